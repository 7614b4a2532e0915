"""What a feature run writes into its plan: each change queued, the queue written in one verified write.

The plan is written as a task loop starts, when one ends, when the merge queue runs the gate, and
when the run stops: the steps between (the run starting, a wave starting, merges) join the next
write (:func:`~guardkit_state.plans.plan_writer.modify_plan` applies them in order and verifies the
whole once). The plan reports progress; where a task stands is read from its files and git, so a
plan a kill left a step behind is put right by ``--resume``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from guardkit_state.features.result import TaskOutcome
from guardkit_state.plans import plan_progress as progress_values
from guardkit_state.plans.merge_queue_log import QueueStep, with_steps
from guardkit_state.plans.plan import FeaturePlan
from guardkit_state.plans.plan_splice import PlanUpdate
from guardkit_state.plans.plan_writer import modify_plan
from guardkit_state.plans.smoke_gates import SmokeRun, with_run
from guardkit_state.turns.clock import utc_now

Change = Callable[[FeaturePlan], PlanUpdate | None]


class PlanReport:
    """The plan changes of one run, not written yet, and their write."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._pending: list[Change] = []

    def add(self, change: Change, *, now: bool = False) -> None:
        """Queue ``change``; with ``now``, write every queued change (one write)."""
        self._pending.append(change)
        if now:
            self.flush()

    def flush(self) -> None:
        if self._pending:
            modify_plan(self.path, *self._pending)
            self._pending.clear()  # only once written: a write cut short is tried again by the next

    def task(self, outcome: TaskOutcome, outcomes: Sequence[TaskOutcome], *, now: bool = False) -> None:
        """Queue one task's values (after its loop ended, or its merge), with the recounted counters."""
        counts = progress_values.counters(outcomes)

        def change(plan: FeaturePlan) -> PlanUpdate:
            when = utc_now()
            return PlanUpdate(tasks={outcome.task_id: progress_values.task_values(outcome, plan, now=when)},
                              execution={**counts, "last_updated": when})
        self.add(change, now=now)

    def queue_step(self, step: QueueStep) -> None:
        """Queue a step of the merge queue (``execution.merge_queue``); a gate run is written at once,
        with the wave's latest run in ``smoke_gate_runs``: a verdict shows while the queue goes on."""
        if step.step != "candidate" or step.reused:
            self.add(lambda plan: PlanUpdate(execution={"merge_queue": with_steps(plan, [step])}))
            return
        run = SmokeRun(step.wave, step.gate or "?", step.exit_code, step.expected_exit, step.seconds, step.output,
                       step.at)
        self.add(lambda plan: PlanUpdate(execution={"merge_queue": with_steps(plan, [step]),
                                                    "smoke_gate_runs": with_run(plan, run),
                                                    "last_updated": utc_now()}), now=True)

    def reconcile(self, outcomes: Sequence[TaskOutcome], ended: Sequence[TaskOutcome]) -> None:
        """Queue what the files say of the ``ended`` tasks the plan reports otherwise (a run killed
        between a merge and its plan write), and the counters; nothing when the plan already agrees."""
        counts = progress_values.counters(outcomes)

        def change(plan: FeaturePlan) -> PlanUpdate | None:
            when = utc_now()
            tasks = {o.task_id: progress_values.task_values(o, plan, now=when) for o in ended
                     if progress_values.disagrees(o, plan)}
            if not tasks and progress_values.counted(plan, counts):
                return None
            return PlanUpdate(tasks=tasks, execution={**counts, "last_updated": when})
        self.add(change)


__all__ = ["Change", "PlanReport"]
