"""How a feature run ends: a :class:`FeatureResult` (one :class:`TaskOutcome` per task), or
:class:`FeatureInterrupted` raised (:class:`FeatureNotStarted` when it was stopped before it began)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from guardkit_state.loop.command_line import build_argv, rerun_command
from guardkit_state.model import Fields

#: How a feature run ended: every task merged, stopped before a wave (a task not approved, a
#: merge conflict, a loop that died), every wave run but some tasks failed or skipped (a failure
#: that did not stop the feature: ``--no-stop-on-failure``), or interrupted (Ctrl+C, SIGTERM, SIGHUP).
FeatureStatus = Literal["completed", "stopped", "incomplete", "interrupted"]


@dataclass
class TaskOutcome(Fields):
    """One task of the feature as its files and the feature branch say after the run.

    Attributes:
        task_id: the task.
        wave: its 1-based wave.
        status: the word written into the plan (GuardKit's): ``pending``, ``in_progress``,
            ``completed`` (approved and merged), ``failed`` (ended not approved), ``blocked``
            (approved, but its branch could not be merged); or ``skipped``: the task was
            completed or closed before the feature ran it (never written), or (outcome
            ``dependency_failed``) it needs a task that failed without stopping the feature.
        outcome: how its loop ended: ``approved``, ``max_turns_exceeded``,
            ``unrecoverable_stall``, ``error`` (the loop could not go on), ``interrupted`` (its
            loop stopped before it ended), or None (not started).
        turns: turns recorded in its task file.
        decisions: the Coach's decision of each turn, in order.
        merge_commit: the merge commit on the feature branch, once merged.
        conflicts: the conflicting paths when the merge conflicted.
        reason: one sentence for people.
        ran: a loop of this task ran during this invocation.
        resumed: that loop continued from the task's files.
    """

    task_id: str
    wave: int
    status: str = "pending"
    outcome: str | None = None
    turns: int = 0
    decisions: tuple[str, ...] = ()
    merge_commit: str | None = None
    conflicts: tuple[str, ...] = ()
    reason: str = ""
    ran: bool = False
    resumed: bool = False

    @property
    def approved(self) -> bool:
        return self.outcome == "approved"


@dataclass
class FeatureResult:
    """How a feature run ended; ``tasks`` in plan order."""

    feature_id: str
    plan_path: Path
    branch: str
    worktree: Path | None
    waves: list[list[str]]
    max_parallel: int
    tasks: list[TaskOutcome] = field(default_factory=list)
    status: FeatureStatus = "stopped"
    reason: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return {"completed": 0, "stopped": 1, "incomplete": 1, "interrupted": 130}[self.status]

    @property
    def verdict(self) -> str:
        """The status in words: ``incomplete`` is "completed without" the tasks not merged."""
        if self.status != "incomplete":
            return self.status
        return "completed without " + ", ".join(
            t.task_id for t in self.tasks if t.status == "failed" or t.outcome == "dependency_failed")

    def ended(self, passed_over: Sequence[str]) -> None:
        """Every wave ran: ``completed``; or ``incomplete`` when tasks of ``passed_over`` failed without
        stopping the feature (``--no-stop-on-failure``): the reason names them and the tasks skipped."""
        self.status, self.reason = "completed", f"every wave merged into {self.branch}"
        without = [t for t in self.tasks if t.task_id in passed_over or t.outcome == "dependency_failed"]
        if without:
            self.status = "incomplete"
            self.reason = "; ".join(f"{t.task_id} ended without approval ({t.outcome}): {t.reason}"
                                    if t.status == "failed" else f"{t.task_id} {t.reason}" for t in without)
            # (with no other task, "every other task merged" would claim a merge where there is none)
            merged = "every other" if len(without) < len(self.tasks) else "no"
            self.reason += f"; {merged} task merged into {self.branch}"

    def task(self, task_id: str) -> TaskOutcome:
        """The outcome of ``task_id`` (KeyError when the feature has no such task)."""
        for outcome in self.tasks:
            if outcome.task_id == task_id:
                return outcome
        raise KeyError(task_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "feature_id": self.feature_id, "plan": str(self.plan_path), "branch": self.branch,
            "worktree": str(self.worktree) if self.worktree else None, "waves": self.waves,
            "max_parallel": self.max_parallel, "status": self.status, "reason": self.reason,
            "exit_code": self.exit_code, "tasks": [task.to_dict() for task in self.tasks], "notes": self.notes,
        }


def resume_command(feature_id: str, argv: Sequence[str] | None = None, *, resume: bool = True) -> str:
    """The command that continues ``feature_id`` (or, ``resume=False``, starts it afresh: ``--resume``
    refuses a feature not started): ``argv`` (the run's own command line, without the program name),
    shell-quoted; placeholders for the agents without it."""
    return rerun_command(argv if argv is not None else build_argv(feature_id, None, None), resume=resume)


class FeatureInterrupted(KeyboardInterrupt):
    """Ctrl+C, SIGTERM or SIGHUP stopped the feature run; every task loop stopped with its state saved.

    ``result`` is the run as it stood (``status == "interrupted"``); ``str()`` says how to go on.
    A :class:`KeyboardInterrupt`, so code catching that catches it as before.
    """

    def __init__(self, result: FeatureResult, *, argv: Sequence[str] | None = None) -> None:
        self.result = result
        self.argv = tuple(argv) if argv is not None else None
        super().__init__(self.describe())

    def describe(self) -> str:
        running = [t.task_id for t in self.result.tasks if t.outcome == "interrupted"]
        stopped = f"; stopped {', '.join(running)} with their state saved" if running else ""
        return (f"feature {self.result.feature_id} interrupted{stopped}: continue with "
                f"{resume_command(self.result.feature_id, self.argv)}")


class FeatureNotStarted(KeyboardInterrupt):
    """Ctrl+C, SIGTERM or SIGHUP stopped a feature run outside the run itself: while its modules
    loaded, its plan and tasks were checked, or it waited for the feature's lock (or, a second
    time, while an interrupted run stopped).

    ``started`` says whether the feature branch exists. Without it this invocation recorded
    nothing, and ``--resume`` would find nothing to resume: the way on is a fresh start again.
    With it, ``--resume`` continues. A :class:`KeyboardInterrupt`, like :class:`FeatureInterrupted`.
    """

    def __init__(self, feature: str, *, started: bool, argv: Sequence[str] | None = None) -> None:
        self.feature = feature
        self.started = started
        self.argv = tuple(argv) if argv is not None else None
        super().__init__(self.describe())

    def describe(self) -> str:
        if self.started:
            return f"feature {self.feature} interrupted: continue with {resume_command(self.feature, self.argv)}"
        return (f"feature {self.feature} interrupted before it started; nothing was recorded: run "
                f"{resume_command(self.feature, self.argv, resume=False)} again")


__all__ = ["FeatureInterrupted", "FeatureNotStarted", "FeatureResult", "FeatureStatus", "TaskOutcome",
           "resume_command"]
