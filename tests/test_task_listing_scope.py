"""Reading a feature lists ``tasks/`` once per command, and never serves a stale listing.

``show FEAT-X`` resolves each task of the feature several times (its state, its copy, its
criteria); each lookup used to walk every task file of the repository again. Inside one read
command the walk is now shared (:func:`listing_scope`); outside one — the feature loop, which runs
for hours — every lookup walks again, so files created or moved since are seen.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from guardkit_state.errors import TaskNotFoundError
from guardkit_state.inspect.feature_view import feature_view
from guardkit_state.report.feature import build_feature_report
from guardkit_state.taskfile.discovery import task_copies
from guardkit_state.taskfile.resolve import resolve_task

TASKS = [f"TASK-LS-{n:03d}" for n in range(1, 9)]
FILLER = 60  # other tasks of the repository, in several folders


def _task(task_id: str) -> str:
    return (f"---\nid: {task_id}\ntitle: {task_id}\nstatus: backlog\n---\n\n"
            "## Acceptance Criteria\n\n- [ ] AC-001: works\n")


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for n in range(FILLER):
        folder = root / "tasks" / ("backlog", "in_progress", "completed")[n % 3] / f"group-{n % 5}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"TASK-OTHER-{n:03d}-filler.md").write_text(_task(f"TASK-OTHER-{n:03d}"))
    for task_id in TASKS:
        (root / "tasks" / "backlog" / f"{task_id}-work.md").write_text(_task(task_id))
    features = root / ".guardkit" / "features"
    features.mkdir(parents=True)
    lines = ["id: FEAT-LS", "name: Listing", "tasks:"]
    for task_id in TASKS:
        lines += [f"- id: {task_id}", f"  file_path: tasks/backlog/{task_id}-work.md"]
    (features / "FEAT-LS.yaml").write_text("\n".join(lines) + "\n")
    _git(root.parent, "init", "-q", "-b", "main", str(root))
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "tasks")
    return root


@pytest.fixture
def tasks_listings(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """How often each folder is listed (``os.scandir``, the walker's only way to list)."""
    counts: Counter[str] = Counter()
    real = os.scandir

    def counting(path: str = ".") -> os._ScandirIterator[str]:
        counts[os.fspath(path)] += 1
        return real(path)

    monkeypatch.setattr(os, "scandir", counting)
    yield counts


def test_show_feature_lists_the_tasks_folder_once(repo: Path, tasks_listings: Counter[str]) -> None:
    view = feature_view(repo, "FEAT-LS")
    assert [row.task_id for row in view.tasks] == TASKS
    assert all(row.error is None and row.criteria is not None and row.criteria.total == 1 for row in view.tasks)
    assert tasks_listings[str(repo / "tasks")] == 1
    assert tasks_listings[str(repo / "tasks" / "completed" / "group-2")] == 1


def test_report_feature_lists_the_tasks_folder_once(repo: Path, tasks_listings: Counter[str]) -> None:
    report = build_feature_report(repo, "FEAT-LS")
    assert [task.row.task_id for task in report.tasks] == TASKS
    assert all(task.error is None for task in report.tasks)
    assert tasks_listings[str(repo / "tasks")] == 1


def test_outside_a_command_every_lookup_sees_the_files_as_they_are(repo: Path) -> None:
    # The feature loop resolves tasks for hours: a file moved or created since must be found.
    first = resolve_task(repo, TASKS[0]).path
    moved = repo / "tasks" / "in_progress" / first.name
    moved.parent.mkdir(parents=True, exist_ok=True)
    first.rename(moved)
    assert resolve_task(repo, TASKS[0]).path == moved
    with pytest.raises(TaskNotFoundError):
        resolve_task(repo, "TASK-LS-NEW")
    (repo / "tasks" / "backlog" / "TASK-LS-NEW-late.md").write_text(_task("TASK-LS-NEW"))
    assert resolve_task(repo, "TASK-LS-NEW").path.name == "TASK-LS-NEW-late.md"


def test_a_listing_ends_with_its_command(repo: Path) -> None:
    from guardkit_state.taskfile.discovery import listing_scope

    with listing_scope():
        assert task_copies(repo, "TASK-LS-NEW") == []
    (repo / "tasks" / "backlog" / "TASK-LS-NEW-late.md").write_text(_task("TASK-LS-NEW"))
    assert [p.name for p in task_copies(repo, "TASK-LS-NEW")] == ["TASK-LS-NEW-late.md"]
    with listing_scope():
        assert [p.name for p in task_copies(repo, "TASK-LS-NEW")] == ["TASK-LS-NEW-late.md"]
    # Two commands in a row: the second sees what happened after the first.
    first = feature_view(repo, "FEAT-LS")
    (repo / "tasks" / "backlog" / f"{TASKS[1]}-work.md").unlink()
    second = feature_view(repo, "FEAT-LS")
    assert first.tasks[1].error is None
    assert second.tasks[1].error is not None and "no task file" in second.tasks[1].error


def test_cli_show_feature_reads_every_task(repo: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "guardkit_state", "show", "FEAT-LS", "--repo", str(repo)],
                         capture_output=True, text=True, check=False, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("0/1 verified") == len(TASKS)


def test_a_later_command_reuses_the_listing_only_while_no_folder_changed(
        repo: Path, tasks_listings: Counter[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A long-running process (the MCP server) lists tasks/ for every call: a folder unchanged since
    (its mtime: a file added, removed or renamed in it changes it) is not listed again; a changed
    one is, and its new file is found."""
    from guardkit_state.store import stat_cache
    from guardkit_state.taskfile.discovery import listing_scope

    monkeypatch.setattr(stat_cache, "RACY_NS", 0)  # the fixture's folders are settled for this test
    with listing_scope():
        assert task_copies(repo, "TASK-LS-NEW") == []
    listed = sum(tasks_listings.values())
    with listing_scope():
        assert task_copies(repo, "TASK-LS-NEW") == []
    assert sum(tasks_listings.values()) == listed  # nothing listed again
    (repo / "tasks" / "completed" / "group-2" / "TASK-LS-NEW-late.md").write_text(_task("TASK-LS-NEW"))
    with listing_scope():
        assert [p.name for p in task_copies(repo, "TASK-LS-NEW")] == ["TASK-LS-NEW-late.md"]
    assert sum(tasks_listings.values()) > listed


def test_a_folder_changed_within_the_racy_window_is_listed_again(repo: Path, tasks_listings: Counter[str]) -> None:
    """Two changes within one clock tick could leave a folder's mtime as it was: a listing of a
    folder changed that recently is never reused."""
    from guardkit_state.taskfile.discovery import listing_scope

    (repo / "tasks" / "backlog" / "TASK-LS-NEW-late.md").write_text(_task("TASK-LS-NEW"))  # backlog changed now
    with listing_scope():
        task_copies(repo, "TASK-LS-NEW")
    listed = tasks_listings[str(repo / "tasks" / "backlog")]
    with listing_scope():
        task_copies(repo, "TASK-LS-NEW")
    assert tasks_listings[str(repo / "tasks" / "backlog")] == listed + 1
