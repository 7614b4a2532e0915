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
