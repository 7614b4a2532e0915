"""Read a feature from its files into a :class:`FeatureReport`: its waves, where each task stands,
and each task's own report (the I/O edge of the feature page).

Where a task stands is what ``show FEAT-X`` says (:func:`~guardkit_state.inspect.feature_view.feature_view`),
which reads it as the orchestrator does (:func:`~guardkit_state.features.progress.read_task_state`:
the task's own copy of its task file, its turn commits, the feature branch's merges), so the page,
``show`` and a resumed run never disagree. Each task's full report is
:func:`~guardkit_state.report.collect.build_task_report` of the copy that holds its turns.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from guardkit_state.errors import GuardkitStateError
from guardkit_state.inspect.feature_view import FeatureTaskRow, FeatureView, feature_view, task_copy
from guardkit_state.plans.merge_queue_log import QueueStep
from guardkit_state.report.collect import build_task_report, shown_path
from guardkit_state.report.task_report import TaskReport
from guardkit_state.taskfile.discovery import listing_scope

#: What the grid says of a task: ``show``'s words (``pending``, ``in_progress``, ``approved``,
#: ``blocked``, ``completed``, ``failed``, ``skipped``), and ``running`` while its loop runs.
TASK_STATUSES = ("pending", "running", "in_progress", "approved", "completed", "blocked", "failed", "skipped")


@dataclass
class FeatureTask:
    """One task of the feature: a cell row of the grid, and its section below it."""

    #: The task as ``show FEAT-X`` reads it: id, wave, name, turns, outcome, merge, the paths whose merge
    #: conflict keeps it off the feature branch (``conflicts``), why it stands where it does (``reason``).
    row: FeatureTaskRow
    #: ``show``'s status, or ``running`` while its loop runs.
    status: str
    #: The turn its loop is running now (None: not running, or between two turns).
    running_turn: int | None = None
    #: The task's own report; None when its files could not be read (``error`` says why).
    report: TaskReport | None = None
    error: str | None = None

    def summary(self) -> dict[str, Any]:
        row = self.row
        return {"task_id": row.task_id, "wave": row.wave, "status": self.status, "turns": row.turns,
                "outcome": row.outcome, "merged": row.merged, "merge_commit": row.merge_commit,
                "blocked_paths": list(row.conflicts), "error": self.error,
                "cost_usd": self.report.cost_usd if self.report is not None else None}


@dataclass
class FeatureReport:
    """Everything a feature's page shows."""

    #: The feature as ``show FEAT-X`` reads it: id, name, branch, plan status, waves, notes, and its
    #: counts (``tally``) as ``status``, ``show`` and ``log`` give them.
    view: FeatureView
    plan_path: str
    tasks: list[FeatureTask]
    #: What a run (or ``--resume``) does next, as ``show`` says it.
    next_step: str = ""
    generated_at: str = ""
    #: The plan's smoke gate in words, and one line per recorded run of it.
    smoke_gate: str | None = None
    smoke_runs: list[str] = field(default_factory=list)
    #: The merge queue's steps, one line each: each candidate, its gate result, what was sent back.
    queue_steps: list[str] = field(default_factory=list)

    def task(self, task_id: str) -> FeatureTask:
        return next(t for t in self.tasks if t.row.task_id == task_id)

    def status_counts(self) -> dict[str, int]:
        """How many tasks have each status, in the order the statuses first appear."""
        return dict(Counter(task.status for task in self.tasks))

    def summary(self) -> dict[str, Any]:
        """The report's counts, for ``--json`` and tools."""
        view = self.view
        return {"feature_id": view.feature_id, "waves": len(view.waves), "tasks": [t.summary() for t in self.tasks],
                "task_statuses": self.status_counts(), "turns": sum(t.row.turns for t in self.tasks),
                "notes": list(view.notes), "totals": view.tally.to_dict()}


def build_feature_report(repo: Path | str, feature: str, *, running: Mapping[str, int | None] | None = None,
                         generated_at: str | None = None) -> FeatureReport:
    """The report of ``feature`` (an id ``FEAT-X`` or a plan file's path) in ``repo``, from its files.

    ``running``: the tasks whose loops run now (a live ``feature-build --report``), each with the
    turn it is in (None between two turns).

    Raises:
        FeatureNotFoundError, ParseError, SchemaError, WaveError: the plan cannot be read.
    """
    with listing_scope():  # one listing of tasks/ for every task of the feature (see discovery)
        return _feature_report(Path(repo).resolve(), feature, running or {}, generated_at)


def _feature_report(root: Path, feature: str, running: Mapping[str, int | None],
                    generated_at: str | None) -> FeatureReport:
    view = feature_view(root, feature)
    tasks = [_task(root, task_copy(root, view, row), row, running) for row in view.tasks]
    next_step = "loops are running; this page is rewritten after every turn" if running else view.next.text
    return FeatureReport(
        view=view, plan_path=shown_path(view.plan_path, root), tasks=tasks, next_step=next_step,
        generated_at=generated_at or datetime.now().astimezone().isoformat(timespec="seconds"),
        smoke_gate=view.smoke_gate.describe() if view.smoke_gate is not None else None,
        smoke_runs=[run.describe() + (f": {run.output[-300:]}" if run.halts and run.output else "")
                    for run in view.smoke_runs],
        queue_steps=[_queue_line(step) for step in view.queue_steps])


def _queue_line(step: QueueStep) -> str:
    """A queue step in words, a failing candidate's with the end of the gate's output."""
    failed = step.step == "candidate" and step.gate in ("failed", "timed_out") and step.output
    return step.describe() + (f": {step.output[-300:]}" if failed else "")


def _task(root: Path, copy: str, row: FeatureTaskRow, running: Mapping[str, int | None]) -> FeatureTask:
    task = FeatureTask(row, "running" if row.task_id in running else row.status, running.get(row.task_id))
    try:
        task.report = build_task_report(root, copy, running_turn=task.running_turn,
                                        generated_at="")
    except GuardkitStateError as exc:
        task.error = str(exc)
        return task
    if task.running_turn is not None and any(t.number >= task.running_turn for t in task.report.turns):
        # The loop's event lags behind its files: that turn is recorded already, not running.
        task.running_turn = None
    return task


__all__ = ["TASK_STATUSES", "FeatureReport", "FeatureTask", "build_feature_report"]
