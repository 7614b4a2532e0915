"""A loop killed while git made its worktree leaves the branch's ref lock behind; the next run must
still make the worktree (the lock is a dead git's, so it is removed), and never take a live one's."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from guardkit_state.errors import GitError
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.worktrees import WorktreeManager

from .conftest import run_git
from .gitloop import TASK_ID, make_project

BRANCH = f"autobuild/{TASK_ID}"


def _manager(root: Path) -> WorktreeManager:
    repo = GitRepo.discover(root)
    assert repo is not None
    return WorktreeManager(repo)


def _leave_lock(root: Path) -> Path:
    """The ref lock a git killed inside ``worktree add`` leaves (no git process holds it now)."""
    lock = root / ".git" / "refs" / "heads" / f"{BRANCH}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")
    return lock


@pytest.mark.parametrize("branch_made", [False, True], ids=["new branch", "existing branch (resume)"])
def test_a_dead_gits_ref_lock_is_removed_and_the_worktree_made(git_repo: Path, branch_made: bool) -> None:
    project = make_project(git_repo)
    if branch_made:
        run_git(project, "branch", BRANCH)
    lock = _leave_lock(project)
    worktree = _manager(project).create(TASK_ID)
    assert not lock.exists()
    assert run_git(worktree.path, "symbolic-ref", "--short", "HEAD").strip() == BRANCH


def test_a_lock_a_running_git_may_hold_is_kept_and_the_error_raised(git_repo: Path) -> None:
    project = make_project(git_repo)
    lock = _leave_lock(project)
    # A git process working in the repository (waiting on its input) could be the lock's owner.
    running = subprocess.Popen(["git", "cat-file", "--batch"], cwd=project, stdin=subprocess.PIPE,
                               stdout=subprocess.DEVNULL)
    try:
        with pytest.raises(GitError, match="lock"):
            _manager(project).create(TASK_ID)
        assert lock.exists()
    finally:
        running.communicate(b"", timeout=30)


def test_a_ref_lock_held_by_a_git_in_another_worktree_is_not_taken_as_stale(git_repo: Path,
                                                                             tmp_path: Path) -> None:
    # A feature's loops run side by side, each in its worktree, and each moves its own snapshot ref
    # (refs/guardkit/snapshots/TASK) in the shared git directory. One loop, clearing the locks its
    # agent may have left, took the other loop's live lock: that loop's update-ref failed with
    # "couldn't set 'refs/guardkit/snapshots/...'" and its task ended in an error (seen in CI).
    from guardkit_state.git.stale_locks import remove_stale_locks

    project = make_project(git_repo)
    run_git(project, "worktree", "add", "-q", "-b", "one", str(tmp_path / "one"))
    run_git(project, "worktree", "add", "-q", "-b", "two", str(tmp_path / "two"))
    head = run_git(project, "rev-parse", "HEAD").strip()
    holder = subprocess.Popen(["git", "update-ref", "--stdin"], cwd=tmp_path / "one", stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdin is not None and holder.stdout is not None
    try:
        holder.stdin.write(f"start\nupdate refs/guardkit/snapshots/ONE {head}\nprepare\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "start: ok"
        assert holder.stdout.readline().strip() == "prepare: ok"  # the ref's lock is held now
        lock = project / ".git" / "refs" / "guardkit" / "snapshots" / "ONE.lock"
        assert lock.exists()
        two = GitRepo.discover(tmp_path / "two")
        assert two is not None
        assert remove_stale_locks(two.root, two.git_dir, two.common_dir, "two") == []
        assert lock.exists()
        holder.stdin.write("commit\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "commit: ok"
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert run_git(project, "rev-parse", "refs/guardkit/snapshots/ONE").strip() == head


def test_a_packed_refs_lock_a_killed_ref_deletion_left_is_removed(git_repo: Path) -> None:
    # A loop killed while git deleted its snapshot ref (update-ref -d locks packed-refs too) left
    # packed-refs.lock: on resume every ref deletion failed on it ("Unable to create
    # '.git/packed-refs.lock': File exists"), seen once in the crash campaign.
    from guardkit_state.git.stale_locks import remove_stale_locks

    project = make_project(git_repo)
    repo = GitRepo.discover(project)
    assert repo is not None
    lock = repo.common_dir / "packed-refs.lock"
    lock.write_text("")
    assert remove_stale_locks(repo.root, repo.git_dir, repo.common_dir, None) == [lock]
    run_git(project, "update-ref", "refs/guardkit/snapshots/X", "HEAD")
    run_git(project, "update-ref", "-d", "refs/guardkit/snapshots/X")  # no lock in its way
