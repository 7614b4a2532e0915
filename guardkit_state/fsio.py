"""Durable file I/O: atomic replace, per-task locks, safe paths, capped reads.

Every write guardkit-state makes goes through :func:`atomic_write_bytes`: a temp file in the same
directory, the original mode kept, fsync, ``os.replace``, fsync of the directory. A reader never
sees a torn file, and a crash at any instant leaves either the old or the new bytes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import signal
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from .errors import (
    FileTooLargeError,
    GuardkitStateError,
    InvalidTaskIdError,
    LockedError,
    ParseError,
    UnsafePathError,
)

#: Task files and reports above this size are refused before parsing (the largest real task file
#: in the GuardKit corpus is well under 1 MiB; 200 recorded turns are ~300 KB).
MAX_FILE_BYTES = 8 * 1024 * 1024

TEMP_PREFIX = ".gks-tmp-"

_TASK_ID = re.compile(r"^[A-Za-z][A-Za-z0-9]*(-[A-Za-z0-9._]+)+$")


def crash_point(name: str) -> None:
    """Test-only hook: SIGKILL this process when ``GUARDKIT_STATE_CRASH_AT`` names this point.

    The variable holds ``name`` or ``name:N`` (die at the N-th time the point is reached, 1-based).
    The reliability harness uses it to kill the loop inside each write step. Costs one dict lookup
    when unset.
    """
    spec = os.environ.get("GUARDKIT_STATE_CRASH_AT")
    if not spec:
        return
    target, _, count = spec.partition(":")
    if target != name:
        return
    seen = _CRASH_COUNTS.get(name, 0) + 1
    _CRASH_COUNTS[name] = seen
    if seen >= int(count or 1):
        os.kill(os.getpid(), signal.SIGKILL)


_CRASH_COUNTS: dict[str, int] = {}


def fsync_directory(directory: Path) -> None:
    """fsync a directory so a rename inside it survives power loss."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes, *, mode: int | None = None,
                       precondition: Callable[[], bool] | None = None) -> bool:
    """Replace ``path`` with ``data`` atomically and durably; returns True when replaced.

    The file's current permission bits are kept (``mkstemp`` would make it 0600); a new file gets
    ``mode`` or 0644 less the umask. Raises :class:`GuardkitStateError` (with the path) on
    ENOSPC, EROFS, EACCES and friends, after removing the temp file, so the original is untouched.
    ``precondition`` is called after the fsync, just before the rename: when it returns False the
    temp file is removed, nothing is replaced and False is returned (the caller re-reads and
    retries; this keeps the window for a concurrent editor save to microseconds, not an fsync).
    """
    path = Path(path)
    directory = path.parent
    if mode is None:
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o644 & ~umask
    tmp = directory / f"{TEMP_PREFIX}{path.name}.{os.getpid()}.{time.monotonic_ns()}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            crash_point("write.temp_open")
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fchmod(fd, mode)
            crash_point("write.before_fsync")
            os.fsync(fd)
        finally:
            os.close(fd)
        crash_point("write.before_replace")
        if precondition is not None and not precondition():
            os.unlink(tmp)
            return False
        os.replace(tmp, path)
        crash_point("write.after_replace")
        fsync_directory(directory)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise GuardkitStateError(_describe_os_error(exc, "write"), path=path) from exc
    return True


def atomic_write_text(path: Path, text: str, *, mode: int | None = None,
                      precondition: Callable[[], bool] | None = None) -> bool:
    """:func:`atomic_write_bytes` for UTF-8 text (newlines are written exactly as given)."""
    return atomic_write_bytes(path, text.encode("utf-8"), mode=mode, precondition=precondition)


def remove_stale_temp_files(directory: Path) -> list[Path]:
    """Delete temp files a killed writer left in ``directory``; returns what was removed."""
    removed: list[Path] = []
    with contextlib.suppress(FileNotFoundError):
        for entry in directory.iterdir():
            if entry.name.startswith(TEMP_PREFIX):
                with contextlib.suppress(FileNotFoundError):
                    entry.unlink()
                    removed.append(entry)
    return removed


def read_bytes_capped(path: Path, *, limit: int = MAX_FILE_BYTES) -> bytes:
    """Read a whole file, refusing one larger than ``limit`` before reading it."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > limit:
                raise FileTooLargeError(
                    f"file is {size} bytes, over the {limit}-byte limit",
                    path=path,
                    expected=f"at most {limit} bytes",
                )
            return handle.read(limit + 1)
    except OSError as exc:
        raise GuardkitStateError(_describe_os_error(exc, "read"), path=path) from exc


def decode_utf8(data: bytes, path: Path) -> str:
    """Decode UTF-8, naming the file and line of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ParseError(
            f"invalid UTF-8 byte 0x{data[exc.start]:02x}", path=path, line=line, expected="UTF-8 text"
        ) from exc


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
        raise GuardkitStateError(_describe_os_error(exc, "create lock"), path=lock_path) from exc
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
                        expected="one writer per task at a time",
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


def validate_task_id(task_id: str) -> str:
    """Return ``task_id`` if it is a plain id like ``TASK-AUTH-001``; raise otherwise."""
    if not isinstance(task_id, str) or not _TASK_ID.match(task_id) or ".." in task_id:
        shown = repr(task_id)[:80]
        raise InvalidTaskIdError(
            f"invalid task id {shown}",
            task_id=None,
            expected="letters, digits and dashes like TASK-AUTH-001 (no '/', '..', NUL or spaces)",
        )
    return task_id


def resolve_inside(root: Path, candidate: Path) -> Path:
    """Resolve ``candidate`` (following symlinks) and refuse it if it leaves ``root``."""
    root_real = Path(os.path.realpath(root))
    real = Path(os.path.realpath(candidate))
    if real != root_real and root_real not in real.parents:
        raise UnsafePathError(
            f"path resolves outside the repository (to {real})",
            path=candidate,
            expected=f"a path inside {root_real}",
        )
    return real


def _describe_os_error(exc: OSError, action: str) -> str:
    reasons = {
        errno.ENOSPC: "no space left on device",
        errno.EROFS: "read-only file system",
        errno.EACCES: "permission denied",
        errno.EPERM: "operation not permitted",
        errno.ENOENT: "no such file or directory",
        errno.EDQUOT: "disk quota exceeded",
    }
    reason = reasons.get(exc.errno or 0, exc.strerror or str(exc))
    return f"cannot {action} file: {reason}"


def ensure_private_dir(directory: Path) -> Path:
    """Create ``directory`` with a ``.gitignore`` of ``*`` so git never sees what we keep there.

    Used for scratch, logs and caches inside a user's checkout: ``git status`` must not change
    because guardkit-state ran.
    """
    directory.mkdir(parents=True, exist_ok=True)
    marker = directory / ".gitignore"
    if not marker.exists():
        atomic_write_text(marker, "*\n")
    return directory
