"""The file scan's cache: every record as searched, in ``.guardkit/cache/search.json``.

Reading every task file, turn and plan costs seconds on a large repository, and searches ask the
same files again and again. The cache keeps the signature (size, mtime, ctime, inode) of every file
under ``tasks/`` and ``.guardkit/`` (checkout and loop worktrees); any change rebuilds it whole. It
is never trusted over the files: unreadable or another version's, it is rebuilt; unwritable, the
next search scans.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from guardkit_state.errors import GuardkitStateError
from guardkit_state.index.records import IndexRecord
from guardkit_state.index.words import index_text
from guardkit_state.store.fsio import atomic_write_text, ensure_private_dir
from guardkit_state.store.layout import status_cache_file
from guardkit_state.store.reads import read_bytes_capped
from guardkit_state.store.stat_cache import writes_enabled

#: Bumped whenever a record's shape changes: an older cache is rebuilt, never misread.
CACHE_VERSION = 2
_READ_LIMIT = 512 * 1024 * 1024
#: The folders of a checkout whose files records come from, and the ones inside them that hold none.
_SOURCES = ("tasks", ".guardkit")
_SKIPPED = frozenset({"cache", "worktrees", ".work", "graphiti", "index", "logs", ".git", "__pycache__"})
_SUFFIXES = (".md", ".json", ".yaml", ".yml")


def search_cache_file(root: Path) -> Path:
    """``.guardkit/cache/search.json``, beside ``status``'s cache."""
    return status_cache_file(root).with_name("search.json")


#: This process's records, by checkout, with the fingerprint they were read at: a long-running
#: process (the MCP server) searches them again without reading the cache file while no file changed.
_MEMO: dict[str, tuple[dict[str, list[int]], list[tuple[IndexRecord, str]]]] = {}


def cached_records(root: Path, load: Callable[[], list[IndexRecord]]) -> list[tuple[IndexRecord, str]]:
    """The records ``load`` reads from the files of ``root`` (from the cache while no file changed),
    each with its tokens (:func:`~guardkit_state.index.words.index_text` of its search text)."""
    fingerprint = source_fingerprint(root)
    key = os.path.abspath(root)
    known = _MEMO.get(key)
    if known is not None and known[0] == fingerprint:
        return known[1]
    cached = _load(root)
    if cached is not None and cached.get("fingerprint") == fingerprint:
        with contextlib.suppress(KeyError, TypeError, ValueError):
            records = [record_from_dict(item) for item in cached["records"]]
            _MEMO[key] = (fingerprint, records)
            return records
    records = [(record, index_text(record.search_text)) for record in load()]
    _save(root, fingerprint, records)
    _MEMO[key] = (fingerprint, records)
    return records


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
                    stat = entry.stat()
                    found[entry.path[prefix:]] = [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]
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


#: What the scan ranks and answers with, in this order: a record's graph side (its data, facts and
#: entities) is for the Graphiti index, which never reads this cache.
_SEARCHED = ("key", "kind", "group_id", "name", "summary", "search_text", "fields", "source_path", "task_id",
             "feature_id", "turn_number", "completed_at", "criteria")


def record_to_dict(record: IndexRecord, tokens: str) -> list[Any]:
    """The searched fields of ``record`` (see :data:`_SEARCHED`) and its tokens, compactly."""
    return [*(list(record.criteria) if name == "criteria" else getattr(record, name) for name in _SEARCHED), tokens]


def record_from_dict(row: list[Any]) -> tuple[IndexRecord, str]:
    """A search-only record (its data, facts and entities empty) and its tokens, from what
    :func:`record_to_dict` wrote; raises KeyError/TypeError/ValueError on anything else."""
    if not isinstance(row, list) or len(row) != len(_SEARCHED) + 1 or not isinstance(row[-1], str):
        raise ValueError("not a cached record")
    values = dict(zip(_SEARCHED, row[:-1], strict=True))
    values["criteria"] = tuple(values["criteria"])
    return IndexRecord(data={}, **values), row[-1]


def _load(root: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(read_bytes_capped(search_cache_file(root), limit=_READ_LIMIT).decode("utf-8"))
    except (GuardkitStateError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("version") == CACHE_VERSION else None


def _save(root: Path, fingerprint: dict[str, list[int]], records: list[tuple[IndexRecord, str]]) -> None:
    """Write the cache (never in a process whose cache writes are off, a read-only server's: see
    :func:`~guardkit_state.store.stat_cache.disable_writes`); a failure only costs the next search a scan."""
    if not writes_enabled():
        return
    if not (root / "tasks").is_dir() and not (root / ".guardkit").is_dir():
        return  # not a GuardKit checkout: a read creates nothing
    path = search_cache_file(root)
    with contextlib.suppress(GuardkitStateError, OSError, TypeError, ValueError):
        ensure_private_dir(path.parent)
        text = json.dumps({"version": CACHE_VERSION, "fingerprint": fingerprint,
                           "records": [record_to_dict(r, t) for r, t in records]}, default=str)
        atomic_write_text(path, text, limit=None)
