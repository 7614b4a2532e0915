"""One line per task with loop state: the data behind ``guardkit-state status``.

Repositories hold thousands of task files and most have no loop state, so the scan first checks
the raw text for a state block before parsing anything, and keeps a cache of summaries keyed by
each file's size and mtime in ``.guardkit/cache/status.json``. The cache is rebuildable at any
time and never trusted over the files: an entry is used only while its file is unchanged.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .errors import FileTooLargeError, GuardkitStateError
from .fsio import atomic_write_text, ensure_private_dir, read_bytes_capped
from .locate import WORKTREES_DIR
from .taskfile import TaskFile
from .worktrees import worktrees_home

CACHE_FILE = Path(".guardkit/cache/status.json")
CACHE_VERSION = 1
_MARKERS = (b"\nautobuild_state:", b"\nfeature_build:")
#: The cache is ours and rebuildable; one this large is ignored (and rebuilt) rather than read.
_CACHE_READ_LIMIT = 256 * 1024 * 1024


@dataclass
class TaskSummary:
    task_id: str
    path: str
    status: str | None
    turns: int
    last_decision: str | None
    verified: int
    total: int
    outcome: str | None
    in_worktree: bool = False
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarise(task: TaskFile, *, relpath: str, in_worktree: bool = False) -> TaskSummary | None:
    """The one-line summary of ``task``, or ``None`` when it has no loop state."""
    state = task.state
    if state is None:
        return None
    total = len(task.criteria) or len(state.criteria)
    verified = sum(1 for status in state.criteria.values() if status == "verified")
    return TaskSummary(
        task_id=task.task_id or Path(relpath).stem, path=relpath, status=task.status, turns=len(state.turns),
        last_decision=state.turns[-1].decision if state.turns else None, verified=verified, total=total,
        outcome=state.extra.get("outcome"), in_worktree=in_worktree,
    )


def repo_status(repo_root: Path, *, use_cache: bool = True) -> list[TaskSummary]:
    """Summaries of every task with loop state under ``tasks/`` (worktree copies win), sorted by id."""
    root = Path(repo_root).resolve()
    cache = _load_cache(root) if use_cache else {}
    fresh: dict[str, Any] = {}
    summaries: dict[str, TaskSummary] = {}
    # Plain strings and scandir entries, not Path objects: 10,000 files cost ~0.1 s less this way.
    for entry, key, relpath, in_worktree in _task_files(str(root)):
        try:
            stat = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        # inode and ctime too: an atomic replace (new inode) or any write (new ctime) within the
        # same mtime tick and at the same size is still seen as a change.
        signature = [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]
        hit = cache.get(key)
        if hit is not None and hit.get("sig") == signature:
            data = hit.get("summary")
        else:
            data = _summarise_file(Path(entry.path), relpath, in_worktree)
        fresh[key] = {"sig": signature, "summary": data}
        if data is None:
            continue
        summary = TaskSummary(**data)
        if in_worktree or summary.task_id not in summaries:
            summaries[summary.task_id] = summary
    if use_cache and fresh != cache:
        with contextlib.suppress(GuardkitStateError, OSError):
            ensure_private_dir((root / CACHE_FILE).parent)
            # Not capped: a rebuildable cache of a huge repository may pass the task-file cap.
            atomic_write_text(root / CACHE_FILE, json.dumps({"version": CACHE_VERSION, "files": fresh}), limit=None)
    return [summaries[k] for k in sorted(summaries)]


def _summarise_file(path: Path, relpath: str, in_worktree: bool) -> dict[str, Any] | None:
    try:
        # Capped, and never a blocking open (the name may have become a FIFO since the scan).
        raw = read_bytes_capped(path)
    except FileTooLargeError as exc:
        return TaskSummary(path.stem, relpath, None, 0, None, 0, 0, None, in_worktree, str(exc)).to_dict()
    except GuardkitStateError:
        return None
    if not any(marker in raw for marker in _MARKERS):
        return None
    try:
        summary = summarise(TaskFile.load(path), relpath=relpath, in_worktree=in_worktree)
    except GuardkitStateError as exc:
        return TaskSummary(path.stem, relpath, None, 0, None, 0, 0, None, in_worktree, str(exc)).to_dict()
    return summary.to_dict() if summary else None


def _task_files(root: str) -> Iterator[tuple[os.DirEntry[str], str, str, bool]]:
    """(entry, path relative to the repo, path relative to its checkout, in a worktree) of each ``*.md``."""
    prefix = len(root) + 1
    for entry in _walk_md(os.path.join(root, "tasks")):
        relpath = entry.path[prefix:]
        yield entry, relpath, relpath, False
    # Loop worktrees live in the repository's main checkout, also when this is a linked worktree.
    home = str(worktrees_home(Path(root)))
    keep = prefix if home == root else 0  # cache keys: relative to the repo, else absolute
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for tree in sorted(os.scandir(os.path.join(home, str(WORKTREES_DIR))), key=lambda e: e.name):
            if tree.is_dir(follow_symlinks=False):
                base = len(tree.path) + 1
                for entry in _walk_md(os.path.join(tree.path, "tasks")):
                    yield entry, entry.path[keep:], entry.path[base:], True


def _walk_md(top: str) -> Iterator[os.DirEntry[str]]:
    stack = [top]
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            elif entry.name.endswith(".md") and entry.is_file(follow_symlinks=False):
                yield entry


def _load_cache(root: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_bytes_capped(root / CACHE_FILE, limit=_CACHE_READ_LIMIT).decode("utf-8"))
    except (GuardkitStateError, ValueError):
        return {}
    files = data.get("files") if isinstance(data, dict) and data.get("version") == CACHE_VERSION else None
    return files if isinstance(files, dict) else {}
