"""What a feature run writes into its plan, as :class:`PlanUpdate` values. Pure functions.

GuardKit's keys keep their meaning: a task's ``status`` (``in_progress``, ``completed``,
``failed``, ``blocked``), ``result`` (``total_turns``, ``final_decision``, ``error``),
``turns_completed``, ``started_at``/``completed_at``; the ``execution`` counters. Two keys are
added: ``merge_commit`` (the task's merge on the feature branch) and ``merge_conflicts`` (the
paths that kept an approved task off it).

Counters are recounted from the tasks' outcomes on every write, never incremented: a write
redone after a kill gives the same numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from guardkit_state.plans.plan import FeaturePlan
from guardkit_state.plans.plan_splice import PlanUpdate

#: Task statuses that end a task in the plan.
ENDED = ("completed", "failed", "blocked")


class RunTask(Protocol):
    """What the plan records of one task of a run: the runner's ``TaskOutcome``, read through this
    shape so plans sit below the runner."""

    @property
    def task_id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def outcome(self) -> str | None: ...
    @property
    def turns(self) -> int: ...
    @property
    def merge_commit(self) -> str | None: ...
    @property
    def conflicts(self) -> tuple[str, ...]: ...
    @property
    def reason(self) -> str: ...


def counters(outcomes: Sequence[RunTask]) -> dict[str, int]:
    """``tasks_completed``, ``tasks_failed`` and ``total_turns`` of the tasks as they stand."""
    return {
        # (a task skipped because a task it needs failed is not done: GuardKit's closed ones are)
        "tasks_completed": sum(o.status == "completed" or (o.status == "skipped" and o.outcome is None)
                               for o in outcomes),
        "tasks_failed": sum(o.status in ("failed", "blocked") for o in outcomes),
        "total_turns": sum(o.turns for o in outcomes),
    }


def task_values(outcome: RunTask, plan: FeaturePlan, *, now: str) -> dict[str, Any]:
    """The plan values of one task after its loop ended, or after its merge (or conflict)."""
    raw = plan.task(outcome.task_id).raw
    values: dict[str, Any] = {"status": outcome.status, "turns_completed": outcome.turns}
    if outcome.outcome not in (None, "interrupted"):
        error = outcome.reason if outcome.status in ("failed", "blocked", "skipped") else None
        values["result"] = {"total_turns": outcome.turns, "final_decision": outcome.outcome, "error": error}
    if outcome.merge_commit is not None:
        values["merge_commit"] = outcome.merge_commit
    if outcome.status == "blocked":
        values["merge_conflicts"] = list(outcome.conflicts)
    elif raw.get("merge_conflicts") is not None:
        values["merge_conflicts"] = None
    if outcome.status in ENDED:
        values["completed_at"] = now
    return values


def disagrees(outcome: RunTask, plan: FeaturePlan) -> bool:
    """True when the plan reports ``outcome``'s task otherwise than its files and git say."""
    task = plan.task(outcome.task_id)
    if task.status != outcome.status or task.turns_completed != outcome.turns:
        return True
    if outcome.merge_commit is not None and task.raw.get("merge_commit") != outcome.merge_commit:
        return True
    return outcome.outcome not in (None, "interrupted") and task.final_decision != outcome.outcome


def counted(plan: FeaturePlan, counts: dict[str, int]) -> bool:
    """True when the plan's ``execution`` already holds ``counts``."""
    execution = plan.execution.raw if plan.execution is not None else {}
    return all(execution.get(key) == value for key, value in counts.items())


def task_started(task_id: str, plan: FeaturePlan, *, now: str) -> dict[str, Any]:
    """The plan values of a task whose loop starts (``started_at`` only when it was not running)."""
    values: dict[str, Any] = {"status": "in_progress"}
    if plan.task(task_id).status != "in_progress" or not plan.task(task_id).started_at:
        values["started_at"] = now
        values["completed_at"] = None
    return values


def run_started(plan: FeaturePlan, *, worktree: str, resumed: bool, now: str) -> PlanUpdate:
    """The feature starts (or resumes): its status, where its worktree is, a fresh ``execution``."""
    update = PlanUpdate(top_level={"status": "in_progress"})
    execution = plan.execution
    if resumed and execution is not None and execution.started_at:
        update.set_execution(worktree_path=worktree, last_updated=now, completed_at=None)
        return update
    update.set_execution(started_at=now, completed_at=None, worktree_path=worktree, current_wave=0,
                         completed_waves=[], tasks_completed=0, tasks_failed=0, total_turns=0, last_updated=now)
    return update


def wave_completed(plan: FeaturePlan, number: int, *, now: str) -> PlanUpdate:
    """Wave ``number`` is merged: it joins ``completed_waves`` (once)."""
    done = list(plan.execution.completed_waves) if plan.execution is not None else []
    if number not in done:
        done = sorted([*done, number])
    return PlanUpdate(execution={"completed_waves": done, "last_updated": now})


def run_ended(*, completed: bool, failed: bool, waves: int, now: str) -> PlanUpdate:
    """The run ends: every wave merged (``completed``), stopped by a task (``failed``), or
    stopped by a loop that did not end (the plan stays ``in_progress`` for ``--resume``)."""
    update = PlanUpdate(execution={"last_updated": now})
    if completed:
        update.set_top_level(status="completed")
        update.set_execution(completed_at=now, current_wave=waves)
    elif failed:
        update.set_top_level(status="failed")
    return update


__all__ = ["ENDED", "counted", "counters", "disagrees", "run_ended", "run_started", "task_started",
           "task_values", "wave_completed"]
