"""Faults: disk full, read-only files, a task file deleted or moved mid-loop, a worktree removed by
hand, a dead Graphiti backend. Each gives a clear error or a recovery — never a corrupt or
half-written file.
"""

from __future__ import annotations

import contextlib
import json
import resource
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from guardkit_state.inspect.validation import validate_paths
from guardkit_state.taskfile.document import TaskFile

from .harness import (
    TASK_ID,
    TASK_REL,
    TASK_TEXT,
    Setup,
    check_on_disk,
    finish,
    make_project,
    reference_history,
    start_loop,
)

PLAYER = json.dumps({"files_modified": [], "implementation_notes": "work"})
COACH = json.dumps({"decision": "feedback", "rationale": "more work"})
BIG_TASK = TASK_TEXT + "\n" + "padding line to make the task file big\n" * 500


def _record(root: Path, *, preexec: Callable[[], None] | None = None,
            reports: Path | None = None) -> subprocess.CompletedProcess[str]:
    reports = reports or root.parent
    (reports / "p.json").write_text(PLAYER)
    (reports / "c.json").write_text(COACH)
    return subprocess.run([sys.executable, "-m", "guardkit_state", "record", TASK_ID, "--repo", str(root),
                           "--player", str(reports / "p.json"), "--coach", str(reports / "c.json")],
                          capture_output=True, text=True, preexec_fn=preexec, check=False)


def _all_valid(root: Path) -> None:
    targets = [p for p in root.rglob("*") if p.is_file() and ((p.suffix == ".md" and "tasks" in p.parts)
                                                             or (p.name.endswith(".json") and "_turn_" in p.name
                                                                 and ".work" not in p.parts))]  # agents' scratch
    report = validate_paths(targets)
    assert report.ok, [(r.path, r.problems) for r in report.results if r.problems]
    assert not list(root.rglob(".gks-tmp-*")), "temp file left behind"


def _one_error(stderr: str, *fragments: str) -> None:
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr
    for fragment in fragments:
        assert fragment in errors[0], (fragment, stderr)


def _file_size_limit(limit: int) -> Callable[[], None]:
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of being killed
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


@contextlib.contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                      capture_output=True, check=False).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root); RLIMIT_FSIZE covers the full-disk path")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def test_file_size_limit_during_write_leaves_the_task_intact(tmp_path: Path,
                                                            record_figures: Callable[[dict[str, Any]], None]) -> None:
    root = make_project(tmp_path / "repo", Setup(git=False), BIG_TASK)
    task = root / TASK_REL
    result = _record(root, preexec=_file_size_limit(len(BIG_TASK.encode()) + 10))
    assert result.returncode == 1, result.stderr
    _one_error(result.stderr, TASK_REL.name, "cannot write file")
    assert task.read_text() == BIG_TASK  # untouched: the turn was not recorded
    _all_valid(root)
    again = _record(root)  # with space again, the same turn is recorded normally
    assert again.returncode == 0, again.stderr
    assert [t.turn for t in TaskFile.load(task).state.turns] == [1]  # type: ignore[union-attr]
    _all_valid(root)
    record_figures({"faults": 1, "fault": "RLIMIT_FSIZE"})


def test_disk_full_on_tmpfs(tmp_path: Path, record_figures: Callable[[dict[str, Any]], None]) -> None:
    with _tmpfs(tmp_path / "disk", "256k") as disk:
        root = make_project(disk / "repo", Setup(git=False), BIG_TASK)
        task = root / TASK_REL
        assert _record(root, reports=tmp_path).returncode == 0
        before = task.read_bytes()
        filler = disk / "filler"
        with contextlib.suppress(OSError), open(filler, "wb") as handle:
            while True:
                handle.write(b"\0" * 4096)
                handle.flush()
        result = _record(root, reports=tmp_path)  # the report files live outside the full disk
        assert result.returncode == 1, result.stderr
        _one_error(result.stderr, "no space left on device")
        assert task.read_bytes() == before
        filler.unlink()
        _all_valid(root)
    record_figures({"faults": 1, "fault": "ENOSPC"})


def test_read_only_file_system(tmp_path: Path, record_figures: Callable[[dict[str, Any]], None]) -> None:
    with _tmpfs(tmp_path / "disk", "1m") as disk:
        root = make_project(disk / "repo", Setup(git=False))
        (tmp_path / "p.json").write_text(PLAYER)
        (tmp_path / "c.json").write_text(COACH)
        assert subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=False).returncode == 0
        result = subprocess.run([sys.executable, "-m", "guardkit_state", "record", TASK_ID, "--repo", str(root),
                                 "--player", str(tmp_path / "p.json"), "--coach", str(tmp_path / "c.json")],
                                capture_output=True, text=True, check=False)
        assert result.returncode in (1, 2), result.stderr
        _one_error(result.stderr, "read-only file system")
        assert (root / TASK_REL).read_text() == TASK_TEXT
    record_figures({"faults": 1, "fault": "EROFS"})


def test_a_write_on_a_read_only_file_system_is_refused_by_name(tmp_path: Path) -> None:
    from guardkit_state.errors import UnwritableFileError
    from guardkit_state.store.fsio import atomic_write_bytes

    with _tmpfs(tmp_path / "disk", "1m") as disk:
        (disk / "kept.json").write_bytes(b"{}\n")
        assert subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=False).returncode == 0
        for name in ("kept.json", "new.json"):
            with pytest.raises(UnwritableFileError, match="read-only file system"):
                atomic_write_bytes(disk / name, b"[]\n")
        assert sorted(p.name for p in disk.iterdir()) == ["kept.json"]
        assert (disk / "kept.json").read_bytes() == b"{}\n"


@pytest.mark.parametrize("how", ["DELETE", "MOVE"])
def test_task_file_deleted_or_moved_mid_loop(tmp_path: Path, how: str,
                                             record_figures: Callable[[dict[str, Any]], None]) -> None:
    setup = Setup(git=False)
    root = make_project(tmp_path / "repo", setup)
    code, err = finish(start_loop(root, setup, resume=False, env={f"RELIABILITY_PLAYER_{how}_TASK": "2"}))
    assert code == 1, err
    _one_error(err, TASK_REL.name)
    assert not (root / TASK_REL).exists()  # never re-created behind the user's back
    if how == "MOVE":
        moved = root / "tasks" / "in_progress" / TASK_REL.name
        assert [t.turn for t in TaskFile.load(moved).state.turns] == [1]  # type: ignore[union-attr]
    _all_valid(root)
    record_figures({"faults": 1, "fault": f"task file {how.lower()}d mid-loop"})


@pytest.mark.slow
def test_worktree_removed_by_hand_is_recreated_on_resume(tmp_path: Path,
                                                        record_figures: Callable[[dict[str, Any]], None]) -> None:
    setup = Setup()
    reference = reference_history(tmp_path, setup)
    root = make_project(tmp_path / "repo", setup)
    code, _ = finish(start_loop(root, setup, resume=False, crash_at="turn.before_frontmatter:3"))
    assert code == -signal.SIGKILL
    shutil.rmtree(root / ".guardkit" / "worktrees" / TASK_ID)
    code, err = finish(start_loop(root, setup, resume=True))
    assert code == 0, err
    assert "deleted by hand" in err or "re-created worktree" in err or "reusing it" in err, err
    assert check_on_disk(root, setup, final=True).comparable() == reference.comparable()
    record_figures({"faults": 1, "fault": "worktree removed by hand"})


@pytest.mark.slow
def test_dead_graphiti_backend_never_blocks_the_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     record_figures: Callable[[dict[str, Any]], None]) -> None:
    setup = Setup(worktree=False)
    reference = reference_history(tmp_path, setup)
    monkeypatch.setenv("GUARDKIT_GRAPHITI_URI", "falkor://127.0.0.1:9")  # nothing listens there
    root = make_project(tmp_path / "repo", setup)
    code, err = finish(start_loop(root, setup, resume=False))
    assert code == 0, err
    assert check_on_disk(root, setup, final=True).comparable() == reference.comparable()
    record_figures({"faults": 1, "fault": "dead graphiti backend"})
