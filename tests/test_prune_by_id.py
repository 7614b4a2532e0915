"""``worktrees prune TASK-ID|FEAT-ID`` prunes those loops only, and ``--force`` never deletes a
branch holding merged task work that no other branch holds. Real repositories and worktrees."""

from __future__ import annotations

import subprocess
from pathlib import Path

from guardkit_state.git.repo import GitRepo
from guardkit_state.git.worktrees import WorktreeManager

from .e2e_support import GUARDKIT_STATE, clean_env, git

PLAN = ("id: FEAT-PR\ntasks:\n- id: TASK-PR-001\n  dependencies: []\n- id: TASK-PR-002\n  dependencies: []\n")


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(GUARDKIT_STATE), "worktrees", "prune", *args, "--repo", str(root)], cwd=root,
                          env=clean_env(NO_COLOR="1"), capture_output=True, text=True, timeout=60, check=False)


def _repo(tmp_path: Path) -> tuple[Path, WorktreeManager]:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / ".guardkit" / "features").mkdir(parents=True)
    (root / ".guardkit" / "features" / "FEAT-PR.yaml").write_text(PLAN, encoding="utf-8")
    (root / "README.md").write_text("x\n", encoding="utf-8")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "initial")
    repo = GitRepo.discover(root)
    assert repo is not None
    return root, WorktreeManager(repo)


def _commit(worktree: Path, name: str) -> None:
    (worktree / name).write_text(name, encoding="utf-8")
    git(worktree, "add", name)
    git(worktree, "commit", "-q", "-m", f"work {name}")


def test_prune_one_task_leaves_the_other_loops(tmp_path: Path) -> None:
    root, manager = _repo(tmp_path)
    one = manager.create("TASK-PR-001").path
    two = manager.create("TASK-PR-002").path
    _commit(one, "a.txt")
    _commit(two, "b.txt")
    (two / "dirty.txt").write_text("unsaved", encoding="utf-8")
    run = _cli(root, "TASK-PR-001", "--force")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("removed TASK-PR-001 ")
    assert not one.exists() and two.is_dir() and (two / "dirty.txt").exists()
    branches = git(root, "branch", "--list", "--format=%(refname:short)", "autobuild/*").split()
    assert branches == ["autobuild/TASK-PR-002"]


def test_force_keeps_a_feature_branch_whose_merges_no_other_branch_holds(tmp_path: Path) -> None:
    root, manager = _repo(tmp_path)
    feature = manager.create("FEAT-PR").path
    task = manager.create("TASK-PR-001").path
    _commit(task, "a.txt")
    git(feature, "merge", "-q", "--no-ff", "--no-edit", "autobuild/TASK-PR-001")
    manager.prune(force=True, only={"TASK-PR-001"})  # the task's own branch goes: the merge holds its work
    merge = git(root, "rev-parse", "autobuild/FEAT-PR").strip()

    run = _cli(root, "FEAT-PR", "--force")
    assert run.returncode == 0, run.stderr
    assert not feature.exists()
    assert git(root, "rev-parse", "autobuild/FEAT-PR").strip() == merge  # kept: the only copy of the merge
    assert (f"kept branch autobuild/FEAT-PR: it holds 1 merge(s) of task work no other branch has (newest "
            f"{merge[:10]})") in run.stderr

    # Once main holds the merge, the branch holds nothing of its own and --force deletes it.
    manager.create("FEAT-PR")
    git(root, "merge", "-q", "--no-edit", "autobuild/FEAT-PR")
    run = _cli(root, "FEAT-PR", "--force")
    assert run.returncode == 0 and "kept branch" not in run.stderr, run.stderr
    assert git(root, "branch", "--list", "autobuild/FEAT-PR").strip() == ""


def test_an_unknown_id_is_refused(tmp_path: Path) -> None:
    root, _ = _repo(tmp_path)
    run = _cli(root, "FEAT-NOPE")
    assert run.returncode == 2 and run.stderr.startswith("error:") and len(run.stderr.splitlines()) == 1
