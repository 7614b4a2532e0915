"""``guardkit-state log TASK-ID``: one line per turn, from the turn commits on git."""

from __future__ import annotations

import argparse
from typing import Any

from guardkit_state.cli.exit_codes import ExitCode
from guardkit_state.cli.options import add_json_option, add_repo_option
from guardkit_state.cli.output import Output, safe
from guardkit_state.inspect.review import read_turn_log

EXAMPLE = """\
Example:
  guardkit-state log TASK-AUTH-001
  guardkit-state log TASK-AUTH-001 --json
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "log", help="show a task's turns: commit, decision, mode, criteria delta",
        description="Show the turns of a task from its turn commits (branch autobuild/TASK-ID, or the "
                    "current branch after a merge) and its turn_state files.",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task_id", metavar="TASK-ID", help="exact task id")
    add_repo_option(parser)
    add_json_option(parser)
    parser.set_defaults(handler=show_log)


def show_log(args: argparse.Namespace, out: Output) -> int:
    result = read_turn_log(args.repo, args.task_id)
    if args.json:
        out.json(result.to_dict())
        return ExitCode.OK
    out.note(f"{safe(result.task_id)}: turns from {safe(result.source)}")
    for note in result.notes:
        out.note(safe(note))
    for e in result.entries:
        sha = e.sha[:10] if e.sha else "(no commit)"
        delta = " ".join(e.delta) or "-"
        verified = "" if e.verified_count is None else f" verified={e.verified_count}"
        out.line(f"turn {e.turn:<3} {out.style(sha, 'yellow')} {safe(e.decision or '?'):<9} "
                 f"{safe(e.mode or '?'):<17} {safe(e.date or '')} {safe(delta)}{verified}")
    if not result.entries and not result.notes:
        out.note("no turns recorded")
    return ExitCode.OK
