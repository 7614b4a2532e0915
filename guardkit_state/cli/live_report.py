"""``feature-build ... --report FILE``: the loop's progress callbacks that rewrite the HTML page as it goes.

Kept apart from the ``report`` command so the command line's start-up does not import the loop's
and the feature run's event types (only ``feature-build`` needs them, when it runs).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from guardkit_state.cli.output import Output, safe
from guardkit_state.errors import GuardkitStateError
from guardkit_state.features.feature_events import (
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
        self._warned = _write_page(partial(write_report, self.repo, self.task_id, self.path,
                                           running_turn=running_turn), self.out, self.path, self._warned, "  ")


def _write_page(write: Callable[[], object], out: Output, path: Path, warned: bool, indent: str = "") -> bool:
    """Write the page; a page that cannot be written never stops the run, and is said once.
    Returns whether that has been said."""
    try:
        write()
    except (GuardkitStateError, OSError) as exc:
        if not warned:
            out.note(f"{indent}note: report {safe(path)} not written: {safe(exc)}")
        return True
    return warned


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
        self._warned = _write_page(partial(write_feature_report, self.repo, self.feature, self.path,
                                           running=dict(self.running)), self.out, self.path, self._warned)


def feature_report_events(inner: FeatureEventSink, out: Output, args: argparse.Namespace) -> FeatureReportEvents:
    """``inner`` (a feature run's progress callback), rewriting ``args.report`` when it is given."""
    return FeatureReportEvents(inner, out, args.repo, args.task_id, getattr(args, "report", None))
