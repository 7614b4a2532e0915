"""``guardkit-state validate PATH...``: check task files and per-turn reports against the schemas."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from guardkit_state.cli.exit_codes import ExitCode
from guardkit_state.cli.options import add_json_option
from guardkit_state.cli.output import Output, safe

EXAMPLE = """\
Task files have their frontmatter parsed strictly and their autobuild_state block validated
(in a walked directory: TASK-*.md, and PREFIX-*.md files declaring an id: in their frontmatter;
READMEs and guides are skipped); player_turn_N.json, coach_turn_N.json and turn_state_turn_N.json are read as strict
JSON and validated after normalising known legacy shapes. Directories are walked; other files
in them are skipped.

Errors are printed first, then warnings, then one line per task id several files declare.
Exit status: 0 all valid, 1 some file invalid, 2 a path does not exist.

Example:
  guardkit-state validate tasks/ .guardkit/autobuild/
  guardkit-state validate .guardkit/autobuild/TASK-AUTH-001/coach_turn_2.json --json
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "validate", help="check task files and per-turn JSON reports against the schemas",
        description="Validate task files and per-turn reports; print every problem as "
                    "'path:line: message' or 'path: $.json.path: message'.",
        epilog=EXAMPLE)
    parser.add_argument("paths", metavar="PATH", nargs="+", type=Path, help="file or directory (recursive)")
    parser.add_argument("--errors-only", action="store_true",
                        help="print the invalid files' problems and the summary, no warnings")
    add_json_option(parser, "machine-readable report")
    parser.set_defaults(handler=run_validate)


def run_validate(args: argparse.Namespace, out: Output) -> int:
    from guardkit_state.inspect.validation import validate_paths  # jsonschema and yaml load only when validating

    report = validate_paths(args.paths)
    if args.json:
        out.json(report.to_dict())
        return ExitCode.OK if report.ok else ExitCode.FAILED
    # Errors first (they decide the exit status), then warnings, then one line per duplicated id.
    for result in report.results:
        for problem in result.problems:
            out.line(f"{out.style('error:', 'red')} {safe(problem.location(result.path))}: {safe(problem.message)}")
    if not args.errors_only:
        for result in report.results:
            for warning in result.warnings:
                out.line(f"{out.style('warning:', 'yellow')} {safe(warning.location(result.path))}: "
                         f"{safe(warning.message)}")
        for duplicate in report.duplicates:
            out.line(f"{out.style('warning:', 'yellow')} {safe(duplicate.describe())}")
    summary = report.summary()
    out.line(out.style(summary, "green") if report.ok else out.style(summary, "red", "bold"))
    return ExitCode.OK if report.ok else ExitCode.FAILED
