"""Records of turns known only from task files: GuardKit lists every turn in the frontmatter while its
per-turn JSON stays on the machine that ran it. A turn with a ``turn_state_turn_N.json`` is left to it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

from guardkit_state.errors import GuardkitStateError
from guardkit_state.index.records import IndexRecord, project_group_id
from guardkit_state.index.turn_records import turn_record
from guardkit_state.store.fsio import read_bytes_capped
from guardkit_state.taskfile.discovery import STATE_MARKERS, iter_task_files, loop_worktrees, own_task_files
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.turns.history import entry_turn_state

log = logging.getLogger("guardkit_state.index")


def load_frontmatter_turn_records(repo_root: Path, known: set[tuple[str, int]], *,
                                  group: str | None = None) -> list[IndexRecord]:
    """Records of the turns task files list, except the ``(task id, turn)`` pairs in ``known``.

    Among several copies of a task (a planning copy in ``backlog`` and the working one), the copy
    in the task's own loop worktree wins, else the copy listing the most turns.
    """
    root = Path(repo_root)
    group = group or project_group_id(root)
    chosen: dict[str, tuple[bool, int, TaskFile, str]] = {}
    for path, relpath, loop in _candidates(root):
        task = _load_with_turns(path)
        if task is None or task.state is None or loop not in (None, task.task_id):
            continue
        rank = (loop is not None, len(task.state.turns))
        held = chosen.get(task.task_id)
        if held is None or rank > held[:2]:
            chosen[task.task_id] = (*rank, task, relpath)
    records: list[IndexRecord] = []
    for _, _, task, relpath in chosen.values():
        assert task.state is not None
        for entry in task.state.turns:
            if (task.task_id, entry.turn) in known:
                continue
            state = entry_turn_state(entry, task_id=task.task_id, feature_id=task.feature_id, verified_count=None)
            records.append(turn_record(state.to_dict(), group, source_path=relpath))
    return records


def _candidates(root: Path) -> Iterator[tuple[Path, str, str | None]]:
    """(file, path shown, the worktree's task or None) of each task file that may hold turns.

    A loop's worktree is a full checkout: only the copy of that loop's own task is read there.
    """
    for path in iter_task_files(root):
        yield path, str(path.relative_to(root)), None
    for tree in loop_worktrees(root):
        for entry in own_task_files(tree.path, tree.name):
            path = Path(entry.path)
            yield path, str(path.relative_to(root)), tree.name


def _load_with_turns(path: Path) -> TaskFile | None:
    """The task file when its frontmatter lists turns; ``None`` otherwise or when it cannot be read."""
    try:
        raw = read_bytes_capped(path)
        # A state block starts a line of the frontmatter; files without one are never parsed.
        if not any(marker in raw for marker in STATE_MARKERS):
            return None
        task = TaskFile.from_bytes(raw, path)
    except GuardkitStateError as exc:
        log.debug("not searched: %s", exc)
        return None
    return task if task.state is not None and task.state.turns else None
