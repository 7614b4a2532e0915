"""The watch a long-running reader keeps (``store/tree_watch.py``): its generation moves with every
change to what it watches — on real files and folders, made the ways editors, git and the loop make
them — stays put while nothing changed, and is None wherever the kernel's word could miss a change."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from guardkit_state.store import tree_watch
from guardkit_state.taskfile.read_scope import generation, watch_reads


@pytest.fixture
def checkout(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "repo"
    (root / "tasks" / "backlog").mkdir(parents=True)
    (root / ".guardkit" / "features").mkdir(parents=True)
    (root / "tasks" / "backlog" / "TASK-A-1.md").write_text("---\nid: TASK-A-1\nstatus: backlog\n---\n")
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    watch_reads(root)
    yield root.resolve()
    tree_watch.stop(os.fspath(root.resolve()))


def _moves(root: Path, change: Callable[[], object]) -> bool:
    before = generation(root)
    assert before is not None and generation(root) == before  # nothing changed: it stays
    change()
    return generation(root) != before


def _same_size_same_mtime(path: Path) -> None:
    info = path.stat()
    path.write_text(path.read_text().replace("backlog", "blocked"))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


def test_every_kind_of_change_moves_the_generation(checkout: Path) -> None:
    task = checkout / "tasks" / "backlog" / "TASK-A-1.md"
    new_folder = checkout / "tasks" / "in_review" / "feature-x"
    changes: list[Callable[[], object]] = [
        lambda: _same_size_same_mtime(task),  # an in-place edit a stat could miss within one tick
        lambda: task.chmod(0o600),
        lambda: (checkout / "tasks" / "backlog" / "TASK-B-1.md").write_text("new"),
        lambda: new_folder.mkdir(parents=True),
        lambda: os.rename(task, new_folder / task.name),  # into a folder created after the watch began
        lambda: (new_folder / task.name).write_text("edited where it moved to"),
        lambda: (new_folder / "deeper").mkdir(),
        lambda: (new_folder / "deeper" / "TASK-C-1.md").write_text("in a folder made just now"),
        lambda: (new_folder / "deeper" / "TASK-C-1.md").unlink(),
        lambda: (checkout / ".guardkit" / "features" / "FEAT-X.yaml").write_text("id: FEAT-X\n"),
        lambda: (checkout / ".guardkit" / "autobuild" / "TASK-A-1").mkdir(parents=True),
        lambda: (checkout / ".guardkit" / "autobuild" / "TASK-A-1" / "turn_state_turn_1.json").write_text("{}"),
        lambda: subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty",
                                "-m", "x"], cwd=checkout, check=True),
        lambda: subprocess.run(["git", "branch", "autobuild/TASK-A-1"], cwd=checkout, check=True),
        lambda: (checkout / ".git" / "guardkit-state" / "turn-commits").mkdir(parents=True),
        lambda: (checkout / ".git" / "guardkit-state" / "turn-commits" / "TASK-A-1").write_text("sha 1\n"),  # a ledger
    ]
    for number, change in enumerate(changes):
        assert _moves(checkout, change), f"change {number} was not seen"


def test_a_loop_worktree_made_later_is_watched_as_a_checkout(checkout: Path) -> None:
    tree = checkout / ".guardkit" / "worktrees" / "TASK-A-1"
    assert _moves(checkout, lambda: (tree / "tasks" / "backlog").mkdir(parents=True))
    assert _moves(checkout, lambda: (tree / "tasks" / "backlog" / "TASK-A-1.md").write_text("the loop's copy"))
    assert _moves(checkout, lambda: (tree / ".guardkit" / "autobuild" / "TASK-A-1").mkdir(parents=True))
    assert _moves(checkout, lambda: (tree / ".guardkit" / "autobuild" / "TASK-A-1" / "t.json").write_text("{}"))


def test_the_caches_written_at_the_end_of_a_read_move_nothing(checkout: Path) -> None:
    cache = checkout / ".guardkit" / "cache"
    cache.mkdir()
    assert not _moves(checkout, lambda: (cache / "status.json").write_text("{}"))
    assert not _moves(checkout, lambda: (cache / "status.json").write_text('{"files": {}}'))


def test_a_symlink_below_a_watched_folder_means_reading_the_files(checkout: Path) -> None:
    # A link's target can change with no event in the folder holding the link.
    target = checkout / "elsewhere.md"
    target.write_text("---\nid: TASK-L-1\n---\n")
    (checkout / "tasks" / "backlog" / "TASK-L-1.md").symlink_to(target)
    assert generation(checkout) is None
    watch_reads(checkout)  # watched again: the link is there from the start
    assert generation(checkout) is None


def test_a_file_system_another_machine_may_write_is_never_trusted(checkout: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    kind = tree_watch.file_system_of(os.fspath(checkout))
    assert kind in tree_watch.LOCAL_FILE_SYSTEMS
    monkeypatch.setattr(tree_watch, "LOCAL_FILE_SYSTEMS", frozenset())  # as if it were NFS
    watch_reads(checkout)
    assert generation(checkout) is None


def test_lost_events_lose_no_change(checkout: Path) -> None:
    # More events than the kernel queues (16,384 by default): it says they were lost; the
    # generation moves and every folder is watched again, the one created in the flood too.
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    flood = checkout / "tasks" / "flood"
    flood.mkdir()
    before = generation(checkout)  # the new folder watched
    for number in range(limit // 2 + 10):
        path = flood / f"f{number}"
        path.write_bytes(b"")
        path.unlink()
    late = checkout / "tasks" / "late"
    late.mkdir()  # its event is among the lost ones: only watching every folder again finds it
    assert generation(checkout) != before
    assert _moves(checkout, lambda: (late / "TASK-Z-1.md").write_text("after the flood"))


def test_a_process_that_does_not_watch_reads_the_files(tmp_path: Path) -> None:
    assert generation(tmp_path) is None
