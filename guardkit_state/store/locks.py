"""Per-task (and per-index) locks: one writer at a time, and a lock that dies with its process.

An ``flock`` on a small file. The kernel releases it when the holder exits, however it exits, so
a SIGKILLed writer never leaves a stale lock behind (git's own ``.lock`` files can be left; those
are :mod:`guardkit_state.git.stale_locks`). Where a task's lock file lives is
:func:`guardkit_state.store.layout.task_lock_file`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from guardkit_state.errors import GuardkitStateError, LockedError
from guardkit_state.store.reads import describe_os_error


@contextlib.contextmanager
def exclusive_lock(lock_path: Path, *, wait: float = 0.0, holder: str = "") -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path`` for the duration of the block.

    ``wait=0`` fails fast with :class:`LockedError`; otherwise it retries for ``wait`` seconds.
    The lock dies with its process, so a SIGKILLed writer never leaves a stale lock behind.
    The file records the holder's pid and ``holder`` text so the error can say who has it.
    """
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:  # a read-only or full file system: say so, naming the lock file
        raise GuardkitStateError(describe_os_error(exc, "create lock"), path=lock_path) from exc
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    other = _read_lock_owner(fd)
                    raise LockedError(
                        f"another guardkit-state process holds this lock{other}",
                        path=lock_path,
                        fix="wait for it to finish, or stop it (one writer per task at a time)",
                    ) from None
                time.sleep(0.01)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {holder}".strip().encode() + b"\n", 0)
        yield
    finally:
        os.close(fd)


def _read_lock_owner(fd: int) -> str:
    with contextlib.suppress(OSError):
        owner = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
        if owner:
            return f" (pid {owner})"
    return ""


__all__ = ["exclusive_lock"]
