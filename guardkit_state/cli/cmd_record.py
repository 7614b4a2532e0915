"""``guardkit-state record``: record one turn from two report files (for loops driven by other tools)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from guardkit_state.cli.exit_codes import ExitCode
from guardkit_state.cli.options import add_json_option, add_repo_option, turn_count
from guardkit_state.cli.output import Output, one_line, safe

if TYPE_CHECKING:
    from guardkit_state.turns.lifecycle import TurnRecord

# Library imports happen inside ``run``: ``guardkit-state --help`` must stay fast.
MODES = ("fresh_start", "continuing_work", "recovering_state")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "record",
        help="record one turn from a Player report and a Coach decision",
        description="Validate two report files, update the criteria ledger, check for a stall, write "
        "turn_state_turn_N.json and append the turn to the task's frontmatter. Nothing is written "
        "when either report is invalid.",
        epilog="Example:\n  guardkit-state record TASK-AUTH-001 --player player.json --coach coach.json\n\n"
        "Exit codes:\n"
        "  0  recorded; or the reports name a turn already recorded with exactly these reports\n"
        "     (a retried record: nothing to do)\n"
        "  1  a report was rejected (schema, a value JSON cannot store, wrong task or turn):\n"
        "     nothing written\n"
        "  2  usage error: unreadable or non-JSON report file, bad option, task id or task file;\n"
        "     a closed task without --reopen, a turn beyond max_turns, a task file that cannot be\n"
        "     written: nothing written\n"
        "  3  already recorded: the reports name a recorded turn but differ from its reports\n"
        "  70 a fault of guardkit-state itself (a bug: the error names its crash log)",
    )
    parser.add_argument("task_id", metavar="TASK-ID")
    parser.add_argument("--player", required=True, type=Path, metavar="FILE", help="the Player's JSON report")
    parser.add_argument("--coach", required=True, type=Path, metavar="FILE", help="the Coach's JSON decision")
    parser.add_argument("--mode", choices=MODES, help="how the turn started")
    parser.add_argument("--max-turns", type=turn_count, metavar="N", help="turn budget (default: the task's, else 5); "
                        "a turn beyond it is refused unless this raises it")
    parser.add_argument("--reopen", action="store_true", help="record a turn of a completed, cancelled, "
                        "archived or approved task (refused without it)")
    add_repo_option(parser)
    add_json_option(parser, "print the recorded turn as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, out: Output) -> int:
    """Record the turn; an error (exit 1, 2 or 3: ``app.exit_code_for``) is said by the CLI's one place."""
    from guardkit_state.errors import AlreadyRecordedError, InputError
    from guardkit_state.store.jsonio import load_json
    from guardkit_state.turns.lifecycle import record_turn

    for name in ("player", "coach"):
        if not getattr(args, name).is_file():
            raise InputError(f"--{name} {getattr(args, name)}: no such file")
    player, coach = load_json(args.player), load_json(args.coach)
    try:
        record = record_turn(args.repo, args.task_id, player, coach, mode=args.mode, max_turns=args.max_turns,
                             player_path=args.player, coach_path=args.coach, reopen=args.reopen)
    except AlreadyRecordedError as exc:
        if not exc.identical:
            raise
        # A retried record (the very reports of that turn) is done already: exit 0.
        out.result({"task_id": exc.task_id, "turn": exc.turn, "already_recorded": True, "message": exc.message},
                   lambda done, _: out.line(safe(done["message"])))
        return ExitCode.OK
    out.result(record, render)
    return ExitCode.OK


def render(record: TurnRecord, out: Output) -> None:
    state = record.turn_state
    delta = " ".join(record.ledger.delta(record.ledger_before))
    out.line(f"Recorded turn {state.turn_number} of {safe(state.task_id)}: "
             f"{out.style(safe(record.entry.decision), 'bold')} — {record.ledger.counts().describe('criteria')}"
             + (f" ({delta})" if delta else ""))
    from guardkit_state.turns.verdicts import describe_verdict_words

    for line in describe_verdict_words(state.verdict_words):
        out.line(f"  verdict: {safe(line)}")
    if state.gate_override:
        out.line(f"  gate: {safe(state.gate_override)}")
    if state.coach_feedback:
        out.line(f"  feedback: {one_line(state.coach_feedback)}")  # whole in --json
    if record.outcome:
        reason = f": {one_line(record.stall.reason)}" if record.stall else ""
        out.line(f"  loop outcome: {record.outcome.value} (task status {record.outcome.task_status}){reason}")
    note = f" — {safe(record.splice.reason)}" if record.splice.reason else ""
    out.line(f"  frontmatter: {record.splice.method}{note}")
