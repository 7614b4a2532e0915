"""``guardkit-state report``: a task's loop, or a feature's, as one self-contained HTML page."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from guardkit_state.cli.options import add_json_option, add_repo_option
from guardkit_state.cli.output import Output, safe
from guardkit_state.errors import GuardkitStateError
from guardkit_state.features.events import (
    FeatureEvent,
    FeatureEventSink,
    FeatureStarted,
    TaskBlocked,
    TaskEnded,
    TaskEvent,
    TaskMerged,
    TaskStarted,
)
from guardkit_state.loop.events import EventSink, LoopEvent, TurnRecorded, TurnStarted


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
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("task_id", metavar="TASK-ID|FEAT-ID", help="a task id or the path of a task file; "
                        "a feature id or the path of its plan")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE",
                        help="the HTML file to write (default: .guardkit/reports/ID.html in the repository)")
    add_repo_option(parser)
    add_json_option(parser, "print where the report was written and what it counts, as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, out: Output) -> int:
    from guardkit_state.cli.feature_output import names_feature
    from guardkit_state.report import write_report

    if names_feature(args.task_id):
        return _run_feature(args, out)
    result = write_report(args.repo, args.task_id, args.output)
    if args.json:
        out.json(result.to_dict())
        return 0
    out.line(f"wrote {safe(result.path)} ({result.bytes // 1024 + 1} KiB): {len(result.report.turns)} turn(s), "
             f"criteria {result.report.counts.describe()}")
    return 0


def _run_feature(args: argparse.Namespace, out: Output) -> int:
    from guardkit_state.report import write_feature_report

    result = write_feature_report(args.repo, args.task_id, args.output)
    if args.json:
        out.json(result.to_dict())
        return 0
    report = result.report
    statuses = ", ".join(f"{n} {safe(status)}" for status, n in result.report.summary()["task_statuses"].items())
    out.line(f"wrote {safe(result.path)} ({result.bytes // 1024 + 1} KiB): {len(report.tasks)} task(s) in "
             f"{len(report.waves)} wave(s){': ' + statuses if statuses else ''}")
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


@dataclass
class FeatureReportEvents:
    """A feature run's ``on_event`` callback that also rewrites ``--report FILE`` as the run goes.

    It runs in the orchestrator's process, which receives every task loop's events one at a time,
    so the page is written by one writer. Each event is passed on to ``inner`` first. The page is
    rewritten when the feature starts, when a task's turn starts (that task shown running it) and
    when it is recorded, when a task's loop ends, and when it is merged or blocked; and once more by
    :meth:`finish`, however the run stops. A page that cannot be written never stops the run.
    """

    inner: FeatureEventSink
    out: Output
    repo: Path
    feature: str
    #: ``None``: no ``--report``; the events are only passed on.
    path: Path | None
    #: The tasks whose loops run now, with the turn each is in (None between two turns).
    running: dict[str, int | None] = field(default_factory=dict)
    started: bool = field(default=False, init=False)
    _warned: bool = field(default=False, init=False, repr=False)

    def __call__(self, event: FeatureEvent) -> None:
        self.inner(event)
        if self.path is None:
            return
        if isinstance(event, TaskStarted):
            self.running[event.task_id] = None
            return  # its first turn's start follows at once
        if isinstance(event, TaskEvent):
            if isinstance(event.event, TurnStarted):
                self.running[event.task_id] = event.event.turn
            elif isinstance(event.event, TurnRecorded):
                self.running[event.task_id] = None
            else:
                return
        elif isinstance(event, TaskEnded):
            self.running.pop(event.outcome.task_id, None)
        elif not isinstance(event, (FeatureStarted, TaskMerged, TaskBlocked)):
            return
        self.started = True
        self.refresh()

    def finish(self) -> None:
        """The page as the files stand after the run (nothing when the run never started)."""
        self.running.clear()
        if self.path is not None and self.started:
            self.refresh()

    def refresh(self) -> None:
        from guardkit_state.report import write_feature_report

        if self.path is None:
            return
        try:
            write_feature_report(self.repo, self.feature, self.path, running=dict(self.running))
        except (GuardkitStateError, OSError) as exc:
            if not self._warned:
                self._warned = True
                self.out.note(f"note: report {safe(self.path)} not written: {safe(exc)}")


def feature_report_events(inner: FeatureEventSink, out: Output, args: argparse.Namespace) -> FeatureReportEvents:
    """``inner`` (a feature run's progress callback), rewriting ``args.report`` when it is given."""
    return FeatureReportEvents(inner, out, args.repo, args.task_id, getattr(args, "report", None))
