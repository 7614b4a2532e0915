"""Task files that are not plain files: oversized writes, symlinks, hard links, read-only files,
other owners, FIFOs, and the temp files a killed writer leaves behind.

Each case goes through the real CLI (``guardkit-state`` in a subprocess, so a blocking open would
hang the child, not the test run) or the library write path, and checks the bytes on disk.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from guardkit_state.errors import FileTooLargeError, InputError, UnsafePathError, UnwritableFileError
from guardkit_state.store import fsio, reads
from guardkit_state.taskfile.discovery import iter_task_files
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.turns.lifecycle import record_turn

from ..helpers import dead_pid

TASK_ID = "TASK-EDGE-001"
TASK_REL = Path("tasks/backlog/TASK-EDGE-001-edges.md")
GOOD = f"---\nid: {TASK_ID}\ntitle: Edges\nstatus: backlog\n---\n\n## Acceptance Criteria\n\n- [ ] One\n"
CLI = Path(sys.executable).with_name("guardkit-state")
#: A child that blocks on a FIFO must not hang the test run.
CLI_TIMEOUT = 60.0


def _project(tmp_path: Path, *, git: bool = False) -> Path:
    root = tmp_path / "repo"
    (root / TASK_REL).parent.mkdir(parents=True)
    (root / TASK_REL).write_text(GOOD)
    if git:
        subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def _cli(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([str(CLI), *argv, "--repo", str(root)], capture_output=True, text=True, env=env,
                          timeout=CLI_TIMEOUT, check=False)


def _reports(tmp_path: Path, turn: int, feedback: str = "more") -> tuple[Path, Path]:
    player, coach = tmp_path / f"player{turn}.json", tmp_path / f"coach{turn}.json"
    player.write_text(json.dumps({"task_id": TASK_ID, "turn": turn, "files_modified": []}))
    coach.write_text(json.dumps({"task_id": TASK_ID, "turn": turn, "decision": "feedback",
                                 "rationale": "r", "feedback": feedback}))
    return player, coach


def _record(root: Path, tmp_path: Path, turn: int = 1) -> subprocess.CompletedProcess[str]:
    player, coach = _reports(tmp_path, turn)
    return _cli(root, "record", TASK_ID, "--player", str(player), "--coach", str(coach))


def _one_error_line(err: str, *fragments: str) -> str:
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in errors[0], (fragment, err)
    return errors[0]


def _temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob(f"{fsio.TEMP_PREFIX}*") if ".git" not in p.parts]


# --------------------------------------------------------------------------- the size cap on write


def test_write_over_the_read_cap_is_refused_before_a_temp_file_exists(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("{}")
    with pytest.raises(FileTooLargeError) as info:
        fsio.atomic_write_bytes(target, b"x" * (reads.MAX_FILE_BYTES + 1))
    message = str(info.value)
    assert str(target) in message and str(reads.MAX_FILE_BYTES + 1) in message and str(reads.MAX_FILE_BYTES) in message
    assert target.read_text() == "{}"
    assert not _temp_files(tmp_path)


def test_record_never_writes_a_task_file_it_could_not_read_back(tmp_path: Path) -> None:
    root = _project(tmp_path)
    task = root / TASK_REL
    feedback = "needs work " * 480_000  # ~5 MB of Coach feedback per turn
    for turn in (1, 2):
        player: dict[str, Any] = {"task_id": TASK_ID, "turn": turn, "files_modified": []}
        coach: dict[str, Any] = {"task_id": TASK_ID, "turn": turn, "decision": "feedback", "rationale": "r",
                                 "feedback": feedback}
        if turn == 1:
            record_turn(root, TASK_ID, player, coach)
            after_one = task.read_bytes()
            continue
        with pytest.raises(FileTooLargeError) as info:
            record_turn(root, TASK_ID, player, coach)
        assert info.value.path is not None and info.value.path.name == TASK_REL.name
        assert "limit" in str(info.value)
    assert task.read_bytes() == after_one
    loaded = TaskFile.load(task)  # still readable: the store never wrote past its own read cap
    assert loaded.state is not None and len(loaded.state.turns) == 1
    assert not [p for p in task.parent.iterdir() if p.name.startswith(fsio.TEMP_PREFIX)]


# --------------------------------------------------------------------------- symlinks, hard links, modes


def test_symlinked_task_file_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    root = _project(tmp_path, git=True)
    real = root / "docs" / "tasks" / TASK_REL.name
    real.parent.mkdir(parents=True)
    (root / TASK_REL).rename(real)
    (root / TASK_REL).symlink_to(os.path.relpath(real, (root / TASK_REL).parent))
    result = _record(root, tmp_path)
    assert result.returncode == 0, result.stderr
    assert (root / TASK_REL).is_symlink()
    assert TaskFile.load(real).state is not None and len(TaskFile.load(real).state.turns) == 1  # type: ignore[union-attr]
    assert not _temp_files(root)


def test_symlink_leaving_the_repository_is_never_written_through(tmp_path: Path) -> None:
    root = _project(tmp_path, git=True)
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    link = root / ".guardkit" / "autobuild" / TASK_ID / "player_turn_1.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(outside)
    with pytest.raises(UnsafePathError):
        fsio.atomic_write_text(link, '{"planted": false}')
    assert outside.read_text() == "{}" and link.is_symlink()
    assert not _temp_files(tmp_path)


def test_hard_linked_task_file_is_refused_and_the_link_kept(tmp_path: Path) -> None:
    root = _project(tmp_path)
    other = root / "TASK-EDGE-001.copy"
    os.link(root / TASK_REL, other)
    result = _record(root, tmp_path)
    assert result.returncode == 2, result.stderr
    _one_error_line(result.stderr, TASK_REL.name, "hard link")
    assert (root / TASK_REL).read_text() == GOOD and os.stat(other).st_nlink == 2
    assert os.path.samefile(root / TASK_REL, other)
    assert not _temp_files(root)


def test_read_only_task_file_is_refused_untouched(tmp_path: Path) -> None:
    root = _project(tmp_path)
    task = root / TASK_REL
    os.chmod(task, 0o444)
    before = os.stat(task)
    result = _record(root, tmp_path)
    assert result.returncode == 2, result.stderr
    _one_error_line(result.stderr, TASK_REL.name, "read-only", "chmod u+w")
    after = os.stat(task)
    assert task.read_text() == GOOD and (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert not _temp_files(root)


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner and group needs root")
def test_replace_keeps_the_files_owner_and_group(tmp_path: Path) -> None:
    root = _project(tmp_path)
    task = root / TASK_REL
    os.chown(task, 4242, 4343)
    os.chmod(task, 0o664)
    result = _record(root, tmp_path)
    assert result.returncode == 0, result.stderr
    after = os.stat(task)
    assert (after.st_uid, after.st_gid, stat.S_IMODE(after.st_mode)) == (4242, 4343, 0o664)
    assert "turns:" in task.read_text()


def test_file_of_another_owner_is_refused_when_its_owner_cannot_be_kept(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "task.md"
    target.write_text(GOOD)
    owner = os.stat(target).st_uid
    monkeypatch.setattr(os, "geteuid", lambda: owner + 1)  # we are someone else, and not root
    with pytest.raises(UnwritableFileError) as info:
        fsio.atomic_write_text(target, "new")
    assert "owner" in str(info.value) and str(target) in str(info.value)
    assert target.read_text() == GOOD and not _temp_files(tmp_path)


# --------------------------------------------------------------------------- FIFOs and other special files


def test_fifo_named_like_a_task_file_never_blocks(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / TASK_REL).unlink()
    fifo = root / "tasks" / "backlog" / "TASK-X-1.md"
    os.mkfifo(fifo)
    slug_fifo = root / "tasks" / "backlog" / "TASK-X-2-slug.md"
    os.mkfifo(slug_fifo)
    for argv, name in ((["show", "TASK-X-1"], fifo.name), (["context", "TASK-X-1"], fifo.name),
                       (["show", "TASK-X-2"], slug_fifo.name)):
        result = _cli(root, *argv)  # times out (fails) if an open blocks
        assert result.returncode == 2, (argv, result.stderr)
        _one_error_line(result.stderr, name, "not a regular file")
    result = _cli(root, "status")
    assert result.returncode == 0, result.stderr
    result = subprocess.run([sys.executable, "-c", "from guardkit_state.store.reads import read_bytes_capped as r; "
                             f"r({str(fifo)!r})"], capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False)
    assert result.returncode == 1 and "NotRegularFileError" in result.stderr and "not a regular file" in result.stderr


def test_task_walkers_skip_special_files(tmp_path: Path) -> None:
    root = _project(tmp_path)
    os.mkfifo(root / "tasks" / "backlog" / "TASK-X-1.md")
    assert [p.name for p in iter_task_files(root)] == [TASK_REL.name]


def test_write_onto_a_fifo_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "TASK-X-1.md"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        fsio.atomic_write_text(fifo, GOOD)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and not _temp_files(tmp_path)


# --------------------------------------------------------------------------- stale temp files


def test_stale_temp_cleaning_never_removes_a_live_writers_file(tmp_path: Path) -> None:
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        names = {
            "own": f"{fsio.TEMP_PREFIX}task.md.{os.getpid()}.1000001",
            "live": f"{fsio.TEMP_PREFIX}task.md.{live.pid}.1000002",
            "dead": f"{fsio.TEMP_PREFIX}coach_turn_1.json.{dead_pid()}.1000003",
            "old-live": f"{fsio.TEMP_PREFIX}task.md.{live.pid}.1000004",
            "unparsed-new": f"{fsio.TEMP_PREFIX}weird",
        }
        for name in names.values():
            (tmp_path / name).write_text("partial")
        hour_ago = time.time() - 3600
        os.utime(tmp_path / names["old-live"], (hour_ago, hour_ago))
        removed = {p.name for p in fsio.remove_stale_temp_files(tmp_path)}
    finally:
        live.kill()
        live.wait()
    assert removed == {names["dead"], names["old-live"]}
    assert {p.name for p in tmp_path.iterdir()} == {names["own"], names["live"], names["unparsed-new"]}


def test_a_private_folder_made_sure_of_loses_the_temp_files_killed_writers_left(tmp_path: Path) -> None:
    # A kill inside the write of a private folder's ``.gitignore`` (a feature run's first plan write makes
    # ``.guardkit/features/.locks/``) leaves its temp file where no run's tidy-up looks, for good: making
    # sure of the folder removes what a dead writer left there, never a live writer's.
    folder = tmp_path / ".guardkit" / "features" / ".locks"
    folder.mkdir(parents=True)
    dead = folder / f"{fsio.TEMP_PREFIX}.gitignore.{dead_pid()}.1000001"
    own = folder / f"{fsio.TEMP_PREFIX}.gitignore.{os.getpid()}.1000002"
    for leftover in (dead, own):
        leftover.write_text("")
    fsio.ensure_private_dir(folder)
    assert sorted(p.name for p in folder.iterdir()) == sorted([".gitignore", own.name])
    dead.write_text("")  # also when the marker is there already (another process wrote it meanwhile)
    fsio.ensure_private_dir(folder)
    assert sorted(p.name for p in folder.iterdir()) == sorted([".gitignore", own.name])


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="a zombie is told by /proc (Linux)")
def test_stale_temp_cleaning_removes_the_file_of_a_writer_killed_but_not_yet_reaped(tmp_path: Path) -> None:
    # A killed writer is a zombie until its parent reaps it: a feature run's task loop, orphaned by the
    # run's kill, waits for init (~2 s on some hosts, for ever under a PID 1 that never reaps). It will
    # never write again; its temp file is debris (the feature campaign found one after a resumed run).
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        while _state(zombie.pid) != "Z":  # exited, not waited for
            time.sleep(0.01)
        left = tmp_path / f"{fsio.TEMP_PREFIX}player_schema_turn_1.json.{zombie.pid}.1000001"
        left.write_text("partial")
        assert fsio.remove_stale_temp_files(tmp_path) == [left]
    finally:
        zombie.wait()


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
