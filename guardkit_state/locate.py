"""Which copy of a task is the truth: the main checkout's, or its running loop's worktree copy.

While a loop runs in ``.guardkit/worktrees/TASK-ID``, the worktree's task file and turn files are
the truth (DESIGN.md section 5). Read commands run from the main checkout find that copy by the
conventional path and say which one they read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .artifacts import TurnStore, artifacts_dir
from .fsio import validate_task_id
from .taskfile import TaskFile, find_task
from .worktrees import worktrees_home

WORKTREES_DIR = Path(".guardkit/worktrees")


@dataclass(frozen=True)
class TaskLocation:
    """A task as found: the checkout holding its live state, its file, and how it was chosen."""

    task_id: str
    checkout: Path
    task_path: Path
    in_worktree: bool

    @property
    def note(self) -> str:
        where = "the loop's worktree copy" if self.in_worktree else "the main checkout"
        return f"reading {where}: {self.task_path}"

    def load(self) -> tuple[TaskFile, TurnStore]:
        task = TaskFile.load(self.task_path)
        return task, TurnStore(artifacts_dir(self.checkout, self.task_id), self.task_id)


def locate_task(repo_root: Path, task_id: str) -> TaskLocation:
    """Find ``task_id`` in the main checkout, preferring its worktree copy when a loop has one."""
    validate_task_id(task_id)
    root = Path(repo_root).resolve()
    main_path = find_task(root, task_id)
    # Loop worktrees live in the repository's main checkout, also when this is a linked worktree.
    worktree = worktrees_home(root) / WORKTREES_DIR / task_id
    if worktree.is_dir():
        copy = worktree / main_path.relative_to(root)
        if copy.is_file():
            return TaskLocation(task_id, worktree, copy, True)
    return TaskLocation(task_id, root, main_path, False)
