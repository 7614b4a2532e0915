"""The one writer of verified YAML files (task files and feature plans): lock, edit, precondition,
retry with jitter, settle.

The caller's ``edit`` turns the bytes on disk into the new, already verified text (it locates,
edits, renders and verifies: :mod:`.splice`). :func:`write_verified` replaces the file atomically
only while it still holds the bytes the edit was made from, checked after the fsync just before
the rename: an editor or a ``git checkout`` that saved meanwhile is never overwritten; the file is
read again once it has settled and the edit redone on its text. Locks bind only guardkit-state's
own writers; this check covers everyone else.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

from guardkit_state.errors import FileBusyError, GuardkitStateError
from guardkit_state.store import fsio
from guardkit_state.store.locks import exclusive_lock

#: An in-place save is over when two reads this far apart agree (bounded by SETTLE_LIMIT seconds).
SETTLE_PAUSE = 0.002
SETTLE_LIMIT = 2.0


def read_settled(path: Path, data: bytes | None = None) -> bytes:
    """The file's bytes once two reads :data:`SETTLE_PAUSE` apart agree (an in-place save is done)."""
    data = fsio.read_bytes_capped(path) if data is None else data
    deadline = time.monotonic() + SETTLE_LIMIT
    while True:
        time.sleep(SETTLE_PAUSE)
        again = fsio.read_bytes_capped(path)
        if again == data or time.monotonic() > deadline:
            return again
        data = again


def holds(path: Path, expected: bytes) -> bool:
    """True when ``path`` still holds ``expected`` (a missing or unreadable file does not)."""
    try:
        return fsio.read_bytes_capped(path) == expected
    except GuardkitStateError:
        return False


def write_verified(path: Path, raw: bytes, edit: Callable[[bytes], str | None], *, attempts: int, name: str,
                   what: str, landed: Callable[[str], bytes | None] | None = None) -> bool:
    """Write ``edit(raw)`` in place of ``raw``; True when written, False when the edit is a no-op.

    ``raw`` is what the caller read the file as. When the file changed before the rename, the edit is
    redone on its settled bytes. ``landed(text)``, after a write, returns None when the write stands,
    or the bytes to redo the edit on (a stale copy saved over it just after the rename).

    Raises:
        FileBusyError: the file kept changing for ``attempts`` attempts; nothing was overwritten.
        whatever ``edit`` raises (nothing is written then).
    """
    for attempt in range(attempts):
        text = edit(raw)
        if text is None:
            return False
        fsio.crash_point(f"{name}.before_write")
        if not fsio.atomic_write_text(path, text, precondition=partial(holds, path, raw)):
            # A random pause, growing with the attempts, so a writer saving at a steady rhythm does
            # not land inside our read-edit-write window every time; then wait for its save to end.
            time.sleep(random.uniform(0, min(0.002 * (attempt + 1), 0.05)))
            raw = read_settled(path)
            continue
        fsio.crash_point(f"{name}.after_write")
        again = landed(text) if landed is not None else None
        if again is None:
            return True
        raw = again
    raise FileBusyError(f"the {what} kept changing while it was written ({attempts} attempts); nothing was "
                        "overwritten: try again", path=path, expected="a moment without other writers")


#: The writer locks each thread holds: a thread inside :func:`writer_lock` may take it again (a
#: second ``flock`` on a new descriptor would wait for the thread itself).
_HELD = threading.local()


@contextlib.contextmanager
def writer_lock(lock: Path, *, wait: float, holder: str) -> Iterator[None]:
    """Hold the ``flock`` ``lock`` for the block (exclusive between threads and processes, released
    when its holder dies, so a SIGKILLed run never leaves it held); re-entrant within a thread.

    Raises:
        LockedError: another writer held it for the whole ``wait``.
    """
    key = os.path.realpath(lock)
    held: set[str] = _HELD.__dict__.setdefault("paths", set())
    if key in held:
        yield
        return
    fsio.ensure_private_dir(lock.parent)
    with exclusive_lock(lock, wait=wait, holder=holder):
        held.add(key)
        try:
            yield
        finally:
            held.discard(key)


#: What each file held after this process last wrote (or read) it, by real path: while the file
#: still holds exactly those bytes, the next write or read starts from that reading instead of
#: parsing the file again. Keyed on the bytes themselves, so any other writer's change misses it.
_WRITTEN: dict[str, tuple[bytes, object]] = {}
_WRITTEN_LIMIT = 64


def recall(path: Path, raw: bytes) -> object | None:
    """The reading :func:`remember` kept for ``path`` when the file still holds ``raw``, else None."""
    known = _WRITTEN.get(os.path.realpath(path))
    return known[1] if known is not None and known[0] == raw else None


def remember(path: Path, raw: bytes, reading: object) -> None:
    if len(_WRITTEN) >= _WRITTEN_LIMIT:
        _WRITTEN.pop(next(iter(_WRITTEN)), None)
    _WRITTEN[os.path.realpath(path)] = (raw, reading)
