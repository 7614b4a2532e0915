"""``guardkit-state suggest-mode TASK-ID``: the advisory implementation mode for a task."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from guardkit_state.cli.exit_codes import ExitCode
from guardkit_state.cli.options import add_json_option, add_repo_option
from guardkit_state.cli.output import Output, safe
from guardkit_state.errors import InputError

if TYPE_CHECKING:
    from guardkit_state.inspect.task_view import ModeSuggestion

EXAMPLE = """\
Example:
  guardkit-state suggest-mode TASK-AUTH-001
  guardkit-state suggest-mode TASK-AUTH-001 --json
  guardkit-state suggest-mode --complexity 7
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "suggest-mode", help="suggest direct, task_work or autobuild for a task (advisory)",
        description="Suggest an implementation mode from the task's complexity: direct (1-3), "
                    "task_work (3-7) or autobuild (5-10). Where ranges overlap, the mode whose range "
                    "is centred nearest wins (a tie goes to less ceremony). Advice only: nothing is "
                    "changed or blocked.",
        epilog=EXAMPLE)
    parser.add_argument("task_id", metavar="TASK-ID", nargs="?", help="exact task id")
    parser.add_argument("--complexity", type=int, metavar="N",
                        help="use this complexity (1-10) instead of reading the task")
    add_repo_option(parser)
    add_json_option(parser)
    parser.set_defaults(handler=suggest)


def suggest(args: argparse.Namespace, out: Output) -> int:
    from guardkit_state.inspect.task_view import mode_suggestion  # imported here: building the parser stays light

    if args.task_id is None and args.complexity is None:
        raise InputError("give a TASK-ID or --complexity N (guardkit-state suggest-mode TASK-ID)")
    out.result(mode_suggestion(args.repo, args.task_id, complexity=args.complexity, source="--complexity"), render)
    return ExitCode.OK


def render(suggestion: ModeSuggestion, out: Output) -> None:
    advice = suggestion.advice
    if advice is None:
        out.line(f"No suggestion: complexity {safe(repr(suggestion.complexity))} (from {safe(suggestion.source)}) "
                 "is not an estimate in 1-10.")
        return
    out.line(safe(advice.render()))
    out.note(safe(f"(complexity {advice.complexity} from {suggestion.source}; {advice.reason})"))
    for note in advice.notes:
        out.note(safe(note))
