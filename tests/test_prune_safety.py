"""``worktrees prune`` never deletes a worktree holding files that exist nowhere else without ``--force``.

A loop branch merged into its base looks finished, but its worktree may still hold files no commit
has: uncommitted changes, or files a ``.gitignore`` hides (GuardKit ignores ``.guardkit/autobuild/*``,
so a loop that did not commit its reports holds the only copy of them). Real repositories, real
worktrees, the real CLI.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from guardkit_state.git.commits import commit_turn
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.worktrees import WorktreeManager

from .e2e_support import GUARDKIT_STATE, clean_env, git
from .gitloop import TASK_ID, write_turn

GITIGNORE = "__pycache__/\n.guardkit/autobuild/*\n"
STORE = f".guardkit/autobuild/{TASK_ID}"


def merged_loop(root: Path, *, reports_committed: bool) -> Path:
    """A repository whose loop ran one turn in its worktree and was merged into ``main``.

    Without ``reports_committed`` the turn's reports stay ignored and untracked in the worktree
    (what a turn commit did before it forced them in).
    """
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / ".gitignore").write_text(GITIGNORE, encoding="utf-8")
    task = root / "tasks" / "in_progress" / f"{TASK_ID}-git-native-loop.md"
    task.parent.mkdir(parents=True)
    task.write_text(f"---\nid: {TASK_ID}\ntitle: Loop\nstatus: in_progress\nautobuild_state:\n  turns:\n---\n\n"
                    "## Acceptance Criteria\n\n- [ ] AC one\n- [ ] AC two\n- [ ] AC three\n", encoding="utf-8")
    (root / "src").mkdir()
    (root / "src" / "feature.py").write_text('"""Feature."""\n', encoding="utf-8")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "initial")
    repo = GitRepo.discover(root)
    assert repo is not None
    worktree = WorktreeManager(repo).create(TASK_ID).path
    written = write_turn(worktree, 1)
    reports = [p for p in written if p.parent.name == TASK_ID] if reports_committed else []
    commit = commit_turn(GitRepo.discover(worktree), task_id=TASK_ID, turn=1, decision="feedback",
                         mode="fresh_start", managed_worktree=True, force_paths=reports)
    assert commit.committed, commit
    git(root, "merge", "-q", "--no-edit", f"autobuild/{TASK_ID}")
    return worktree


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(GUARDKIT_STATE), *args, "--repo", str(root)], cwd=root, env=clean_env(NO_COLOR="1"),
                          capture_output=True, text=True, encoding="utf-8", timeout=60, check=False)


def test_prune_keeps_a_merged_worktree_holding_the_only_copy_of_ignored_reports(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    worktree = merged_loop(root, reports_committed=False)
    for args in (("worktrees", "prune", "--dry-run"), ("worktrees", "prune")):
        run = _cli(root, *args)
        assert run.returncode == 0, run.stderr
        kept = [line for line in run.stdout.splitlines() if line.startswith(f"kept {TASK_ID}")]
        assert len(kept) == 1, run.stdout
        assert "files that exist nowhere else" in kept[0] and "--force" in kept[0]
        assert f"{STORE}/player_turn_1.json" in kept[0]
        assert "removed" not in run.stdout
    assert (worktree / STORE / "turn_state_turn_1.json").is_file()
    data = json.loads(_cli(root, "worktrees", "prune", "--dry-run", "--json").stdout)
    assert f"{STORE}/coach_turn_1.json" in data["kept"][0]["files"]
    forced = _cli(root, "worktrees", "prune", "--force")
    assert forced.returncode == 0 and f"removed {TASK_ID}" in forced.stdout, forced.stdout
    assert not worktree.exists()


def test_prune_names_the_uncommitted_files_it_keeps(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    worktree = merged_loop(root, reports_committed=True)
    (worktree / "src" / "feature.py").write_text("changed after the merge\n", encoding="utf-8")
    (worktree / "src" / "draft.py").write_text("DRAFT = 1\n", encoding="utf-8")
    run = _cli(root, "worktrees", "prune")
    assert run.returncode == 0, run.stderr
    assert f"kept {TASK_ID}: has uncommitted changes" in run.stdout
    assert "src/feature.py" in run.stdout and "src/draft.py" in run.stdout
    assert worktree.exists()


def test_prune_removes_a_merged_worktree_whose_files_all_exist_elsewhere(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    worktree = merged_loop(root, reports_committed=True)
    # Regenerated caches, the loop's own scratch, and an ignored file the main checkout has too.
    (worktree / "src" / "__pycache__").mkdir()
    (worktree / "src" / "__pycache__" / "feature.cpython-311.pyc").write_bytes(b"\0cache")
    (worktree / STORE / ".work").mkdir()
    (worktree / STORE / ".work" / "context_turn_2.md").write_text("# context\n", encoding="utf-8")
    (root / ".guardkit" / "autobuild" / "OTHER-1").mkdir(parents=True)
    (root / ".guardkit" / "autobuild" / "OTHER-1" / "notes.txt").write_text("same\n", encoding="utf-8")
    (worktree / ".guardkit" / "autobuild" / "OTHER-1").mkdir(parents=True)
    (worktree / ".guardkit" / "autobuild" / "OTHER-1" / "notes.txt").write_text("same\n", encoding="utf-8")
    run = _cli(root, "worktrees", "prune")
    assert run.returncode == 0 and f"removed {TASK_ID}" in run.stdout, run.stdout
    assert not worktree.exists()
