"""The merge queue of a feature: the feature branch only ever moves to a candidate that passed the gate.

A wave's approved tasks are merged, in plan order, onto a *candidate* of the feature branch: the
merger's worktree (the feature's own) is detached at the branch's tip and the task branches are
merged there, one ``--no-ff`` merge commit each (the trailers of :func:`~guardkit_state.git.merge.merge_message`),
so the candidate's first-parent line holds one commit per task: the first *k* of them is the
candidate of the first *k* tasks. The plan's gate (:mod:`guardkit_state.plans.smoke_gates`) runs on
the wave's candidate; when it passes, the feature branch moves there (``update-ref`` from the sha it
had: a fast-forward, in one step).

When it fails, the breaker is found by bisection over the candidate's commits (plan order, the
order of merges kept): the smallest *k* whose candidate fails, with the first *k - 1* passing. The
feature branch moves to the first *k - 1* (they passed), task *k* is sent back (its loop gets one
more turn with the gate's output: :mod:`guardkit_state.features.send_back`), and the tasks after it
make the next candidate, on the new tip. For one breaker in a wave of *n* that is one gate run on
the wave's candidate and ⌈log2 n⌉ to find it (one more on the wave's start when the breaker is the
first task and that start never ran the gate: if the start fails too, no task is to blame and the
queue halts). A task whose merge conflicts is left out of the candidate and reported blocked.

Every verdict is kept at once (:class:`~guardkit_state.features.gate_verdicts.GateVerdicts`), keyed
by what the candidate is made of, so a queue interrupted at any instant and run again continues: it
rebuilds the candidates and runs the gate only where no verdict was recorded. Where the plan names
no gate for the wave, the tasks are merged onto the branch directly, as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from guardkit_state.errors import GitError
from guardkit_state.features.gate_verdicts import GateVerdicts, candidate_key
from guardkit_state.git.merge import MergeResult, merge_branch, merge_in_progress
from guardkit_state.git.repo import UNREAD, GitRepo, Unread
from guardkit_state.plans.merge_queue_log import QueueStep
from guardkit_state.plans.smoke_gates import SmokeGate, SmokeRun, run_smoke_gate
from guardkit_state.process.command import stop_orphans
from guardkit_state.store.fsio import crash_point
from guardkit_state.store.layout import branch_for
from guardkit_state.turns.clock import utc_now


@dataclass(frozen=True)
class Approved:
    """An approved task waiting to be merged: its branch's tip and its turns."""

    task_id: str
    tip: str
    turns: int


@dataclass(frozen=True)
class SendBack:
    """A task whose merge breaks the gate: the smallest failing candidate and what it found.

    ``base`` is the passing commit the breaker was merged onto (the feature branch before the wave,
    or its first tasks'), ``merged_before`` the wave's tasks in it, ``runs`` the gate runs made (or
    verdicts reused) to find the breaker.
    """

    task: Approved
    wave: int
    run: SmokeRun
    candidate: str
    base: str
    merged_before: tuple[str, ...]
    runs: int


@dataclass
class Landing:
    """What the queue did with one wave's approved tasks."""

    merged: dict[str, str] = field(default_factory=dict)
    sent_back: list[SendBack] = field(default_factory=list)
    blocked: dict[str, MergeResult] = field(default_factory=dict)
    #: The gate failing on the feature branch before the wave's merges too (nothing merged then).
    halted: SmokeRun | None = None
    #: Every step, for the plan's ``execution.merge_queue``.
    steps: list[QueueStep] = field(default_factory=list)
    #: Every gate run made (not reused), for the plan's ``smoke_gate_runs``.
    runs: list[SmokeRun] = field(default_factory=list)
    #: The feature branch's tip after the queue (None: it did not move).
    tip: str | None = None
    #: The tasks went through the gate (False: the plan names no gate for the wave).
    gated: bool = False


Link = tuple[Approved, str]  # a task and the candidate commit that merged it


class MergeQueue:
    """One wave's pass through the queue, in the feature worktree ``worktree`` on branch ``branch``.

    ``message`` gives a task's merge message; ``send_back`` is called with each breaker before the
    feature branch moves past it (the caller writes it into the task's history; True when the task
    had no turn left and ends failed); ``on_step`` is told every step as it happens, ``on_merged``
    each task (and its merge commit) as the feature branch takes it, ``note`` what the queue did on
    its own (a gate an interrupted run left running, stopped).
    """

    def __init__(self, worktree: GitRepo, branch: str, wave: int, gate: SmokeGate | None, verdicts: GateVerdicts,
                 *, message: Callable[[Approved], str], send_back: Callable[[SendBack], bool],
                 on_step: Callable[[QueueStep], None] = lambda step: None,
                 on_merged: Callable[[str, str], None] = lambda task, sha: None, runs_before: int = 0,
                 note: Callable[[str], None] = lambda text: None) -> None:
        self.repo, self.branch, self.wave, self.gate, self.verdicts = worktree, branch, wave, gate, verdicts
        self.message, self.send_back, self.on_step, self.on_merged = message, send_back, on_step, on_merged
        self.note = note
        self.landing = Landing()
        self._head: str | None = None  # where this queue last put the worktree's HEAD
        #: Gate verdicts taken in the wave so far (``runs_before``: by its earlier passes): each is numbered.
        self.number = runs_before
        self._first = runs_before == 0

    def land(self, tasks: Sequence[Approved], *, head: str | Unread | None = UNREAD) -> Landing:
        """Merge ``tasks`` (approved, plan order) as the module says; the feature branch moves only
        to candidates that passed (or, without a gate for this wave, takes each merge as it comes).
        ``head``: the worktree's HEAD as the caller just put it (so it is not asked again)."""
        if not tasks:
            return self.landing
        if self.gate is None or not self.gate.applies_after(self.wave):
            return self._merge_directly(tasks, self.repo.head_sha() if isinstance(head, Unread) else head)
        restore_worktree(self.repo, self.branch)
        # A run SIGKILLed while its gate ran left the gate's processes, in a session of their own, running.
        for text in stop_orphans([self.verdicts.gate_pid_file], by="an interrupted run"):
            self.note(text)
        self.landing.gated = True
        try:
            self._queue(list(tasks))
        finally:
            with contextlib.suppress(Exception):  # a second Ctrl-C here: --resume puts it back
                restore_worktree(self.repo, self.branch)
        return self.landing

    # -- without a gate ----------------------------------------------------------------------
    def _merge_directly(self, tasks: Sequence[Approved], head: str | None) -> Landing:
        # HEAD known once: then it is each merge's commit, or (a merge blocked: aborted) where it was.
        for task in tasks:
            crash_point("feature.before_merge")
            merged = merge_branch(self.repo, branch_for(task.task_id), self.message(task), head=head)
            crash_point("feature.after_merge")
            if self._took(task, merged):
                head = merged.sha
        self.landing.tip = head
        return self.landing

    def _took(self, task: Approved, merged: MergeResult) -> bool:
        if merged.merged:
            assert merged.sha is not None
            self.landing.merged[task.task_id] = merged.sha
            self.on_merged(task.task_id, merged.sha)
            return True
        self.landing.blocked[task.task_id] = merged
        return False

    # -- with a gate -------------------------------------------------------------------------
    def _queue(self, pending: list[Approved]) -> None:
        base = self._tip()
        why = "the wave's candidate" if self._first else "the new approvals of tasks sent back"
        while pending:
            chain = self._build(base, pending)
            if not chain:
                return
            runs = self.number
            if not self._gate(base, chain, len(chain), why).halts:
                self._land(base, chain, self.number - runs)
                return
            breaker = self._bisect(base, chain, runs)
            if breaker is None:
                return  # halted: the wave's start fails the gate too
            passing, index = breaker
            if passing:
                base = passing[-1][1]
            pending = [task for task, _ in chain[index + 1:]]
            why = "the rest of the wave"

    def _bisect(self, base: str, chain: list[Link], runs: int) -> tuple[list[Link], int] | None:
        """Find the first task whose merge fails (the first ``lo`` pass, the first ``hi`` fail),
        send it back and land the ones before it; None when the queue halts instead."""
        lo, hi = 0, len(chain)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self._gate(base, chain, mid, f"bisecting: the first {mid} of {len(chain)}").halts:
                hi = mid
            else:
                lo = mid
        if lo == 0 and not self.verdicts.passes(base):
            start = self._gate(base, chain, 0, "the feature branch before these merges")
            if start.halts:
                self._halt(base, start, self.number - runs)
                return None
        failing = self._verdict(base, chain, hi)
        assert failing is not None  # it ran (or was reused) above
        task, candidate = chain[hi - 1]
        sent = SendBack(task, self.wave, failing, candidate, chain[lo - 1][1] if lo else base,
                        tuple(t.task_id for t, _ in chain[:lo]), self.number - runs)
        final = self.send_back(sent)
        crash_point("queue.after_send_back")
        self.landing.sent_back.append(sent)
        self._step(QueueStep(self.wave, "sent_back", candidate, sent.merged_before, gate=failing.outcome,
                             exit_code=failing.exit_code, expected_exit=failing.expected_exit, task=task.task_id,
                             after_turn=task.turns, final=final, runs=sent.runs, at=utc_now()))
        if lo:
            self._land(base, chain[:lo], sent.runs)
        return chain[:lo], hi - 1

    def _build(self, base: str, pending: list[Approved]) -> list[Link]:
        """The candidate of ``pending`` on ``base``: one merge each, a conflicting task left out."""
        self._checkout(base)
        chain: list[Link] = []
        for task in pending:
            merged = merge_branch(self.repo, branch_for(task.task_id), self.message(task), head=self._head)
            crash_point("queue.after_merge")  # a candidate half built, the worktree detached
            if merged.merged and merged.sha is not None:
                chain.append((task, merged.sha))
                self._head = merged.sha
            else:
                self.landing.blocked[task.task_id] = merged
        return chain

    def _key(self, base: str, chain: list[Link], count: int) -> str:
        assert self.gate is not None
        return candidate_key(self.gate, base, [(task.task_id, task.tip) for task, _ in chain[:count]])

    def _verdict(self, base: str, chain: list[Link], count: int) -> SmokeRun | None:
        return self.verdicts.verdict(self._key(base, chain, count))

    def _gate(self, base: str, chain: list[Link], count: int, why: str) -> SmokeRun:
        """The gate's verdict on the candidate of the first ``count`` tasks of ``chain`` (0: ``base``):
        recorded before, or run now in the worktree (its tracked files put back afterwards)."""
        assert self.gate is not None
        self.number += 1
        key = self._key(base, chain, count)
        sha = chain[count - 1][1] if count else base
        tasks = tuple(task.task_id for task, _ in chain[:count])
        known = self.verdicts.verdict(key)
        if known is not None:
            self._step(_candidate_step(self.wave, known, sha, tasks, why, self.number, reused=True))
            return known
        if sha != self._head:
            self._checkout(sha)
        crash_point("queue.before_gate")
        before = self._untracked()
        self.verdicts.gate_pid_file.parent.mkdir(parents=True, exist_ok=True)
        run = run_smoke_gate(self.gate, self.repo.root, self.wave, at=utc_now(), pid_file=self.verdicts.gate_pid_file)
        self._undo_gate(before)
        self.verdicts.record(key, sha, run)
        self.landing.runs.append(run)
        self._step(_candidate_step(self.wave, run, sha, tasks, why, self.number, reused=False))
        return run

    def _land(self, base: str, chain: list[Link], runs: int) -> None:
        """Move the feature branch to the candidate of ``chain`` (it passed), from ``base``, the tip it was
        built on: a commit someone put on the branch meanwhile is never dropped (the move is refused, and
        the queue run again builds its candidate on that commit)."""
        tip = chain[-1][1]
        crash_point("queue.before_land")
        status, _, _ = self.repo.run("update-ref", "-m", "guardkit-state: the merge queue lands a candidate that "
                                     "passed the gate", f"refs/heads/{self.branch}", tip, base, check=False)
        if status != 0:
            now = self.repo.resolve(f"refs/heads/{self.branch}")
            raise GitError(f"the feature branch {self.branch} moved while the merge queue ran (from {base[:10]} to "
                           f"{now[:10] if now else 'nowhere'}), so nothing more landed; --resume builds the candidate "
                           "again on it", path=self.repo.root)
        self.verdicts.good(tip)
        self.landing.tip = tip
        self._step(QueueStep(self.wave, "landed", tip, tuple(task.task_id for task, _ in chain), runs=runs,
                             at=utc_now()))
        for task, sha in chain:
            self.landing.merged[task.task_id] = sha
            self.on_merged(task.task_id, sha)

    def _halt(self, base: str, run: SmokeRun, runs: int) -> None:
        self.landing.halted = run
        # What the user fixes before --resume (the gate, its environment) is not in the keys: the
        # verdicts are not trusted again.
        self.verdicts.reset(f"halted: the gate fails on {base}")
        self._step(QueueStep(self.wave, "halted", base, gate=run.outcome, exit_code=run.exit_code,
                             expected_exit=run.expected_exit, runs=runs, at=run.at, output=run.output))

    def _step(self, step: QueueStep) -> None:
        self.landing.steps.append(step)
        self.on_step(step)

    def _tip(self) -> str:
        return self.repo.text("rev-parse", "--verify", f"refs/heads/{self.branch}^{{commit}}")

    def _checkout(self, sha: str) -> None:
        # -f: the worktree is the merger's own; a gate's edits to tracked files are not kept.
        self.repo.run("checkout", "-q", "-f", "--detach", sha)
        self._head = sha

    def _untracked(self) -> set[str]:
        """The files in the worktree git neither tracks nor ignores."""
        out = self.repo.run("ls-files", "-z", "--others", "--exclude-standard", check=False)[1]
        return {path for path in out.decode("utf-8", "surrogateescape").split("\0") if path}

    def _undo_gate(self, before: set[str]) -> None:
        """What the gate wrote is no candidate's: its edits of tracked files are undone, and the files it
        made that git does not ignore removed (one left would refuse a later task's merge of a file of that
        name: "untracked working tree files would be overwritten"). Files that were there before it (what
        a person put there for the gate) and ignored ones (build caches) stay."""
        self.repo.run("reset", "-q", "--hard", check=False)
        for path in sorted(self._untracked() - before):
            with contextlib.suppress(OSError):
                (self.repo.root / path).unlink()


def _candidate_step(wave: int, run: SmokeRun, sha: str, tasks: tuple[str, ...], why: str, number: int, *,
                    reused: bool) -> QueueStep:
    return QueueStep(wave, "candidate", sha, tasks, why, run.outcome, run.exit_code, run.expected_exit, run.seconds,
                     number, reused, at=run.at, output=run.output)


def restore_worktree(repo: GitRepo, branch: str) -> bool:
    """Put the feature worktree back on ``branch`` when a queue left it detached at a candidate (it
    was stopped there); True when it did. A merge in progress there is aborted first."""
    if repo.current_branch() == branch:
        return False
    if merge_in_progress(repo):
        repo.run("merge", "--abort", check=False)
    repo.run("checkout", "-q", "-f", branch)
    return True


__all__ = ["Approved", "Landing", "MergeQueue", "SendBack", "restore_worktree"]
