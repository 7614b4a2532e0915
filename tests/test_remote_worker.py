"""``remote/worker.py``: what a worker reads and fetches while the others run and approve tasks.

Each test counts the git commands the worker processes run (a logging ``git`` first on PATH: the
working directory and the first two words of each call), on real clones of one bare remote.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from guardkit_state.git.merge import merge_message
from guardkit_state.git.repo import GitRepo
from guardkit_state.remote.claim_record import claim_ref
from guardkit_state.remote.claims import ClaimBoard
from tests.feature_support import FEATURE_BRANCH, FEATURE_ID, FeatureProject, TaskSpec, git, make_feature
from tests.remote_support import clone, make_bare
from tests.test_remote_feature import (
    DEPENDENT,
    INDEPENDENT,
    _run_elsewhere,
    _two_machines,
    merged_order,
    worker,
)


@pytest.fixture
def git_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The log every git call is written to from now on, by the tests' processes and the workers."""
    real = shutil.which("git")
    assert real is not None
    log, wrapper = tmp_path / "git-calls.log", tmp_path / "bin" / "git"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\necho "$PWD $1 $2" >> {shlex.quote(str(log))}\nexec {shlex.quote(real)} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    return log


def _finish(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, out + err


def test_the_tasks_other_workers_approved_are_known_from_their_ledgers_not_read(
        tmp_path: Path, git_calls: Path) -> None:
    # Every worker used to read each task the others approved (its task file shown from its branch,
    # its commits checked) to learn that nothing was left to run: 12-20 such reads for three
    # workers on seven tasks. Their turn ledgers, fetched with the branches, say it; only the
    # merger of each wave reads the tasks it merges, once: those that ran elsewhere together, in one
    # cat-file --batch (features.progress.files_read_ahead), any other on its own.
    tasks = [*INDEPENDENT, DEPENDENT]
    project = make_feature(tmp_path, tasks)
    bare = make_bare(tmp_path, project.root)
    machines = [clone(bare.as_uri(), tmp_path / f"machine-{n}") for n in range(1, 4)]
    git_calls.unlink()
    _finish([worker(project, machine) for machine in machines])
    calls = git_calls.read_text().splitlines()
    reads = [line for line in calls if re.search(r" show autobuild/TASK-FB-\d+:", line)]
    batches = [line for line in calls if line.endswith(" cat-file --batch")]
    assert 0 < len(reads) + len(batches) <= len(tasks), "\n".join(reads + batches)


def _waiting_beside(tmp_path: Path, git_calls: Path, project: FeatureProject, *others: str
                   ) -> tuple[Path, str, list[Path], subprocess.Popen[str], subprocess.Popen[str]]:
    """The first worker running TASK-FB-001 of ``project``, then a second one started beside it, whose
    every fetch is logged with whether that task's claim is held then; ``others``: more clones.
    (The bare remote, the claim ref, the clones, the two workers.)"""
    bare = make_bare(tmp_path, project.root)
    claim = f"refs/guardkit/claims/{FEATURE_ID}/TASK-FB-001"
    clones = [clone(bare.as_uri(), tmp_path / name) for name in ("first", "second", *others)]
    # The wrapper notes, beside each fetch of the second worker, whether the task's claim is held.
    wrapper = git_calls.parent / "bin" / "git"
    real = shlex.quote(str(shutil.which("git", path=os.environ["PATH"].split(os.pathsep, 1)[1])))
    wrapper.write_text(f'#!/bin/sh\nif [ "$1" = fetch ] && [ "$PWD" = {shlex.quote(str(clones[1]))} ]; then\n'
                       f'  echo "fetch $({real} --git-dir={shlex.quote(str(bare))} for-each-ref {claim})" '
                       f'>> {shlex.quote(str(git_calls))}\nfi\nexec {real} "$@"\n')
    git_calls.unlink()
    running = worker(project, clones[0])
    deadline = time.monotonic() + 60
    while not git(bare, "for-each-ref", claim):
        assert time.monotonic() < deadline and running.poll() is None, "the first worker never claimed the task"
        time.sleep(0.05)
    return bare, claim, clones, running, worker(project, clones[1])


def test_a_waiting_worker_does_not_fetch_the_turns_of_a_task_running_elsewhere(
        tmp_path: Path, git_calls: Path) -> None:
    # One task of three turns runs on the first worker; the second has nothing to claim and looks
    # at the remote every 0.1 s. It used to fetch after each turn the first one pushed; a task
    # under a live claim is not read, so it fetches once while the claim holds (its first look).
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001", sleep=0.6, approve_at=3)])
    bare, claim, _, running, waiting = _waiting_beside(tmp_path, git_calls, project)
    _finish([running, waiting])
    turns = git(bare, "rev-list", "--count", "--grep=^autobuild(TASK-FB-001): turn", "autobuild/TASK-FB-001")
    assert turns.strip() == "3"
    fetches = [line for line in git_calls.read_text().splitlines() if line.startswith("fetch")]
    while_running = [line for line in fetches if claim in line]
    assert len(fetches) >= 2 and len(while_running) == 1, fetches


def test_a_ledger_saying_approved_over_files_that_do_not_is_read_before_any_merge(
        tmp_path: Path, git_calls: Path) -> None:
    # The remote's ledger of a task says its branch's tip is an approved turn; the task file there
    # says nothing of the kind (no loop ran it). A worker's wave looks mergeable from the ledger,
    # but the merger reads the files first: the task runs, and only its real approval is merged.
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001")])
    bare = make_bare(tmp_path, project.root)
    tip = git(bare, "rev-parse", "main").strip()
    empty = git(bare, "hash-object", "-t", "tree", "-w", "/dev/null").strip()
    forged = git(bare, "commit-tree", empty, "-m",
                 f"guardkit turn ledger of TASK-FB-001\n\n{tip} 1 approve fresh_start")
    git(bare, "update-ref", "refs/heads/autobuild/TASK-FB-001", tip)
    git(bare, "update-ref", f"refs/guardkit/ledgers/{FEATURE_ID}/TASK-FB-001", forged.strip())
    machine = clone(bare.as_uri(), tmp_path / "machine")
    proc = worker(project, machine)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err
    assert "not every task of it is approved in its files" in out + err
    assert [e["task"] for e in project.invocations() if e["role"] == "player" and e["event"] == "start"] == [
        "TASK-FB-001"]
    log = git(bare, "log", "--format=%s", "autobuild/FEAT-FB")
    assert "turn 1 approve" in git(bare, "log", "--format=%s", "autobuild/TASK-FB-001") and "TASK-FB-001" in log


def test_a_commit_pushed_onto_an_approved_task_while_fetches_were_skipped_is_merged(tmp_path: Path) -> None:
    # The task's holder pushed its approval and died with its claim on the remote. A waiting worker
    # fetched that approval; then a person pushed a fix onto the task's branch while the dead
    # holder's claim still looked live, so the worker skipped that fetch (only a task running
    # elsewhere moved). Once the claim is stale the worker merges the task: the branch the remote
    # holds, the person's commit with it, never the approval its last fetch brought.
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001")])
    bare, mine, theirs = _two_machines(tmp_path, project)
    _run_elsewhere(project, theirs, "TASK-FB-001", release=False, lease=6)
    person = clone(bare.as_uri(), tmp_path / "person")  # the fix made first: pushed at once when its turn comes
    git(person, "checkout", "-q", "-b", "fix", "origin/autobuild/TASK-FB-001")
    (person / "src" / "person.txt").write_text("a fix made by hand\n")
    git(person, "add", "src/person.txt")
    git(person, "commit", "-qm", "a fix made by hand")
    waiting = worker(project, mine, "--lease", "6")
    seen = f"refs/guardkit/seen/origin/ledgers/{FEATURE_ID}/TASK-FB-001"
    deadline = time.monotonic() + 60
    while not git(mine, "for-each-ref", seen):
        assert time.monotonic() < deadline and waiting.poll() is None, "the worker never fetched the approval"
        time.sleep(0.02)
    git(person, "push", "-q", "origin", "fix:autobuild/TASK-FB-001")
    out, err = waiting.communicate(timeout=300)
    assert waiting.returncode == 0, out + err
    assert "TASK-FB-001" in git(bare, "log", "--format=%B", FEATURE_BRANCH)
    assert git(bare, "show", f"{FEATURE_BRANCH}:src/person.txt") == "a fix made by hand\n"


def test_a_waiting_worker_does_not_fetch_for_a_claim_made_meanwhile(tmp_path: Path, git_calls: Path) -> None:
    # The first worker runs TASK-FB-001 (three turns); the second has nothing to claim and waits.
    # Meanwhile a third worker claims TASK-FB-002 (of the next wave). A new claim only takes work
    # away from a waiting worker: the second fetches once while TASK-FB-001's claim holds, as
    # before. (It used to fetch for every claim it saw appear: at a wave's end, all the waiting
    # workers fetched for the merge claim, then for the next task's.)
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001", sleep=0.6, approve_at=3),
                                      TaskSpec("TASK-FB-002", dependencies=["TASK-FB-001"])])
    bare, claim, clones, running, waiting = _waiting_beside(tmp_path, git_calls, project, "third")
    third, deadline = clones[2], time.monotonic() + 60
    while not git_calls.exists():
        assert time.monotonic() < deadline and waiting.poll() is None, "the second worker never fetched"
        time.sleep(0.05)
    repo = GitRepo.discover(third)
    assert repo is not None
    board = ClaimBoard(repo, "origin", "third")
    held = board.claim(FEATURE_ID, "TASK-FB-002", 120)
    assert held is not None and git(bare, "for-each-ref", claim), "TASK-FB-001 ended before the claim was made"
    while "Guardkit-Task: TASK-FB-001" not in git(bare, "log", "--format=%B", FEATURE_BRANCH):
        assert time.monotonic() < deadline + 60, "TASK-FB-001 was never merged"
        time.sleep(0.05)
    assert board.release(held)  # the third worker lets TASK-FB-002 go: the others run it
    _finish([running, waiting])
    fetches = [line for line in git_calls.read_text().splitlines() if line.startswith("fetch")]
    while_running = [line for line in fetches if claim in line]
    assert len(fetches) >= 2 and len(while_running) == 1, fetches


def _hook(git_calls: Path, machine: Path, bare: Path, *stages: tuple[str, dict[str, str], list[str]]) -> Path:
    """``machine``'s worker meets the remote changing under it: at each stage ``(command, made,
    gone)`` in turn, the first git call of it there starting with ``command`` finds the claim refs
    ``made`` (ref -> sha) on the remote, and those named in ``gone`` deleted at once after it. The
    marker file the last stage leaves."""
    real = shlex.quote(str(shutil.which("git", path=os.environ["PATH"].split(os.pathsep, 1)[1])))
    to_remote = f"{real} --git-dir={shlex.quote(str(bare))}"
    script, marker = f'#!/bin/sh\nif [ "$PWD" = {shlex.quote(str(machine))} ]; then\n', Path()
    for n, (command, made, gone) in enumerate(stages):
        marker = git_calls.parent / f"stage-{n}"
        then = "".join(f"      {to_remote} update-ref {ref} {sha}\n" for ref, sha in made.items())
        after = "".join(f"      {to_remote} update-ref -d {ref}\n" for ref in gone)
        script += (f'  {"if" if n == 0 else "elif"} [ ! -e {shlex.quote(str(marker))} ]; then\n'
                   f'    case "$*" in {shlex.quote(command)}*)\n      touch {shlex.quote(str(marker))}\n{then}'
                   f'      {real} "$@"\n      status=$?\n{after}      exit $status;;\n    esac\n')
    wrapper = git_calls.parent / "bin" / "git"
    wrapper.write_text(script + f'  fi\nfi\nexec {real} "$@"\n')
    return marker


def _made_elsewhere(machine: Path, bare: Path, *tasks: str, lease: float = 600) -> dict[str, str]:
    """Claims of ``tasks`` by a worker "elsewhere" (never renewed: it died), their commits on the
    remote but their refs not (see :func:`_hook`): ref -> sha."""
    repo = GitRepo.discover(machine)
    assert repo is not None
    board = ClaimBoard(repo, "origin", "elsewhere")
    made = {}
    for task in tasks:
        held = board.claim(FEATURE_ID, task, lease)
        assert held is not None
        made[held.ref] = held.sha
        git(bare, "update-ref", "-d", held.ref)
    return made


def _ends(proc: subprocess.Popen[str], seconds: float = 60) -> str:
    """The worker's output once it exits 0; stopped (its process group) if it has not within ``seconds``."""
    try:
        out, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"the worker never ended:\n{out}{err}") from None
    assert proc.returncode == 0, out + err
    return out + err


def test_a_claim_its_fetch_read_and_that_was_released_before_its_next_look_is_not_waited_on(
        tmp_path: Path, git_calls: Path) -> None:
    # Another worker claimed the task between this worker's look and its fetch (the fetch reads the
    # claim, the look did not list it), and let it go before any turn was pushed (stopped by Ctrl-C).
    # The remote then looks as it did at the look before the fetch: the worker used to take that for
    # "nothing moved" and wait on the claim it read, live for its 600 s lease; after that its
    # takeover found no claim, and it waited on, for good.
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001")])
    bare, mine, theirs = _two_machines(tmp_path, project)
    made = _made_elsewhere(theirs, bare, "TASK-FB-001")
    marker = _hook(git_calls, mine, bare, ("fetch", made, list(made)))
    out = _ends(worker(project, mine))
    assert marker.exists() and "claimed by a live worker" in out, out
    assert "Guardkit-Task: TASK-FB-001" in git(bare, "log", "--format=%B", FEATURE_BRANCH)


def _until_approved(bare: Path, task: str, proc: subprocess.Popen[str], seconds: float = 60) -> None:
    """Until ``task``'s approval is on the remote; the worker stopped (its process group) if not within ``seconds``."""
    deadline = time.monotonic() + seconds
    while "approve" not in git(bare, "log", "--format=%s", f"autobuild/{task}"):
        if time.monotonic() > deadline or proc.poll() is not None:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise AssertionError(f"{task} was never run to its approval:\n{out}{err}")
        time.sleep(0.05)


def _one_of_two_claimed_elsewhere(tmp_path: Path) -> tuple[FeatureProject, Path, Path, dict[str, str]]:
    """A feature of two tasks of one wave, TASK-FB-002 run elsewhere for one turn and released (its
    branch on the remote: only a reading tells whether it is done); its remote, this machine, and
    claims of both by a dead worker (:func:`_made_elsewhere`)."""
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001"), TaskSpec("TASK-FB-002", approve_at=2)])
    bare, mine, theirs = _two_machines(tmp_path, project)
    _run_elsewhere(project, theirs, "TASK-FB-002", "--max-turns", "1")
    return project, bare, mine, _made_elsewhere(theirs, bare, "TASK-FB-001", "TASK-FB-002")


def test_a_claim_its_fetch_read_that_goes_while_a_new_one_stays_is_not_waited_on(
        tmp_path: Path, git_calls: Path) -> None:
    # Both tasks were claimed between the worker's look and its fetch; TASK-FB-002's claim went again
    # at once. The next look finds TASK-FB-001's claim, made since the look the fetch was made at:
    # the worker, waiting, used to keep waiting without a fetch (a new claim only takes work away)
    # for a quarter of the stale time (75 s of a 600 s lease), TASK-FB-002 free all along.
    project, bare, mine, made = _one_of_two_claimed_elsewhere(tmp_path)
    second = claim_ref(FEATURE_ID, "TASK-FB-002")
    _hook(git_calls, mine, bare, ("fetch", made, [second]))
    proc = worker(project, mine, "--lease", "600", "--max-turns", "5")
    _until_approved(bare, "TASK-FB-002", proc)
    git(bare, "update-ref", "-d", claim_ref(FEATURE_ID, "TASK-FB-001"))  # its dead holder's claim cleared by hand
    _ends(proc)
    assert merged_order(bare) == ["TASK-FB-001", "TASK-FB-002"]


def test_a_claim_a_lost_race_found_that_goes_while_a_new_one_stays_is_not_waited_on(
        tmp_path: Path, git_calls: Path) -> None:
    # The worker's claim of one task loses a race; its ls-remote finds both tasks claimed, so the
    # worker tries no other, and waits. TASK-FB-002's claim goes again at once: the next look finds
    # only TASK-FB-001's claim, made since the worker's fetch, and the worker used to keep waiting
    # without a fetch for a quarter of the stale time, TASK-FB-002 free all along.
    project, bare, mine, made = _one_of_two_claimed_elsewhere(tmp_path)
    second = claim_ref(FEATURE_ID, "TASK-FB-002")
    marker = _hook(git_calls, mine, bare, ("push", made, []), ("ls-remote --refs", {}, [second]))
    proc = worker(project, mine, "--lease", "600", "--max-turns", "5")
    _until_approved(bare, "TASK-FB-002", proc)
    assert marker.exists()
    git(bare, "update-ref", "-d", claim_ref(FEATURE_ID, "TASK-FB-001"))
    _ends(proc)
    assert merged_order(bare) == ["TASK-FB-001", "TASK-FB-002"]


def test_claims_made_since_the_fetch_by_a_worker_that_died_at_once_are_taken_over_after_their_lease(
        tmp_path: Path, git_calls: Path) -> None:
    # TASK-FB-002 was claimed between the worker's look and its fetch, TASK-FB-001 as the worker
    # tried to claim it (its race lost), both by a worker that died at once (2 s leases, never
    # renewed). Claims made since a waiting worker's fetch are not fetched for at once; they are
    # read, and taken over once they stood still for their lease.
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001"), TaskSpec("TASK-FB-002")])
    bare, mine, theirs = _two_machines(tmp_path, project)
    made = _made_elsewhere(theirs, bare, "TASK-FB-001", "TASK-FB-002", lease=2)
    first, second = (claim_ref(FEATURE_ID, task) for task in ("TASK-FB-001", "TASK-FB-002"))
    marker = _hook(git_calls, mine, bare, ("fetch", {second: made[second]}, []), ("push", {first: made[first]}, []))
    out = _ends(worker(project, mine, "--lease", "2"))
    assert marker.exists() and out.count("took over the claim of elsewhere") == 2, out
    assert sorted(merged_order(bare)) == ["TASK-FB-001", "TASK-FB-002"]


def test_a_merge_claim_a_lost_race_found_that_goes_without_a_merge_is_not_waited_on(
        tmp_path: Path, git_calls: Path) -> None:
    # TASK-FB-001 was approved elsewhere; this worker's merge claim loses a race to a merger that
    # lets it go at once, merging nothing, as a claim of TASK-FB-002 (of the next wave, by a dead
    # claimant) appears. The worker used to take the merge for under way and wait on it without a
    # fetch (a new claim only takes work away) for a quarter of the stale time, the wave unmerged.
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001"), TaskSpec("TASK-FB-002", dependencies=["TASK-FB-001"])])
    bare, mine, theirs = _two_machines(tmp_path, project)
    _run_elsewhere(project, theirs, "TASK-FB-001")
    made = _made_elsewhere(theirs, bare, "MERGE-WAVES", "TASK-FB-002")
    merge, second = (claim_ref(FEATURE_ID, task) for task in ("MERGE-WAVES", "TASK-FB-002"))
    marker = _hook(git_calls, mine, bare, ("push", made, []), ("ls-remote --refs", {}, [merge]))
    proc = worker(project, mine, "--lease", "600")
    deadline = time.monotonic() + 60
    while "Guardkit-Task: TASK-FB-001" not in git(bare, "log", "--format=%B", FEATURE_BRANCH):
        if time.monotonic() > deadline or proc.poll() is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise AssertionError(f"wave 1 was never merged:\n{out}{err}")
        time.sleep(0.05)
    assert marker.exists()
    git(bare, "update-ref", "-d", second)  # the dead claimant's claim cleared by hand
    out = _ends(proc)
    assert "another worker is merging it" in out
    assert merged_order(bare) == ["TASK-FB-001", "TASK-FB-002"]


def test_a_wave_merge_asks_git_once_a_task_beside_its_merge(tmp_path: Path, git_calls: Path) -> None:
    # One worker runs and merges the feature (six tasks, then one). What the merge used to ask git
    # for each task beside its `git merge` and the merge commit's sha: the branch's tip (the listing
    # of task branches holds it) and whether it is in HEAD already (git merge answers that itself);
    # and for the wave, the plan's `add` before its commit (one `commit --include` does both).
    tasks = [*INDEPENDENT, DEPENDENT]
    project = make_feature(tmp_path, tasks)
    bare = make_bare(tmp_path, project.root)
    machine = clone(bare.as_uri(), tmp_path / "machine")
    git_calls.unlink()
    _finish([worker(project, machine)])
    calls = git_calls.read_text().splitlines()
    feature = f"{machine / '.guardkit' / 'worktrees' / FEATURE_ID} "
    in_feature = [line.removeprefix(feature) for line in calls if line.startswith(feature)]
    assert in_feature.count("merge --no-ff") == len(tasks)
    assert [line for line in in_feature if line.startswith(("merge-base", "add"))] == []
    assert [line for line in calls if re.search(r" rev-parse refs/heads/autobuild/TASK", line)] == []


def test_the_merger_of_a_wave_reads_the_earlier_waves_tasks_from_their_ledgers(
        tmp_path: Path, git_calls: Path) -> None:
    # Wave 1 was run and merged on another machine; this worker runs wave 2 and merges it. Before
    # merging, it reads the files of wave 2's tasks (a ledger may be forged); wave 1's are merged, as
    # the feature branch's merges and their ledgers say, and their files are not read again.
    first, second = "TASK-FB-001", "TASK-FB-002"
    project = make_feature(tmp_path, [TaskSpec(first), TaskSpec(second, dependencies=[first])])
    _, mine, theirs = _two_machines(tmp_path, project)
    _run_elsewhere(project, theirs, first)
    git(theirs, "checkout", "-q", "-B", FEATURE_BRANCH, f"origin/{FEATURE_BRANCH}")
    git(theirs, "merge", "--no-ff", "-q", "-m", merge_message(FEATURE_ID, first, branch=f"autobuild/{first}",
                                                              target=FEATURE_BRANCH, wave=1), f"autobuild/{first}")
    git(theirs, "push", "-q", "origin", FEATURE_BRANCH)
    git_calls.unlink()
    _finish([worker(project, mine)])
    calls = [line for line in git_calls.read_text().splitlines() if line.startswith(f"{mine} ")]
    assert [line for line in calls if f" show autobuild/{first}:" in line] == []
    # Wave 2's task ran here: nothing read ahead. (The one read of a file out of git is its loop's
    # start looking for its copy on the feature branch, the size asked first: wave 2's, not wave 1's.)
    assert [line for line in calls if line.endswith(" cat-file --batch")] == [f"{mine} cat-file --batch"]
    assert second in git(mine, "log", "-1", "--format=%B", f"origin/{FEATURE_BRANCH}~1")


def test_the_merger_reads_the_tasks_that_ran_elsewhere_with_one_listing_of_their_branches(
        tmp_path: Path, git_calls: Path) -> None:
    # Two tasks ran on other machines; this worker only merges. Its re-read of the wave asks git
    # nothing per task for their branches (their tips, and whether the feature branch reaches
    # them: one for-each-ref for all), and reads their files in one cat-file --batch.
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001"), TaskSpec("TASK-FB-002")])
    bare, mine, theirs = _two_machines(tmp_path, project)
    _run_elsewhere(project, theirs, "TASK-FB-001")
    _run_elsewhere(project, clone(bare.as_uri(), tmp_path / "machine-3"), "TASK-FB-002")
    wrapper = git_calls.parent / "bin" / "git"
    real = shlex.quote(str(shutil.which("git", path=os.environ["PATH"].split(os.pathsep, 1)[1])))
    log = shlex.quote(str(git_calls))
    wrapper.write_text(f'#!/bin/sh\n[ "$PWD" = {shlex.quote(str(mine))} ] && echo "$*" >> {log}\nexec {real} "$@"\n')
    git_calls.unlink()
    _finish([worker(project, mine)])
    calls = git_calls.read_text().splitlines()
    assert "Guardkit-Task: TASK-FB-002" in git(bare, "log", "--format=%B", FEATURE_BRANCH)
    asked = re.compile(r"(rev-parse -q --verify|--no-merged=\S+) refs/heads/autobuild/TASK")
    per_task = [line for line in calls if asked.search(line)]
    assert per_task == [], per_task
    assert len([line for line in calls if "--no-merged=" in line]) == 1, calls
    # Their files: their sizes asked in one call (none over the cap is read), then read in one.
    assert [line for line in calls if line.startswith("cat-file --batch")] == ["cat-file --batch-check",
                                                                                "cat-file --batch"], calls
