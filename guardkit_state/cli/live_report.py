"""``feature-build``'s progress: each event shown, ``--report FILE`` rewritten as the run goes, and the
index (a side wing) offered each recorded turn — for a task's loop and a feature run alike.

Kept apart from the ``report`` command so the command line's start-up does not import the loop's
and the feature run's event types (only ``feature-build`` needs them, when it runs).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from guardkit_state.cli.event_lines import event_lines
from guardkit_state.cli.options import log_on_stderr
from guardkit_state.cli.output import Output, safe
from guardkit_state.errors import GuardkitStateError
from guardkit_state.features.feature_events import FeatureStarted, TaskBlocked, TaskEnded, TaskMerged, TaskStarted
from guardkit_state.loop.events import Event, EventSink, Note, TurnRecorded, TurnStarted

R = TypeVar("R")

#: Writes the page, given the tasks whose loops run now and the turn each is in (None between two turns;
#: a task loop run alone is the key None).
PageWriter = Callable[[dict[str | None, int | None]], object]


@dataclass
class ReportEvents:
    """A run's ``on_event`` callback that also rewrites ``--report FILE`` as the run goes.

    Each event is passed on to ``inner`` first. The page is rewritten when a turn starts (its task
    shown running it) and when it is recorded, when a feature starts, when one of its task loops
    ends, and when a task is merged or blocked; and once more by :meth:`finish`, however the run
    stops. In a feature run it is written in the orchestrator's process, which receives every task
    loop's events one at a time: one writer. A page that cannot be written never stops the run: it
    is said once.
    """

    inner: EventSink
    out: Output
    #: ``None``: no ``--report``; the events are only passed on.
    path: Path | None
    write: PageWriter
    #: Before the note that the page was not written (a task loop's lines are indented under its turn).
    indent: str = ""
    #: The tasks whose loops run now, with the turn each is in (None between two turns).
    running: dict[str | None, int | None] = field(default_factory=dict)
    started: bool = field(default=False, init=False)
    _warned: bool = field(default=False, init=False, repr=False)

    def __call__(self, event: Event) -> None:
        self.inner(event)
        if self.path is None:
            return
        if isinstance(event, TaskStarted):
            self.running[event.task_id] = None
            return  # its first turn's start follows at once
        if isinstance(event, TurnStarted):
            self.running[event.task_id] = event.turn
        elif isinstance(event, TurnRecorded):
            self.running[event.task_id] = None
        elif isinstance(event, TaskEnded):
            self.running.pop(event.outcome.task_id, None)
        elif not isinstance(event, (FeatureStarted, TaskMerged, TaskBlocked)):
            return
        self.started = True
        self.refresh()

    def finish(self) -> None:
        """The page as the files stand after the run (nothing when no turn began)."""
        self.running.clear()
        if self.path is not None and self.started:
            self.refresh()

    def refresh(self) -> None:
        """The page rewritten (its callers write it only where there is a ``path``)."""
        try:
            self.write(dict(self.running))
        except (GuardkitStateError, OSError) as exc:
            if not self._warned:
                self.out.note(f"{self.indent}note: report {safe(self.path)} not written: {safe(exc)}")
            self._warned = True


def report_events(inner: EventSink, out: Output, args: argparse.Namespace, *, feature: bool = False) -> ReportEvents:
    """``inner`` (a task loop's or, ``feature``, a feature run's progress callback), rewriting
    ``args.report`` when it is given."""
    from guardkit_state.report import write_feature_report, write_report

    path: Path | None = getattr(args, "report", None)
    if feature:
        return ReportEvents(inner, out, path, lambda running: write_feature_report(
            args.repo, args.task_id, path, running={t: n for t, n in running.items() if t is not None}))
    return ReportEvents(inner, out, path, lambda running: write_report(args.repo, args.task_id, path,
                                                                       running_turn=running.get(None)), "  ")


def run_with_progress(args: argparse.Namespace, out: Output, run: Callable[[EventSink], R], *, feature: bool) -> R:
    """``run(on_event)`` (a task's loop, or with ``feature`` a feature run) with its events shown on
    stderr (not with ``--json``), ``--report FILE`` rewritten as it goes and once more however it
    stops, and each recorded turn offered to the index: the side wing is plugged in here."""
    from guardkit_state.index.after_turn import with_indexing

    if args.verbose:
        log_on_stderr(out)
    shown: set[str] = set()

    def on_event(event: Event) -> None:
        if args.json:
            return
        if feature and isinstance(event, Note):
            # Every loop says the same of the shared checkout (its uncommitted changes): once is enough.
            if event.text in shown:
                return
            shown.add(event.text)
        for line in event_lines(event, out, feature=feature):
            out.note(line)

    report = report_events(on_event, out, args, feature=feature)
    try:
        return run(with_indexing(report, args.repo))
    finally:
        report.finish()  # --report: the page as the files stand now, however the run stopped
