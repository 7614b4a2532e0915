"""The one walker over tasks/ and the one owner of the .guardkit layout: every reader sees the same files."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from guardkit_state.errors import NotRegularFileError, TaskNotFoundError
from guardkit_state.git.checkouts import common_git_dir, shared_lock_path
from guardkit_state.index.records import TURN_STATES
from guardkit_state.index.sources import load_project_records
from guardkit_state.inspect.status import repo_status
from guardkit_state.store import layout
from guardkit_state.store.turn_files import artifacts_dir
from guardkit_state.taskfile.discovery import (
    STATE_MARKERS,
    iter_task_files,
    listing_scope,
    loop_worktrees,
    own_task_files,
    task_copies,
    task_entries,
    walk_markdown,
)
from guardkit_state.taskfile.frontmatter import STATE_KEYS
from guardkit_state.taskfile.resolve import find_task

from .test_resolve import task_text, write


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write(root / "tasks/backlog/TASK-A-1-real.md", task_text("TASK-A-1", "backlog", turns=1))
    write(root / "tasks/backlog/sub/TASK-A-2.md", task_text("TASK-A-2", "backlog", turns=1))
    write(root / "tasks/backlog/README.md", "# not a task\n")
    return root


def _names(root: Path) -> list[str]:
    return [Path(e.path).relative_to(root).as_posix() for e in walk_markdown(root, root / "tasks")]


def test_a_folders_files_come_before_its_subfolders_each_by_name(repo: Path) -> None:
    write(repo / "tasks/backlog/TASK-A-0.md", task_text("TASK-A-0", "backlog"))
    write(repo / "tasks/completed/TASK-B-1.md", task_text("TASK-B-1", "completed"))
    assert _names(repo) == ["tasks/backlog/README.md", "tasks/backlog/TASK-A-0.md", "tasks/backlog/TASK-A-1-real.md",
                            "tasks/backlog/sub/TASK-A-2.md", "tasks/completed/TASK-B-1.md"]
    assert [p.name for p in iter_task_files(repo)] == ["TASK-A-0.md", "TASK-A-1-real.md", "TASK-A-2.md",
                                                        "TASK-B-1.md"]


def test_a_symlinked_task_file_inside_the_repository_is_seen_by_show_and_status_alike(repo: Path) -> None:
    real = write(repo / "docs/TASK-L-1-linked.md", task_text("TASK-L-1", "in_progress", turns=2))
    link = repo / "tasks/in_progress/TASK-L-1-linked.md"
    link.parent.mkdir(parents=True)
    link.symlink_to(os.path.relpath(real, link.parent))
    assert find_task(repo, "TASK-L-1") == link
    [row] = [s for s in repo_status(repo) if s.task_id == "TASK-L-1"]
    assert (row.path, row.turns) == ("tasks/in_progress/TASK-L-1-linked.md", 2)
    # The cache is keyed by the target: a change to it is seen through the link.
    real.write_text(task_text("TASK-L-1", "in_progress", turns=3), encoding="utf-8")
    assert [s.turns for s in repo_status(repo) if s.task_id == "TASK-L-1"] == [3]


def test_a_symlink_leaving_the_repository_is_seen_by_no_reader(repo: Path, tmp_path: Path) -> None:
    outside = write(tmp_path / "elsewhere/TASK-OUT-1.md", task_text("TASK-OUT-1", "backlog", turns=1))
    (repo / "tasks/backlog/TASK-OUT-1.md").symlink_to(outside)
    with pytest.raises(TaskNotFoundError):
        find_task(repo, "TASK-OUT-1")
    assert "TASK-OUT-1" not in {s.task_id for s in repo_status(repo)}
    assert "TASK-OUT-1.md" not in [p.name for p in iter_task_files(repo)]


def test_a_symlinked_folder_is_never_followed(repo: Path, tmp_path: Path) -> None:
    elsewhere = write(tmp_path / "elsewhere/TASK-D-1.md", task_text("TASK-D-1", "backlog", turns=1)).parent
    (repo / "tasks/linked").symlink_to(elsewhere, target_is_directory=True)
    (repo / "tasks/loop").symlink_to(repo / "tasks", target_is_directory=True)  # a cycle: walked once
    assert _names(repo) == ["tasks/backlog/README.md", "tasks/backlog/TASK-A-1-real.md",
                            "tasks/backlog/sub/TASK-A-2.md"]
    assert "TASK-D-1" not in {s.task_id for s in repo_status(repo)}


def test_a_fifo_named_like_a_task_is_never_opened_and_is_named(repo: Path) -> None:
    fifo = repo / "tasks/backlog/TASK-F-1.md"
    os.mkfifo(fifo)
    special: list[Path] = []
    assert "tasks/backlog/TASK-F-1.md" not in [Path(e.path).relative_to(repo).as_posix()
                                               for e in walk_markdown(repo, repo / "tasks", special)]
    assert special == [fifo]
    with pytest.raises(NotRegularFileError):
        find_task(repo, "TASK-F-1")
    assert "TASK-F-1" not in {s.task_id for s in repo_status(repo)}


def test_only_a_loops_own_task_is_read_in_its_worktree(repo: Path) -> None:
    tree = layout.worktree_path(repo, "TASK-A-1")
    write(tree / "tasks/in_progress/TASK-A-1-real.md", task_text("TASK-A-1", "in_progress", turns=2))
    write(tree / "tasks/backlog/TASK-A-2.md", task_text("TASK-A-2", "backlog", turns=5))  # not this loop's task
    (layout.worktrees_dir(repo) / "not a task id!").mkdir()
    assert [t.name for t in loop_worktrees(repo)] == ["TASK-A-1"]
    assert [e.name for e in own_task_files(tree, "TASK-A-1")] == ["TASK-A-1-real.md"]
    rows = {s.task_id: s for s in repo_status(repo)}
    assert (rows["TASK-A-1"].turns, rows["TASK-A-1"].in_worktree) == (2, True)
    assert (rows["TASK-A-2"].turns, rows["TASK-A-2"].in_worktree) == (1, False)
    shown = {r.source_path for r in load_project_records(repo).records if r.kind == TURN_STATES}
    assert shown == {".guardkit/worktrees/TASK-A-1/tasks/in_progress/TASK-A-1-real.md",
                     "tasks/backlog/sub/TASK-A-2.md"}


def test_task_copies_lists_every_file_of_an_id_and_only_its_own(repo: Path) -> None:
    write(repo / "tasks/completed/TASK-A-1.md", task_text("TASK-A-1", "completed"))
    write(repo / "tasks/backlog/TASK-A-1-2-other.md", task_text("TASK-A-1-2", "backlog"))
    assert [p.relative_to(repo).as_posix() for p in task_copies(repo, "TASK-A-1")] == [
        "tasks/backlog/TASK-A-1-real.md", "tasks/completed/TASK-A-1.md"]


def test_state_markers_are_the_frontmatter_state_keys() -> None:
    assert STATE_KEYS == ("autobuild_state", "feature_build")
    assert STATE_MARKERS == (b"\nautobuild_state:", b"\nfeature_build:")


# ---------------------------------------------------------------------------------- the layout


def test_every_guardkit_path_comes_from_the_layout(tmp_path: Path) -> None:
    root = tmp_path
    assert artifacts_dir(root, "TASK-A-1") == root / ".guardkit/autobuild/TASK-A-1"
    assert layout.worktree_path(root, "TASK-A-1") == root / ".guardkit/worktrees/TASK-A-1"
    assert layout.features_dir(root) == root / ".guardkit/features"
    assert layout.index_dir(root) == root / ".guardkit/index"
    assert layout.report_file(root, "TASK-A-1") == root / ".guardkit/reports/TASK-A-1.html"
    assert layout.status_cache_file(root) == root / ".guardkit/cache/status.json"
    assert layout.log_file(root) == root / ".guardkit/logs/autobuild.log"
    assert (root / layout.QUALITY_GATES_FILE, root / layout.OVERRIDES_FILE) == (
        root / ".guardkit/config/quality-gates.yaml", root / ".guardkit/config/entity-overrides.yaml")
    assert layout.branch_for("TASK-A-1") == "autobuild/TASK-A-1"
    assert layout.task_of_branch("autobuild/TASK-A-1") == "TASK-A-1"
    assert layout.task_of_branch("main") is None


def test_the_layout_knows_a_worktrees_files_and_local_scratch() -> None:
    assert layout.worktree_root_of(Path(".guardkit/worktrees/TASK-X/tasks/a.md")) == Path(".guardkit/worktrees/TASK-X")
    assert layout.worktree_root_of(Path(".guardkit/worktrees/TASK-X")) is None
    assert layout.worktree_root_of(Path("tasks/backlog/TASK-X.md")) is None
    assert layout.is_local_scratch(".guardkit/autobuild/TASK-X/.work/context_turn_1.md")
    assert layout.is_local_scratch(".guardkit/index/falkordb/graph.rdb")
    assert not layout.is_local_scratch(".guardkit/autobuild/TASK-X/player_turn_1.json")
    assert not layout.is_local_scratch("src/.work/notes.md")


def test_the_task_lock_is_in_gits_common_dir_or_beside_the_turn_files(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert common_git_dir(plain) is None
    assert shared_lock_path(plain, "TASK-A-1") == plain.resolve() / ".guardkit/autobuild/TASK-A-1/.lock"
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "src").mkdir()
    expected = repo.resolve() / ".git/guardkit-state/locks/TASK-A-1.lock"
    assert shared_lock_path(repo, "TASK-A-1") == expected
    assert shared_lock_path(repo / "src", "TASK-A-1") == expected  # asked of git from a subfolder


# ------------------------------------------------------------- the listing kept between commands


def _next_command_lists(root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str]]:
    """What a new command's listing of ``root/tasks`` holds, and the folders it had to list."""
    from guardkit_state.store import stat_cache
    from guardkit_state.taskfile import discovery

    monkeypatch.setattr(stat_cache, "_LOADED", {})  # a new process: nothing in memory
    monkeypatch.setattr(discovery, "_LAST", {})
    listed: list[str] = []
    real = os.scandir

    def scandir(path: str) -> object:
        rel = Path(path).relative_to(root).as_posix()
        if rel.split("/")[0] == "tasks":  # the cache's save lists its own folder for stale temp files
            listed.append(rel)
        return real(path)

    monkeypatch.setattr(discovery.os, "scandir", scandir)
    with listing_scope():
        found = [Path(entry.path).relative_to(root).as_posix() for entry in task_entries(root)]
    monkeypatch.setattr(discovery.os, "scandir", real)
    return found, listed


def test_a_command_lists_only_the_folders_changed_since_the_last(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from guardkit_state.store import stat_cache

    monkeypatch.setattr(stat_cache, "RACY_NS", 0)  # the fixture's folders count as settled
    every = ["tasks/backlog/TASK-A-1-real.md", "tasks/backlog/README.md", "tasks/backlog/sub/TASK-A-2.md"]
    found, listed = _next_command_lists(repo, monkeypatch)
    assert sorted(found) == sorted(every) and found == _names(repo)
    assert sorted(listed) == ["tasks", "tasks/backlog", "tasks/backlog/sub"]
    found, listed = _next_command_lists(repo, monkeypatch)  # nothing changed: no folder listed
    assert found == _names(repo) and listed == []
    write(repo / "tasks/backlog/sub/TASK-A-3.md", task_text("TASK-A-3", "backlog", turns=1))
    os.rename(repo / "tasks/backlog/TASK-A-1-real.md", repo / "tasks/backlog/sub/TASK-A-1-real.md")
    (repo / "tasks/in_review").mkdir()
    found, listed = _next_command_lists(repo, monkeypatch)
    assert found == _names(repo) and "tasks/backlog/sub/TASK-A-3.md" in found
    assert "tasks/backlog/TASK-A-1-real.md" not in found and "tasks/backlog/sub/TASK-A-1-real.md" in found
    assert sorted(listed) == ["tasks", "tasks/backlog", "tasks/backlog/sub", "tasks/in_review"]


def test_a_folder_holding_a_symlink_or_a_fifo_is_listed_by_every_command(repo: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from guardkit_state.store import stat_cache

    monkeypatch.setattr(stat_cache, "RACY_NS", 0)
    target = repo / "tasks" / "backlog" / "sub" / "TASK-A-2.md"
    (repo / "tasks" / "linked").mkdir()
    (repo / "tasks" / "linked" / "TASK-L-1.md").symlink_to(target)
    os.mkfifo(repo / "tasks" / "backlog" / "sub" / "TASK-F-1.md")
    _next_command_lists(repo, monkeypatch)
    found, listed = _next_command_lists(repo, monkeypatch)
    # A link's target, a FIFO's kind can change with no change to the folder: never kept.
    assert sorted(listed) == ["tasks/backlog/sub", "tasks/linked"]
    assert found == _names(repo) and "tasks/linked/TASK-L-1.md" in found
