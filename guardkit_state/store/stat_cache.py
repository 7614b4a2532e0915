"""What was read from a file, kept between processes until the file changes: ``.guardkit/cache/NAME.json``.

A read command of a large repository spends its time parsing the same files as the last one did:
the feature plans (``show``, ``log``, ``status``), the task files with loop state (``status``),
every task file (``validate``). Each such reader keeps what it derived from a file in one cache,
keyed by the file's path and **signature** (size, mtime, ctime and inode: an in-place write changes
the ctime, an atomic replace the inode), and uses an entry only while the file's signature is
unchanged. The caches are rebuildable at any time and never trusted over the files: a damaged
cache, one of another version, or one that cannot be written only costs a re-read.

One cache per kind of file (``status``: the task files; ``plans``: the feature plans), loaded
once per process and validated entry by entry on every use, so a long-running process (the MCP
server) sees a file changed by anyone at once. A cache is written only when a read ends (a read
command runs in one :func:`batch`, through
:func:`~guardkit_state.taskfile.discovery.listing_scope`): a command that writes (``record``,
``feature-build``) reads the caches and writes none, so a refused write leaves the disk as it was.
Writing can be switched off for a whole process (:func:`disable_writes`): a read-only server then
reads the caches the commands keep and writes none.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from guardkit_state.errors import GuardkitStateError
from guardkit_state.store.fsio import atomic_write_text, ensure_private_dir
from guardkit_state.store.layout import cache_file
from guardkit_state.store.reads import read_bytes_capped

#: The cache is ours and rebuildable; one this large is ignored (and rebuilt) rather than read.
_READ_LIMIT = 256 * 1024 * 1024
#: The caches this process has loaded, by file: each is read from disk once per process.
_LOADED: dict[str, StatCache] = {}
_WRITES = {"enabled": True}
#: How deep in :func:`batch` blocks this context is (a server's calls run in threads of their own).
_BATCH: ContextVar[int] = ContextVar("guardkit_state_cache_batch", default=0)
#: A file changed less than this long ago is not recorded (git's "racily clean" rule): timestamps
#: move in clock ticks (milliseconds; seconds on some file systems), so another write within the
#: same tick, at the same size and on a reused inode, could keep the signature. It is read again
#: until it has settled.
RACY_NS = 2_000_000_000


def signature(info: os.stat_result) -> list[int]:
    """A file's signature: size, mtime and ctime (ns) and inode. An atomic replace (new inode) or
    any write (new ctime) at the same size within the same mtime tick is still a change."""
    return [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino]


def settled(sig: list[int]) -> bool:
    """True when the file of signature ``sig`` was last changed longer ago than :data:`RACY_NS`
    (what was read from it may be kept under that signature)."""
    return time.time_ns() - max(sig[1], sig[2]) >= RACY_NS


def signature_of(path: Path | str) -> list[int] | None:
    """``path``'s signature, None when it cannot be stat'ed."""
    try:
        return signature(os.stat(path))
    except OSError:
        return None


@contextlib.contextmanager
def batch() -> Iterator[None]:
    """A read: the caches it changed are saved once, at the end of the block (a command reading
    many files records many facts: one write, not one per file), and only when it ended without an
    error (a command refused changes nothing on disk, caches included). Nested blocks share the outer one."""
    token = _BATCH.set(_BATCH.get() + 1)
    try:
        yield
    finally:
        _BATCH.reset(token)
    if not _BATCH.get():
        for cache in list(_LOADED.values()):
            cache.save()


def disable_writes() -> None:
    """No cache is written by this process from now on (the caches on disk are still read)."""
    _WRITES["enabled"] = False


def writes_enabled() -> bool:
    """False once :func:`disable_writes` was called in this process."""
    return _WRITES["enabled"]


class StatCache:
    """One reader's cache: path key -> ``{"sig": signature, fact: value, ...}``.

    Take it with :meth:`of`; read a file's facts with :meth:`entry`, record one with :meth:`put`
    (an entry with another signature is replaced whole); the end of the :func:`batch` saves it.
    """

    def __init__(self, path: Path, version: int) -> None:
        self.path = path
        self.version = version
        self.entries: dict[str, dict[str, Any]] = _load(path, version)
        self.dirty = False
        # The MCP server answers calls in threads: a save must not serialise a dict being changed.
        self.lock = threading.Lock()

    @classmethod
    def of(cls, root: Path | str, name: str, version: int) -> StatCache:
        """The process's cache ``name`` of the checkout ``root`` (loaded on first use)."""
        key = f"{os.fspath(root)}\0{name}"
        cache = _LOADED.get(key)
        if cache is None or cache.version != version:
            cache = _LOADED[key] = cls(cache_file(root, name), version)
        return cache

    @staticmethod
    def loaded(root: Path | str, name: str) -> bool:
        """True when this process has loaded the cache ``name`` of ``root`` already."""
        return f"{os.fspath(root)}\0{name}" in _LOADED

    def entry(self, key: str, sig: list[int] | None) -> dict[str, Any] | None:
        """Every fact recorded for ``key`` at signature ``sig`` (``fact in entry`` tells a recorded
        None from none); None when there is no entry, or the file changed since."""
        entry = self.entries.get(key)
        if entry is None or sig is None or entry.get("sig") != sig:
            return None
        return entry

    def put(self, key: str, sig: list[int] | None, fact: str, value: Any) -> None:
        """Record ``fact`` = ``value`` (JSON-ready) for ``key`` at ``sig``."""
        if sig is None or not settled(sig):
            return  # changed just now: a change within the same clock tick could keep its signature
        with self.lock:
            entry = self.entries.get(key)
            if entry is None or entry.get("sig") != sig:
                entry = self.entries[key] = {"sig": sig}
            if fact not in entry or entry[fact] != value:
                entry[fact] = value
                self.dirty = True

    def retain(self, keys: Iterable[str]) -> None:
        """Forget the entries of every key not in ``keys`` (files gone since)."""
        keep = set(keys)
        with self.lock:
            gone = [key for key in self.entries if key not in keep]
            for key in gone:
                del self.entries[key]
            self.dirty = self.dirty or bool(gone)

    def save(self) -> None:
        """Write the cache when it changed (the end of a :func:`batch` calls this); a failure only
        costs the next process a re-read."""
        if not self.dirty or not _WRITES["enabled"]:
            return
        with self.lock:
            text = json.dumps({"version": self.version, "files": self.entries})
            self.dirty = False
        with contextlib.suppress(GuardkitStateError, OSError):
            ensure_private_dir(self.path.parent)  # also removes the temp file a save a kill cut short left
            # Not capped: a rebuildable cache of a huge repository may pass the task-file cap.
            atomic_write_text(self.path, text, limit=None)


def _load(path: Path, version: int) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(read_bytes_capped(path, limit=_READ_LIMIT).decode("utf-8"))
    except (GuardkitStateError, ValueError):
        return {}
    files = data.get("files") if isinstance(data, dict) and data.get("version") == version else None
    if not isinstance(files, dict):
        return {}
    return {key: entry for key, entry in files.items() if isinstance(entry, dict)}


__all__ = ["RACY_NS", "StatCache", "batch", "disable_writes", "settled", "signature", "signature_of"]
