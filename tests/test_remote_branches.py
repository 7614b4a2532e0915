"""``remote/branches.py``: the loop branches between a worker's clone and a real bare remote."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from guardkit_state.errors import RemoteRejectedError, RemoteUnreachableError
from guardkit_state.git.repo import GitRepo
from guardkit_state.remote.branches import RemoteBranches, list_refs, listed_refs, remote_refs
from guardkit_state.remote.claims import ClaimBoard
from guardkit_state.remote.ledgers import LEDGERS_PREFIX, RemoteLedgers
from tests.conftest import run_git
from tests.feature_support import count_git_runs
from tests.remote_support import clone, make_bare


def test_a_fetch_is_not_stopped_for_good_by_a_ref_lock_a_killed_fetch_left(git_repo: Path, tmp_path: Path) -> None:
    # A worker SIGKILLed in its fetch leaves packed-refs.lock (or a ref's .lock) in its clone: every
    # later fetch failed on it, taken for an unreachable remote and retried for ever (the chaos campaign).
    bare = make_bare(tmp_path, git_repo)
    base = run_git(git_repo, "rev-parse", "main").strip()
    run_git(git_repo, "push", "-q", str(bare), f"{base}:refs/heads/autobuild/TASK-X-001",
            f"{base}:refs/heads/autobuild/TASK-X-002")
    machine = clone(bare.as_uri(), tmp_path / "machine")
    repo = GitRepo.discover(machine)
    assert repo is not None
    branches = RemoteBranches(repo, "origin")
    assert set(branches.fetch()) == {"autobuild/TASK-X-001", "autobuild/TASK-X-002"}
    run_git(machine, "pack-refs", "--all")
    run_git(bare, "update-ref", "-d", "refs/heads/autobuild/TASK-X-002")  # the next fetch prunes it
    (machine / ".git" / "packed-refs.lock").write_text("")
    (machine / ".git" / "refs" / "remotes" / "origin" / "autobuild").mkdir(parents=True, exist_ok=True)
    run_git(bare, "update-ref", "refs/heads/autobuild/TASK-X-003", base)
    (machine / ".git" / "refs" / "remotes" / "origin" / "autobuild" / "TASK-X-003.lock").write_text("")
    assert set(branches.fetch()) == {"autobuild/TASK-X-001", "autobuild/TASK-X-003"}
    assert not (machine / ".git" / "packed-refs.lock").exists()
    (machine / ".git" / "refs" / "guardkit" / "seen" / "origin" / "claims" / "FEAT-X").mkdir(parents=True)
    run_git(bare, "update-ref", "refs/guardkit/claims/FEAT-X/TASK-X-001", base)
    seen = machine / ".git" / "refs" / "guardkit" / "seen" / "origin" / "claims" / "FEAT-X"
    (seen / "TASK-X-001.lock").write_text("")
    ClaimBoard(repo, "origin", "w").read("FEAT-X")  # the claims' own fetch too (a commit that is no claim)


def test_sync_moves_the_branches_behind_the_remote_in_one_git_call(
        git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A fetch after a round of six workers brings a dozen branches new to this clone: set in one
    # update-ref transaction. A branch ahead of the remote's (a turn not pushed yet) is left alone.
    bare = make_bare(tmp_path, git_repo)
    base = run_git(git_repo, "rev-parse", "main").strip()
    machine = clone(bare.as_uri(), tmp_path / "machine")
    run_git(machine, "branch", "autobuild/TASK-X-001", base)  # behind the remote's once it moves
    run_git(machine, "checkout", "-q", "-b", "autobuild/TASK-X-002", base)
    (machine / "ahead.txt").write_text("a turn not pushed yet\n")
    run_git(machine, "add", "ahead.txt")
    run_git(machine, "commit", "-qm", "ahead")
    ahead = run_git(machine, "rev-parse", "HEAD").strip()
    run_git(machine, "checkout", "-q", "main")
    run_git(git_repo, "commit", "-q", "--allow-empty", "-m", "a turn pushed elsewhere")
    moved = run_git(git_repo, "rev-parse", "HEAD").strip()
    refspecs = [f"{moved}:refs/heads/autobuild/TASK-X-{n:03d}" for n in range(1, 13)]
    run_git(git_repo, "push", "-q", str(bare), *refspecs)
    repo = GitRepo.discover(machine)
    assert repo is not None
    calls = count_git_runs(monkeypatch)
    RemoteBranches(repo, "origin").sync()
    heads = {name: sha for sha, name in (line.split() for line in run_git(
        machine, "for-each-ref", "--format=%(objectname) %(refname:short)", "refs/heads/autobuild/").splitlines())}
    assert heads == {f"autobuild/TASK-X-{n:03d}": ahead if n == 2 else moved for n in range(1, 13)}
    assert [call[:2] for call in calls if call[0] == "update-ref"] == [("update-ref", "--stdin")]


def _another_process_at_first_update_ref(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, branch: str,
                                        sha: str) -> Path:
    """git on PATH made to set ``branch`` to ``sha`` just before the first ``update-ref`` a test runs (as
    another process of the clone would, between the listing and the update); the marker it leaves."""
    real = shutil.which("git")
    assert real is not None
    wrapper, marker = tmp_path / "bin" / "git", tmp_path / "moved"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nif [ "$1" = "update-ref" ] && [ ! -e {marker} ]; then\n'
                       f'  touch {marker}\n  {shlex.quote(real)} update-ref refs/heads/{branch} {sha}\n'
                       f'fi\nexec {shlex.quote(real)} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    return marker


@pytest.mark.parametrize("count", [1, 3])
def test_a_branch_moved_here_between_the_listing_and_the_update_is_left_for_its_worker(
        git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    # Branches behind the remote's are set in one update-ref transaction, each where it was listed;
    # one moved meanwhile (a commit made in this clone by another process), so the transaction
    # changes nothing and each is set alone: the moved one is left where it moved, as a branch ahead
    # or apart is (its worker decides), and the sync goes on (it used to stop the worker).
    bare = make_bare(tmp_path, git_repo)
    base = run_git(git_repo, "rev-parse", "main").strip()
    machine = clone(bare.as_uri(), tmp_path / "machine")
    names = [f"autobuild/TASK-X-00{n}" for n in range(1, count + 1)]
    for name in names:
        run_git(machine, "branch", name, base)
    run_git(machine, "commit", "-q", "--allow-empty", "-m", "a turn made here meanwhile")
    here = run_git(machine, "rev-parse", "HEAD").strip()
    run_git(git_repo, "commit", "-q", "--allow-empty", "-m", "a turn pushed elsewhere")
    moved = run_git(git_repo, "rev-parse", "HEAD").strip()
    run_git(git_repo, "push", "-q", str(bare), *(f"{moved}:refs/heads/{name}" for name in names))
    marker = _another_process_at_first_update_ref(tmp_path, monkeypatch, names[-1], here)
    repo = GitRepo.discover(machine)
    assert repo is not None
    assert RemoteBranches(repo, "origin").sync() == dict.fromkeys(names, moved)
    assert marker.exists()
    assert {name: run_git(machine, "rev-parse", name).strip() for name in names} == {
        **dict.fromkeys(names, moved), names[-1]: here}


@pytest.mark.parametrize("count", [1, 3])
def test_a_branch_created_here_between_the_listing_and_the_update_is_never_set_over(
        git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    # A branch new to this clone is set only where it still does not exist: a loop of this clone
    # that created its task branch meanwhile (or a person) keeps it.
    bare = make_bare(tmp_path, git_repo)
    machine = clone(bare.as_uri(), tmp_path / "machine")
    run_git(machine, "commit", "-q", "--allow-empty", "-m", "a turn made here meanwhile")
    here = run_git(machine, "rev-parse", "HEAD").strip()
    run_git(git_repo, "commit", "-q", "--allow-empty", "-m", "a turn pushed elsewhere")
    moved = run_git(git_repo, "rev-parse", "HEAD").strip()
    names = [f"autobuild/TASK-X-00{n}" for n in range(1, count + 1)]
    run_git(git_repo, "push", "-q", str(bare), *(f"{moved}:refs/heads/{name}" for name in names))
    marker = _another_process_at_first_update_ref(tmp_path, monkeypatch, names[0], here)
    repo = GitRepo.discover(machine)
    assert repo is not None
    assert RemoteBranches(repo, "origin").sync() == dict.fromkeys(names, moved)
    assert marker.exists()
    assert {name: run_git(machine, "rev-parse", name).strip() for name in names} == {
        **dict.fromkeys(names, moved), names[0]: here}


def test_listed_refs_reads_ls_remote_lines() -> None:
    assert listed_refs("a\trefs/heads/x\nb\trefs/guardkit/claims/F/T-1\n") == {
        "refs/heads/x": "a", "refs/guardkit/claims/F/T-1": "b"}


def test_fetch_branch_from_a_remote_gone_says_it_cannot_reach_the_remote(git_repo: Path, tmp_path: Path) -> None:
    # The one ls-remote reader (remote_refs) words an unreachable remote as the claims always did.
    bare = make_bare(tmp_path, git_repo)
    machine = clone(bare.as_uri(), tmp_path / "machine")
    repo = GitRepo.discover(machine)
    assert repo is not None
    shutil.rmtree(bare)
    with pytest.raises(RemoteUnreachableError) as caught:
        RemoteBranches(repo, "origin").fetch_branch("autobuild/TASK-X-001")
    assert caught.value.message.startswith("cannot reach remote 'origin': ")


def test_a_commit_message_never_adds_a_ref_to_a_listing(git_repo: Path) -> None:
    # A claim or ledger ref holds a commit anyone with push access writes: its message carried the
    # listing's record separator and a ref name after it, read as one more ref (a task "claimed" by
    # a ref that is not there, its note naming a ref nobody could delete).
    repo = GitRepo.discover(git_repo)
    assert repo is not None
    prefix = "refs/guardkit/seen/origin/claims/FEAT-X"
    message = f"a note\x01{prefix}/TASK-X-002\n\x01{prefix}/TASK-X-003\x02"
    sha = repo.text("commit-tree", repo.empty_tree(), "-m", message)
    run_git(git_repo, "update-ref", f"{prefix}/TASK-X-001", sha)
    assert list_refs(repo, prefix) == [(f"{prefix}/TASK-X-001", sha, message + "\n")]


def test_sync_sets_a_branch_whose_name_is_no_utf8_as_the_remote_names_it(git_repo: Path, tmp_path: Path) -> None:
    # git takes any bytes but a few in a ref name; the listing keeps them (surrogateescape) so that
    # the name goes back to git as it came. The update-ref transaction's input was encoded as strict
    # UTF-8: one such branch on the remote stopped every worker's sync with a traceback.
    bare = make_bare(tmp_path, git_repo)
    base = run_git(git_repo, "rev-parse", "main").strip()
    odd = "autobuild/TASK-X-\udcff\udce9"  # the bytes 0xff 0xe9, as os.fsencode passes them to git
    run_git(git_repo, "push", "-q", str(bare), f"{base}:refs/heads/autobuild/TASK-X-001", f"{base}:refs/heads/{odd}")
    machine = clone(bare.as_uri(), tmp_path / "machine")
    repo = GitRepo.discover(machine)
    assert repo is not None
    assert RemoteBranches(repo, "origin").sync() == {"autobuild/TASK-X-001": base, odd: base}
    listed = subprocess.run(["git", "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/autobuild/"],
                            cwd=machine, capture_output=True, check=True).stdout
    assert listed.splitlines() == [f"refs/heads/autobuild/TASK-X-001 {base}".encode(),
                                   b"refs/heads/autobuild/TASK-X-\xff\xe9 " + base.encode()]


def test_a_ref_named_with_bytes_no_utf8_reads_alike_from_ls_remote_and_from_the_fetched_listing(
        git_repo: Path, tmp_path: Path) -> None:
    # A worker compares its look (ls-remote) with the claim refs its fetch listed: read apart (one
    # with U+FFFD, one with the bytes kept), such a ref "moved" at every look, and each look fetched.
    bare = make_bare(tmp_path, git_repo)
    base = run_git(git_repo, "rev-parse", "main").strip()
    claims, seen = "refs/guardkit/claims/FEAT-X", "refs/guardkit/seen/origin/claims/FEAT-X"
    run_git(git_repo, "push", "-q", str(bare), f"{base}:{claims}/TASK-X-001/\udcff", f"{base}:{claims}/TASK-X-002")
    repo = GitRepo.discover(clone(bare.as_uri(), tmp_path / "machine"))
    assert repo is not None
    RemoteBranches(repo, "origin").fetch(f"+{claims}/*:{seen}/*")
    fetched = {claims + name.removeprefix(seen): sha for name, sha, _ in list_refs(repo, seen)}
    assert remote_refs(repo, "origin", f"{claims}/*") == fetched == {
        f"{claims}/TASK-X-001/\udcff": base, f"{claims}/TASK-X-002": base}


def _a_turn_to_push(git_repo: Path, tmp_path: Path) -> tuple[Path, Path, GitRepo, str]:
    """A bare remote of ``git_repo``, a clone of it (``machine``) holding a turn on a new branch
    autobuild/TASK-X-001 not pushed yet: (bare, machine, its repo, the turn's sha)."""
    bare = make_bare(tmp_path, git_repo)
    machine = clone(bare.as_uri(), tmp_path / "machine")
    repo = GitRepo.discover(machine)
    assert repo is not None
    run_git(machine, "commit", "-q", "--allow-empty", "-m", "a turn")
    run_git(machine, "branch", "autobuild/TASK-X-001")
    return bare, machine, repo, repo.text("rev-parse", "HEAD")


@pytest.mark.parametrize("blocker", ["TASK-X-001/x", ""])
def test_a_turn_push_refused_for_a_ref_in_its_ledgers_way_names_that_ref(
        git_repo: Path, tmp_path: Path, blocker: str) -> None:
    # A ref below a task's ledger ref (or at the feature's folder of ledgers) keeps git from creating
    # the ledger, and the turn's atomic push fails whole: every line of git's report says only
    # "atomic transaction failed", and the worker stopped naming its branch, not what is in the way.
    _, machine, repo, tip = _a_turn_to_push(git_repo, tmp_path)
    ledgers = RemoteLedgers(repo, "origin", "FEAT-X")
    in_way = f"{LEDGERS_PREFIX}/FEAT-X" + (f"/{blocker}" if blocker else "")
    run_git(machine, "push", "-q", "origin", f"{repo.text('rev-parse', 'HEAD~1')}:{in_way}")
    with pytest.raises(RemoteRejectedError) as refused:
        RemoteBranches(repo, "origin").push("autobuild/TASK-X-001", None, also=(ledgers.refspec("TASK-X-001", tip),))
    ledger = ledgers.ref("TASK-X-001")
    assert refused.value.message == (
        f"remote 'origin' refused autobuild/TASK-X-001: [remote rejected] (atomic transaction failed): "
        f"cannot lock ref '{ledger}': '{in_way}' exists; cannot create '{ledger}'")


@pytest.mark.parametrize("locked", ["refs/heads/autobuild/TASK-X-001", f"{LEDGERS_PREFIX}/FEAT-X/TASK-X-001"])
def test_a_turn_push_refused_only_because_a_ref_lock_was_held_is_tried_again(
        git_repo: Path, tmp_path: Path, locked: str) -> None:
    # A turn goes with its ledger in one atomic push, and git's report of a held ref lock then says
    # only "atomic transaction failed": taken for a refusal, it stopped the worker, and the lock a
    # push killed on the remote left (on this machine) was never removed, as it is for other pushes.
    bare, _, repo, tip = _a_turn_to_push(git_repo, tmp_path)
    ledgers, branches = RemoteLedgers(repo, "origin", "FEAT-X"), RemoteBranches(repo, "origin")
    lock = bare / f"{locked}.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")  # fresh: a push from another machine may hold it now
    with pytest.raises(RemoteUnreachableError, match="could not lock refs/heads/autobuild/TASK-X-001"):
        branches.push("autobuild/TASK-X-001", None, also=(ledgers.refspec("TASK-X-001", tip),))
    assert lock.exists()
    os.utime(lock, (time.time() - 60, time.time() - 60))  # a minute old: no live push holds a ref lock that long
    with pytest.raises(RemoteUnreachableError, match="a push that died on the remote left"):
        branches.push("autobuild/TASK-X-001", None, also=(ledgers.refspec("TASK-X-001", tip),))
    assert not lock.exists()
    assert branches.push("autobuild/TASK-X-001", None, also=(ledgers.refspec("TASK-X-001", tip),)) == tip
    assert run_git(bare, "rev-parse", "refs/heads/autobuild/TASK-X-001", ledgers.ref("TASK-X-001")).split()[0] == tip
