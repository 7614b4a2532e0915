"""A feature run's own steps, in the one family of events (:mod:`guardkit_state.loop.events`).

:func:`guardkit_state.features.build.build_feature` calls its ``on_event`` callback with the
records below, its notes (:class:`~guardkit_state.loop.events.Note`), and each task loop's own events,
``task_id`` naming the task (several loops run at once). Each record has a ``kind`` and a
``to_dict()`` (a JSON view for logs and tools).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from guardkit_state.loop.events import Event

if TYPE_CHECKING:
    from guardkit_state.features.result import TaskOutcome
    from guardkit_state.plans.merge_queue_log import QueueStep


@dataclass(frozen=True)
class FeatureStarted(Event):
    """The feature's branch and worktree are ready; ``waves`` are the task ids of each wave."""

    kind: ClassVar[str] = "feature"
    feature_id: str
    branch: str
    worktree: Path
    waves: tuple[tuple[str, ...], ...]
    max_parallel: int
    resumed: bool


#: What a task of a wave that does not run is, by its phase (``features.progress``), in the order
#: a wave's line lists them: merged by an earlier run, approved but not merged yet (this wave
#: merges it), ended without approval, closed before the feature ran it.
NOT_RUN_WORDS = {"merged": "already merged", "approved": "approved awaiting merge", "failed": "failed",
                 "closed": "skipped"}


@dataclass(frozen=True)
class WaveStarted(Event):
    """Wave ``number`` (1-based) begins; ``to_run`` are the tasks whose loops run in it (the
    others of ``task_ids`` ended in an earlier run).

    ``phases`` is each task's phase as the run read it from its files (``new``, ``resume``,
    ``approved``, ``merged``, ``failed``, ``closed``), in ``task_ids`` order; empty when the
    sender did not say, and then the tasks not run are not told apart.
    """

    kind: ClassVar[str] = "wave"
    number: int
    total: int
    task_ids: tuple[str, ...]
    to_run: tuple[str, ...]
    phases: tuple[str, ...] = ()

    def not_run(self) -> dict[str, int]:
        """How many tasks that do not run are of each phase (:data:`NOT_RUN_WORDS` order), or
        ``{"ended": n}`` when ``phases`` was not given."""
        skipped = [i for i, task_id in enumerate(self.task_ids) if task_id not in self.to_run]
        if len(self.phases) != len(self.task_ids):
            return {"ended": len(skipped)} if skipped else {}
        counts = dict.fromkeys(NOT_RUN_WORDS, 0)
        for index in skipped:
            counts[self.phases[index]] = counts.get(self.phases[index], 0) + 1
        return {phase: count for phase, count in counts.items() if count}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"number": self.number, "total": self.total, "task_ids": list(self.task_ids),
                               "to_run": list(self.to_run)}
        if len(self.phases) == len(self.task_ids):
            out["phases"] = dict(zip(self.task_ids, self.phases, strict=True))
        return out


@dataclass(frozen=True)
class TaskStarted(Event):
    """A task's loop starts in its own process (``resume``: it continues from its files)."""

    kind: ClassVar[str] = "task"
    task_id: str = field()  # positional, and never None
    resume: bool
    pid: int | None


@dataclass(frozen=True)
class TaskEnded(Event):
    """A task's loop process has exited; ``outcome`` is what its files say."""

    kind: ClassVar[str] = "task_end"
    outcome: TaskOutcome

    def to_dict(self) -> dict[str, Any]:
        return self.outcome.to_dict()


@dataclass(frozen=True)
class TaskMerged(Event):
    """A task's branch was merged into the feature branch (``already``: by an earlier run)."""

    kind: ClassVar[str] = "merge"
    task_id: str = field()  # positional, and never None
    branch: str
    sha: str | None
    already: bool


@dataclass(frozen=True)
class TaskBlocked(Event):
    """A task's approved branch could not be merged: ``conflicts`` (paths), or git's ``error``."""

    kind: ClassVar[str] = "blocked"
    task_id: str = field()  # positional, and never None
    branch: str
    conflicts: tuple[str, ...]
    error: str | None


@dataclass(frozen=True)
class QueueStepped(Event):
    """A step of the merge queue (:mod:`guardkit_state.features.merge_queue`): a gate run on a
    candidate (or its verdict recorded before an interruption), a task sent back, a landing, a halt."""

    kind: ClassVar[str] = "merge_queue"
    step: QueueStep

    def to_dict(self) -> dict[str, Any]:
        return self.step.to_dict()


@dataclass(frozen=True)
class TaskSentBack(Event):
    """The merge queue sent ``task_id`` back: its approval of turn ``after_turn`` breaks the gate.
    Its loop goes on with one more turn, or (``final``) it had none left and ends failed."""

    kind: ClassVar[str] = "sent_back"
    task_id: str = field()  # positional, and never None
    wave: int
    after_turn: int
    final: bool
    gate_runs: int


__all__ = ["NOT_RUN_WORDS", "FeatureStarted", "QueueStepped", "TaskBlocked", "TaskEnded", "TaskMerged", "TaskSentBack",
           "TaskStarted", "WaveStarted"]
