"""A worker restarted in its clone takes back its dead predecessor's claim at once
(``remote/own_claims.py``): the nonce kept in the clone proves the claim its own, the ``flock`` of
the worker that made it proves that one dead; over a real bare remote."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from guardkit_state.git.repo import GitRepo
from guardkit_state.remote.claims import ClaimBoard
from guardkit_state.remote.own_claims import ClaimKeeper
from guardkit_state.store.fsio import TEMP_PREFIX
from tests.conftest import run_git
from tests.feature_support import FEATURE_ID, TaskSpec, agent_command, git, make_feature
from tests.remote_support import clone, make_bare

from .helpers import dead_pid

TASK = "TASK-FB-001"


def test_a_worker_restarted_in_its_clone_takes_back_its_dead_claim_without_waiting_for_the_lease(
        tmp_path: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec(TASK, approve_at=2)])
    bare = make_bare(tmp_path, project.root)
    machine = clone(bare.as_uri(), tmp_path / "machine")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARDKIT_", "FEATURE_"))}
    env.update(project.env(), NO_COLOR="1")
    mark = tmp_path / "in-turn-2"
    hanging = (f'if [ "$GUARDKIT_TURN" = 2 ] && [ ! -e {mark} ]; then echo $$ > {mark}; sleep 600; fi; '
               f"exec {agent_command('player.py')}")

    def start() -> subprocess.Popen[str]:  # a lease of ten minutes: only the nonce can end it early
        return subprocess.Popen([sys.executable, "-m", "guardkit_state", "feature-build", FEATURE_ID, "--repo",
                                 str(machine), "--player", hanging, "--coach", agent_command("coach.py"), "--remote",
                                 "origin", "--poll", "0.1", "--lease", "600"],
                                cwd=machine, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)

    victim = start()
    while not (mark.exists() and mark.read_text().strip()):
        assert victim.poll() is None, victim.communicate()
        subprocess.run(["sleep", "0.05"], check=False)
    os.killpg(victim.pid, signal.SIGKILL)  # the machine dies mid-Player: the worker and its agent
    os.killpg(int(mark.read_text()), signal.SIGKILL)
    _, victim_err = victim.communicate()
    claim = run_git(bare, "for-each-ref", "--format=%(objectname)", f"refs/guardkit/claims/{FEATURE_ID}/{TASK}")
    assert claim.strip()  # left on the remote, its lease ten minutes long
    heir = start()
    try:
        out, err = heir.communicate(timeout=120)  # far less than the lease
    except subprocess.TimeoutExpired:
        os.killpg(heir.pid, signal.SIGKILL)  # the worker this test started: it waited for the lease
        out, err = heir.communicate()
    assert heir.returncode == 0, out + err[-3000:]
    victim_id = victim_err.split("worker ", 1)[1].split(" on ", 1)[0]
    assert f"{TASK}: took back the claim of {victim_id}, a worker of this clone that died" in err
    assert f"this worker ran: {TASK}; merged: {TASK}" in out
    players = [(e["task"], e["turn"]) for e in project.invocations() if e["role"] == "player" and e["event"] == "start"]
    assert players == [(TASK, 1), (TASK, 2)]  # turn 1 kept; turn 2 (killed) run once more
    shown = json.loads(subprocess.run([sys.executable, "-m", "guardkit_state", "show", TASK, "--json"], cwd=machine,
                                      capture_output=True, text=True, check=True).stdout)
    [entry] = shown["takeovers"]
    assert (entry["from"], entry["how"], entry["turns_done"]) == (victim_id, "restart", 1)
    assert git(bare, "for-each-ref", "refs/guardkit/claims/") == ""


def _board(machine: Path, worker: str, keeper: ClaimKeeper | None = None) -> ClaimBoard:
    repo = GitRepo.discover(machine)
    assert repo is not None
    return ClaimBoard(repo, "origin", worker, keep=keeper)


def test_a_live_workers_claims_are_never_adopted_and_a_dead_ones_are_once(git_repo: Path, tmp_path: Path) -> None:
    bare = make_bare(tmp_path, git_repo)
    machine = clone(bare.as_uri(), tmp_path / "machine")
    repo = GitRepo.discover(machine)
    assert repo is not None
    alive = ClaimKeeper(repo, "origin", "alive")
    with alive:
        mine = _board(machine, "alive", alive)
        held = mine.claim(FEATURE_ID, TASK, lease=600)
        assert held is not None
        with ClaimKeeper(repo, "origin", "second") as second:
            assert second.adopt() == {}  # its lock is held: a live worker's claim is its own
        dead = ClaimKeeper(repo, "origin", "dead")
        dead.__enter__()
        board = _board(machine, "dead", dead)
        other = board.claim(FEATURE_ID, "TASK-FB-002", lease=600)
        assert other is not None
        dead._held.close()  # as the kernel does when its process dies: the lock is gone, the record stays
        with ClaimKeeper(repo, "origin", "heir") as heir:
            assert heir.adopt() == {other.ref: other.nonce}
            assert heir.nonces == {other.ref: other.nonce}  # kept as its own: its successor finds them too
            with ClaimKeeper(repo, "origin", "late") as late:
                assert late.adopt() == {}  # adopted once, by one worker
            assert _board(machine, "heir", heir).release(other) and heir.nonces == {}
        assert mine.release(held)
    assert sorted(path.name for path in alive.folder.iterdir()) == []  # nothing left once every claim is released


def test_a_claim_taken_over_since_is_not_taken_back_by_the_dead_workers_successor(git_repo: Path,
                                                                                   tmp_path: Path) -> None:
    bare = make_bare(tmp_path, git_repo)
    here, there = (clone(bare.as_uri(), tmp_path / f"machine-{n}") for n in (1, 2))
    repo = GitRepo.discover(here)
    assert repo is not None
    dead = ClaimKeeper(repo, "origin", "dead")
    dead.__enter__()
    made = _board(here, "dead", dead).claim(FEATURE_ID, TASK, lease=1)
    assert made is not None
    dead._held.close()
    clock = [1000.0]
    taker = ClaimBoard(_board(there, "taker").repo, "origin", "taker", monotonic=lambda: clock[0])
    taker.read(FEATURE_ID)
    clock[0] += 10
    taken = taker.take_over(FEATURE_ID, TASK, 600, stale_after=1)  # another machine took it over meanwhile
    assert taken is not None
    with ClaimKeeper(repo, "origin", "heir") as heir:
        board = _board(here, "heir", heir)
        board.orphans.update(heir.adopt())
        assert board.orphans == {made.ref: made.nonce}
        seen = board.read(FEATURE_ID)[TASK]
        assert seen.nonce == taken.nonce and not board.is_stale(seen, stale_after=0)
        assert board.take_over(FEATURE_ID, TASK, 600, stale_after=0) is None  # not its own: the lease rules


def test_a_worker_taking_its_dead_predecessors_claims_removes_the_record_write_a_kill_cut_short(
        git_repo: Path, tmp_path: Path) -> None:
    # A worker killed while it wrote its record (each claim made or released) leaves the temp file in
    # the clone's git folder, where nothing else looks: the next worker's adopt removes it, and never
    # the temp file of a live worker's write (this process's).
    bare = make_bare(tmp_path, git_repo)
    repo = GitRepo.discover(clone(bare.as_uri(), tmp_path / "machine"))
    assert repo is not None
    with ClaimKeeper(repo, "origin", "heir") as heir:
        dead = dead_pid()
        killed = heir.folder / f"{TEMP_PREFIX}{dead}-0a1b2c3d.json.{dead}.1000001"
        live = heir.folder / f"{TEMP_PREFIX}{os.getpid()}-0a1b2c3d.json.{os.getpid()}.1000002"
        for leftover in (killed, live):
            leftover.write_text('{"worker": "w", "cla', encoding="utf-8")
        assert heir.adopt() == {}
        assert not killed.exists() and live.exists()
