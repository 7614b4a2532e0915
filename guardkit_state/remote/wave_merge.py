"""One wave merged by the worker holding the merge claim, through the feature's merge queue.

The worker of ``feature-build --remote`` that holds the merge claim (:mod:`~guardkit_state.remote.worker`)
resets its feature worktree to the remote's feature branch and hands the wave's approved tasks to the
merge queue (:mod:`guardkit_state.features.merge_queue`), as a one-machine run does: candidates built
in that worktree, the plan's gate run on them, the feature branch moved (here) only to candidates that
passed, a breaker found by bisection and sent back (:mod:`guardkit_state.features.send_back`). Then,
in this order: each send-back is pushed to its task's branch (the task is claimable again, for one more
turn, on any machine), and the landing is written into the plan on the feature branch
(:func:`~guardkit_state.remote.wave_progress.write_wave_progress`, with the queue's steps) and pushed with
a lease. A merger stopped in between leaves the remote as it was before the step not pushed; the next
merger does it again (the gate's verdicts are kept in this clone: a merger that goes on here runs the
gate only where it has not).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from guardkit_state.errors import ClaimLostError, GuardkitStateError
from guardkit_state.features.gate_verdicts import GateVerdicts
from guardkit_state.features.merge_queue import Approved, Landing, MergeQueue, SendBack, restore_worktree
from guardkit_state.features.progress import TaskState
from guardkit_state.features.send_back import write_send_back
from guardkit_state.git.merge import merge_message
from guardkit_state.git.merge_driver_setup import unregistered_note
from guardkit_state.git.repo import UNREAD, GitRepo
from guardkit_state.git.stale_locks import remove_stale_locks
from guardkit_state.git.worktrees import WorktreeManager
from guardkit_state.plans.merge_queue_log import recorded_steps
from guardkit_state.plans.plan import FeaturePlan, load_plan
from guardkit_state.plans.smoke_gates import read_smoke_gate
from guardkit_state.plans.waves import Waves
from guardkit_state.remote.branches import RemoteBranches, list_refs
from guardkit_state.remote.ledgers import RemoteLedgers
from guardkit_state.remote.ready import WaveTurn
from guardkit_state.remote.wave_progress import write_wave_progress
from guardkit_state.store.fsio import crash_point
from guardkit_state.store.layout import BRANCH_PREFIX, branch_for

#: Runs one remote step, retried while the remote is unreachable (the worker's ``_remote``).
Remote = Callable[[Callable[[], object], str], object]


@dataclass
class WaveMerged:
    """How the wave's merge step ended: ``step`` ``worked`` (look again), ``done`` (the workers stop:
    ``reason``), and what it merged (task -> merge commit) and sent back."""

    step: str
    reason: str = ""
    merged: dict[str, str] = field(default_factory=dict)
    sent_back: list[str] = field(default_factory=list)
    complete: bool = False


@dataclass
class WaveMerger:
    """What a worker merges with: its clone, the remote's branches and ledgers, the plan."""

    repo: GitRepo
    branches: RemoteBranches
    ledgers: RemoteLedgers
    plan: FeaturePlan
    waves: Waves
    remote: Remote
    note: Callable[[str], None]
    max_turns: int | None = None

    @property
    def feature_branch(self) -> str:
        return branch_for(self.plan.feature_id)

    def merge(self, turn: WaveTurn, state_of: Callable[[str], TaskState]) -> WaveMerged:
        # No fetch here: this step's ls-remote found the remote as the last fetch left it, and the
        # push below carries a lease, so a feature branch another merger moved since is not overwritten.
        expected = self.repo.resolve(self.branches.tracking(self.feature_branch))
        feature_repo = WorktreeManager(self.repo).create(self.plan.feature_id).repo()
        # A merger killed in its merge here left its lock, or the merge half-done, or its worktree at a
        # candidate: no git holds the one, and the others are reset with the branch (the remote's is the truth).
        remove_stale_locks(feature_repo.root, feature_repo.git_dir, feature_repo.common_dir, self.feature_branch)
        restore_worktree(feature_repo, self.feature_branch)
        if expected is not None:
            feature_repo.run("reset", "--hard", "--quiet", expected)
        approved = [task for task in turn.tasks if turn.states[task].phase == "approved"]
        tips = self._tips()
        lost = self._push_unpushed(turn, approved, tips)
        if lost is not None:
            return lost
        gate = read_smoke_gate(self.plan)
        sent: list[SendBack] = []

        def send_back(breaker: SendBack) -> bool:
            assert gate is not None  # only a gated queue sends back
            sent.append(breaker)
            return write_send_back(self.repo, breaker, feature_branch=self.feature_branch, gate=gate,
                                   max_turns=self.max_turns, note=self.note).final

        def message(task: Approved) -> str:
            return merge_message(self.plan.feature_id, task.task_id, branch=branch_for(task.task_id),
                                 target=self.feature_branch, wave=turn.number,
                                 summary=f"{task.task_id} approved in {task.turns} turn(s).")

        verdicts = GateVerdicts(self.repo, self.plan.feature_id)
        queue = MergeQueue(feature_repo, self.feature_branch, turn.number, gate, verdicts, message=message,
                           send_back=send_back, on_step=lambda step: self.note(step.describe()),
                           runs_before=self._runs_before(feature_repo, turn.number), note=self.note)
        # Each tip as the listing above read it (what a rev-parse here would say: the pushes above move
        # the remote's branches and their tracking refs, never a branch here; an approved task runs nowhere).
        landing = queue.land([Approved(task, tips.get(f"refs/heads/{branch_for(task)}")
                                       or self.repo.text("rev-parse", f"refs/heads/{branch_for(task)}"),
                                       turn.states[task].turns) for task in approved],
                             head=UNREAD if expected is None else expected)  # (just reset there)
        pushed = self._push_send_backs(turn, sent)
        if pushed is not None:
            return pushed
        stop = self._stopped(feature_repo, landing, expected)
        if stop is not None:
            return stop
        return self._push_landing(feature_repo, turn, landing, expected, state_of, [s.task.task_id for s in sent],
                                  verdicts)

    def _runs_before(self, feature_repo: GitRepo, wave: int) -> int:
        """The gate runs the plan on the feature branch records for ``wave`` (by any merger): the
        next is numbered after them, and is the run of tasks sent back and approved again."""
        assert self.plan.path is not None  # loaded from its file (run_worker)
        with contextlib.suppress(GuardkitStateError, ValueError):
            plan = load_plan(feature_repo.root / self.plan.path.relative_to(self.repo.root))
            return sum(step.step == "candidate" and step.wave == wave for step in recorded_steps(plan))
        return 0

    def _tips(self) -> dict[str, str]:
        """Every task branch here and as last fetched (full ref name -> sha), in one git call."""
        prefix = BRANCH_PREFIX.rstrip("/")
        return {name: sha for name, sha, _ in list_refs(self.repo, self.branches.tracking(prefix),
                                                        f"refs/heads/{prefix}")}

    def _push_unpushed(self, turn: WaveTurn, approved: list[str], tips: dict[str, str]) -> WaveMerged | None:
        """Push the approvals a dead holder committed on this clone and never pushed."""
        for task in approved:
            branch = branch_for(task)
            tip, local = tips.get(self.branches.tracking(branch)), tips.get(f"refs/heads/{branch}")
            if local is None or local == tip:
                continue
            # Approved on this clone, its push never made (its holder died first; its claim is stale or
            # gone): pushed now, so the remote's task branch holds what the feature branch merges.
            try:
                self.remote(functools.partial(self.branches.push, branch, tip,
                                              also=(self.ledgers.refspec(task, local),)), f"{task}: push")
            except ClaimLostError as exc:
                self.note(f"wave {turn.number}: {exc.message}; looking again")
                return WaveMerged("worked", sent_back=[task])
        return None

    def _push_send_backs(self, turn: WaveTurn, sent: list[SendBack]) -> WaveMerged | None:
        """Each breaker's send-back onto its branch on the remote (claimable again, for one more turn)."""
        for breaker in sent:
            task = breaker.task.task_id
            branch = branch_for(task)
            try:
                self.remote(functools.partial(self.branches.push, branch, breaker.task.tip), f"{task}: push")
            except ClaimLostError as exc:
                self.note(f"wave {turn.number}: {exc.message}; looking again")
                return WaveMerged("worked", sent_back=[s.task.task_id for s in sent])
        return None

    def _stopped(self, feature_repo: GitRepo, landing: Landing, expected: str | None) -> WaveMerged | None:
        """The workers stop on a conflict (name the task and files) or a gate the wave's start fails too."""
        reason = ""
        for task, merged in landing.blocked.items():
            reason = (f"{task}: merge conflict in {', '.join(merged.conflicts)}" if merged.conflicts
                      else f"{task}: the merge was refused: {merged.error}")
            note = unregistered_note(feature_repo, merged.conflicts)
            reason += f" ({note})" if note is not None else ""
            break
        if landing.halted is not None:
            tail = " ".join(landing.halted.output.split())[-300:]
            reason = (f"{landing.halted.describe()} on {self.feature_branch} before the wave's merges too, so no task "
                      f"of it breaks it{': ' + tail if tail else ''}; once fixed, run the workers again")
        if not reason:
            return None
        feature_repo.run("reset", "--hard", "--quiet", expected or "HEAD")
        return WaveMerged("done", reason)

    def _push_landing(self, feature_repo: GitRepo, turn: WaveTurn, landing: Landing, expected: str | None,
                      state_of: Callable[[str], TaskState], sent: list[str], verdicts: GateVerdicts) -> WaveMerged:
        # Every task merged or closed: a wave whose tasks failed or were skipped without stopping the
        # feature (remote.wave_progress.WrittenWaves), written though nothing is merged.
        ended = all(turn.states[task].phase in ("merged", "closed") for task in turn.tasks)
        if not landing.merged and not landing.steps and not ended:
            return WaveMerged("worked", sent_back=sent)
        if ended:
            self.note(f"wave {turn.number}: nothing to merge (its tasks failed or were skipped); its progress "
                      f"is written into the plan")
        # (Nothing landed, a task sent back: its steps alone are written, on the tip as it was.)
        complete = write_wave_progress(feature_repo, self.repo.root, self.plan, self.waves, turn,
                                       dict(landing.merged), state_of=state_of, note=self.note,
                                       steps=landing.steps, runs=landing.runs)
        crash_point("remote.merged")  # the wave merged here, not pushed yet
        try:
            pushed = self.remote(lambda: self.branches.push(self.feature_branch, expected), "push")
        except ClaimLostError:
            self.note(f"wave {turn.number}: {self.feature_branch} moved on the remote meanwhile; looking again")
            return WaveMerged("worked", sent_back=sent)
        if landing.gated and landing.tip is not None and isinstance(pushed, str):
            # The plan's progress is the one change on top of the candidate that passed.
            verdicts.good(pushed)
        return WaveMerged("worked", merged=dict(landing.merged), sent_back=sent, complete=complete)


__all__ = ["WaveMerged", "WaveMerger"]
