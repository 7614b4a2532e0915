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
4. else wait (``poll`` seconds; on another worker's merge, :func:`merge_wait`: quick looks at
   first, slowing down to ``poll``), saying what for.

Claims are renewed by a heartbeat thread; Ctrl-C or SIGTERM releases them; a SIGKILL leaves them
to expire, and another worker takes the task over and resumes it from the remote branch.
The merger writes each merged wave into the plan on the feature branch, as a one-machine run writes
its plan; progress while tasks run is read from the remote (``status``/``show --remote``).
"""

from __future__ import annotations

import functools
import logging
import time
import zlib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Literal

from guardkit_state.agents.protocol import Agent
from guardkit_state.errors import (
    ClaimLostError,
    GuardkitStateError,
    InputError,
    RemoteError,
)
from guardkit_state.features.progress import FeatureGit, TaskState, files_read_ahead, read_task_state, unstarted_state
from guardkit_state.git.merge import task_merges
from guardkit_state.git.merge_driver_setup import INSTALL_HINT, registration
from guardkit_state.git.repo import GitRepo
from guardkit_state.loop.events import AgentStarted, Event, EventSink, TurnRecorded, TurnStarted, ignore
from guardkit_state.loop.run import LoopOptions, run_task_loop
from guardkit_state.loop.session import interrupts_as_exceptions
from guardkit_state.plans.plan import FeaturePlan, find_plan, load_plan
from guardkit_state.plans.waves import plan_waves
from guardkit_state.remote.alignment import CloneAlignment
from guardkit_state.remote.branches import RemoteBranches, ls_remote
from guardkit_state.remote.claim_record import CLAIMS_PREFIX, MERGE_CLAIM, Claim
from guardkit_state.remote.claims import ClaimBoard, retrying
from guardkit_state.remote.fresh_tasks import branches_here, fresh_in_look, started_here
from guardkit_state.remote.going_on import GoingOn
from guardkit_state.remote.holding import HeldClaims
from guardkit_state.remote.known_states import approved_in_ledger
from guardkit_state.remote.ledgers import RemoteLedgers
from guardkit_state.remote.looks import Looks
from guardkit_state.remote.own_claims import ClaimKeeper
from guardkit_state.remote.quarantine import held_back, read_quarantine
from guardkit_state.remote.ready import WaveTurn, wave_turn
from guardkit_state.remote.run_history import RunHistory
from guardkit_state.remote.spending import RemoteSpending
from guardkit_state.remote.turn_pushes import TurnPushes
from guardkit_state.remote.wave_merge import WaveMerger
from guardkit_state.remote.wave_progress import WrittenWaves
from guardkit_state.remote.worker_records import WorkerInterrupted, WorkerOptions, WorkerResult
from guardkit_state.store.layout import BRANCH_PREFIX, branch_for, worktrees_dir

log = logging.getLogger("guardkit_state.remote.worker")

#: The first look again at another worker's merge, in seconds (see :func:`merge_wait`).
MERGE_LOOK = 0.05


def merge_wait(waited: float, poll: float) -> float:
    """Seconds until the next look at another worker's merge, ``waited`` seconds after this worker
    first found it under way: half of that, at least :data:`MERGE_LOOK`, at most ``poll``.

    A merge takes seconds and the next wave (or the end of the feature) waits on it: it is seen
    landing at most half the time waited so far after it landed. The looks thin out as the wait
    grows: on a merger that died, they come every ``poll`` once it has waited ``2 * poll``, having
    made a few looks more than ``poll`` alone would (10 at ``poll`` 2, about 6 more for each
    tenfold ``poll``: it grows as its logarithm)."""
    return min(poll, max(MERGE_LOOK, waited / 2))


Step = Literal["done", "worked", "wait"]


def run_worker(repo_root: Path, feature: str, player: Agent, coach: Agent, options: WorkerOptions, *,
               on_note: Callable[[str], None] = lambda text: None,
               on_event: EventSink = ignore) -> WorkerResult:
    """Work on ``feature`` through ``options.remote`` until it is merged or cannot go on; ``on_event``
    hears the events of each task loop this worker runs (what follows a recorded turn plugs in there)."""
    repo = GitRepo.discover(repo_root)
    if repo is None:
        raise InputError(f"{repo_root} is not a git repository", path=repo_root, expected="a clone of the remote")
    plan = load_plan(find_plan(repo.root, feature))
    return _Worker(repo, plan, player, coach, options, on_note, on_event).run()


class _Worker:
    def __init__(self, repo: GitRepo, plan: FeaturePlan, player: Agent, coach: Agent, options: WorkerOptions,
                 on_note: Callable[[str], None], on_event: EventSink) -> None:
        self.repo, self.plan, self.player, self.coach, self.options = repo, plan, player, coach, options
        self.feature = plan.feature_id
        self.waves = plan_waves(plan)
        self.board = ClaimBoard(repo, options.remote, options.worker)
        self.board.keep = self.keeper = ClaimKeeper(repo, options.remote, self.board.worker)
        self.branches = RemoteBranches(repo, options.remote)
        self.ledgers = RemoteLedgers(repo, options.remote, plan.feature_id)
        self.held = HeldClaims(self.board, options.lease, self.note)
        self.heartbeat, self.lost = self.held.heartbeat, self.held.lost
        self._holding, self._release, self._release_all = self.held.holding, self.held.release, self.held.release_all
        self.feature_branch = branch_for(self.feature)
        self.history = RunHistory(repo, self.branches, self.feature_branch, self.board.worker,
                                  options.quarantine_after, self._remote, self.note)
        self.fgit = FeatureGit(repo, repo.root, self.feature_branch, worktrees_dir(repo.root) / self.feature,
                               worktrees_dir(repo.root))
        self.alignment = CloneAlignment(repo, self.branches, self.fgit, self.feature, self.feature_branch, self.note)
        # --max-cost: what the feature's tasks spent, from their branches on the remote
        self.spending = RemoteSpending(repo, self.feature, tuple(task for wave in self.waves for task in wave))
        self.going_on = GoingOn(self.plan, options.stop_on_failure)  # failures that do not stop the feature
        self.written = WrittenWaves(repo, self.going_on)  # and the waves they leave nothing to merge in
        self.result = WorkerResult(self.feature, self.board.worker)
        self.on_note, self.on_event = on_note, on_event
        self._states: dict[str, tuple[tuple[str | None, str | None], TaskState]] = {}
        self.looks = Looks(self.feature, options.stale)
        self._last_remote: dict[str, str] | None = None
        self._claims: dict[str, Claim] = {}
        self._merges_at: tuple[str | None, dict[str, str]] = (None, {})
        self._said = ""
        self._pause = options.poll
        self._first_look: object = None
        self._merging_since: float | None = None
        self._wave = 0  # the wave the last step decided on
        # A never-run task as the main checkout's copy says (read once a run: this worker never writes it).
        self._unstarted = functools.cache(functools.partial(unstarted_state, repo.root))

    def note(self, text: str) -> None:
        log.info("%s", text)
        self.on_note(text)

    # -- the loop ---------------------------------------------------------------------------

    def run(self) -> WorkerResult:
        with self.keeper, self.result.timed("start"):
            self.note(f"worker {self.board.worker} on {self.feature} through remote '{self.options.remote}'")
            found = registration(self.repo)
            if not found.registered:  # this worker may merge a wave: git would merge loop state as text
                self.note(f"note: the guardkit-state merge driver is not registered in this clone "
                          f"({'; '.join(found.missing())}): {INSTALL_HINT}")
            self.board.orphans.update(self.keeper.adopt())  # a dead worker of this clone: its claims come back
            self.heartbeat.start()
            try:
                with interrupts_as_exceptions():
                    try:
                        self._ensure_feature_branch()
                        while (step := self._timed_step()) != "done":
                            if step == "wait":  # after a task or a merge, look again at once
                                with self.result.timed("merge_wait" if self._merging_since else "wait"):
                                    time.sleep(self._pause)
                            else:
                                self._merging_since = self.looks.deferred = self.looks.waited = None
                    except KeyboardInterrupt:
                        raise WorkerInterrupted(self.feature, self._release_all()) from None
            finally:
                self.heartbeat.stop()
        return self.result

    def _timed_step(self) -> Step:
        with self.result.timed("step"):
            return self._step()

    def _remote(self, action: Callable[[], object], what: str) -> object:
        kind = what.rsplit(": ", 1)[-1]
        with self.result.timed("claim" if kind == "takeover" else kind):
            return retrying(action, on_wait=lambda n, exc: self.note(f"{what}: {exc.message}; waiting (try {n})"))

    def _sync(self) -> dict[str, str]:
        """The remote's branches here (:meth:`RemoteBranches.sync`), its turn ledgers imported and
        the feature's claims read (``_claims``): one fetch and one listing of refs for the three."""
        remote = self.branches.sync(self.ledgers.fetch_refspec(), self.board.fetch_refspec(self.feature),
                                    listed=(self.ledgers.seen, self.board.seen_prefix(self.feature)))
        self.ledgers.import_fetched(self.branches.listing)
        self._claims = self.board.read_fetched(self.feature, self.branches.listing)
        self.board.raced = {}  # (read by this fetch)
        self.alignment.feature(remote.get(self.feature_branch))
        return remote

    def _ensure_feature_branch(self) -> None:
        # One ls-remote, not a fetch: the first step fetches anyway (workers start together).
        listed = self._remote(self._snapshot, "look")
        assert isinstance(listed, str)
        if any(line.endswith(f"\trefs/heads/{self.feature_branch}") for line in listed.splitlines()):
            self._first_look = listed  # the first step's look: nothing was pushed since
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
        look = self._first_look or self._remote(self._snapshot, "look")
        snapshot, self._first_look = str(look), None
        self.looks.read_claims_moved(snapshot, self._read_claims())  # (what was decided on no longer holds: a fetch)
        # (Under --max-cost a claim waits for a fetch: what the others spent is on their branches.)
        if self.options.max_cost is None and snapshot != self.looks.last and self._claim_fresh(snapshot):
            return "worked"  # a task nobody had started, claimed and run without a fetch
        decision = self.looks.decide(snapshot, self._claims, self._running_elsewhere, wave=self._wave,
                                     stale_read=self._stale_read(), no_shortcut=self.options.max_cost is not None)
        if decision == "wait" and self.looks.deferred is not None:
            self._wait(*self.looks.deferred)
            return "wait"
        if decision == "fetch" or self._last_remote is None:
            remote = self._remote(self._sync, "fetch")
            assert isinstance(remote, dict)
            self.looks.made_fetch(snapshot)
            self._last_remote = remote
        remote = self._last_remote
        if self._all_merged(remote.get(self.feature_branch)):
            return self._finished()
        # The claims as the last fetch brought them (the snapshot lists the claim refs too, so they
        # still hold): a task is claimed only when free, taken over only when its claim is stale
        # here (no push is tried, and refused, for a live claim).
        claims = self._claims
        turn = wave_turn(self.waves, lambda task: self.going_on.state(self._state(task, remote, claims.get(task),
                                                                                  ledger=True)),
                         written=self.written.at(remote.get(self.feature_branch)))
        if turn is None:
            return self._finished()
        self._wave = turn.number
        if turn.mergeable:
            return self._merge_wave(turn, claims.get(MERGE_CLAIM))
        claimable = turn.claimable(claims, stale=lambda claim: self.board.is_stale(
            claim, stale_after=self.options.stale))
        # Each worker starts at its own place in the list: workers that look at the same moment
        # (a wave's tasks end together) mostly claim different tasks instead of losing races.
        over = self.spending.reached(self.options.max_cost, remote) if claimable else None
        if over is not None:  # no task is claimed once the feature's agents have spent --max-cost
            self.result.reason = over
            return "done"
        start = zlib.crc32(self.board.worker.encode()) % len(claimable) if claimable else 0
        self.board.taken = set()  # (what a lost race finds claimed: tried no more, unless a stale claim's)
        for task in claimable[start:] + claimable[:start]:
            if (task not in self.board.taken or task in claims) and self._try_task(task, turn.states[task],
                                                                                   claims.get(task)):
                return "worked"
        ended = turn.failed
        if ended:  # the wave's other tasks ran (or run elsewhere); the next wave cannot start
            self.result.reason = "; ".join(f"{s.task_id}: {s.reason}" for s in ended)
            return "done"
        blocked = [task for task in claimable if task in self.board.foreign]
        self._wait(self._foreign_claim(turn.number, blocked[0]) if blocked
                   else f"wave {turn.number}: every task that has to run is claimed by a live worker")
        return "wait"

    def _claim_fresh(self, look: str) -> bool:
        """Claim and run a task nobody has started, found from ``look`` alone (:mod:`fresh_tasks`)."""
        fresh = fresh_in_look(look, feature_branch=self.feature_branch, merged=self._merged, waves=self.waves,
                              fetched_tip=(self._last_remote or {}).get(self.feature_branch),
                              claims_prefix=f"{CLAIMS_PREFIX}/{self.feature}",
                              worktrees=self.fgit.worktrees, listing=self.branches.listing, unstarted=self._unstarted)
        start = zlib.crc32(self.board.worker.encode()) % len(fresh) if fresh else 0
        self.board.taken = set()  # (what a lost race finds claimed: tried no more)
        return any(self._try_task(task, self._unstarted(task), None) for task in fresh[start:] + fresh[:start]
                   if task not in self.board.taken)

    def _read_claims(self) -> dict[str, str]:
        """The claim refs this worker read, as the remote names them (ref -> sha): those its last
        fetch brought (holding a claim commit or not), and those a lost race found since."""
        seen = self.board.seen_prefix(self.feature)
        read = {f"{self.looks.claims_prefix}{name[len(seen):]}": sha for name, sha, _ in self.branches.listing
                if name.startswith(f"{seen}/")}
        return read | self.board.raced

    def _stale_read(self) -> bool:
        """Whether a claim of another worker this worker read is stale by now."""
        return any(claim.worker != self.board.worker and not self._running_elsewhere(claim)
                   for claim in self._claims.values())

    def _foreign_claim(self, wave: int, task: str) -> str:
        """Why ``task`` (or the merge) waits on a ref in the way of its claim, and how to clear it."""
        what = "nothing merges it" if task == MERGE_CLAIM else f"{task} runs nowhere"
        return f"wave {wave}: {self.board.foreign_note(self.feature, task, what)}"

    def _merged(self, feature_sha: str | None) -> dict[str, str]:
        """The tasks the feature branch has merged (task -> merge commit), by one look at its
        merges, once per sha."""
        if self._merges_at[0] != feature_sha:
            found = task_merges(self.repo, self.branches.tracking(self.feature_branch)) if feature_sha else {}
            self._merges_at = (feature_sha, found)
        return self._merges_at[1]

    def _all_merged(self, feature_sha: str | None) -> bool:
        """Every task merged: what the workers that did not make the last merge find, without
        reading each task."""
        merged = self._merged(feature_sha)
        return bool(merged) and all(task in merged for wave in self.waves for task in wave)

    def _finished(self) -> Step:
        self.result.done, self.result.reason = True, "every wave is merged into " + self.feature_branch
        without, why = self.going_on.without(self.feature_branch)
        if without:  # --no-stop-on-failure: every wave done, but not every task's work on the branch
            self.result.done, self.result.without, self.result.reason = False, without, why
        self.note(self.result.reason)
        return "done"

    def _snapshot(self) -> str:
        """The remote's loop branches and this feature's claims, as ``ls-remote`` lists them."""
        return ls_remote(self.repo, self.options.remote, f"refs/heads/{BRANCH_PREFIX}*",
                         f"{CLAIMS_PREFIX}/{self.feature}/*")

    def _state(self, task: str, remote: dict[str, str], claim: Claim | None = None, *,
               ledger: bool = False) -> TaskState:
        """Where ``task`` stands; read again only when its branch or the feature branch moved (a
        waiting worker looks often, and each reading is several git calls).

        A task under another worker's live ``claim`` is running there: it is neither claimable nor
        approved yet, whatever its branch says between two turns, so its files are not read (each
        turn it pushes moves its branch); they are once the claim is released or goes stale.
        With ``ledger``, a task another worker approved is known from its turn ledger alone
        (:func:`~guardkit_state.remote.known_states.approved_in_ledger`), its files unread; not one
        that ran here (its worktree's copy is read)."""
        if claim is not None and self._running_elsewhere(claim):
            return TaskState(task, "resume", reason=f"running on {claim.worker}", resume=True)
        key = (remote.get(branch_for(task)), remote.get(self.feature_branch))
        cached = self._states.get(task)
        if cached is not None and cached[0] == key:
            return cached[1]
        if ledger and not self.fgit.task_worktree(task).is_dir():
            known = approved_in_ledger(task, self.ledgers.fetched(task, self.branches.listing), key[0],
                                       self._merged(key[1]).get(task))
            if known is not None:
                return known
        if (cached is not None and cached[0][0] == key[0] and cached[1].phase in ("approved", "merged")
                and task in self._merged(key[1])):
            state = replace(cached[1], phase="merged")  # its branch stood still; a merge took it in
        elif key[0] is None and self._never_run_here(task, key[1]):
            state = self._unstarted(task)  # no branch, worktree or merge of it: what a reading answers then
        else:
            # Read as the remote holds it: a branch of this clone apart from (or behind) the remote's
            # would tell a run the remote never saw (an ousted holder's own approval, merged instead).
            # The branch here read once: for its alignment and whether it exists (aligning never removes it);
            # in the merger's re-read, from the one listing of the unmerged branches made as it began.
            ref = f"refs/heads/{branch_for(task)}"
            local = self.fgit.unmerged.get(ref) or self.repo.resolve(ref)
            moved = self.alignment.task(task, branch_for(task), key[0], taken_over=False, local=local)
            state = read_task_state(self.fgit, task, max_turns=self.options.max_turns, merges=self._merged(key[1]),
                                    has_branch=local is not None, tip_read=None if moved else local)
            if state.runs:  # a task whose runs keep killing their workers is claimed no more
                state = held_back(state, read_quarantine(self.repo, task, key[0]), self.feature, self.options.remote)
        self._states[task] = (key, state)
        return state

    def _never_run_here(self, task: str, feature_sha: str | None) -> bool:
        """No branch of ``task`` in this clone as the last fetch listed its refs (only a run here
        makes one since, and a run leaves its worktree), no worktree, no merge of it."""
        return (task not in self._merged(feature_sha)
                and not started_here(task, branches_here(self.branches.listing), self.fgit.worktrees))

    def _running_elsewhere(self, claim: Claim) -> bool:
        return claim.worker != self.board.worker and not self.board.is_stale(claim, stale_after=self.options.stale)

    def _wait(self, why: str, merging: bool = False) -> None:
        """Say why this worker waits (once), and set how long until it looks again."""
        self.looks.waited = (why, merging)
        self._pause = self.options.poll
        if not merging:
            self._merging_since = None
        else:
            now = time.monotonic()
            self._merging_since = since = self._merging_since or now
            self._pause = merge_wait(now - since, self.options.poll)
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
            orphan = self.board.orphans.get(current.ref) == current.nonce
            claim = self._remote(lambda: self.board.take_over(self.feature, task, self.options.lease,
                                                              stale_after=self.options.stale), "takeover")
            if claim is None:
                return False
            took_over = True
            assert isinstance(claim, Claim)
            self.note(f"{task}: took back the claim of {claim.previous}, a worker of this clone that died" if orphan
                      else f"{task}: took over the claim of {claim.previous} (lease ended, heartbeat stale)")
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
        fetched = self.repo.resolve(self.branches.tracking(branch))
        moved = taken_from is not None or self._remote(
            lambda: self.board.remote_sha(f"refs/heads/{branch}"), "look") != fetched
        remote = self._remote(self._sync, "fetch") if moved else self._last_remote
        if moved:
            fetched = self.repo.resolve(self.branches.tracking(branch))  # what the fetch found
        pushes = TurnPushes(self.repo, self.branches, self.ledgers, self.alignment, task, self._remote,
                            functools.partial(self._claim_held, task), self.note, fetched)
        if self.alignment.task(task, branch, pushes.pushed, taken_over=taken_from is not None):
            moved = True
        fresh = state if not moved else read_task_state(self.fgit, task, max_turns=self.options.max_turns,
                                                        known_unmerged=taken_from is not None)
        if not fresh.runs:
            return  # finished by the worker whose claim ended while we looked
        self.note(f"{task}: running on {self.board.worker}" + (" (resumed from the remote)" if fresh.resume else ""))
        if task not in self.result.ran:  # a task run again here (its branch moved under a turn) is listed once
            self.result.ran.append(task)
        self.lost.discard(task)
        if taken_from is not None:
            try:
                pushes.pushed = self.history.takeover(
                    task, taken_from, pushes.pushed, restart=self.board.orphans.get(taken_from.ref) == taken_from.nonce)
            except ClaimLostError as exc:  # the ousted holder's late push landed first: look again
                self.note(f"{task}: {exc.message}; looking again")
                return
            quarantine = read_quarantine(self.repo, task, pushes.pushed)
            if quarantine.quarantined:  # that dead worker was one too many: no run here either
                self._states.pop(task, None)
                self.note(f"{task}: {quarantine.reason(self.feature, self.options.remote)}")
                return

        def sink(event: Event) -> None:
            if isinstance(event, (TurnStarted, AgentStarted)) and task in self.lost:
                raise ClaimLostError(f"{task}: the claim was taken over", path=self.repo.root)
            if isinstance(event, TurnRecorded):
                pushes.turn = event.turn
                # Before the next turn starts: a crash loses at most the turn it was in. A commit the loop
                # just made (in the task's worktree, on its branch, checked after) is the branch's tip: not asked again.
                pushes.push(event.commit.sha if event.commit is not None and event.commit.committed else None)
                self.note(f"{task}: turn {event.turn} ({event.record.entry.decision}) pushed")
            self.on_event(event)

        # The loop counts the task's own turns before each of its turns, and is told what the others spent
        # (once each: this task's turns on the remote are its own, counted by it).
        before = self.spending.elsewhere(task, remote) \
            if self.options.max_cost is not None and isinstance(remote, dict) else 0.0
        options = LoopOptions(max_turns=self.options.max_turns, resume=fresh.resume, base_branch=self.feature_branch,
                              turn_timeout=self.options.turn_timeout, max_cost=self.options.max_cost,
                              cost_before=before, continue_session=self.options.continue_session)
        try:
            with self.result.timed("run"):
                run_task_loop(self.repo.root, task, self.player, self.coach, options, on_event=sink)
            pushes.push()  # an approval committed on resume (no new turn) reaches the remote too
        except ClaimLostError as exc:
            self.note(f"{task}: {exc.message}")
        except RemoteError:
            raise
        except GuardkitStateError as exc:
            self.note(f"{task}: the loop stopped: {exc.message}")
            self._states.pop(task, None)
            self.history.crash(task, exc.message, pushes.pushed)

    def _claim_held(self, task: str) -> bool:
        """Whether the claim on ``task`` on the remote is still this worker's (the one it renews)."""
        held = next((claim for claim in self.heartbeat.held() if claim.task == task), None)
        if held is None or task in self.lost:
            return False
        found = self._remote(lambda: self.board.read(self.feature), "look")
        current = found.get(task) if isinstance(found, dict) else None
        return current is not None and current.nonce == held.nonce

    # -- merges -----------------------------------------------------------------------------

    def _merge_wave(self, turn: WaveTurn, current: Claim | None) -> Step:
        if current is not None and not self.board.is_stale(current, stale_after=self.options.stale):
            self._wait(f"wave {turn.number}: another worker is merging it", merging=True)  # no push tried
            return "wait"
        if current is None:
            claim = self._remote(lambda: self.board.claim(self.feature, MERGE_CLAIM, self.options.lease), "claim")
        else:
            claim = self._remote(lambda: self.board.take_over(self.feature, MERGE_CLAIM, self.options.lease,
                                                              stale_after=self.options.stale), "takeover")
        if claim is None:
            if MERGE_CLAIM in self.board.foreign:
                self._wait(self._foreign_claim(turn.number, MERGE_CLAIM))
            else:
                self._wait(f"wave {turn.number}: another worker is merging it", merging=True)
            return "wait"
        assert isinstance(claim, Claim)
        with self._holding(claim), self.result.timed("merge"):
            return self._merge_held(turn)

    def _merge_held(self, turn: WaveTurn) -> Step:
        """Merge the wave through the merge queue (:mod:`~guardkit_state.remote.wave_merge`), under the claim,
        once its tasks' files say what their ledgers said: every task approved (else look again)."""
        if self.looks.fetched != self.looks.last:
            # Looks since the last fetch skipped turns of tasks running elsewhere (only_running_moved);
            # a claim gone stale since makes its task mergeable, and the branch merged is the remote's
            # as it is now (a commit pushed onto it then, by a person, is merged with it).
            # (The next step fetches again: this fetch is newer than the last look, and holds this claim.)
            fetched = self._remote(self._sync, "fetch")
            assert isinstance(fetched, dict)
            self._last_remote = fetched
            self.looks.forget()
        remote = self._last_remote or {}
        # The files of the wave's tasks that ran elsewhere, as the remote's branches hold them, read in one
        # git call for the readings below (each still reads its own where its branch here is elsewhere).
        tips = {task: remote[branch_for(task)] for task in turn.tasks
                if branch_for(task) in remote and not self.fgit.task_worktree(task).is_dir()}
        # The wave's tasks are read from their files; the earlier waves' as a look reads them (from their
        # ledgers, merged as the feature branch's merges say: one of them not merged makes its own wave
        # the one merged first, and this one is looked at again).
        with files_read_ahead(self.fgit, tips):
            read = wave_turn(self.waves, lambda task: self.going_on.state(self._state(
                task, remote, self._claims.get(task), ledger=task not in turn.tasks)),
                written=self.written.at(remote.get(self.feature_branch)))
        if read is None or read.number != turn.number or not read.mergeable:
            self.note(f"wave {turn.number}: not every task of it is approved in its files; looking again")
            return "worked"
        turn = read
        merger = WaveMerger(self.repo, self.branches, self.ledgers, self.plan, self.waves, self._remote, self.note,
                            self.options.max_turns)
        # (The plan's progress names every task: the wave's as just read, the others' from their ledgers.)
        done = merger.merge(turn, lambda task: self._state(task, self._last_remote or {}, ledger=True))
        for task in done.sent_back:
            self._states.pop(task, None)  # its branch moved: read it again
        if done.step == "done":
            self.result.reason = done.reason
            return "done"
        self.result.merged += list(done.merged)
        for task in done.merged:
            # A claim left on a merged task is stale (its holder died after its approval) or this
            # worker's own, its release lost (the remote was unreachable then): it runs nowhere.
            left = self._claims.get(task)
            if left is not None:
                self._release(left)  # deleted only at the sha seen: a holder still renewing keeps it
        if done.merged:
            self.note(f"wave {turn.number}: merged {', '.join(done.merged)} into {self.feature_branch}")
        return self._finished() if done.complete and turn.number == len(self.waves) else "worked"


# The records of a run, and the merge claim's name, are imported from here by the CLI and the tests.
__all__ = ["MERGE_CLAIM", "WorkerInterrupted", "WorkerOptions", "WorkerResult", "merge_wait", "run_worker"]
