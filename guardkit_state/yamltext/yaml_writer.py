"""The one writer of verified YAML files (task files and feature plans): lock, edit, precondition,
retry with jitter, settle.

The caller's ``edit`` turns the bytes on disk into the new, already verified text (it edits and
verifies: :mod:`.editor`, :mod:`.verify`). :func:`write_verified` replaces the file atomically only
while it still holds the bytes the edit was made from, compared after the fsync just before the
rename: an editor or a ``git checkout`` that saved meanwhile is never overwritten; the file is read
again once it has settled (:func:`read_settled`, the one settle algorithm) and the edit redone on
its text. Locks bind only guardkit-state's own writers; this check covers everyone else.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Generic, TypeVar

from guardkit_state.errors import FileBusyError, ParseError
from guardkit_state.store import fsio, reads
from guardkit_state.store.locks import exclusive_lock

#: An in-place save is over when the file is unchanged this long after it was read (a file that
#: keeps changing is read again for up to SETTLE_LIMIT seconds).
SETTLE_PAUSE = 0.002
SETTLE_LIMIT = 2.0
#: Pauses before reading again a file that does not read whole or changed meanwhile: growing, so
#: that an editor descheduled in the middle of an in-place save on a busy machine is waited out too.
RESETTLE_PAUSES = (0.005, 0.02, 0.05, 0.1, 0.2, 0.4)

T = TypeVar("T")


@dataclass(frozen=True)
class SettledRead(Generic[T]):
    """What a file held when it was read: its bytes, what they read as, and its identity then."""

    value: T
    raw: bytes
    identity: reads.Identity | None
    at: float = field(default_factory=time.monotonic)


def unchanged(path: Path, identity: reads.Identity | None, read_at: float) -> bool:
    """True when the file still has the ``identity`` it had when it was read (at ``read_at``, monotonic),
    :data:`SETTLE_PAUSE` or more after that read: a save in progress at the read would have changed
    it by then (its size or times)."""
    waited = time.monotonic() - read_at
    if waited < SETTLE_PAUSE:
        time.sleep(SETTLE_PAUSE - waited)
    return identity is not None and reads.file_identity(path) == identity


def read_settled(path: Path, read: Callable[[bytes], T], *, whole: Callable[[T], bool] | None = None,
                 confirm: bool = True) -> SettledRead[T]:
    """The file once it has settled: ``read(bytes)`` raises no :class:`ParseError`, ``whole`` holds,
    and (``confirm``) it is unchanged a settle pause later. The one settle algorithm of every writer.

    A file that changed within the settle pause is read again at once (for up to :data:`SETTLE_LIMIT`
    seconds: a save in progress); one that does not read whole, after each of :data:`RESETTLE_PAUSES`
    (under a second in all): an editor saving it in place (truncate, then write) is waited out, so
    a partial file never numbers a turn nor is refused as broken. One that stays unreadable is what
    it is: its parse error is raised (:class:`FileBusyError` where its bytes kept changing); one
    that stays not whole, or keeps changing, is returned as last read.
    """
    deadline = time.monotonic() + SETTLE_LIMIT
    pauses = iter(RESETTLE_PAUSES)
    seen: set[bytes] = set()
    error: ParseError | None = None
    last: SettledRead[T] | None = None
    while True:
        identity = reads.file_identity(path)  # taken first: a write during the read shows as a change
        raw = reads.read_bytes_capped(path)
        seen.add(raw)
        try:
            last, error = SettledRead(read(raw), raw, identity), None
        except ParseError as exc:
            last, error = None, exc
        if last is not None and (whole is None or whole(last.value)):
            if not confirm or unchanged(path, identity, last.at):
                return last
            if time.monotonic() < deadline:
                continue  # changed within the pause: a save in progress, read again
        pause = next(pauses, None)
        if pause is None:
            break
        time.sleep(pause)
    if last is not None:
        return last
    assert error is not None
    if len(seen) > 1:
        # Different bytes each time, the last not whole: a file being saved over and over, not a broken one.
        raise FileBusyError("the file kept changing and never read whole; nothing was written",
                            path=path, fix="try again once the other writer is done")
    raise error


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
        if not fsio.atomic_write_text(path, text, precondition=partial(reads.holds, path, raw)):
            # A random pause, growing with the attempts, so a writer saving at a steady rhythm does
            # not land inside our read-edit-write window every time; then wait for its save to end.
            time.sleep(random.uniform(0, min(0.002 * (attempt + 1), 0.05)))
            raw = read_settled(path, bytes).raw
            continue
        fsio.crash_point(f"{name}.after_write")
        again = landed(text) if landed is not None else None
        if again is None:
            return True
        raw = again
    raise FileBusyError(f"the {what} kept changing while it was written ({attempts} attempts); nothing was "
                        "overwritten", path=path, fix="try again once the other writer is done")


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


#: What each file held after this process last wrote it, by real path: while the file still holds
#: exactly those bytes, the next write starts from that (verified) reading instead of parsing the
#: file again. Keyed on the bytes themselves, so any other writer's change misses it.
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
