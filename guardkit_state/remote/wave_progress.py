"""A merged wave written into the feature's plan on the feature branch, by the worker that merged it.

Committed in the feature worktree and pushed with the merges, as a one-machine run writes its plan:
the merged tasks' status, turns, result and merge commit, the failed and skipped ones (a failure that
did not stop the feature), the counters, the completed waves, and the feature's end after the last wave.
A wave with nothing to merge (every task of it failed or skipped) is written the same way, by a merge
step that merges nothing: :class:`WrittenWaves` tells the workers it is still to be written.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from guardkit_state.errors import GuardkitStateError
from guardkit_state.features.progress import TaskState
from guardkit_state.features.result import TaskOutcome
from guardkit_state.git.repo import GitRepo
from guardkit_state.plans import plan_progress as progress_values
from guardkit_state.plans.merge_queue_log import QueueStep, with_steps
from guardkit_state.plans.plan import FeaturePlan, parse_plan
from guardkit_state.plans.plan_splice import PlanUpdate
from guardkit_state.plans.plan_writer import modify_plan
from guardkit_state.plans.smoke_gates import SmokeRun, with_run
from guardkit_state.plans.waves import Waves
from guardkit_state.remote.going_on import GoingOn
from guardkit_state.remote.ready import WaveTurn
from guardkit_state.store.layout import branch_for
from guardkit_state.turns.clock import utc_now


def write_wave_progress(feature_repo: GitRepo, repo_root: Path, plan: FeaturePlan, waves: Waves,
                        turn: WaveTurn, merged: dict[str, str | None], *, state_of: Callable[[str], TaskState],
                        note: Callable[[str], None], steps: Sequence[QueueStep] = (),
                        runs: Sequence[SmokeRun] = ()) -> bool:
    """The wave's merges written into the plan on the feature branch (committed, pushed with the
    merges) as a one-machine run writes its plan: the merged tasks' status, turns, result and
    merge commit, the counters, the merge queue's ``steps`` and the gate's ``runs``, and once every
    task of the wave is merged the completed waves (and the feature's end after the last wave).
    True when the wave is complete."""
    complete = all(task in merged or turn.states[task].phase in ("merged", "closed") for task in turn.tasks)
    assert plan.path is not None  # loaded from its file (run_worker)
    path = feature_repo.root / plan.path.relative_to(repo_root)
    if not path.is_file():
        note(f"wave {turn.number}: {plan.path.name} is not on {branch_for(plan.feature_id)}; its progress "
             f"is not written (commit the plan to share it)")
        return complete
    now = utc_now()
    outcomes = _outcomes(waves, turn, merged, state_of)
    # The merged tasks, and the ones a failure that did not stop the feature left out (failed, skipped).
    done = [o for o in outcomes if o.task_id in merged or (o.task_id in turn.tasks and o.outcome is not None
                                                             and o.status in ("failed", "skipped"))]

    def tasks(current: FeaturePlan) -> PlanUpdate:
        # (a skipped task never started: a one-machine run gives it no started_at either)
        return PlanUpdate(tasks={o.task_id: {**(progress_values.task_started(o.task_id, current, now=now)
                                                if o.status != "skipped" else {}),
                                             **progress_values.task_values(o, current, now=now)} for o in done})

    def started(current: FeaturePlan) -> PlanUpdate:
        resumed = current.execution is not None and bool(current.execution.started_at)
        return progress_values.run_started(current, worktree=str(feature_repo.root), resumed=resumed, now=now)

    def ended(current: FeaturePlan) -> PlanUpdate | None:
        if turn.number < len(waves) or not complete:
            return None
        # (every wave done, but a failure that did not stop the feature: GuardKit's "failed")
        failed = any(o.status in ("failed", "blocked") or o.outcome == "dependency_failed" for o in outcomes)
        return progress_values.run_ended(completed=not failed, failed=failed, waves=len(waves), now=now)

    def queue(current: FeaturePlan) -> PlanUpdate | None:
        if not steps and not runs:
            return None
        execution: dict[str, object] = {"merge_queue": with_steps(current, list(steps))}
        if runs:  # per wave, the latest (as a one-machine run keeps them)
            execution["smoke_gate_runs"] = with_run(current, runs[-1])
        return PlanUpdate(execution=execution)

    def wave_done(current: FeaturePlan) -> PlanUpdate | None:
        return progress_values.wave_completed(current, turn.number, now=now) if complete else None

    counts = progress_values.counters(outcomes)
    modify_plan(path, started, lambda _: PlanUpdate(execution={"current_wave": turn.number, "last_updated": now}),
                tasks, lambda _: PlanUpdate(execution={**counts, "last_updated": now}), queue, wave_done, ended)
    rel = str(path.relative_to(feature_repo.root))
    message = f"guardkit: {plan.feature_id} progress after wave {turn.number} in its plan"
    # The plan staged and committed in one git call (--include: what `add` then `commit` do). Where it
    # commits nothing (or fails), the two steps are taken as ever, and end as ever.
    if feature_repo.run("commit", "-q", "--no-verify", "-i", "-m", message, "--", rel, check=False,
                        pre=feature_repo.identity_args())[0] == 0:
        return complete
    feature_repo.run("add", "--", rel)
    if feature_repo.ok("diff", "--cached", "--quiet"):
        return complete  # already written (a merge pushed before, then redone)
    feature_repo.run("commit", "-q", "--no-verify", "-m", message, pre=feature_repo.identity_args())
    return complete


def _outcomes(waves: Waves, turn: WaveTurn, merged: dict[str, str | None],
              state_of: Callable[[str], TaskState]) -> list[TaskOutcome]:
    """Every task of the feature as the plan counts it after the wave's merges."""
    outcomes: list[TaskOutcome] = []
    for number, wave in enumerate(waves, start=1):
        for task in wave:
            state = turn.states[task] if number == turn.number else state_of(task)
            if task in merged:
                outcomes.append(TaskOutcome(task, number, "completed", "approved", state.turns,
                                            merge_commit=merged[task]))
            elif state.phase == "merged":
                outcomes.append(TaskOutcome(task, number, "completed", "approved", state.turns,
                                            merge_commit=state.merge_commit))
            else:
                # (closed with an outcome: a failure that did not stop the feature, or a task skipped for it)
                status = "pending" if state.phase not in ("closed", "failed") else "failed" if state.phase == "failed" \
                    or state.outcome not in (None, "dependency_failed") else "skipped"
                outcomes.append(TaskOutcome(task, number, status, state.outcome, state.turns, reason=state.reason))
    return outcomes


def plan_on_branch(repo: GitRepo, plan: FeaturePlan, rev: str) -> FeaturePlan | None:
    """The plan as the feature branch at ``rev`` holds it (the mergers write the progress and the
    merge queue's steps into it); None when it holds none that can be read."""
    if plan.path is None:
        return None
    with contextlib.suppress(GuardkitStateError, ValueError):
        # (Read under the cap a plan on disk is read under: one over it is never read, and holds none.)
        raw = repo.blob(rev, plan.path.relative_to(repo.root).as_posix())
        if raw is not None:
            return parse_plan(raw.decode("utf-8", "replace"), path=plan.path)
    return None


@dataclass
class WrittenWaves:
    """Whether a wave wholly merged or closed is written into the plan on the feature branch.

    A merged wave is written by its merge. A wave with a task that failed without stopping the
    feature, or was skipped for one (:class:`~guardkit_state.remote.going_on.GoingOn`), may have
    nothing to merge: it is written once the plan on the feature branch lists it complete (read once
    per feature branch tip), and until then it is the workers' wave (:func:`~guardkit_state.remote.ready.wave_turn`):
    the worker that takes its merge claim writes it, as a one-machine run writes a wave that ends so
    (its failed and skipped tasks; after the last wave, the feature's end). A feature branch without
    a readable plan has nothing to write: every wave counts as written."""

    repo: GitRepo
    going_on: GoingOn
    _complete: tuple[str | None, frozenset[int] | None] = (None, None)  # a tip, the waves its plan lists complete

    def at(self, feature_sha: str | None) -> Callable[[int, Mapping[str, TaskState]], bool]:
        """The test for the feature branch at ``feature_sha``: is wave ``number`` (its tasks' ``states``) written?"""
        def written(number: int, states: Mapping[str, TaskState]) -> bool:
            if not any(task in self.going_on.failed or task in self.going_on.skipped for task in states):
                return True  # merged (its merge wrote it), or closed before the feature ran it
            complete = self._waves_complete(feature_sha)
            return complete is None or number in complete
        return written

    def _waves_complete(self, feature_sha: str | None) -> frozenset[int] | None:
        if feature_sha is None:
            return None
        if self._complete[0] != feature_sha:
            found = plan_on_branch(self.repo, self.going_on.plan, feature_sha)
            execution = found.execution if found is not None else None
            self._complete = (feature_sha, None if found is None else
                              frozenset(execution.completed_waves if execution is not None else ()))
        return self._complete[1]


__all__ = ["WrittenWaves", "plan_on_branch", "write_wave_progress"]
