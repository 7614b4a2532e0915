"""``guardkit-state report``: a task's loop, or a feature's, as one self-contained HTML page."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from guardkit_state.cli.options import add_json_option, add_repo_option
from guardkit_state.cli.output import Output, safe

if TYPE_CHECKING:
    from guardkit_state.report.task_report import TaskReport
    from guardkit_state.report.write import FeatureReportResult, ReportResult


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "report",
        help="write a task's (or a feature's) loop as one HTML page: turn timeline, criteria matrix, what "
        "each turn said",
        description="Write one self-contained HTML file (inline style, no script, nothing to download) "
        "showing a task's turns: mode, Player outcome, Coach decision, duration, commit and gate results "
        "per turn; each acceptance criterion's status after every turn; and, folded under each turn, "
        "the Player's summary, the Coach's feedback and issues, blockers and lessons. Read from the "
        "files only (no index needed), GuardKit's frontmatter-only history included. For a feature "
        "(FEAT-ID, or a plan's .yaml): its waves × tasks grid (status, turns, outcome, merged, blocked "
        "paths, each task's turns at a glance), linking to every task's own report further down.",
        epilog="Example:\n  guardkit-state report TASK-AUTH-001\n"
        "  guardkit-state report TASK-AUTH-001 -o review/TASK-AUTH-001.html --json\n"
        "  guardkit-state report FEAT-AUTH -o review/FEAT-AUTH.html",
    )
    parser.add_argument("task_id", metavar="TASK-ID|FEAT-ID", help="a task id or the path of a task file; "
                        "a feature id or the path of its plan")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE",
                        help="the HTML file to write (default: .guardkit/reports/ID.html in the repository)")
    add_repo_option(parser)
    add_json_option(parser, "print where the report was written and what it counts, as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, out: Output) -> int:
    from guardkit_state.report import write_feature_report, write_report
    from guardkit_state.store.layout import names_feature

    if names_feature(args.task_id):
        out.result(write_feature_report(args.repo, args.task_id, args.output), _wrote_feature)
        return 0
    out.result(write_report(args.repo, args.task_id, args.output), _wrote)
    return 0


def _wrote(result: ReportResult[TaskReport], out: Output) -> None:
    out.line(f"wrote {safe(result.path)} ({result.bytes // 1024 + 1} KiB): {len(result.report.turns)} turn(s), "
             f"criteria {result.report.counts.describe()}")


def _wrote_feature(result: FeatureReportResult, out: Output) -> None:
    report = result.report
    statuses = ", ".join(f"{n} {safe(status)}" for status, n in report.status_counts().items())
    out.line(f"wrote {safe(result.path)} ({result.bytes // 1024 + 1} KiB): {len(report.tasks)} task(s) in "
             f"{len(report.view.waves)} wave(s){': ' + statuses if statuses else ''}")

