"""``guardkit-state context``: the continuation context a turn's Player receives."""

from __future__ import annotations

import argparse

from guardkit_state.cli.exit_codes import ExitCode
from guardkit_state.cli.options import add_json_option, add_repo_option
from guardkit_state.cli.output import Output, safe


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "context",
        help="print the continuation context for a turn (what the Player is told)",
        description="Render, from the files, the markdown summary of the previous turn and the "
        "cumulative criteria that turn N's Player receives in GUARDKIT_CONTEXT_FILE. Read from the "
        "copy the loop works on (its worktree's; after a feature run, the feature's), named on stderr.",
        epilog="Example:\n  guardkit-state context TASK-AUTH-001            # the next turn\n"
        "  guardkit-state context TASK-AUTH-001 --turn 2",
    )
    parser.add_argument("task_id", metavar="TASK-ID", help="a task id, or the path of a task file")
    parser.add_argument("--turn", type=int, metavar="N", help="the turn to build the context for (default: next)")
    add_repo_option(parser)
    add_json_option(parser, "print {turn, context} as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, out: Output) -> int:
    from guardkit_state.inspect.task_view import continuation_context

    context = continuation_context(args.repo, args.task_id, args.turn)
    if context.location.source != "main":
        # The copy is not the main checkout's (a loop's worktree, a feature's copy): said, on stderr.
        out.note(f"note: {safe(context.location.note)}")
    out.result(context, lambda shown, _: out.stdout.write(safe(shown.text)))  # safe() keeps its newlines
    return ExitCode.OK

