"""Finding task files: the one walker over ``tasks/``, and the cheap tests of what a file is.

Every reader (``show`` and the resolver, ``status``, ``validate``, the index) walks ``tasks/``
through :func:`walk_markdown`, so they all see the same files:

* a symlinked folder is never followed (a link to ``/`` or to a parent would walk out of the
  repository, or for ever);
* a symlinked file is read only when it resolves inside its checkout (a link planted in a
  repository must not make it read, or write, a file elsewhere);
* a FIFO, socket or device is never opened (a FIFO would block the reader for ever): it is
  skipped with a note;
* the order is fixed: a folder's files by name, then its subfolders by name.

Which of several copies of an id is the truth is :mod:`guardkit_state.taskfile.resolve`'s job.

A command that reads many tasks (``show FEAT-X`` resolves each task of a feature several times)
runs inside :func:`listing_scope`: each ``tasks/`` folder is then walked once for the whole
command instead of once per lookup. Outside a scope nothing is remembered, so a long-running
process (the feature loop) always sees files created, moved or removed since its last lookup.
"""

from __future__ import annotations

import bisect
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

from guardkit_state.errors import FrontmatterError, GuardkitStateError, UnsafePathError
from guardkit_state.model import STATE_KEYS
from guardkit_state.store import reads, safe_paths, stat_cache
from guardkit_state.store.layout import TASKS_DIR, worktrees_dir
from guardkit_state.taskfile.read_scope import listing_scope as listing_scope  # re-exported: readers name it here
from guardkit_state.taskfile.read_scope import scoped as scoped
from guardkit_state.taskfile.task_facts import remembered, task_cache

if TYPE_CHECKING:
    from guardkit_state.store.stat_cache import StatCache

log = logging.getLogger("guardkit_state.taskfile.discovery")
#: What each folder under ``tasks/`` held when it was last listed (see :func:`walk_markdown`).
LISTING_CACHE = "listing"

#: A task file's name: ``PREFIX-...md`` (READMEs and guides are not tasks).
TASK_FILE_NAME = re.compile(r"^[A-Z][A-Z0-9]*-[A-Za-z0-9.]+.*\.md$")
#: A state block starts a line of the frontmatter: a raw-bytes check before any parse.
STATE_MARKERS = tuple(f"\n{key}:".encode() for key in STATE_KEYS)

_ID_SEGMENT = re.compile(r"^[A-Z0-9][A-Z0-9.]*$")
_TREE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_ID_LINE = re.compile(r"^id:[ \t]*['\"]?([^'\"\s#]+)", re.M)
#: How much of a file's head :func:`declared_id` scans for its ``id:``.
_HEAD_BYTES = 8192

@dataclass(frozen=True)
class _Listing:
    """The readable ``*.md`` files below a ``tasks/`` folder in walk order, their names sorted
    (with their walk position: a lookup by id bisects them), and the FIFOs, sockets and devices
    the walk skipped."""

    entries: tuple[TaskEntry, ...]
    special: tuple[Path, ...]
    by_name: tuple[tuple[str, int], ...] = ()
    #: Every folder walked, with its signature taken before it was listed; empty when this
    #: listing may not be reused (see :func:`_listing`).
    folders: tuple[tuple[str, list[int]], ...] = ()

    def named(self, task_id: str) -> list[str]:
        """The paths of the files named for ``task_id`` (``<id>.md``, ``<id>-<slug>.md``), in walk order."""
        found = []
        for name, position in self.by_name[bisect.bisect_left(self.by_name, (task_id,)):]:
            if not name.startswith(task_id):
                break
            if named_for(name, task_id):
                found.append(position)
        return [self.entries[position].path for position in sorted(found)]


#: This process's last listing of each ``tasks/`` folder (a long-running process, the MCP server,
#: lists it for every call): reused by the next scope while no folder in it changed since.
_LAST: dict[str, _Listing] = {}


def _listing(root: Path) -> _Listing:
    """``root/tasks`` listed once per :func:`listing_scope`, and in a later scope only when one of
    its folders changed (a file added, removed or renamed in a folder changes that folder's mtime).

    A listing is not reused when a folder changed within the last clock ticks (a second change in
    the same tick would keep its mtime: :data:`~guardkit_state.store.stat_cache.RACY_NS`), nor when
    it holds a symlink or a special file (a link's target can change with no folder changing).
    """
    def walk() -> _Listing:
        key = os.fspath(root)
        last = _LAST.get(key)
        if last is not None and last.folders and all(stat_cache.signature_of(f) == sig for f, sig in last.folders):
            return last
        special: list[Path] = []
        folders: list[tuple[str, list[int]]] = []
        kept = task_cache(root, LISTING_CACHE)
        entries = tuple(walk_markdown(root, root / TASKS_DIR, special, folders, kept=kept))
        if kept is not None:  # the folders since removed go
            prefix = len(os.fspath(root)) + 1
            kept.retain(folder[prefix:] for folder, _ in folders)
        by_name = tuple(sorted((entry.name, position) for position, entry in enumerate(entries)))
        reusable = not special and all(stat_cache.settled(sig) for _, sig in folders) \
            and not any(entry.is_symlink() for entry in entries)
        listing = _Listing(entries, tuple(special), by_name, tuple(folders) if reusable else ())
        _LAST[key] = listing
        return listing

    return scoped(("tasks", os.fspath(root)), walk)


def ids_in_other_case(root: Path | str, task_id: str) -> list[str]:
    """The ids of the files under ``root/tasks`` named for ``task_id`` in another case
    (``task-cr-007`` -> ``TASK-CR-007``), as their names spell them; sorted."""
    folded = task_id.casefold()
    found = {entry.name[:len(task_id)] for entry in _listing(Path(root)).entries
             if named_for(entry.name.casefold(), folded)}
    return sorted(found - {task_id})


def listed_ids(root: Path | str) -> list[str]:
    """The id of every task-like file under ``root/tasks``, by its name (for "did you mean")."""
    return sorted({task_id_from_filename(entry.name) for entry in _listing(Path(root)).entries
                   if TASK_FILE_NAME.match(entry.name)})


def task_entries(root: Path | str) -> tuple[TaskEntry, ...]:
    """Every readable ``*.md`` file under ``root/tasks``, in walk order (:func:`walk_markdown`'s
    rules): listed once per :func:`listing_scope`, as every lookup by id there sees them."""
    return _listing(Path(root)).entries


class TaskEntry(Protocol):
    """A file the walk found: its name and path (an ``os.DirEntry``, or a :class:`KeptEntry`)."""

    @property
    def name(self) -> str: ...
    @property
    def path(self) -> str: ...
    def is_symlink(self) -> bool: ...


class KeptEntry(NamedTuple):
    """A file of a folder listed by an earlier command and unchanged since (never a symlink: a
    folder holding one is listed afresh every time)."""

    name: str
    path: str

    def is_symlink(self) -> bool:
        return False


def walk_markdown(root: Path | str, top: Path | str, special: list[Path] | None = None,
                  walked: list[tuple[str, list[int]]] | None = None, *,
                  kept: StatCache | None = None) -> Iterator[TaskEntry]:
    """Every readable ``*.md`` file below ``top`` (inside checkout ``root``), by the rules above.

    Yields scandir entries (no Path objects: a walk of 10,000 files costs ~0.1 s less this way).
    A FIFO, socket or device is added to ``special`` when given, so a caller can name it; each
    folder listed to ``walked``, with its signature taken just before
    (:func:`~guardkit_state.store.stat_cache.signature`).

    ``kept``: a cache of what each folder held (``.guardkit/cache/listing.json``), used for a folder
    while its signature is the one it was listed at (a file added, removed or renamed in it changes
    its mtime) and recorded for one listed now that holds only plain files and folders (a link's
    target can change with the folder unchanged): a command lists only the folders that changed.
    """
    base = len(os.fspath(root)) + 1
    stack = [str(top)]
    while stack:
        folder = stack.pop()
        sig = stat_cache.signature_of(folder) if walked is not None or kept is not None else None
        if sig is not None and walked is not None:
            walked.append((folder, sig))
        known = kept.entry(folder[base:], sig) if kept is not None and sig is not None else None
        if known is not None and "md" in known and "dirs" in known:
            for name in known["md"]:
                yield KeptEntry(name, f"{folder}/{name}")
            stack.extend(f"{folder}/{name}" for name in reversed(known["dirs"]))
            continue
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:  # gone, not a folder, or unreadable: nothing to read there
            continue
        folders, files, plain = [], [], True
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry)
            elif entry.name.endswith(".md") and _readable(root, entry, special):
                files.append(entry.name)
                yield entry
            plain = plain and (entry.is_file(follow_symlinks=False) or entry.is_dir(follow_symlinks=False))
        if kept is not None and sig is not None and plain:
            kept.put(folder[base:], sig, "md", files)
            kept.put(folder[base:], sig, "dirs", [entry.name for entry in folders])
        stack.extend(entry.path for entry in reversed(folders))


def _readable(root: Path | str, entry: os.DirEntry[str], special: list[Path] | None) -> bool:
    """True for a regular file, or a symlink to one inside ``root``; notes what is skipped."""
    if entry.is_file(follow_symlinks=False):
        return True
    try:
        if entry.is_symlink() and (entry.is_dir() or not _inside(root, entry)):
            return False  # a symlinked folder (never followed), or a link leaving the checkout
        if entry.is_file():  # a stat, never an open: False for a FIFO, socket, device or dangling link
            return True
        os.stat(entry.path)
    except OSError:
        return False  # dangling, or gone since the listing
    log.warning("skipping %s: not a regular file", entry.path)
    if special is not None:
        special.append(Path(entry.path))
    return False


def _inside(root: Path | str, link: os.DirEntry[str]) -> bool:
    try:
        safe_paths.resolve_inside(Path(root), Path(link.path))
    except UnsafePathError:
        log.warning("skipping %s: symlink leaves the repository", link.path)
        return False
    return True


def iter_task_files(repo_root: Path | str) -> Iterator[Path]:
    """Every task-like markdown file under ``repo_root/tasks`` (``PREFIX-...md``), in walk order.

    READMEs and guides are skipped by name; symlinks leaving the repository, FIFOs, sockets and
    devices are skipped (with a logged note).
    """
    root = Path(repo_root)
    for entry in walk_markdown(root, root / TASKS_DIR):
        if TASK_FILE_NAME.match(entry.name):
            yield Path(entry.path)


def task_copies(repo_root: Path | str, task_id: str, special: list[Path] | None = None) -> list[Path]:
    """Every file of ``task_id`` under ``repo_root/tasks``, in walk order (possibly none)."""
    task_id = safe_paths.validate_task_id(task_id)
    listing = _listing(Path(repo_root))
    if special is not None:
        special.extend(listing.special)
    root = Path(repo_root)
    return [path for path in map(Path, listing.named(task_id)) if names_task(path, task_id, root)]


def loop_worktrees(home: Path | str) -> list[os.DirEntry[str]]:
    """The loop worktrees in ``home`` (the main checkout): real folders under ``.guardkit/worktrees``
    named like a task id, by name."""
    try:
        with os.scandir(worktrees_dir(home)) as listing:
            trees = [e for e in listing if e.is_dir(follow_symlinks=False) and _TREE_NAME.match(e.name)]
    except OSError:
        return []
    return sorted(trees, key=lambda e: e.name)


def own_task_files(tree: Path | str, task_id: str) -> Iterator[TaskEntry]:
    """The files of ``task_id`` in its loop worktree ``tree``.

    A worktree is a full checkout, but only its loop's own task is read there: every other task is
    read from the main checkout.
    """
    for entry in walk_markdown(tree, Path(tree) / TASKS_DIR):
        if named_for(entry.name, task_id) and names_task(Path(entry.path), task_id):
            yield entry


def named_for(name: str, task_id: str) -> bool:
    """True when a file name is ``<id>.md`` or ``<id>-<slug>.md`` (the name alone, no read)."""
    return name == f"{task_id}.md" or name.startswith(f"{task_id}-")


def names_task(path: Path, task_id: str, checkout: Path | None = None) -> bool:
    """True when ``path`` is a file of ``task_id``: named for it, and not declaring another id.

    With ``checkout`` (the checkout holding ``path``), the id the file declares is kept in the
    task-file cache while the file is unchanged (a lookup by id reads no file twice).
    """
    name = path.name
    if name == f"{task_id}.md":
        return True
    if not named_for(name, task_id):
        return False
    # TASK-ABC-1-2-x.md starts with "TASK-ABC-1-" too: trust the file's own id when it has one.
    if checkout is None:
        declared = declared_id(path)
    else:
        declared = remembered(path, checkout, "declared id", partial(declared_id, path), cheap=True)
    return declared is None or declared == task_id


def declared_id(path: Path) -> str | None:
    """The ``id:`` a task file declares in its frontmatter, by a cheap scan of its head (no YAML parse)."""
    try:
        # Never a blocking open: the name may have become a FIFO since the walk looked at it.
        head = reads.read_head(path, _HEAD_BYTES).decode("utf-8", "replace")
    except GuardkitStateError:
        return None
    from guardkit_state.taskfile.frontmatter import split_frontmatter  # here: the CLI builds its parser without YAML

    try:
        split = split_frontmatter(head + "\n---\n")
    except FrontmatterError:
        return None
    match = _ID_LINE.search(split.yaml_text) if split.has_frontmatter else None
    return match.group(1) if match else None


def task_id_from_filename(name: str) -> str:
    """``TASK-SFT-009-quality-gate-update.md`` -> ``TASK-SFT-009`` (upper-case segments)."""
    stem = name[:-3] if name.endswith(".md") else name
    segments = stem.split("-")
    taken = [segments[0]]
    for segment in segments[1:]:
        if not _ID_SEGMENT.match(segment):
            break
        taken.append(segment)
    return "-".join(taken)


__all__ = [
    "LISTING_CACHE",
    "STATE_MARKERS",
    "TASK_FILE_NAME",
    "KeptEntry",
    "TaskEntry",
    "declared_id",
    "ids_in_other_case",
    "iter_task_files",
    "listed_ids",
    "listing_scope",
    "loop_worktrees",
    "named_for",
    "names_task",
    "own_task_files",
    "scoped",
    "task_copies",
    "task_entries",
    "task_id_from_filename",
    "walk_markdown",
]
