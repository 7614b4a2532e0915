"""Claims through a real bare remote, over file:// and over git daemon on loopback: races, leases,
heartbeats, takeovers, refusals and an unreachable remote."""

from __future__ import annotations

import contextlib
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from guardkit_state.errors import ClaimLostError, GitError, InputError, RemoteRejectedError, RemoteUnreachableError
from guardkit_state.git.repo import GitRepo
from guardkit_state.remote import branches as branches_module
from guardkit_state.remote import claim_record
from guardkit_state.remote import claims as claims_module
from guardkit_state.remote.branches import RemoteBranches
from guardkit_state.remote.claim_record import Claim, claim_ref
from guardkit_state.remote.claims import ClaimBoard, retrying
from guardkit_state.remote.heartbeat import Heartbeat
from tests.conftest import run_git
from tests.remote_support import Daemon, clone, git_daemon, make_bare

FEAT, TASK = "FEAT-R", "TASK-R-001"


class Clock:
    """Time that moves only when the test says (wall and monotonic alike)."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


class Remote:
    def __init__(self, root: Path, bare: Path, url: str, daemon: Daemon | None) -> None:
        self.root, self.bare, self.url, self.daemon = root, bare, url, daemon
        self.count = 0

    def machine(self, worker: str, clock: Clock | None = None, monotonic: Clock | None = None) -> ClaimBoard:
        self.count += 1
        path = clone(self.url, self.root / f"machine-{self.count}")
        repo = GitRepo.discover(path)
        assert repo is not None
        clock = clock or Clock()
        return ClaimBoard(repo, "origin", worker, clock=clock, monotonic=monotonic or clock)


@pytest.fixture(params=["file", "daemon"])
def remote(request: pytest.FixtureRequest, git_repo: Path, tmp_path: Path) -> Iterator[Remote]:
    bare = make_bare(tmp_path, git_repo)
    if request.param == "file":
        yield Remote(tmp_path, bare, bare.as_uri(), None)
        return
    with git_daemon(tmp_path) as daemon:
        yield Remote(tmp_path, bare, daemon.url("remote.git"), daemon)


def remote_ref(remote: Remote, ref: str) -> str:
    return run_git(remote.bare, "for-each-ref", "--format=%(objectname)", ref).strip()


def test_many_workers_racing_one_claim_leave_exactly_one_holder(remote: Remote) -> None:
    boards = [remote.machine(f"w{i}") for i in range(6)]
    start = threading.Barrier(len(boards))
    results: dict[str, Claim | None] = {}

    def race(board: ClaimBoard) -> None:
        start.wait()
        results[board.worker] = board.claim(FEAT, TASK, lease=60)

    threads = [threading.Thread(target=race, args=(board,)) for board in boards]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    won = [claim for claim in results.values() if claim is not None]
    assert len(results) == 6 and len(won) == 1  # the others lost the race: None, not an error
    assert remote_ref(remote, claim_ref(FEAT, TASK)) == won[0].sha
    seen = boards[0].read(FEAT)[TASK]
    assert (seen.worker, seen.sha, seen.kind) == (won[0].worker, won[0].sha, "claim")


def test_a_lost_race_lists_the_tasks_claimed_meanwhile(remote: Remote) -> None:
    # Workers that look at one moment tend to lose races to each other in turn; the loser's one
    # ls-remote (what tells a lost race from a refusal) lists all the feature's claims, so its next
    # try skips every task another worker claimed meanwhile.
    one, two = remote.machine("w1"), remote.machine("w2")
    for task in (TASK, "TASK-R-002", "TASK-R-003"):
        assert one.claim(FEAT, task, lease=30) is not None
    assert two.claim(FEAT, TASK, lease=30) is None
    assert two.taken == {TASK, "TASK-R-002", "TASK-R-003"}
    assert two.claim(FEAT, "TASK-R-004", lease=30) is not None and two.taken == {TASK, "TASK-R-002", "TASK-R-003"}


def test_renewal_moves_the_ref_and_a_released_claim_can_be_claimed_again(remote: Remote) -> None:
    one, two = remote.machine("w1"), remote.machine("w2")
    held = one.claim(FEAT, TASK, lease=30)
    assert held is not None and two.claim(FEAT, TASK, lease=30) is None
    renewed = one.renew(held, lease=30)
    assert renewed.beat == 1 and remote_ref(remote, held.ref) == renewed.sha
    assert one.release(renewed) is True and remote_ref(remote, held.ref) == ""
    assert two.claim(FEAT, TASK, lease=30) is not None


def test_takeover_needs_an_ended_lease_and_a_heartbeat_seen_standing_still(remote: Remote) -> None:
    clock = Clock()
    holder, taker = remote.machine("holder", clock), remote.machine("taker", clock)
    held = holder.claim(FEAT, TASK, lease=30)
    assert held is not None
    taker.read(FEAT)
    clock.now += 20  # lease running
    assert taker.take_over(FEAT, TASK, 30, stale_after=10) is None
    clock.now += 20  # lease over, but the holder beats: the ref moves
    held = holder.renew(held, lease=1)
    clock.now += 5  # that beat's lease ended too, but the taker saw it move just now
    assert taker.take_over(FEAT, TASK, 30, stale_after=10) is None
    clock.now += 10  # and now it has stood still for 10 s past its lease
    taken = taker.take_over(FEAT, TASK, 30, stale_after=10)
    assert taken is not None and taken.kind == "takeover" and taken.previous == "holder"
    with pytest.raises(ClaimLostError):
        holder.renew(held, lease=30)  # the holder learns at its next beat
    assert holder.release(held) is False  # and cannot delete the new holder's claim
    history = run_git(remote.bare, "log", "--format=%s", taken.ref).splitlines()
    assert history == [f"guardkit takeover {TASK} of {FEAT}", f"guardkit renew {TASK} of {FEAT}",
                       f"guardkit claim {TASK} of {FEAT}"]


def test_a_takeover_racing_a_renewal_has_one_winner(remote: Remote) -> None:
    for round_number in range(4):
        task = f"TASK-R-{round_number + 10:03d}"
        clock = Clock()
        holder, taker = remote.machine("holder", clock), remote.machine("taker", clock)
        held = holder.claim(FEAT, task, lease=1)
        assert held is not None
        taker.read(FEAT)
        clock.now += 100  # lease long over and the ref seen standing still: a takeover is allowed...
        start = threading.Barrier(2)
        outcome: dict[str, object] = {}

        def renew(claim: Claim = held) -> None:
            start.wait()
            try:
                outcome["renewed"] = holder.renew(claim, lease=30)
            except ClaimLostError:
                outcome["renewed"] = None

        def take(name: str = task) -> None:
            start.wait()
            outcome["taken"] = taker.take_over(FEAT, name, 30, stale_after=10)

        threads = [threading.Thread(target=renew), threading.Thread(target=take)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winners = [claim for claim in (outcome["renewed"], outcome["taken"]) if claim is not None]
        assert len(winners) == 1  # ...but never both: the compare-and-swap push decides
        assert isinstance(winners[0], Claim) and remote_ref(remote, claim_ref(FEAT, task)) == winners[0].sha


def test_a_push_refused_by_the_remote_is_not_a_lost_race(remote: Remote) -> None:
    hook = remote.bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'claims are not allowed here' >&2\nexit 1\n")
    hook.chmod(0o755)
    board = remote.machine("w1")
    with pytest.raises(RemoteRejectedError) as refused:
        board.claim(FEAT, TASK, lease=30)
    assert "remote rejected" in refused.value.message
    assert remote_ref(remote, claim_ref(FEAT, TASK)) == ""


def test_an_unreachable_remote_is_waited_for_and_said(remote: Remote) -> None:
    board = remote.machine("w1")
    hidden = remote.bare.with_name("hidden.git")
    remote.bare.rename(hidden)  # the server answers, the repository is not there (or the server is down)
    if remote.daemon is not None:
        remote.daemon.stop()
    with pytest.raises(RemoteUnreachableError):
        board.claim(FEAT, TASK, lease=30)
    waits: list[str] = []

    def back_online(seconds: float) -> None:
        if not remote.bare.exists():
            hidden.rename(remote.bare)
            if remote.daemon is not None:
                remote.daemon.start()

    held = retrying(lambda: board.claim(FEAT, TASK, lease=30), sleep=back_online,
                    on_wait=lambda attempt, error: waits.append(error.message))
    assert held is not None and remote_ref(remote, held.ref) == held.sha
    assert len(waits) == 1 and "cannot reach remote 'origin'" in waits[0]


def test_heartbeat_renews_and_reports_a_takeover(remote: Remote) -> None:
    clock = Clock()
    holder, taker = remote.machine("holder", clock), remote.machine("taker", clock)
    held = holder.claim(FEAT, TASK, lease=30)
    assert held is not None
    lost: list[Claim] = []
    beat = Heartbeat(holder, 30, on_lost=lost.append)
    beat.hold(held)
    beat.beat()
    assert beat.held()[0].beat == 1 and remote_ref(remote, held.ref) == beat.held()[0].sha
    taker.read(FEAT)
    clock.now += 100
    assert taker.take_over(FEAT, TASK, 30, stale_after=10) is not None
    beat.beat()
    assert [claim.task for claim in lost] == [TASK] and beat.held() == []


class SlowRenewals(ClaimBoard):
    """A board whose renewals wait at a gate before pushing: a beat caught in flight."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.pushing, self.gate = threading.Event(), threading.Event()

    def renew(self, held: Claim, lease: float) -> Claim:
        self.pushing.set()
        self.gate.wait(10)
        return super().renew(held, lease)


def test_a_claim_dropped_while_its_beat_is_in_flight_is_released_at_its_new_beat(remote: Remote) -> None:
    plain = remote.machine("holder")
    board = SlowRenewals(plain.repo, "origin", "holder", clock=plain.clock, monotonic=plain.monotonic)
    held = board.claim(FEAT, TASK, lease=30)
    assert held is not None
    beat = Heartbeat(board, 30)
    beat.hold(held)
    beating = threading.Thread(target=beat.beat)
    beating.start()
    assert board.pushing.wait(10)
    dropped: list[Claim | None] = []
    dropping = threading.Thread(target=lambda: dropped.append(beat.drop(held)))
    dropping.start()
    dropping.join(0.3)
    board.gate.set()  # the renewal reaches the remote now; the drop returns after it
    beating.join(10)
    dropping.join(10)
    last = dropped[0]
    assert last is not None and last.beat == 1 and last.sha == remote_ref(remote, held.ref)
    assert board.release(last) and remote_ref(remote, held.ref) == ""


def test_a_bad_remote_name_or_id_is_refused_before_any_push(remote: Remote, tmp_path: Path) -> None:
    board = remote.machine("w1")
    with pytest.raises(InputError):
        ClaimBoard(board.repo, "no-such-remote")
    with pytest.raises(InputError):
        board.claim(FEAT, "../TASK", lease=30)
    assert run_git(remote.bare, "for-each-ref", "refs/guardkit/") == ""
    shutil.rmtree(board.repo.root)


def test_a_branch_push_never_replaces_the_history_it_was_leased_on(remote: Remote) -> None:
    from guardkit_state.remote.branches import RemoteBranches

    board = remote.machine("w1")
    root = board.repo.root
    branches = RemoteBranches(board.repo, "origin")
    base = run_git(root, "rev-parse", "main").strip()

    def commit(message: str, parent: str) -> str:
        return run_git(root, "commit-tree", "-p", parent, "-m", message, f"{parent}^{{tree}}").strip()

    run_git(root, "branch", "autobuild/TASK-R-001", commit("a turn pushed", base))
    pushed = branches.push("autobuild/TASK-R-001", None)
    run_git(root, "branch", "-f", "autobuild/TASK-R-001", commit("a turn on the old history", base))
    with pytest.raises(ClaimLostError, match="does not continue"):
        branches.push("autobuild/TASK-R-001", pushed)  # the lease holds, the history does not
    assert remote_ref(remote, "refs/heads/autobuild/TASK-R-001") == pushed
    run_git(root, "branch", "-f", "autobuild/TASK-R-001", commit("the next turn", pushed))
    assert branches.push("autobuild/TASK-R-001", pushed) == remote_ref(remote, "refs/heads/autobuild/TASK-R-001")


def test_a_worker_stopped_while_a_beat_is_in_flight_releases_its_claim_at_the_new_beat(tmp_path: Path) -> None:
    # A second Ctrl-C (or SIGTERM) cut short the release of the task's block while its beat was in
    # flight: the worker's stop releases what it still holds, at the beat that reached the remote.
    from guardkit_state.plans.plan import find_plan, load_plan
    from guardkit_state.remote.worker import WorkerOptions, _Worker
    from tests.feature_support import FEATURE_ID, TaskSpec, make_feature

    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001")])
    bare = make_bare(tmp_path, project.root)
    repo = GitRepo.discover(clone(bare.as_uri(), tmp_path / "machine"))
    assert repo is not None
    player, coach = project.agents()
    worker = _Worker(repo, load_plan(find_plan(repo.root, FEATURE_ID)), player, coach,
                     WorkerOptions(remote="origin", worker="holder"), lambda text: None, lambda event: None)
    board = SlowRenewals(repo, "origin", "holder")
    worker.board = worker.heartbeat.board = board
    held = board.claim(FEATURE_ID, "TASK-FB-001", lease=30)
    assert held is not None
    worker.heartbeat.hold(held)
    beating = threading.Thread(target=worker.heartbeat.beat)
    beating.start()
    assert board.pushing.wait(10)
    released: list[list[str]] = []
    stopping = threading.Thread(target=lambda: released.append(worker._release_all()))
    stopping.start()
    stopping.join(0.3)
    board.gate.set()
    beating.join(10)
    stopping.join(10)
    assert released == [["TASK-FB-001"]]
    assert remote_ref_of(bare, held.ref) == ""


def remote_ref_of(bare: Path, ref: str) -> str:
    return run_git(bare, "for-each-ref", "--format=%(objectname)", ref).strip()


class LostReports(ClaimBoard):
    """A board whose next pushes reach the remote but whose reports are lost (the connection
    dropped after the remote updated the ref, or Ctrl-C killed git as it read the answer)."""

    lose = 0

    def _push(self, refspec: str, *, lease: tuple[str, str] | None = None) -> object:  # type: ignore[override]
        done = super()._push(refspec, lease=lease)
        if self.lose:
            self.lose -= 1
            return type(done)("unreachable", "the connection was reset")
        return done


def test_a_renewal_that_landed_though_its_push_failed_is_still_the_holders(remote: Remote) -> None:
    clock = Clock()
    plain = remote.machine("holder", clock)
    board = LostReports(plain.repo, "origin", "holder", clock=clock, monotonic=clock)
    board.lose = 1
    with pytest.raises(RemoteUnreachableError):
        board.claim(FEAT, TASK, lease=30)  # it landed: the retry finds it and does not call it a lost race
    held = board.claim(FEAT, TASK, lease=30)
    assert held is not None and held.sha == remote_ref(remote, held.ref)
    lost: list[Claim] = []
    beat = Heartbeat(board, 30, on_lost=lost.append)
    beat.hold(held)
    board.lose = 1
    beat.beat()  # the renewal reached the remote; the worker was told it did not
    assert remote_ref(remote, held.ref) != held.sha and beat.held()[0].sha == held.sha
    clock.now += 10
    beat.beat()  # the ref moved, to the holder's own beat: not a takeover
    assert lost == [] and [claim.sha for claim in beat.held()] == [remote_ref(remote, held.ref)]
    board.lose = 1
    clock.now += 10
    beat.beat()
    last = beat.drop(held)
    assert last is not None and board.release(last)  # released though its last beat's report was lost
    assert remote_ref(remote, held.ref) == ""


def test_a_takeover_that_landed_though_its_push_failed_is_the_takers(remote: Remote) -> None:
    clock = Clock()
    holder = remote.machine("holder", clock)
    plain = remote.machine("taker", clock)
    taker = LostReports(plain.repo, "origin", "taker", clock=clock, monotonic=clock)
    assert holder.claim(FEAT, TASK, lease=30) is not None
    taker.read(FEAT)
    clock.now += 100
    taker.lose = 1
    with pytest.raises(RemoteUnreachableError):
        taker.take_over(FEAT, TASK, 30, stale_after=10)
    taken = taker.take_over(FEAT, TASK, 30, stale_after=10)  # the retry: not a live claim of another
    assert taken is not None and (taken.worker, taken.kind, taken.previous) == ("taker", "takeover", "holder")
    assert taken.sha == remote_ref(remote, taken.ref)


class FailingOnce(ClaimBoard):
    """A board whose first renewal cannot run git (a fork refused, a full disk): a GitError."""

    failed = False

    def renew(self, held: Claim, lease: float) -> Claim:
        if not self.failed:
            self.failed = True
            raise GitError("cannot run git: [Errno 11] Resource temporarily unavailable")
        return super().renew(held, lease)


def test_a_heartbeat_survives_a_git_failure_and_beats_again(remote: Remote) -> None:
    plain = remote.machine("holder")
    board = FailingOnce(plain.repo, "origin", "holder")
    held = board.claim(FEAT, TASK, lease=30)
    assert held is not None
    waits: list[str] = []
    beat = Heartbeat(board, 0.3, on_wait=lambda exc: waits.append(exc.message))
    beat.hold(held)
    beat.start()
    try:
        for _ in range(100):  # up to 10 s
            if beat.held()[0].beat >= 1:
                break
            threading.Event().wait(0.1)
    finally:
        beat.stop()
    assert board.failed and waits and "cannot run git" in waits[0]
    assert beat.held()[0].beat >= 1 and remote_ref(remote, held.ref) == beat.held()[0].sha  # it beat again


def test_a_claim_made_by_another_process_under_the_same_worker_id_is_not_taken_for_its_own(remote: Remote) -> None:
    # Agents of the MCP server name their worker themselves: two sessions may use one name.
    first = remote.machine("agent-1")
    second = ClaimBoard(first.repo, "origin", "agent-1")  # the same clone, another session
    assert first.claim(FEAT, TASK, lease=30) is not None
    assert second.claim(FEAT, TASK, lease=30) is None  # a lost race, not a claim won


def test_a_drop_waiting_for_a_beat_to_an_unreachable_remote_returns_the_claim_as_it_stands(
        git_repo: Path, tmp_path: Path) -> None:
    bare = make_bare(tmp_path, git_repo)
    remote = Remote(tmp_path, bare, bare.as_uri(), None)  # file:// only: made unreachable by moving it
    plain = remote.machine("holder")
    board = SlowRenewals(plain.repo, "origin", "holder", clock=plain.clock, monotonic=plain.monotonic)
    held = board.claim(FEAT, TASK, lease=30)
    assert held is not None
    waits: list[str] = []
    beat = Heartbeat(board, 30, on_wait=lambda exc: waits.append(exc.message))
    beat.hold(held)
    beating = threading.Thread(target=beat.beat)
    beating.start()
    assert board.pushing.wait(10)
    hidden = remote.bare.with_name("hidden.git")
    remote.bare.rename(hidden)  # the remote goes away while the beat is in flight
    dropped: list[Claim | None] = []
    dropping = threading.Thread(target=lambda: dropped.append(beat.drop(held)))
    dropping.start()
    board.gate.set()
    beating.join(10)
    dropping.join(10)
    assert not dropping.is_alive() and waits  # no deadlock: the beat failed, the drop returned
    assert dropped == [held]  # the claim as it stands on the remote
    with pytest.raises(RemoteUnreachableError):
        board.release(held)
    hidden.rename(remote.bare)
    assert board.release(held) and remote_ref(remote, held.ref) == ""


@contextlib.contextmanager
def silent_host() -> Iterator[tuple[str, list[socket.socket]]]:
    """A git host on loopback that takes every connection and never answers (a hung server)."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(server.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"git://127.0.0.1:{server.getsockname()[1]}/remote.git", held
    finally:
        stop.set()
        thread.join()
        for connection in held:
            connection.close()
        server.close()


def test_a_remote_that_takes_the_connection_and_never_answers_is_unreachable_at_the_timeout(
        git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    machine = clone(make_bare(tmp_path, git_repo).as_uri(), tmp_path / "machine")
    repo = GitRepo.discover(machine)
    assert repo is not None
    board = ClaimBoard(repo, "origin", "holder")
    monkeypatch.setattr(claims_module, "REFS_TIMEOUT", 1.0)
    monkeypatch.setattr(branches_module, "REFS_TIMEOUT", 1.0)  # (its ls-remote: remote_refs)
    monkeypatch.setattr(branches_module, "DATA_TIMEOUT", 1.0)
    with silent_host() as (url, held):
        run_git(machine, "remote", "set-url", "origin", url)
        started = time.monotonic()
        with pytest.raises(RemoteUnreachableError, match=r"no answer in 1 s"):
            board.claim(FEAT, TASK, lease=30)
        with pytest.raises(RemoteUnreachableError, match=r"no answer in 1 s"):
            RemoteBranches(repo, "origin").fetch()
        assert time.monotonic() - started < 10
        # The stopped git left no process behind holding its connection: each one reads its end.
        assert len(held) >= 2
        for connection in held:
            connection.settimeout(5)
            while connection.recv(65536):
                pass
        # Told as a wait, and tried again: the worker's retrying loop gets an unreachable remote.
        waits: list[str] = []
        with pytest.raises(RemoteUnreachableError, match=r"no answer in 1 s"):
            retrying(lambda: board.remote_sha(claim_ref(FEAT, TASK)), on_wait=lambda n, exc: waits.append(exc.message),
                     sleep=lambda _: None, attempts=2)
        assert len(waits) == 1 and "no answer in 1 s" in waits[0]


def test_a_holder_whose_clock_is_minutes_ahead_is_taken_over_one_lease_after_it_stops(remote: Remote) -> None:
    # Its lease ends 10 minutes late by any other clock: a dead worker's task must not wait for that.
    taker_clock = Clock()
    holder = remote.machine("holder", Clock(taker_clock.now + 600))
    taker = remote.machine("taker", taker_clock)
    held = holder.claim(FEAT, TASK, lease=30)
    assert held is not None and held.lease == 30
    taker.read(FEAT)
    taker_clock.now += 29  # stood still 29 s of a 30 s lease, by the taker's clock
    assert taker.take_over(FEAT, TASK, 30, stale_after=10) is None
    taker_clock.now += 2
    taken = taker.take_over(FEAT, TASK, 30, stale_after=10)
    assert taken is not None and taken.previous == "holder"


def test_a_taker_whose_clock_is_minutes_ahead_never_ousts_a_holder_that_beats_within_its_lease(
        remote: Remote) -> None:
    # To the taker every lease has ended: what it has seen of the claim is all that counts.
    holder_clock = Clock()
    holder = remote.machine("holder", holder_clock)
    taker_clock = Clock(holder_clock.now + 600)
    taker = remote.machine("taker", taker_clock)
    held = holder.claim(FEAT, TASK, lease=30)
    assert held is not None
    taker.read(FEAT)
    taker_clock.now += 25  # two beats of the holder were lost on the way (a third of the lease each)
    assert taker.take_over(FEAT, TASK, 30, stale_after=15) is None
    held = holder.renew(held, lease=30)  # the third arrives
    taker.read(FEAT)
    taker_clock.now += 25
    assert taker.take_over(FEAT, TASK, 30, stale_after=15) is None
    assert remote_ref(remote, held.ref) == held.sha


def test_a_claim_without_its_lease_length_is_judged_by_its_end_on_the_takers_clock() -> None:
    # A claim an older worker made (no Guardkit-Lease-Seconds): its lease's end, as before.
    from guardkit_state.remote.claim_record import parse_claim

    message = ("guardkit claim T of F\n\nGuardkit-Claim: claim\nGuardkit-Worker: old\nGuardkit-Nonce: n\n"
               "Guardkit-Lease-Until: 1000100.000\nGuardkit-Beat: 0\n")
    claim = parse_claim(FEAT, TASK, "a" * 40, message)
    assert claim is not None and claim.lease is None
    for bad in ("nan", "inf", "-5", "0", "1e300", "x"):
        odd = parse_claim(FEAT, TASK, "a" * 40, message + f"Guardkit-Lease-Seconds: {bad}\n")
        assert odd is not None and odd.lease is None


class Unreachable(ClaimBoard):
    """A board whose renewals never reach the remote."""

    def renew(self, held: Claim, lease: float) -> Claim:
        raise RemoteUnreachableError("cannot reach remote 'origin': the connection was reset")


class Pauses:
    """The heartbeat's stop event, recording each pause it is asked to wait, stopping after ``n``."""

    def __init__(self, n: int) -> None:
        self.asked: list[float] = []
        self.n = n

    def wait(self, timeout: float) -> bool:
        self.asked.append(timeout)
        return len(self.asked) > self.n

    def set(self) -> None:
        self.n = 0


def test_a_beat_that_did_not_reach_the_remote_is_tried_again_soon(remote: Remote) -> None:
    plain = remote.machine("holder")
    held = plain.claim(FEAT, TASK, lease=30)
    assert held is not None
    for board, expected in ((plain, [10.0, 10.0, 10.0]), (Unreachable(plain.repo, "origin", "holder"),
                                                          [10.0, 2.5, 2.5])):
        beat = Heartbeat(board, 30)
        beat.hold(held)
        pauses = Pauses(2)
        beat._stop = pauses  # type: ignore[assignment]
        beat._run()
        assert pauses.asked == expected  # a lost beat is tried again after a twelfth of the lease, not a third
        held = beat.held()[0]


def test_a_claim_refused_only_because_the_remotes_ref_lock_was_held_is_tried_again_not_an_error(
        remote: Remote) -> None:
    # A racing push held the ref's lock, claimed, ran and released before this worker looked: the
    # remote said "failed to update ref", which is no refusal (the chaos campaign: a worker stopped on it).
    board = remote.machine("w1")
    lock = remote.bare / "refs" / "guardkit" / "claims" / FEAT / f"{TASK}.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")
    with pytest.raises(RemoteUnreachableError, match="could not lock"):
        board.claim(FEAT, TASK, lease=30)
    waits: list[str] = []
    held = retrying(lambda: board.claim(FEAT, TASK, lease=30), on_wait=lambda n, exc: waits.append(exc.message),
                    sleep=lambda seconds: lock.unlink(missing_ok=True))
    assert held is not None and remote_ref(remote, held.ref) == held.sha and len(waits) == 1
    lock.write_text("")
    with pytest.raises(RemoteUnreachableError, match="could not lock"):
        board.renew(held, lease=30)  # a beat: tried again, the claim still its own
    lock.unlink()
    assert board.release(board.renew(held, lease=30))


def test_a_branch_push_refused_only_because_the_remotes_ref_lock_was_held_is_tried_again(remote: Remote) -> None:
    from guardkit_state.remote.branches import RemoteBranches

    board = remote.machine("w1")
    root = board.repo.root
    run_git(root, "branch", "autobuild/TASK-R-001", "main")
    lock = remote.bare / "refs" / "heads" / "autobuild" / "TASK-R-001.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")
    branches = RemoteBranches(board.repo, "origin")
    with pytest.raises(RemoteUnreachableError, match="could not lock"):
        branches.push("autobuild/TASK-R-001", None)
    stale = time.time() - 60  # left by a push killed on the remote: removed when the remote is on this machine
    __import__("os").utime(lock, (stale, stale))
    with pytest.raises(RemoteUnreachableError, match="could not lock"):
        branches.push("autobuild/TASK-R-001", None)
    assert lock.exists() == (remote.daemon is not None)
    lock.unlink(missing_ok=True)
    assert branches.push("autobuild/TASK-R-001", None) == remote_ref(remote, "refs/heads/autobuild/TASK-R-001")


def test_a_ref_lock_a_killed_push_left_on_a_remote_on_this_machine_is_removed_once_stale(remote: Remote) -> None:
    # A machine SIGKILLed in a push to a file:// remote kills the receive-pack it ran there, holding
    # the ref's lock: every later push to that ref failed for ever (the chaos soak: the merge claim).
    import os

    board = remote.machine("w1")
    lock = remote.bare / "refs" / "guardkit" / "claims" / FEAT / f"{TASK}.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")  # fresh: a push on another machine may hold it now
    with pytest.raises(RemoteUnreachableError, match="if this lasts, a push that died on the remote left"):
        board.claim(FEAT, TASK, lease=30)
    assert lock.exists()
    os.utime(lock, (time.time() - 60, time.time() - 60))  # a minute old: no push holds a ref lock that long
    with pytest.raises(RemoteUnreachableError, match="could not lock"):
        board.claim(FEAT, TASK, lease=30)
    if remote.daemon is None:  # on this machine's file system: removed; the next try claims
        assert not lock.exists()
        held = board.claim(FEAT, TASK, lease=30)
        assert held is not None and remote_ref(remote, held.ref) == held.sha
    else:  # reached over the network: never touched from a client
        assert lock.exists()


def _hand_made_claim(board: ClaimBoard, lease_until: str, lease: str | None = None) -> str:
    """A claim commit as a worker writes one, its lease's end ``lease_until`` (and its length
    ``lease``, when given) as written, pushed to the claim ref from ``board``'s clone (what a dead
    worker of a broken or hostile build left)."""
    repo = board.repo
    tree = repo.text("hash-object", "-t", "tree", "-w", "--stdin")
    length = "" if lease is None else f"\nGuardkit-Lease-Seconds: {lease}"
    message = (f"guardkit claim {TASK} of {FEAT}\n\nGuardkit-Claim: claim\nGuardkit-Worker: dead:1:abcdef\n"
               f"Guardkit-Nonce: 0123456789abcdef\nGuardkit-Lease-Until: {lease_until}\nGuardkit-Beat: 0\n"
               f"Guardkit-Task: {TASK}\nGuardkit-Feature: {FEAT}{length}")
    sha = repo.text("commit-tree", tree, "-m", message)
    run_git(repo.root, "push", "-q", "origin", f"{sha}:{claim_ref(FEAT, TASK)}")
    return sha


@pytest.mark.parametrize("lease_until", ["32503680000", "inf", "nan", "-1e400", "1e300"])
def test_a_lease_end_no_worker_could_have_written_counts_as_ended(remote: Remote, lease_until: str) -> None:
    clock = Clock(start=time.time())
    dead, taker = remote.machine("dead", clock), remote.machine("taker", clock)
    _hand_made_claim(dead, lease_until)
    seen = taker.read(FEAT)[TASK]
    assert taker.take_over(FEAT, TASK, 30, stale_after=10) is None  # seen standing still for no time yet
    clock.now += 10
    taken = taker.take_over(FEAT, TASK, 30, stale_after=10)
    assert taken is not None and taken.previous == "dead:1:abcdef"
    assert claim_record.utc_text(seen.lease_until)  # a text, whatever the value (no ValueError, OverflowError)


@pytest.mark.parametrize("lease", ["1e300", "86401", "nan", "inf", "x"])
def test_a_lease_length_no_claim_may_ask_for_with_an_end_at_no_time_counts_as_ended(remote: Remote,
                                                                                    lease: str) -> None:
    # No length to judge by (over a day, or no number), and an end no worker could have written:
    # ended, taken over once seen standing still (never held for good by either field).
    clock = Clock(start=time.time())
    dead, taker = remote.machine("dead", clock), remote.machine("taker", clock)
    _hand_made_claim(dead, "inf", lease)
    taker.read(FEAT)
    assert taker.take_over(FEAT, TASK, 30, stale_after=10) is None
    clock.now += 10
    taken = taker.take_over(FEAT, TASK, 30, stale_after=10)
    assert taken is not None and taken.previous == "dead:1:abcdef"


@pytest.mark.parametrize("lease_until", ["inf", "nan", "32503680000", "1"])
def test_a_claim_carrying_its_lease_length_is_judged_by_it_whatever_its_end_says(remote: Remote,
                                                                                 lease_until: str) -> None:
    # The length is what the taker sees (a whole lease standing still); the end is never compared.
    clock = Clock(start=time.time())
    dead, taker = remote.machine("dead", clock), remote.machine("taker", clock)
    _hand_made_claim(dead, lease_until, "60")
    taker.read(FEAT)
    clock.now += 59
    assert taker.take_over(FEAT, TASK, 30, stale_after=10) is None  # stood still 59 s of a 60 s lease
    clock.now += 1
    taken = taker.take_over(FEAT, TASK, 30, stale_after=10)
    assert taken is not None and taken.previous == "dead:1:abcdef"


@pytest.mark.parametrize("lease", [0, -1, float("nan"), float("inf"), 1e300, 86_401])
def test_a_lease_no_claim_may_ask_for_is_refused_before_any_push(remote: Remote, lease: float) -> None:
    board = remote.machine("worker")
    with pytest.raises(InputError, match="at most 86400"):
        board.claim(FEAT, TASK, lease)
    assert remote_ref(remote, claim_ref(FEAT, TASK)) == ""


@pytest.mark.parametrize("lease_until", ["inf", "nan"])
def test_a_worker_takes_over_a_dead_workers_claim_whose_lease_is_no_time(tmp_path: Path, lease_until: str) -> None:
    """A real worker (the CLI, a subprocess) on a feature whose task a dead worker left claimed
    with a lease ending at no time: taken over once it has stood still, the feature built."""
    import json
    import os
    import subprocess
    import sys

    from tests.feature_support import FEATURE_BRANCH, FEATURE_ID, TaskSpec, agent_command, git, make_feature

    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001")])
    bare = make_bare(tmp_path, project.root)
    machine = clone(bare.as_uri(), tmp_path / "machine")
    repo = GitRepo.discover(machine)
    assert repo is not None
    tree = repo.text("hash-object", "-t", "tree", "-w", "--stdin")
    sha = repo.text("commit-tree", tree, "-m", f"guardkit claim TASK-FB-001 of {FEATURE_ID}\n\nGuardkit-Claim: claim\n"
                    f"Guardkit-Worker: dead:1:abcdef\nGuardkit-Nonce: 0123456789abcdef\n"
                    f"Guardkit-Lease-Until: {lease_until}\nGuardkit-Beat: 0\n")
    git(machine, "push", "-q", "origin", f"{sha}:refs/guardkit/claims/{FEATURE_ID}/TASK-FB-001")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("GUARDKIT_", "FEATURE_"))}, **project.env()}
    done = subprocess.run([sys.executable, "-m", "guardkit_state", "feature-build", FEATURE_ID, "--repo", str(machine),
                           "--player", agent_command("player.py"), "--coach", agent_command("coach.py"),
                           "--remote", "origin", "--poll", "0.1", "--lease", "2", "--json"],
                          cwd=machine, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["done"] and result["taken_over"] == ["TASK-FB-001"]
    recorded = git(bare, "show", f"{FEATURE_BRANCH}:tasks/backlog/TASK-FB-001-part.md")
    assert f"lease_until: {lease_until} (no time)" in recorded.replace("'", "")


def test_a_new_worker_id_is_one_line_of_safe_characters_whatever_the_host_name(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(claim_record.socket, "gethostname", lambda: "box one\nGuardkit-Beat: 9")
    made = claim_record.new_worker_id()
    assert claim_record.check_worker_id(made) == made and made.startswith("box-one-Guardkit-Beat--9:")



def _move_claim(board: ClaimBoard, held: Claim, ref: str) -> None:
    """``held``'s claim commit moved from its claim ref to ``ref``, as a hostile or buggy actor
    pushing claim commits by hand would."""
    run_git(board.repo.root, "push", "-q", "origin", f":{held.ref}")
    run_git(board.repo.root, "push", "-q", "origin", f"{held.sha}:{ref}")


@pytest.mark.parametrize("nested", [f"x/{TASK}", f"old/x/{TASK}", "lower"])
def test_a_claim_ref_at_another_depth_or_named_by_no_task_id_is_no_claim(remote: Remote, nested: str) -> None:
    other, mine = remote.machine("other"), remote.machine("mine")
    ref = f"refs/guardkit/claims/{FEAT}/{nested}"
    held = other.claim(FEAT, TASK, lease=600)
    assert held is not None
    _move_claim(other, held, ref)
    assert mine.read(FEAT) == {} and mine.foreign == {}  # not TASK's claim, and in the way of no claim ref
    assert remote_ref(remote, ref) == held.sha  # (still there)
    mine_held = mine.claim(FEAT, TASK, lease=30)
    assert mine_held is not None and remote_ref(remote, claim_ref(FEAT, TASK)) == mine_held.sha
    assert mine.read(FEAT) == {TASK: mine_held}
    # A lost race lists only the tasks whose claim refs are there.
    assert other.claim(FEAT, TASK, lease=30) is None and other.taken == {TASK}


@pytest.mark.parametrize("below", ["x", "TASK-R-002/y"])
def test_a_ref_below_a_tasks_claim_ref_is_in_its_way_and_named(remote: Remote, below: str) -> None:
    # git keeps no ref under another ref's name: while refs/.../TASK/x is there, TASK's claim ref
    # cannot be created, so that ref holds the task as a foreign commit at the claim ref does.
    other, mine = remote.machine("other"), remote.machine("mine")
    ref = f"{claim_ref(FEAT, TASK)}/{below}"
    held = other.claim(FEAT, TASK, lease=600)
    assert held is not None
    assert mine.read(FEAT) == {TASK: held}  # (in this clone's copy of the claims: the next fetch prunes it)
    _move_claim(other, held, ref)
    assert mine.read(FEAT) == {}
    assert mine.foreign == {TASK: (ref, held.sha)}
    assert mine.claim(FEAT, TASK, lease=30) is None  # in the way: a lost race, not a remote to wait for
    assert mine.taken == {TASK}
    run_git(mine.repo.root, "push", "-q", "origin", f":{ref}")
    assert mine.claim(FEAT, TASK, lease=30) is not None


def test_a_ref_below_a_claim_ref_named_with_bytes_no_utf8_is_named_as_their_escapes(remote: Remote) -> None:
    # The note names the ref in the way and the command that deletes it: each a line any terminal or
    # MCP answer carries (the name's bytes shown as \\xNN, as bash's $'...' takes them).
    other, mine = remote.machine("other"), remote.machine("mine")
    sha = other.repo.text("commit-tree", other.repo.empty_tree(), "-m", "a note of some other tool")
    run_git(other.repo.root, "push", "-q", "origin", f"{sha}:{claim_ref(FEAT, TASK)}/\udcff")
    assert mine.read(FEAT) == {}
    note = mine.foreign_note(FEAT, TASK, f"{TASK} runs nowhere")
    ref = f"{claim_ref(FEAT, TASK)}/\\xff"
    assert note == (f"{ref} on the remote ({sha[:10]}) keeps git from creating the claim ref {claim_ref(FEAT, TASK)}: "
                    f"{TASK} runs nowhere until it is deleted (git push origin :{ref})")


# (refs/guardkit itself: git refuses to create such a "funny ref" remotely)
@pytest.mark.parametrize("above", [f"refs/guardkit/claims/{FEAT}", "refs/guardkit/claims"])
def test_a_ref_above_the_claim_refs_is_named_as_in_the_way_of_every_claim(remote: Remote, above: str) -> None:
    # git keeps no ref under another ref's name: with a ref at refs/guardkit/claims/<FEAT> (or above)
    # no claim ref of the feature can be created. The push failing so read as a held ref lock, the
    # worker waited on "could not lock" for good, and claim_next_task answered that error.
    other, mine = remote.machine("other"), remote.machine("mine")
    sha = other.repo.text("commit-tree", other.repo.empty_tree(), "-m", "a note of some other tool")
    run_git(other.repo.root, "push", "-q", "origin", f"{sha}:{above}")
    assert mine.read(FEAT) == {} and mine.foreign == {}
    assert mine.claim(FEAT, TASK, lease=30) is None  # no claimant holds it, and no remote to wait for
    assert mine.foreign == {TASK: (above, sha)}
    assert mine.foreign_note(FEAT, TASK, f"{TASK} runs nowhere") == (
        f"{above} on the remote ({sha[:10]}) keeps git from creating the claim ref {claim_ref(FEAT, TASK)}: "
        f"{TASK} runs nowhere until it is deleted (git push origin :{above})")
    run_git(other.repo.root, "push", "-q", "origin", f":{above}")
    assert mine.claim(FEAT, TASK, lease=30) is not None
