"""``--no-stop-on-failure`` for the workers of a feature shared through a remote.

Where a failed task does not stop the feature (:mod:`~guardkit_state.plans.failure_rules`), the
workers read it, and every task that needs it, as ``closed`` when they decide which wave's turn has
come (:func:`~guardkit_state.remote.ready.wave_turn`): the failed task's wave is merged without it,
its dependents are claimed by nobody, and the other tasks run on. When every wave is done the
workers end not done (exit 1), naming the tasks the feature branch is without.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from guardkit_state.features.progress import TaskState
from guardkit_state.plans.failure_rules import skipped_by, skipped_reason, stops_on_failure
from guardkit_state.plans.plan import FeaturePlan


@dataclass
class GoingOn:
    """The failed tasks seen that do not stop the feature, and the tasks skipped for them."""

    plan: FeaturePlan
    flag: bool | None  # the run's --[no-]stop-on-failure
    failed: dict[str, str] = field(default_factory=dict)  # task -> why it failed
    skipped: dict[str, str] = field(default_factory=dict)  # task -> the failed task it needs

    def state(self, state: TaskState) -> TaskState:
        """``state`` as the waves see it: closed for a failure that does not stop the feature, and
        for a task that needs one (the waves are read in order: a task's dependencies come first)."""
        task = state.task_id
        # As it stands now: a failure released (``--release``) or resumed with more turns elsewhere no
        # longer holds back its dependents, nor is it named among what the feature is without.
        self.failed.pop(task, None)
        self.skipped.pop(task, None)
        if state.phase == "failed" and not stops_on_failure(self.plan, task, self.flag):
            self.failed[task] = state.reason
            return replace(state, phase="closed")
        cause = skipped_by(self.failed, self.plan).get(task) if self.failed and state.runs else None
        if cause is None:
            return state
        self.skipped[task] = cause
        return replace(state, phase="closed", outcome="dependency_failed",
                       reason=skipped_reason(cause))

    def without(self, feature_branch: str) -> tuple[list[str], str]:
        """The tasks every wave done leaves out (in plan order; none when nothing was passed over),
        and why, in one line."""
        names = [task.id for task in self.plan.tasks if task.id in self.failed or task.id in self.skipped]
        parts = [f"{task}: {self.failed[task]}" if task in self.failed
                 else f"{task} {skipped_reason(self.skipped[task])}" for task in names]
        merged = "every other" if len(names) < len(self.plan.tasks) else "no"  # (none left: no merge to claim)
        return names, "; ".join(parts) + f"; {merged} task merged into {feature_branch}"


__all__ = ["GoingOn"]
