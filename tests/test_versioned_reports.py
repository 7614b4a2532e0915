"""Reports stay versioned: a turn commit holds the turn's own per-turn files even where GuardKit's
``.gitignore`` (``.guardkit/autobuild/*``) hides them — exact paths only — and the loop says once
which rule it overrode. Real repositories, the real CLI, scripted agents.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from guardkit_state.git.commits import commit_turn
from guardkit_state.git.repo import GitRepo

from .e2e_support import git, run_cli
from .reliability.harness import AGENTS, TASK_ID, TASK_REL, TASK_TEXT, agent_command

#: The shape of GuardKit's own .gitignore around its state directory: per-turn files are ignored.
GUARDKIT_GITIGNORE = """\
# Python
__pycache__/
*.pyc

# GuardKit
.guardkit/autobuild/*
.guardkit/worktrees/
secrets.env
"""
RULE = ".gitignore:6:.guardkit/autobuild/*"
STORE = f".guardkit/autobuild/{TASK_ID}"
TURN_FILES = ("player_turn_{n}.json", "coach_turn_{n}.json", "turn_state_turn_{n}.json")


def make_guardkit_repo(root: Path) -> Path:
    """A repository laid out like GuardKit's: its .gitignore, one task file, one source file."""
    (root / TASK_REL).parent.mkdir(parents=True)
    (root / TASK_REL).write_text(TASK_TEXT, encoding="utf-8")
    (root / "src").mkdir()
    (root / "src" / "work.txt").write_text("start\n", encoding="utf-8")
    (root / ".gitignore").write_text(GUARDKIT_GITIGNORE, encoding="utf-8")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "initial")
    return root


def _build(root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli(root, "feature-build", TASK_ID, "--player", agent_command("player.py"),
                "--coach", agent_command("coach.py"), "--max-turns", "5", *extra, RELIABILITY_APPROVE_AT="3")


def _files_of(checkout: Path, rev: str) -> list[str]:
    return git(checkout, "show", "--name-only", "--format=", rev).split()


def _turn_shas(checkout: Path, rev: str) -> dict[int, str]:
    out = git(checkout, "log", "--format=%H %(trailers:key=Turn,valueonly,separator=)", rev)
    return {int(turn): sha for sha, turn in (line.split() for line in out.splitlines() if len(line.split()) == 2)}


@pytest.mark.parametrize("worktree", [True, False], ids=["worktree", "no-worktree"])
def test_turn_commits_hold_the_turn_files_a_gitignore_hides(tmp_path: Path, worktree: bool) -> None:
    root = make_guardkit_repo(tmp_path / "repo")
    run = _build(root, *([] if worktree else ["--no-worktree"]))
    assert run.returncode == 0, run.stdout + run.stderr
    checkout = root / ".guardkit" / "worktrees" / TASK_ID if worktree else root
    rev = f"autobuild/{TASK_ID}" if worktree else "main"
    shas = _turn_shas(checkout, rev)
    assert sorted(shas) == [1, 2, 3]
    for n, sha in shas.items():
        files = _files_of(checkout, sha)
        for name in TURN_FILES:
            assert f"{STORE}/{name.format(n=n)}" in files, (n, files)
        assert str(TASK_REL) in files
        # Exact paths only: the loop's scratch and other turns' files stay out of this commit.
        assert not [f for f in files if "/.work/" in f], files
        assert [f for f in files if f.startswith(STORE)] == sorted(f"{STORE}/{name.format(n=n)}"
                                                                  for name in TURN_FILES)
    notes = [line for line in run.stderr.splitlines() if "note:" in line and ".gitignore" in line]
    assert len(notes) == 1, run.stderr  # said once per task, not once per turn
    assert RULE in notes[0], notes[0]
    log = (root / ".guardkit" / "logs" / "autobuild.log").read_text(encoding="utf-8")
    assert log.count(RULE) == 1


def test_other_ignored_files_are_never_committed(tmp_path: Path) -> None:
    root = make_guardkit_repo(tmp_path / "repo")
    player = tmp_path / "player.py"
    player.write_text(
        "import os, runpy\nopen('secrets.env', 'w').write('TOKEN=x\\n')\n"
        "os.makedirs('.guardkit/autobuild/OTHER-1', exist_ok=True)\n"
        "open('.guardkit/autobuild/OTHER-1/player_turn_1.json', 'w').write('{}')\n"
        f"runpy.run_path({str(AGENTS / 'player.py')!r}, run_name='__main__')\n",
        encoding="utf-8")
    run = run_cli(root, "feature-build", TASK_ID, "--player", f"{sys.executable} -S {player}",
               "--coach", agent_command("coach.py"), RELIABILITY_APPROVE_AT="1")
    assert run.returncode == 0, run.stdout + run.stderr
    worktree = root / ".guardkit" / "worktrees" / TASK_ID
    files = _files_of(worktree, f"autobuild/{TASK_ID}")
    assert "secrets.env" not in files and not [f for f in files if "OTHER-1" in f], files
    assert f"{STORE}/player_turn_1.json" in files


def test_log_shows_criteria_deltas_from_the_commits_after_merge_and_prune(tmp_path: Path) -> None:
    root = make_guardkit_repo(tmp_path / "repo")
    assert _build(root).returncode == 0
    git(root, "merge", "-q", "--no-edit", f"autobuild/{TASK_ID}")
    prune = run_cli(root, "worktrees", "prune")
    assert prune.returncode == 0 and f"removed {TASK_ID}" in prune.stdout, prune.stdout + prune.stderr
    assert not (root / ".guardkit" / "worktrees" / TASK_ID).exists()
    log = json.loads(run_cli(root, "log", TASK_ID, "--json").stdout)
    assert [(t["turn"], t["delta"]) for t in log["turns"]] == [
        (1, ["+AC-001"]), (2, ["+AC-002"]), (3, ["+AC-003"])], log


def test_commit_turn_forces_exact_files_only(tmp_path: Path) -> None:
    root = make_guardkit_repo(tmp_path / "repo")
    store = root / STORE
    store.mkdir(parents=True)
    (store / "player_turn_1.json").write_text("{}\n", encoding="utf-8")
    (store / "notes.json").write_text("{}\n", encoding="utf-8")
    repo = GitRepo.discover(root)
    assert repo is not None
    assert repo.ignore_rules([store / "player_turn_1.json", root / "src" / "work.txt"]) == {
        f"{STORE}/player_turn_1.json": RULE}
    # A directory among the forced paths is never added as a whole.
    result = commit_turn(repo, task_id=TASK_ID, turn=1, decision="feedback", mode="fresh_start",
                         paths=[store / "player_turn_1.json", store], managed_worktree=False,
                         force_paths=[store / "player_turn_1.json", store])
    assert result.committed, result
    assert _files_of(root, "HEAD") == [f"{STORE}/player_turn_1.json"]
