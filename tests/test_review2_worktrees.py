"""Review of WorktreeManager.create's base handling (real repositories, public API)."""

from __future__ import annotations

from pathlib import Path

import pytest

from guardkit_state.errors import InputError
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.worktrees import WorktreeManager

from .conftest import run_git
from .gitloop import TASK_ID, make_project


def _manager(root: Path) -> WorktreeManager:
    repo = GitRepo.discover(root)
    assert repo is not None
    return WorktreeManager(repo)


def test_a_base_that_names_a_tree_is_refused_as_input_before_anything_is_made(git_repo: Path) -> None:
    # refs/heads/main^{tree} "exists" to rev-parse --verify, so branch_exists() says yes; before
    # the change check_base_branch refused it (it names no commit) with InputError, up front.
    project = make_project(git_repo)
    with pytest.raises(InputError):
        _manager(project).create(TASK_ID, "main^{tree}")
    assert not (project / ".guardkit" / "worktrees").exists()


def test_a_base_relative_to_a_branch_starts_the_worktree_there(git_repo: Path) -> None:
    # main~1 is a commit, not a branch, but branch_exists("main~1") is True (rev-parse resolves
    # refs/heads/main~1), so the worktree is added with --track, which git refuses.
    project = make_project(git_repo)
    run_git(project, "commit", "-q", "--allow-empty", "-m", "second")
    wt = _manager(project).create(TASK_ID, "main~1")
    assert run_git(wt.path, "rev-parse", "HEAD").strip() == run_git(project, "rev-parse", "main~1").strip()
