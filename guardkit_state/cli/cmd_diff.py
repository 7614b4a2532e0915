"""``guardkit-state diff TASK-ID --turn N``: the commit of one turn (code and state)."""

from __future__ import annotations

import argparse
from typing import Any

from guardkit_state.cli.exit_codes import ExitCode
from guardkit_state.cli.options import add_repo_option
from guardkit_state.cli.output import Output, safe

EXAMPLE = """\
Example:
  guardkit-state diff TASK-AUTH-001 --turn 2
  guardkit-state diff TASK-AUTH-001 --turn 2 --stat
  guardkit-state diff TASK-AUTH-001 --turn 2 --state-only
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "diff", help="show what one turn changed (its commit)",
        description="Show the commit of one turn: the Player's code changes and the turn's state files.",
        epilog=EXAMPLE)
    parser.add_argument("task_id", metavar="TASK-ID", help="exact task id")
    parser.add_argument("--turn", type=int, required=True, metavar="N", help="turn number")
    parser.add_argument("--stat", action="store_true", help="diffstat instead of the patch")
    parser.add_argument("--state-only", action="store_true",
                        help="only the task file and .guardkit/autobuild/TASK-ID/")
    add_repo_option(parser)
    parser.set_defaults(handler=show_diff)


def show_diff(args: argparse.Namespace, out: Output) -> int:
    from guardkit_state.inspect.review import turn_diff  # git and YAML load only when the command runs

    text = turn_diff(args.repo, args.task_id, args.turn, stat=args.stat, state_only=args.state_only)
    for line in text.splitlines():
        out.line(safe(line))
    return ExitCode.OK
