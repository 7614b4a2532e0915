"""``git/file_commit.py``: a commit changing one file of another, made with no checkout, in a real repository."""

from __future__ import annotations

import os
from pathlib import Path

from guardkit_state.git.file_commit import commit_file_change
from guardkit_state.git.repo import GitRepo
from tests.conftest import run_git


def test_one_file_changed_deep_in_the_tree_and_everything_else_kept(git_repo: Path) -> None:
    (git_repo / "tasks" / "backlog").mkdir(parents=True)
    (git_repo / "tasks" / "backlog" / "T-1.md").write_text("old\n")
    (git_repo / "tasks" / "backlog" / "T-2.md").write_text("sibling\n")
    (git_repo / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(git_repo / "run.sh", 0o755)
    run_git(git_repo, "add", ".")
    run_git(git_repo, "commit", "-qm", "files")
    repo = GitRepo.discover(git_repo)
    assert repo is not None
    parent = run_git(git_repo, "rev-parse", "HEAD").strip()
    before = run_git(git_repo, "ls-tree", "-r", parent)
    sha = commit_file_change(repo, parent, "tasks/backlog/T-1.md", b"new\n", "one entry more")
    assert run_git(git_repo, "rev-parse", f"{sha}^").strip() == parent
    assert run_git(git_repo, "show", f"{sha}:tasks/backlog/T-1.md") == "new\n"
    after = run_git(git_repo, "ls-tree", "-r", sha)
    changed = set(after.splitlines()) ^ set(before.splitlines())
    assert {line.split("\t")[1] for line in changed} == {"tasks/backlog/T-1.md"}  # modes and siblings kept
    assert run_git(git_repo, "log", "-1", "--format=%s", sha).strip() == "one entry more"
    made = commit_file_change(repo, sha, "new/deeper/file.txt", b"x\n", "a new file")
    assert run_git(git_repo, "show", f"{made}:new/deeper/file.txt") == "x\n"
    # Nothing here moved: HEAD, the index and the files are as they were.
    assert run_git(git_repo, "rev-parse", "HEAD").strip() == parent
    assert run_git(git_repo, "status", "--porcelain") == ""
    assert (git_repo / "tasks" / "backlog" / "T-1.md").read_text() == "old\n"
