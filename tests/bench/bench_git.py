"""Benchmark: the cost of one turn commit, next to a bare git commit of the same paths.

``run(repeat)`` builds a repository of 1,000 files and, ``repeat`` times each (interleaved so
drift hits every variant alike), commits one turn's worth of files (a code change, the three JSON
files of the turn, the task file):

* ``commit_turn_paths``: :func:`commit_turn` outside a worktree (dedupe check, add, commit, sha)
* ``commit_turn_managed``: :func:`commit_turn` in managed-worktree mode (``add -A`` + commit)
* ``floor_add_commit``: ``git add -- <paths>`` + ``git commit -q -m ... -- <paths>`` (subprocess)
* ``floor_commit``: bare ``git commit -q -m ... -- <paths>`` of tracked, modified paths only

and, on the same repository with a Player's work in it (a changed file, a new one, an ignored build
output), the worktree snapshot the loop holds while the Coach runs:

* ``coach_snapshot``: :class:`WorktreeSnapshots` ``take`` + ``restore`` + ``drop``, nothing changed
* ``floor_snapshot``: the same plumbing bare, by subprocess: ``git add -A`` + ``git write-tree`` into
  a temporary index, then one ``git status`` against it

Medians in milliseconds, and ratios against the floors.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from guardkit_state.git.commits import commit_turn
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.snapshot import WorktreeSnapshots

FILES = 1000
TASK_ID = "TASK-BENCH-001"


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def _make_repo(root: Path) -> None:
    _git(root, "init", "-q", "-b", "main")
    for key, value in (("user.name", "Bench"), ("user.email", "bench@example.com"), ("gc.auto", "0"),
                       ("commit.gpgsign", "false")):
        _git(root, "config", key, value)
    for i in range(FILES):
        path = root / "src" / f"pkg{i % 20:02d}" / f"module_{i:04d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'"""Module {i}."""\n\nVALUE = {i}\n')
    task = root / "tasks" / "in_progress" / f"{TASK_ID}-bench.md"
    task.parent.mkdir(parents=True)
    task.write_text(f"---\nid: {TASK_ID}\nautobuild_state:\n  turns:\n---\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "initial")


def _write_turn(root: Path, n: int, *, new_files: bool = True) -> list[str]:
    """One turn's files; returns their repo-relative paths."""
    code = f"src/pkg{n % 20:02d}/module_{n % FILES:04d}.py"
    with (root / code).open("a") as handle:
        handle.write(f"TURN_{n} = {n}\n")
    task = f"tasks/in_progress/{TASK_ID}-bench.md"
    text = (root / task).read_text()
    (root / task).write_text(text.replace("\n---\n", f"\n  - turn: {n}\n---\n", 1))
    paths = [code, task]
    if new_files:
        state = root / ".guardkit" / "autobuild" / TASK_ID
        state.mkdir(parents=True, exist_ok=True)
        for name in ("player_turn", "coach_turn", "turn_state_turn"):
            (state / f"{name}_{n}.json").write_text(json.dumps({"turn": n, "task_id": TASK_ID}) + "\n")
            paths.append(f".guardkit/autobuild/{TASK_ID}/{name}_{n}.json")
    return paths


def _snapshot_samples(root: Path, repo: GitRepo, repeat: int) -> dict[str, list[float]]:
    """Take and put back the worktree with the Player's work in it, beside the bare plumbing."""
    (root / "src" / "pkg00" / "module_0000.py").write_text("CHANGED = True\n")
    (root / "player_new.py").write_text("NEW = 1\n")
    (root / ".gitignore").write_text("build/\n")
    (root / "build").mkdir(exist_ok=True)
    (root / "build" / "out.bin").write_bytes(b"x" * 4096)
    snapshots = WorktreeSnapshots(repo, TASK_ID)
    scratch = root / ".git" / "bench-floor-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(scratch)}
    samples: dict[str, list[float]] = {"coach_snapshot": [], "floor_snapshot": []}

    def ours() -> None:
        restored = snapshots.restore(snapshots.take())
        snapshots.drop()
        assert not restored.changed, restored

    def floor() -> None:
        for args in (["add", "-A"], ["write-tree"], ["status", "--porcelain", "-z", "--untracked-files=all"]):
            subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)

    ours()
    floor()  # warm-up: the loop's index and the floor's both hold stat data from here on
    for _ in range(repeat):
        samples["coach_snapshot"].append(_timed(ours))
        samples["floor_snapshot"].append(_timed(floor))
    return samples


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000.0


def run(repeat: int = 20) -> dict[str, Any]:
    """Measure the per-turn commit cost; returns medians (ms) and ratios to the floors."""
    samples: dict[str, list[float]] = {k: [] for k in
                                       ("commit_turn_paths", "commit_turn_managed", "floor_add_commit", "floor_commit")}
    with tempfile.TemporaryDirectory(prefix="gks-bench-git-") as tmp:
        root = Path(tmp)
        _make_repo(root)
        repo = GitRepo.discover(root)
        assert repo is not None
        turn = 0
        for _ in range(repeat):
            turn += 1
            paths = _write_turn(root, turn)
            result: list[Any] = []
            samples["commit_turn_paths"].append(_timed(lambda: result.append(commit_turn(
                repo, task_id=TASK_ID, turn=turn, decision="feedback", mode="continuing_work",
                paths=paths, managed_worktree=False))))
            assert result[0].committed, result[0]

            turn += 1
            _write_turn(root, turn)
            result.clear()
            samples["commit_turn_managed"].append(_timed(lambda: result.append(commit_turn(
                repo, task_id=TASK_ID, turn=turn, decision="feedback", mode="continuing_work",
                managed_worktree=True))))
            assert result[0].committed, result[0]

            turn += 1
            paths = _write_turn(root, turn)
            samples["floor_add_commit"].append(_timed(lambda: (
                _git(root, "add", "--", *paths),
                _git(root, "commit", "-q", "-m", f"turn {turn}", "--", *paths))))

            turn += 1
            paths = _write_turn(root, turn, new_files=False)
            samples["floor_commit"].append(_timed(lambda: _git(root, "commit", "-q", "-m", f"turn {turn}",
                                                               "--", *paths)))
        samples.update(_snapshot_samples(root, repo, repeat))
    medians = {k: round(statistics.median(v), 3) for k, v in samples.items()}
    return {
        "benchmark": "git_turn_commit",
        "repeat": repeat,
        "repo_files": FILES,
        "median_ms": medians,
        "ratio": {
            "commit_turn_paths/floor_add_commit": round(medians["commit_turn_paths"] / medians["floor_add_commit"], 2),
            "commit_turn_paths/floor_commit": round(medians["commit_turn_paths"] / medians["floor_commit"], 2),
            "commit_turn_managed/floor_add_commit": round(
                medians["commit_turn_managed"] / medians["floor_add_commit"], 2),
            "coach_snapshot/floor_snapshot": round(medians["coach_snapshot"] / medians["floor_snapshot"], 2),
        },
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
