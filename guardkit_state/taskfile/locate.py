"""Which copy of a task is the truth: the resolver's pick in the main checkout, or its own loop's
worktree copy.

While a loop runs in ``.guardkit/worktrees/TASK-ID``, that worktree's copy of TASK-ID and its turn
files are the truth; another loop's worktree is never read for this task. Within a checkout the
copy is chosen by :func:`guardkit_state.taskfile.resolve.resolve_task`, so every command reads the same one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from guardkit_state.errors import TaskNotFoundError
from guardkit_state.git.checkouts import worktrees_home
from guardkit_state.store.layout import artifacts_dir, worktree_path
from guardkit_state.store.turn_files import TurnStore
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.taskfile.resolve import REASON_GIVEN, Resolution, resolve_task


@dataclass(frozen=True)
class TaskLocation:
    """A task as found: the checkout holding its live state, its file, and how it was chosen."""

    task_id: str
    checkout: Path
    task_path: Path
    in_worktree: bool
    resolution: Resolution | None = None

    @property
    def note(self) -> str:
        where = "the loop's worktree copy" if self.in_worktree else "the main checkout"
        return f"reading {where}: {self.task_path}"

    def load(self) -> tuple[TaskFile, TurnStore]:
        task = TaskFile.load(self.task_path)
        return task, TurnStore(artifacts_dir(self.checkout, self.task_id), self.task_id)


def locate_task(repo_root: Path | str, task: str) -> TaskLocation:
    """Find ``task`` (an id or a task file's path), preferring its own loop's worktree copy."""
    root = Path(repo_root).resolve()
    found = resolve_task(root, task)
    if found.reason == REASON_GIVEN:  # a path names its checkout (a worktree's file is read there)
        return TaskLocation(found.task_id, found.checkout, found.path, found.checkout != root, found)
    # Loop worktrees live in the repository's main checkout, also when this is a linked worktree.
    worktree = worktree_path(worktrees_home(root), found.task_id)
    if worktree.is_dir():
        try:
            copy = resolve_task(worktree, found.task_id)
        except TaskNotFoundError:
            copy = None
        if copy is not None:
            return TaskLocation(found.task_id, worktree, copy.path, True, copy)
    return TaskLocation(found.task_id, root, found.path, False, found)
