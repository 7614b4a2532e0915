"""``guardkit-state context``: the continuation context a turn's Player receives."""

from __future__ import annotations

import argparse
from pathlib import Path

from guardkit_state.cli.options import add_json_option, add_repo_option
from guardkit_state.cli.output import Output, safe


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "context",
        help="print the continuation context for a turn (what the Player is told)",
        description="Render, from the files, the markdown summary of the previous turn and the "
        "cumulative criteria that turn N's Player receives in GUARDKIT_CONTEXT_FILE.",
        epilog="Example:\n  guardkit-state context TASK-AUTH-001            # the next turn\n"
        "  guardkit-state context TASK-AUTH-001 --turn 2",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("task_id", metavar="TASK-ID", help="a task id, or the path of a task file")
    parser.add_argument("--turn", type=int, metavar="N", help="the turn to build the context for (default: next)")
    add_repo_option(parser)
    add_json_option(parser, "print {turn, context} as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, out: Output) -> int:
    from guardkit_state.config import load_config, render_player_role_section
    from guardkit_state.errors import InputError
    from guardkit_state.taskfile.locate import locate_task
    from guardkit_state.turns.lifecycle import TurnLifecycle

    location = locate_task(args.repo, args.task_id)
    task, _ = location.load()
    lifecycle = TurnLifecycle(task, root=location.checkout)
    # --turn 0 is out of range too (not "the next turn"): only an absent --turn means the next.
    turn = lifecycle.recorded_turns + 1 if args.turn is None else args.turn
    if turn < 1 or turn > lifecycle.recorded_turns + 1:
        raise InputError(f"turn {turn} is out of range", task_id=args.task_id,
                         expected=f"1..{lifecycle.recorded_turns + 1}")
    # The same text the loop writes to GUARDKIT_CONTEXT_FILE, Player role section included.
    role_section = render_player_role_section(load_config(Path(args.repo).resolve()))
    text = lifecycle.context_for(turn, role_section=role_section)
    if args.json:
        out.json({"task_id": location.task_id, "turn": turn, "context": text,
                  "resolved": location.resolution.to_dict() if location.resolution else None})
    else:
        out.stdout.write(safe_markdown(text))
    return 0


def safe_markdown(text: str) -> str:
    """Context text with control characters neutralised, line by line (newlines kept)."""
    return "\n".join(safe(line) for line in text.split("\n"))
