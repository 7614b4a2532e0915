"""``guardkit-state report``: a task's loop as one self-contained HTML page."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from guardkit_state.cli.options import add_json_option, add_repo_option
from guardkit_state.cli.output import Output, safe
from guardkit_state.errors import GuardkitStateError
from guardkit_state.loop.events import EventSink, LoopEvent, TurnRecorded, TurnStarted


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "report",
        help="write a task's loop as one HTML page: turn timeline, criteria matrix, what each turn said",
        description="Write one self-contained HTML file (inline style, no script, nothing to download) "
        "showing a task's turns: mode, Player outcome, Coach decision, duration, commit and gate results "
        "per turn; each acceptance criterion's status after every turn; and, folded under each turn, "
        "the Player's summary, the Coach's feedback and issues, blockers and lessons. Read from the "
        "files only (no index needed), GuardKit's frontmatter-only history included.",
        epilog="Example:\n  guardkit-state report TASK-AUTH-001\n"
        "  guardkit-state report TASK-AUTH-001 -o review/TASK-AUTH-001.html --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("task_id", metavar="TASK-ID", help="a task id, or the path of a task file "
                        "(feature reports, FEAT-ID, are not available yet)")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE",
                        help="the HTML file to write (default: .guardkit/reports/TASK-ID.html in the repository)")
    add_repo_option(parser)
    add_json_option(parser, "print where the report was written and what it counts, as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, out: Output) -> int:
    from guardkit_state.report import write_report

    result = write_report(args.repo, args.task_id, args.output)
    if args.json:
        out.json(result.to_dict())
        return 0
    out.line(f"wrote {safe(result.path)} ({result.bytes // 1024 + 1} KiB): {len(result.report.turns)} turn(s), "
             f"criteria {result.report.counts.describe()}")
    return 0


def add_report_option(parser: argparse.ArgumentParser) -> None:
    """``--report FILE`` for ``feature-build``: the page is rewritten as the loop goes."""
    parser.add_argument("--report", type=Path, metavar="FILE",
                        help="rewrite this HTML report (see 'guardkit-state report') when each turn starts and "
                        "ends, atomically: a browser tab left open on it shows progress on reload")


@dataclass
class ReportEvents:
    """A loop's ``on_event`` callback that also rewrites ``--report FILE`` as the loop goes.

    Each event is passed on to ``inner`` first. The report is rewritten when a turn starts (saying
    it is running) and when it is recorded, and once more by :meth:`finish` when the loop stops,
    however it stops. A report that cannot be written never stops the loop: it is said once.
    """

    inner: EventSink
    out: Output
    repo: Path
    task_id: str
    #: ``None``: no ``--report``; the events are only passed on.
    path: Path | None
    started: bool = field(default=False, init=False)
    _warned: bool = field(default=False, init=False, repr=False)

    def __call__(self, event: LoopEvent) -> None:
        self.inner(event)
        if self.path is None:
            return
        if isinstance(event, TurnStarted):
            self.started = True
            self.refresh(running_turn=event.turn)
        elif isinstance(event, TurnRecorded):
            self.refresh()

    def finish(self) -> None:
        """The report as the files stand after the loop (nothing when no turn began)."""
        if self.path is not None and self.started:
            self.refresh()

    def refresh(self, running_turn: int | None = None) -> None:
        from guardkit_state.report import write_report

        if self.path is None:
            return
        try:
            write_report(self.repo, self.task_id, self.path, running_turn=running_turn)
        except (GuardkitStateError, OSError) as exc:
            if not self._warned:
                self._warned = True
                self.out.note(f"  note: report {safe(self.path)} not written: {safe(exc)}")


def report_events(inner: EventSink, out: Output, args: argparse.Namespace) -> ReportEvents:
    """``inner`` (the loop's progress callback), rewriting ``args.report`` when it is given."""
    return ReportEvents(inner, out, args.repo, args.task_id, getattr(args, "report", None))
