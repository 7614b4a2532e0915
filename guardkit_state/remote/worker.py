"""One machine's share of a feature built through the git remote (``feature-build FEAT --remote``).

The same command runs on several machines (or several clones of one); each is a *worker*. A worker
repeats, until the feature is merged or cannot go on:

1. sync the ``autobuild/*`` branches from the remote (:mod:`branches`) and read where each task
   stands from them (:func:`~guardkit_state.features.progress.read_task_state`: the files decide);
2. in the first wave not wholly merged: claim a task that has to run (new, or interrupted and its
   claim free or stale: taken over) and run its loop, pushing every turn's commit to the task's
   branch on the remote before the next turn starts;
3. when every task of the wave is approved: take the merge claim, merge them into the feature
   branch in plan order and push it with a lease; the next wave is claimable only then;
4. else wait (``poll`` seconds), saying what for.

Claims are renewed by a heartbeat thread; Ctrl-C or SIGTERM releases them; a SIGKILL leaves them
to expire, and another worker takes the task over and resumes it from the remote branch.
The merger writes each merged wave into the plan on the feature branch, as a one-machine run writes
its plan; progress while tasks run is read from the remote (``status``/``show --remote``).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from guardkit_state.agents.protocol import Agent
from guardkit_state.errors import (
    ClaimLostError,
    GuardkitStateError,
    InputError,
    RemoteError,
    RemoteUnreachableError,
)
from guardkit_state.features.progress import FeatureGit, TaskState, read_task_state
from guardkit_state.features.result import TaskOutcome
from guardkit_state.git.merge import merge_branch, merge_message, merged_task_ids
from guardkit_state.git.merge_driver_setup import INSTALL_HINT, registration, unregistered_note
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.stale_locks import remove_stale_locks
from guardkit_state.git.worktrees import WorktreeManager
from guardkit_state.index.after_turn import with_indexing
from guardkit_state.loop.events import AgentStarted, LoopEvent, TurnRecorded, TurnStarted
from guardkit_state.loop.run import LoopOptions, run_task_loop
from guardkit_state.loop.session import interrupts_as_exceptions
from guardkit_state.plans import plan_progress as progress_values
from guardkit_state.plans.plan import FeaturePlan, find_plan, load_plan
from guardkit_state.plans.plan_splice import PlanUpdate
from guardkit_state.plans.plan_writer import modify_plan
from guardkit_state.plans.waves import plan_waves
from guardkit_state.remote.branches import RemoteBranches
from guardkit_state.remote.claims import Claim, ClaimBoard, retrying, utc_text
from guardkit_state.remote.heartbeat import Heartbeat
from guardkit_state.remote.ledgers import RemoteLedgers
from guardkit_state.remote.ready import WaveTurn, wave_turn
from guardkit_state.store.layout import branch_for, worktrees_dir
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.taskfile.resolve import resolve_task
from guardkit_state.taskfile.splice.update import StateUpdate
from guardkit_state.turns.clock import utc_now

log = logging.getLogger("guardkit_state.remote.worker")

#: The claim a worker holds while it merges a wave (one merger at a time).
MERGE_CLAIM = "MERGE-WAVES"

Step = Literal["done", "worked", "wait"]


@dataclass(frozen=True)
class WorkerOptions:
    """How a worker runs: the remote, its lease, how long a heartbeat must stand still to be
    stale (default: half the lease), how often it looks again while waiting."""

    remote: str
    lease: float = 120.0
    stale_after: float | None = None
    poll: float = 2.0
    max_turns: int | None = None
    turn_timeout: float | None = None
    worker: str | None = None
    max_cost: float | None = None
    continue_session: bool = False

    def __post_init__(self) -> None:
        for name in ("lease", "poll"):
            value = getattr(self, name)
            if not value > 0 or value == float("inf"):
                raise InputError(f"--{name} is {value!r}; expected a positive number of seconds",
                                 expected="seconds > 0")

    @property
    def stale(self) -> float:
        return self.stale_after if self.stale_after is not None else self.lease / 2


@dataclass
class WorkerResult:
    """What one worker did: the tasks it ran (and took over), the waves it merged, how it ended."""

    feature: str
    worker: str
    ran: list[str] = field(default_factory=list)
    taken_over: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    done: bool = False
    reason: str = ""

    @property
    def exit_code(self) -> int:
        return 0 if self.done else 1

    def to_dict(self) -> dict[str, object]:
        return {"feature": self.feature, "worker": self.worker, "ran": self.ran, "taken_over": self.taken_over,
                "merged": self.merged, "done": self.done, "reason": self.reason}


class WorkerInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped the worker; its claims were released (``released``)."""

    def __init__(self, feature: str, released: list[str]) -> None:
        told = f"released the claim(s) of {', '.join(released)}" if released else "it held no claim"
        super().__init__(f"worker on {feature} interrupted; {told}; run the same command to go on")
        self.feature = feature
        self.released = released


def run_worker(repo_root: Path, feature: str, player: Agent, coach: Agent, options: WorkerOptions, *,
               on_note: Callable[[str], None] = lambda text: None,
               on_event: Callable[[LoopEvent], None] = lambda event: None) -> WorkerResult:
    """Work on ``feature`` through ``options.remote`` until it is merged or cannot go on."""
    repo = GitRepo.discover(repo_root)
    if repo is None:
        raise InputError(f"{repo_root} is not a git repository", path=repo_root, expected="a clone of the remote")
    plan = load_plan(find_plan(repo.root, feature))
    return _Worker(repo, plan, player, coach, options, on_note, on_event).run()


class _Worker:
    def __init__(self, repo: GitRepo, plan: FeaturePlan, player: Agent, coach: Agent, options: WorkerOptions,
                 on_note: Callable[[str], None], on_event: Callable[[LoopEvent], None]) -> None:
        self.repo, self.plan, self.player, self.coach, self.options = repo, plan, player, coach, options
        self.feature = plan.feature_id
        self.waves = plan_waves(plan)
        self.board = ClaimBoard(repo, options.remote, options.worker)
        self.branches = RemoteBranches(repo, options.remote)
        self.ledgers = RemoteLedgers(repo, options.remote, plan.feature_id)
        self.heartbeat = Heartbeat(self.board, options.lease, on_lost=self._lost,
                                   on_wait=lambda exc: self.note(f"heartbeat: {exc.message}; will retry"))
        self.feature_branch = branch_for(self.feature)
        self.fgit = FeatureGit(repo, repo.root, self.feature_branch, worktrees_dir(repo.root) / self.feature,
                               worktrees_dir(repo.root))
        self.result = WorkerResult(self.feature, self.board.worker)
        self.on_note, self.on_event = on_note, on_event
        self.lost: set[str] = set()
        self.released_at_stop: list[str] = []
        self._states: dict[str, tuple[tuple[str | None, str | None], TaskState]] = {}
        self._last_snapshot: object = None
        self._last_remote: dict[str, str] | None = None
        self._claims: dict[str, Claim] = {}
        self._merged_at: tuple[str | None, frozenset[str]] = (None, frozenset())
        self._said = ""

    def note(self, text: str) -> None:
        log.info("%s", text)
        self.on_note(text)

    def _lost(self, claim: Claim) -> None:
        self.lost.add(claim.task)
        self.note(f"{claim.task}: claim taken over by another worker; stopping it here")

    # -- the loop ---------------------------------------------------------------------------

    def run(self) -> WorkerResult:
        self.note(f"worker {self.board.worker} on {self.feature} through remote '{self.options.remote}'")
        found = registration(self.repo)
        if not found.registered:  # this worker may merge a wave: git would merge loop state as text
            self.note(f"note: the guardkit-state merge driver is not registered in this clone "
                      f"({'; '.join(found.missing())}): {INSTALL_HINT}")
        self.heartbeat.start()
        try:
            with interrupts_as_exceptions():
                try:
                    self._ensure_feature_branch()
                    while (step := self._step()) != "done":
                        if step == "wait":  # after a task or a merge, look again at once
                            time.sleep(self.options.poll)
                except KeyboardInterrupt:
                    raise WorkerInterrupted(self.feature, self._release_all()) from None
        finally:
            self.heartbeat.stop()
        return self.result

    def _remote(self, action: Callable[[], object], what: str) -> object:
        return retrying(action, on_wait=lambda n, exc: self.note(f"{what}: {exc.message}; waiting (try {n})"))

    def _sync(self) -> dict[str, str]:
        """The remote's branches here (:meth:`RemoteBranches.sync`), its turn ledgers imported and
        the feature's claims read (``_claims``): one fetch and one listing of refs for the three."""
        remote = self.branches.sync(self.ledgers.fetch_refspec(), self.board.fetch_refspec(self.feature),
                                    listed=(self.ledgers.seen, self.board.seen_prefix(self.feature)))
        self.ledgers.import_fetched(self.branches.listing)
        self._claims = self.board.read_fetched(self.feature, self.branches.listing)
        self._align_feature(remote.get(self.feature_branch))
        return remote

    def _align_feature(self, tip: str | None) -> None:
        """The clone's feature branch made the remote's. Only a merger holding the merge claim moves
        it, and pushes it at once: one ahead of (or apart from) the remote's holds merges a merger
        killed before its push made, which no other worker saw. Read as merged, they let the next
        wave start from them, and the remote's feature branch never got that wave's merges."""
        local = self.repo.resolve(f"refs/heads/{self.feature_branch}")
        if tip is None or local is None or local == tip:
            return
        worktree = self._checked_out(self.feature, self.feature_branch)
        if worktree is not None:
            remove_stale_locks(worktree.root, worktree.git_dir, worktree.common_dir, self.feature_branch)
            worktree.run("reset", "--hard", "--quiet", tip)
        elif self.feature_branch in self.branches.checked_out():
            return  # checked out elsewhere (the user's own checkout): theirs to move
        else:
            self.repo.run("update-ref", f"refs/heads/{self.feature_branch}", tip, local)
        self.note(f"{self.feature_branch} here ({local[:10]}) set to the remote's ({tip[:10]})")

    def _ensure_feature_branch(self) -> None:
        # One ls-remote, not a fetch: the first step fetches anyway (workers start together).
        listed = self._remote(self._snapshot, "look")
        assert isinstance(listed, str)
        if any(line.endswith(f"\trefs/heads/{self.feature_branch}") for line in listed.splitlines()):
            return
        start = self.repo.text("rev-parse", "--verify", "HEAD^{commit}")
        if self.repo.resolve(f"refs/heads/{self.feature_branch}") is None:
            self.repo.run("branch", self.feature_branch, start)
        try:
            self._remote(lambda: self.branches.push(self.feature_branch, None), "push")
            self.note(f"{self.feature_branch} on the remote starts at {start[:10]}")
        except ClaimLostError:
            pass  # another worker created it first: theirs is the one (the first step fetches it)

    def _step(self) -> Step:
        """One look at the feature: ``done`` when this worker is finished, ``worked`` after it ran
        a task or merged a wave, ``wait`` when there was nothing for it to do."""
        # One ls-remote first: while nothing moved on the remote (a waiting worker's usual look),
        # the last fetch, states and claims still hold, and no fetch is made.
        snapshot = self._remote(self._snapshot, "look")
        if snapshot != self._last_snapshot or self._last_remote is None:
            remote = self._remote(self._sync, "fetch")
            assert isinstance(remote, dict)
            self._last_snapshot, self._last_remote = snapshot, remote
        remote = self._last_remote
        if self._all_merged(remote.get(self.feature_branch)):
            return self._finished()
        # The claims as the last fetch brought them (the snapshot lists the claim refs too, so they
        # still hold): a task is claimed only when free, taken over only when its claim is stale
        # here (no push is tried, and refused, for a live claim).
        claims = self._claims
        turn = wave_turn(self.waves, lambda task: self._state(task, remote, claims.get(task)))
        if turn is None:
            return self._finished()
        if turn.mergeable:
            return self._merge_wave(turn, claims.get(MERGE_CLAIM))
        claimable = turn.claimable(claims, stale=lambda claim: self.board.is_stale(
            claim, stale_after=self.options.stale))
        # Each worker starts at its own place in the list: workers that look at the same moment
        # (a wave's tasks end together) mostly claim different tasks instead of losing races.
        start = zlib.crc32(self.board.worker.encode()) % len(claimable) if claimable else 0
        for task in claimable[start:] + claimable[:start]:
            if self._try_task(task, turn.states[task], claims.get(task)):
                return "worked"
        ended = turn.failed
        if ended:  # the wave's other tasks ran (or run elsewhere); the next wave cannot start
            self.result.reason = "; ".join(f"{s.task_id}: {s.reason}" for s in ended)
            return "done"
        self._wait(f"wave {turn.number}: every task that has to run is claimed by a live worker")
        return "wait"

    def _merged(self, feature_sha: str | None) -> frozenset[str]:
        """The tasks the feature branch has merged, by one look at its merges, once per sha."""
        if self._merged_at[0] != feature_sha:
            found = merged_task_ids(self.repo, self.branches.tracking(self.feature_branch)) if feature_sha else None
            self._merged_at = (feature_sha, found or frozenset())
        return self._merged_at[1]

    def _all_merged(self, feature_sha: str | None) -> bool:
        """Every task merged: what the workers that did not make the last merge find, without
        reading each task."""
        merged = self._merged(feature_sha)
        return bool(merged) and all(task in merged for wave in self.waves for task in wave)

    def _finished(self) -> Step:
        self.result.done, self.result.reason = True, "every wave is merged into " + self.feature_branch
        self.note(self.result.reason)
        return "done"

    def _snapshot(self) -> str:
        """The remote's loop branches and this feature's claims, as ``ls-remote`` lists them."""
        status, out, err = self.repo.run("ls-remote", self.options.remote, "refs/heads/autobuild/*",
                                         f"refs/guardkit/claims/{self.feature}/*", check=False)
        if status != 0:
            raise RemoteUnreachableError(f"cannot reach remote {self.options.remote!r}: {err.strip()[:200]}",
                                         path=self.repo.root)
        return out.decode("utf-8", "replace")

    def _state(self, task: str, remote: dict[str, str], claim: Claim | None = None) -> TaskState:
        """Where ``task`` stands; read again only when its branch or the feature branch moved (a
        waiting worker looks often, and each reading is several git calls).

        A task under another worker's live ``claim`` is running there: it is neither claimable nor
        approved yet, whatever its branch says between two turns, so its files are not read (each
        turn it pushes moves its branch); they are once the claim is released or goes stale."""
        if (claim is not None and claim.worker != self.board.worker
                and not self.board.is_stale(claim, stale_after=self.options.stale)):
            return TaskState(task, "resume", reason=f"running on {claim.worker}", resume=True)
        key = (remote.get(branch_for(task)), remote.get(self.feature_branch))
        cached = self._states.get(task)
        if cached is not None and cached[0] == key:
            return cached[1]
        if (cached is not None and cached[0][0] == key[0] and cached[1].phase in ("approved", "merged")
                and task in self._merged(key[1])):
            state = replace(cached[1], phase="merged")  # its branch stood still; a merge took it in
        else:
            # Read as the remote holds it: a branch of this clone apart from (or behind) the remote's
            # would tell a run the remote never saw (an ousted holder's own approval, merged instead).
            self._align(task, branch_for(task), key[0], taken_over=False)
            state = read_task_state(self.fgit, task, max_turns=self.options.max_turns)
        self._states[task] = (key, state)
        return state

    def _wait(self, why: str) -> None:
        if why != self._said:
            self.note(f"waiting: {why}")
            self._said = why

    # -- a task -----------------------------------------------------------------------------

    def _try_task(self, task: str, state: TaskState, current: Claim | None) -> bool:
        if current is not None and not self.board.is_stale(current, stale_after=self.options.stale):
            return False  # held by a live worker
        claim = None
        if current is None:
            claim = self._remote(lambda: self.board.claim(self.feature, task, self.options.lease), "claim")
        took_over = False
        if claim is None and current is not None:
            claim = self._remote(lambda: self.board.take_over(self.feature, task, self.options.lease,
                                                              stale_after=self.options.stale), "takeover")
            if claim is None:
                return False
            took_over = True
            assert isinstance(claim, Claim)
            self.note(f"{task}: took over the claim of {claim.previous} (lease ended, heartbeat stale)")
            self.result.taken_over.append(task)
        if claim is None:
            return False  # another worker claimed it first
        assert isinstance(claim, Claim)
        self._states.pop(task, None)  # what this run changes is read again afterwards
        with self._holding(claim):
            self._run_task(task, state, current if took_over else None)
        return True

    def _run_task(self, task: str, state: TaskState, taken_from: Claim | None) -> None:
        self._said = ""
        branch = branch_for(task)
        # The claim is ours now: the branch as the last holder left it. A fresh claim found no claim
        # ref, but another worker may have claimed, run and released the task since this step
        # looked (its turns pushed, even its approval): one ls-remote of the branch tells whether
        # the fetch this step made still holds it, else it is fetched and the task read again.
        moved = taken_from is not None or self._remote(
            lambda: self.board.remote_sha(f"refs/heads/{branch}"), "look") != self.repo.resolve(
            self.branches.tracking(branch))
        if moved:
            self._remote(self._sync, "fetch")
        pushed: list[str | None] = [self.repo.resolve(self.branches.tracking(branch))]
        if self._align(task, branch, pushed[0], taken_over=taken_from is not None):
            moved = True
        fresh = state if not moved else read_task_state(self.fgit, task, max_turns=self.options.max_turns,
                                                        known_unmerged=taken_from is not None)
        if not fresh.runs:
            return  # finished by the worker whose claim ended while we looked
        self.note(f"{task}: running on {self.board.worker}" + (" (resumed from the remote)" if fresh.resume else ""))
        self.result.ran.append(task)
        self.lost.discard(task)
        if taken_from is not None:
            try:
                pushed[0] = self._record_takeover(task, taken_from, pushed[0])
            except ClaimLostError as exc:  # the ousted holder's late push landed first: look again
                self.note(f"{task}: {exc.message}; looking again")
                return

        def push() -> None:
            if self.repo.resolve(f"refs/heads/{branch}") in (None, pushed[0]):
                return
            local = self.repo.resolve(f"refs/heads/{branch}")
            assert local is not None
            pushed[0] = str(self._remote(lambda: self.branches.push(
                branch, pushed[0], also=(self.ledgers.refspec(task, local),)), f"{task}: push"))

        def sink(event: LoopEvent) -> None:
            if isinstance(event, (TurnStarted, AgentStarted)) and task in self.lost:
                raise ClaimLostError(f"{task}: the claim was taken over", path=self.repo.root)
            if isinstance(event, TurnRecorded):
                push()  # before the next turn starts: a crash loses at most the turn it was in
                self.note(f"{task}: turn {event.turn} ({event.record.entry.decision}) pushed")
            self.on_event(event)

        options = LoopOptions(max_turns=self.options.max_turns, resume=fresh.resume, base_branch=self.feature_branch,
                              turn_timeout=self.options.turn_timeout, max_cost=self.options.max_cost,
                              continue_session=self.options.continue_session)
        try:
            run_task_loop(self.repo.root, task, self.player, self.coach, options,
                          on_event=with_indexing(sink, self.repo.root))
            push()  # an approval committed on resume (no new turn) reaches the remote too
        except ClaimLostError as exc:
            self.note(f"{task}: {exc.message}")
        except RemoteError:
            raise
        except GuardkitStateError as exc:
            self.note(f"{task}: the loop stopped: {exc.message}")

    def _align(self, task: str, branch: str, remote_tip: str | None, *, taken_over: bool) -> bool:
        """This clone's branch of ``task`` made the remote's when it does not continue it; True when
        it was. The remote is the truth: a branch apart from it holds the turns of a holder ousted
        before its push, or one behind it (a killed turn's files in the way of the fast-forward) a
        turn begun on old history; a turn pushed from either would overwrite the remote's turns.
        A branch ahead of the remote (a turn committed, not pushed) is kept, to be pushed next, but
        under a takeover, which commits on the remote's tip: that turn is then recorded again."""
        local = self.repo.resolve(f"refs/heads/{branch}")
        if local is None or local == remote_tip:
            return False
        worktree = self._checked_out(task, branch)
        ahead = remote_tip is None or self.repo.ok("merge-base", "--is-ancestor", remote_tip, local)
        if ahead:
            if not taken_over or worktree is None:
                return False
            # Taken over on the clone of the killed holder: its turn committed here, never pushed
            # (killed before its push, or before its ledger listed the commit) is undone, its files
            # kept. The takeover commit goes on the remote's tip (or where the branch left the
            # feature branch) and the loop records that turn again from its reports: above the
            # takeover commit, an unlisted commit is never adopted.
            feature = self.repo.resolve(self.branches.tracking(self.feature_branch)) or self.feature_branch
            base = remote_tip or self.repo.text("merge-base", local, feature)
            if base == local:
                return False
            remove_stale_locks(worktree.root, worktree.git_dir, worktree.common_dir, branch)
            worktree.run("reset", "--soft", "--quiet", base)
            self.note(f"{task}: its turn committed on this clone and never pushed ({local[:10]}) is recorded again")
            return True
        assert remote_tip is not None
        if worktree is not None:  # its files too: what is left there was made on the other history
            # A worker killed in a git command there left its lock: no git process holds it now.
            remove_stale_locks(worktree.root, worktree.git_dir, worktree.common_dir, branch)
            worktree.run("reset", "--hard", "--quiet", remote_tip)
            worktree.run("clean", "-fdq")
        else:
            self.repo.run("update-ref", f"refs/heads/{branch}", remote_tip, local)
        self.note(f"{task}: this clone's {branch} ({local[:10]}) did not continue the remote's ({remote_tip[:10]}); "
                  f"set to the remote's (turns never pushed from here are dropped)")
        return True

    def _checked_out(self, task: str, branch: str) -> GitRepo | None:
        """The task's worktree when it is one, with ``branch`` checked out: git run in a folder that
        is not (its ``.git`` removed) would find this clone's own checkout and reset the user's."""
        path = self.fgit.task_worktree(task)
        found = GitRepo.discover(path) if path.is_dir() else None
        if found is None or found.root.resolve() != path.resolve() or found.current_branch() != branch:
            return None
        return found

    def _record_takeover(self, task: str, old: Claim, tip: str | None) -> str:
        """The takeover written into the task's history: an entry of ``autobuild_state.takeovers``
        in its task file (who took over from whom, when, the old claim and its lease), committed on
        the task's branch and pushed before the task resumes, so ``show`` and ``log`` tell it."""
        worktree = WorktreeManager(self.repo).create(task, self.feature_branch)  # the loop resumes in it
        repo = worktree.repo()
        path = resolve_task(worktree.path, task).path
        relative = str(path.relative_to(worktree.path))
        # On the clone of a killed worker, its turn's leftovers are still here: the entry is written
        # on the task file as committed (an agent's edit of it is not ours to commit), and the commit
        # takes that file alone, not whatever the killed turn staged. The file as the killed turn left
        # it (its agent's edits, a turn the loop recorded and did not commit) is then put back with
        # the entry, for the resumed loop to go on from, as a resume on one machine does.
        left = path.read_bytes() if path.is_file() else None
        remove_stale_locks(repo.root, repo.git_dir, repo.common_dir, branch_for(task))  # the killed worker's git
        repo.run("checkout", "HEAD", "--", relative)
        committed = path.read_bytes()
        copy = TaskFile.load(path)
        entry = {"at": utc_now(), "by": self.board.worker, "from": old.worker, "claim": old.sha,
                 "lease_until": utc_text(old.lease_until), "turns_done": len(copy.state.turns) if copy.state else 0}
        _add_takeover(copy, entry)
        message = (f"guardkit: {task} taken over by {self.board.worker} from {old.worker}\n\n"
                   f"The claim's lease had ended and its heartbeat stood still; the task resumes from "
                   f"its last pushed turn.\n\nGuardkit-Takeover: {old.worker}\n")
        repo.run("commit", "-q", "--no-verify", "-m", message, "--only", "--", relative, pre=repo.identity_args())
        if left is not None and left != committed:
            written = path.read_bytes()
            path.write_bytes(left)
            try:
                _add_takeover(TaskFile.load(path), entry)
            except GuardkitStateError as exc:  # the killed turn left it unreadable: as committed
                path.write_bytes(written)
                self.note(f"{task}: the task file the killed turn left cannot be read ({exc.message}); "
                          f"it resumes from the file as committed")
        return str(self._remote(lambda: self.branches.push(branch_for(task), tip), f"{task}: push"))

    # -- merges -----------------------------------------------------------------------------

    def _merge_wave(self, turn: WaveTurn, current: Claim | None) -> Step:
        if current is not None and not self.board.is_stale(current, stale_after=self.options.stale):
            self._wait(f"wave {turn.number}: another worker is merging it")  # no claim push tried, and refused
            return "wait"
        if current is None:
            claim = self._remote(lambda: self.board.claim(self.feature, MERGE_CLAIM, self.options.lease), "claim")
        else:
            claim = self._remote(lambda: self.board.take_over(self.feature, MERGE_CLAIM, self.options.lease,
                                                              stale_after=self.options.stale), "takeover")
        if claim is None:
            self._wait(f"wave {turn.number}: another worker is merging it")
            return "wait"
        assert isinstance(claim, Claim)
        with self._holding(claim):
            return self._merge_held(turn)

    def _merge_held(self, turn: WaveTurn) -> Step:
        # No fetch here: this step's ls-remote found the remote as the last fetch left it, and the
        # push below carries a lease, so a feature branch another merger moved since is not overwritten.
        expected = self.repo.resolve(self.branches.tracking(self.feature_branch))
        worktree = WorktreeManager(self.repo).create(self.feature)
        feature_repo = worktree.repo()
        # A merger killed in its merge here left its lock, or the merge half-done: no git holds the
        # one, and the other is reset with the branch (the remote's feature branch is the truth).
        remove_stale_locks(feature_repo.root, feature_repo.git_dir, feature_repo.common_dir, self.feature_branch)
        if expected is not None:
            feature_repo.run("reset", "--hard", "--quiet", expected)
        approved = [task for task in turn.tasks if turn.states[task].phase == "approved"]
        for task in approved:
            branch = branch_for(task)
            tip, local = self.repo.resolve(self.branches.tracking(branch)), self.repo.resolve(f"refs/heads/{branch}")
            if local is None or local == tip:
                continue
            # Approved on this clone, its push never made (its holder died first; its claim is stale or
            # gone): pushed now, so the remote's task branch holds what the feature branch merges.
            try:
                self._remote(functools.partial(self.branches.push, branch, tip,
                                               also=(self.ledgers.refspec(task, local),)), f"{task}: push")
            except ClaimLostError as exc:
                self._states.pop(task, None)
                self.note(f"wave {turn.number}: {exc.message}; looking again")
                return "worked"
        merged_now: dict[str, str | None] = {}
        for task in approved:
            state = turn.states[task]
            message = merge_message(self.feature, task, branch=branch_for(task), target=self.feature_branch,
                                    wave=turn.number, summary=f"{task} approved in {state.turns} turn(s).")
            merged = merge_branch(feature_repo, branch_for(task), message)
            if not merged.merged:
                self.result.reason = (f"{task}: merge conflict in {', '.join(merged.conflicts)}" if merged.conflicts
                                      else f"{task}: the merge was refused: {merged.error}")
                note = unregistered_note(feature_repo, merged.conflicts)
                if note is not None:
                    self.result.reason += f" ({note})"
                feature_repo.run("reset", "--hard", "--quiet", expected or "HEAD")
                return "done"
            merged_now[task] = merged.sha
        self._write_plan(feature_repo, turn, merged_now)
        try:
            self._remote(lambda: self.branches.push(self.feature_branch, expected), "push")
        except ClaimLostError:
            self.note(f"wave {turn.number}: {self.feature_branch} moved on the remote meanwhile; looking again")
            return "worked"
        self.result.merged += list(merged_now)
        for task in merged_now:
            # A claim left on a merged task is stale (its holder died after its approval) or this
            # worker's own, its release lost (the remote was unreachable then): it runs nowhere.
            left = self._claims.get(task)
            if left is not None:
                self._release(left)  # deleted only at the sha seen: a holder still renewing keeps it
        self.note(f"wave {turn.number}: merged {', '.join(merged_now) or 'nothing new'} into {self.feature_branch}")
        return self._finished() if turn.number == len(self.waves) else "worked"

    def _write_plan(self, feature_repo: GitRepo, turn: WaveTurn, merged: dict[str, str | None]) -> None:
        """The wave's merge written into the plan on the feature branch (committed, pushed with the
        merges) as a one-machine run writes its plan: the merged tasks' status, turns, result and
        merge commit, the counters, the completed waves, and the feature's end after the last wave."""
        assert self.plan.path is not None  # loaded from its file (run_worker)
        path = feature_repo.root / self.plan.path.relative_to(self.repo.root)
        if not path.is_file():
            self.note(f"wave {turn.number}: {self.plan.path.name} is not on {self.feature_branch}; its progress "
                      f"is not written (commit the plan to share it)")
            return
        now = utc_now()
        outcomes: list[TaskOutcome] = []
        for number, wave in enumerate(self.waves, start=1):
            for task in wave:
                state = turn.states[task] if number == turn.number else self._state(task, self._last_remote or {})
                if task in merged:
                    outcomes.append(TaskOutcome(task, number, "completed", "approved", state.turns,
                                                merge_commit=merged[task]))
                elif state.phase == "merged":
                    outcomes.append(TaskOutcome(task, number, "completed", "approved", state.turns,
                                                merge_commit=state.merge_commit))
                else:
                    status = "skipped" if state.phase == "closed" else "pending"
                    outcomes.append(TaskOutcome(task, number, status, state.outcome, state.turns))
        done = [o for o in outcomes if o.task_id in merged]

        def tasks(plan: FeaturePlan) -> PlanUpdate:
            return PlanUpdate(tasks={o.task_id: {**progress_values.task_started(o.task_id, plan, now=now),
                                                 **progress_values.task_values(o, plan, now=now)} for o in done})

        def started(plan: FeaturePlan) -> PlanUpdate:
            resumed = plan.execution is not None and bool(plan.execution.started_at)
            return progress_values.run_started(plan, worktree=str(feature_repo.root), resumed=resumed, now=now)

        def ended(plan: FeaturePlan) -> PlanUpdate | None:
            if turn.number < len(self.waves):
                return None
            return progress_values.run_ended(completed=True, failed=False, waves=len(self.waves), now=now)

        counts = progress_values.counters(outcomes)
        modify_plan(path, started, lambda _: PlanUpdate(execution={"current_wave": turn.number, "last_updated": now}),
                    tasks, lambda _: PlanUpdate(execution={**counts, "last_updated": now}),
                    lambda plan: progress_values.wave_completed(plan, turn.number, now=now), ended)
        feature_repo.run("add", "--", str(path.relative_to(feature_repo.root)))
        if feature_repo.ok("diff", "--cached", "--quiet"):
            return  # already written (a merge pushed before, then redone)
        feature_repo.run("commit", "-q", "--no-verify", "-m", f"guardkit: {self.feature} progress after wave "
                         f"{turn.number} in its plan", pre=feature_repo.identity_args())

    # -- claims -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _holding(self, claim: Claim) -> Iterator[None]:
        """Renewed by the heartbeat while the block runs; released after it, however it ends
        (a Ctrl-C or SIGTERM included: that release is told in the interruption's message)."""
        self.heartbeat.hold(claim)
        stopped = False
        try:
            yield
        except KeyboardInterrupt:
            stopped = True
            raise
        finally:
            held = self.heartbeat.drop(claim)
            if held is not None and self._release(held) and stopped:
                self.released_at_stop.append(claim.task)

    def _release(self, claim: Claim) -> bool:
        try:
            return self.board.release(claim)
        except RemoteError as exc:
            self.note(f"could not release {claim.ref} ({exc.message}); it expires after its lease")
            return False

    def _release_all(self) -> list[str]:
        released = self.released_at_stop
        for claim in self.heartbeat.held():
            latest = self.heartbeat.drop(claim)  # after a beat in flight: the claim at its new beat
            if latest is not None and self._release(latest):
                released.append(claim.task)
        if released:
            self.note(f"released the claim(s) of {', '.join(released)}")
        return released


def _add_takeover(copy: TaskFile, entry: dict[str, object]) -> None:
    """``entry`` appended to the task file's ``autobuild_state.takeovers`` (written)."""
    earlier = copy.state.extra.get("takeovers") if copy.state is not None else None
    copy.apply(StateUpdate(block_scalars={"takeovers": [*(earlier if isinstance(earlier, list) else []), entry]}))


__all__ = ["MERGE_CLAIM", "WorkerInterrupted", "WorkerOptions", "WorkerResult", "run_worker"]
