"""The file scan's cache: the records as searched, their index, each file's reading (``.guardkit/cache/search.json``).

Reading every task file, turn and plan costs seconds on a large repository, and searches ask the
same files again and again. The cache keeps the signature (size, mtime, ctime, inode) of every file
under ``tasks/`` and ``.guardkit/`` (checkout and loop worktrees): while none changed, a search
reads the index as it is. After a change, only the files that changed are read again and the index
changed for their records (:mod:`.scan_update`; with no cache, the same update from nothing reads
every file). It is never trusted over the files: unreadable or another version's, it is built from
the files; unwritable, the next search reads them.

With the records it keeps their index (:class:`~.scan_index.ScanIndex`): a query then scores only
the records that can score at all.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from guardkit_state.errors import GuardkitStateError
from guardkit_state.index.scan_index import DamagedCache, ScanIndex, utf8
from guardkit_state.store.fsio import atomic_write_bytes, ensure_private_dir
from guardkit_state.store.layout import status_cache_file
from guardkit_state.store.reads import read_bytes_capped
from guardkit_state.store.stat_cache import signature, writes_enabled
from guardkit_state.taskfile.read_scope import generation

#: Bumped whenever a record's or the index's shape changes: an older cache is rebuilt, never misread.
CACHE_VERSION = 5
_READ_LIMIT = 512 * 1024 * 1024
#: The folders of a checkout whose files records come from, and the ones inside them that hold none.
_SOURCES = ("tasks", ".guardkit")
_SKIPPED = frozenset({"cache", "worktrees", ".work", "graphiti", "index", "logs", ".git", "__pycache__"})
_SUFFIXES = (".md", ".json", ".yaml", ".yml")
#: The fingerprint of a cache holding a file read within the racy window: matches no walk of the files.
_UNSETTLED = "unsettled"


def search_cache_file(root: Path) -> Path:
    """``.guardkit/cache/search.json``, beside ``status``'s cache."""
    return status_cache_file(root).with_name("search.json")


#: This process's index, by checkout, with the fingerprint it was read at and the generation of
#: the checkout's watch then (:func:`~guardkit_state.taskfile.read_scope.generation`): a long-running
#: process (the MCP server) searches it again without reading the cache file while no file changed,
#: and without a stat of every file while its watch says nothing changed.
#: With it, the state :mod:`.scan_update` keeps: after a change the server updates the index it
#: holds, reading neither the cache file nor an unchanged source file.
_MEMO: dict[str, tuple[str, int | None, ScanIndex, dict[str, Any] | bytes]] = {}


def cached_index(root: Path, *, rebuild: bool = False) -> ScanIndex:
    """The index of the records of the files of ``root``: from the cache while no file changed,
    else the cache's updated for the files that changed (``rebuild``: built from every file, the
    cache found damaged)."""
    key = os.path.abspath(root)
    watched = generation(Path(key).resolve())  # asked before anything is read: a change meanwhile moves it
    known = _MEMO.get(key)
    if known is not None and not rebuild and watched is not None and known[1] == watched:
        return known[2]
    walk = source_fingerprint(root)
    fingerprint = fingerprint_text(walk)
    if known is not None and known[0] == fingerprint and not rebuild:
        _MEMO[key] = (fingerprint, watched, known[2], known[3])
        return known[2]
    cached = None if rebuild or known is not None else _load(root)
    index: ScanIndex | None
    state: dict[str, Any] | bytes | None
    if cached is not None and cached[0] == fingerprint:
        index, state = cached[1], cached[2]  # the state's text, parsed only if a file changes
    else:
        # Imported here: a search of unchanged files reads no source file, so loads no reader.
        from guardkit_state.index.scan_update import update

        before = known[2:] if known is not None and not rebuild else cached[1:] if cached is not None else None
        index, state = (before[0], _state(before[1])) if before is not None else (None, None)
        try:
            updated = update(Path(key), index if state is not None else None, state, walk)
        except (DamagedCache, LookupError, TypeError, ValueError, AttributeError):
            # A cached reading of a shape no version wrote (what each file gave is plain JSON read
            # back): built from the files. An update from nothing reads no cached part, so a fault
            # of its own is raised again there, never hidden.
            if index is None or state is None:
                raise
            updated = update(Path(key), None, None, walk)
        index, state = updated.index, updated.state
        if not updated.settled:
            fingerprint = _UNSETTLED  # a file changed just now: the next search looks at the files again
        _save(root, fingerprint, index, state)
    _MEMO[key] = (fingerprint, watched, index, state)
    return index


def fingerprint_text(fingerprint: dict[str, list[int]]) -> str:
    """:func:`source_fingerprint` as one text, the same for the same files whatever order they
    were listed in (compared whole: no parse of thousands of entries to tell nothing changed)."""
    return "\0".join(f"{path}\0{size} {mtime} {ctime} {inode}"
                      for path, (size, mtime, ctime, inode) in sorted(fingerprint.items()))


def source_fingerprint(root: Path) -> dict[str, list[int]]:
    """Every file records may come from, by path relative to ``root``: its signature."""
    root = Path(os.path.abspath(root))  # every walked path then starts with it (a relative "." would not)
    found: dict[str, list[int]] = {}
    checkouts = [root]
    with contextlib.suppress(OSError):
        checkouts += sorted(p for p in (root / ".guardkit" / "worktrees").iterdir() if p.is_dir())
    prefix = len(os.fspath(root)) + 1
    for checkout in checkouts:
        for folder in _SOURCES:
            for entry in _walk(checkout / folder):
                with contextlib.suppress(OSError):
                    found[entry.path[prefix:]] = signature(entry.stat())
    return found


def _walk(top: Path) -> Iterator[os.DirEntry[str]]:
    stack = [str(top)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in _SKIPPED:
                    stack.append(entry.path)
            elif entry.name.endswith(_SUFFIXES):
                yield entry


def _load(root: Path) -> tuple[str, ScanIndex, bytes] | None:
    """The fingerprint, index and state (its text: parsed only when a file changed) the cache
    holds; None for no cache, another version's, or one no version wrote (a part read only when
    a search asks for it raises :class:`DamagedCache` then)."""
    try:
        data = read_bytes_capped(search_cache_file(root), limit=_READ_LIMIT)
    except GuardkitStateError:
        return None
    return _from_bytes(data)


def _from_bytes(data: bytes) -> tuple[str, ScanIndex, bytes] | None:
    """The cache file's parts (see :func:`_to_bytes`), sliced by offset: the rest of the file
    (megabytes) is never copied whole."""
    end = data.find(b"\n")
    try:
        header = json.loads(data[:end] if end >= 0 else data)
    except (ValueError, RecursionError):  # (nested deeper than the parser goes: no version wrote it)
        return None
    if not isinstance(header, dict) or header.get("version") != CACHE_VERSION:
        return None
    count, length, fingerprint = header.get("records"), header.get("phrases"), header.get("fingerprint")
    if end < 0 or not isinstance(count, int) or not isinstance(length, int) or count < 0 or length < 0 \
            or not isinstance(fingerprint, str):
        return None
    where_end = data.find(b"\n", end + 1)
    state_end = data.find(b"\n", where_end + 1) if where_end >= 0 else -1
    if state_end < 0:
        return None
    try:
        where = json.loads(data[end + 1:where_end])
    except (ValueError, RecursionError):
        return None
    start = state_end + 1
    rows_at = start + length + 1
    lines = data[rows_at:].split(b"\n") if rows_at < len(data) else []
    if data[start + length:rows_at] not in (b"\n", b"") or len(lines) != count:
        return None
    index = ScanIndex.decoded(where, data[start:start + length], lines)
    if index is None:
        return None
    return fingerprint, index, data[where_end + 1:state_end]


def _state(text: dict[str, Any] | bytes) -> dict[str, Any] | None:
    """The state line: what :mod:`.scan_update` keeps beside the index (None: it does not read back)."""
    if isinstance(text, dict):
        return text
    try:
        found = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return found if isinstance(found, dict) else None


def _save(root: Path, fingerprint: str, index: ScanIndex, state: dict[str, Any]) -> None:
    """Write the cache (never in a process whose cache writes are off, a read-only server's: see
    :func:`~guardkit_state.store.stat_cache.disable_writes`); a failure only costs the next search a scan."""
    if not writes_enabled():
        return
    if not (root / "tasks").is_dir() and not (root / ".guardkit").is_dir():
        return  # not a GuardKit checkout: a read creates nothing
    path = search_cache_file(root)
    with contextlib.suppress(GuardkitStateError, OSError, TypeError, ValueError):
        ensure_private_dir(path.parent)
        atomic_write_bytes(path, _to_bytes(fingerprint, index, state), limit=None)


def _to_bytes(fingerprint: str, index: ScanIndex, state: dict[str, Any]) -> bytes:
    """The cache file: a header line (the version, ``fingerprint``, how many positions, how long
    the phrases are), a line of the tokens', fields' and order's records, a line of the state
    :mod:`.scan_update` keeps, the phrases (a line per position), then a JSON line per position. A
    search of unchanged files parses the header, the second line and the lines of the records it
    answers with, nothing else."""
    where, phrases, rows = index.encoded()
    header = {"version": CACHE_VERSION, "fingerprint": fingerprint, "records": len(rows), "phrases": len(phrases)}
    return b"\n".join([utf8(json.dumps(header)), utf8(json.dumps(where)), utf8(json.dumps(state)), phrases, *rows])


__all__ = ["CACHE_VERSION", "cached_index", "fingerprint_text", "search_cache_file", "source_fingerprint"]
