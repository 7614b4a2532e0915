"""Reads of regular files, capped and never blocking, and what tells a file's versions apart.

A file is read whole only under a size cap (:data:`MAX_FILE_BYTES`), checked before and after it is
opened; a FIFO, socket or device is refused without a blocking open (a FIFO named like a task file
must not hang a command). The writes are :mod:`.fsio`'s.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from guardkit_state.errors import FileTooLargeError, GuardkitStateError, NotRegularFileError, ParseError

#: Task files and reports above this size are refused before parsing (the largest real task file
#: in the GuardKit corpus is well under 1 MiB; 200 recorded turns are ~300 KB).
MAX_FILE_BYTES = 8 * 1024 * 1024


#: What tells a file's versions apart: inode, size, modification and change times (ns).
Identity = tuple[int, int, int, int]


def identity_of(st: os.stat_result) -> Identity:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def file_identity(path: Path) -> Identity | None:
    """The identity of the regular file at ``path`` now (None when there is none): a write gives the
    file another (a new inode, size or time), so a file whose identity is unchanged since a read
    (taken just before it) is the file that was read."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return identity_of(st) if stat.S_ISREG(st.st_mode) else None


def read_bytes_capped(path: Path, *, limit: int = MAX_FILE_BYTES) -> bytes:
    """Read a whole regular file, refusing one larger than ``limit`` before reading it.

    A FIFO, socket or device is refused (:class:`NotRegularFileError`) without a blocking open:
    a FIFO named like a task file must not hang a command.
    """
    path = path if isinstance(path, Path) else Path(path)
    fd, size = _open_regular(path)
    try:
        if size > limit:
            raise too_large(path, f"file is {size} bytes", limit)
        data = _read_upto(fd, limit + 1, path)
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew after the fstat
        raise too_large(path, "file grew while it was read", limit)
    return data


def read_head(path: Path, size: int) -> bytes:
    """The first ``size`` bytes of a regular file (never a blocking open, as :func:`read_bytes_capped`)."""
    fd, _ = _open_regular(path if isinstance(path, Path) else Path(path))
    try:
        return _read_upto(fd, size, path)
    finally:
        os.close(fd)


def holds(path: Path, expected: bytes) -> bool:
    """True when the file at ``path`` still holds exactly ``expected`` (a missing, unreadable or
    special file does not). A comparison, not a read: a file of another size is never opened."""
    try:
        if os.stat(path).st_size != len(expected):
            return False
        fd, _ = _open_regular(path)
    except (OSError, GuardkitStateError):
        return False
    try:
        return _read_upto(fd, len(expected) + 1, path) == expected
    except GuardkitStateError:
        return False
    finally:
        os.close(fd)


def too_large(path: Path | str, what: str, limit: int, why: str = "") -> FileTooLargeError:
    """The error of a file (or ``rev:path`` of one in git) over the ``limit``-byte cap, read or not."""
    return FileTooLargeError(f"{what}, over the {limit}-byte limit{why}", path=path, expected=f"at most {limit} bytes")


def _open_regular(path: Path) -> tuple[int, int]:
    """An fd on ``path`` and its size, after checking (before and after the open) it is a regular file."""
    try:
        before = os.stat(path)
        if stat.S_ISREG(before.st_mode):
            # O_NONBLOCK: should the name be swapped for a FIFO meanwhile, the open still returns.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
            info = os.fstat(fd)
            if stat.S_ISREG(info.st_mode):
                return fd, info.st_size
            os.close(fd)
            before = info
    except OSError as exc:
        raise GuardkitStateError(describe_os_error(exc, "read"), path=path) from exc
    raise NotRegularFileError(f"not a regular file ({file_kind(before.st_mode)}); refusing to open it",
                              path=path, expected="a regular file")


def _read_upto(fd: int, size: int, path: Path) -> bytes:
    chunks: list[bytes] = []
    remaining = size
    try:
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    except OSError as exc:
        raise GuardkitStateError(describe_os_error(exc, "read"), path=path) from exc
    return b"".join(chunks)


def decode_utf8(data: bytes, path: Path) -> str:
    """Decode UTF-8, naming the file and line of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ParseError(
            f"invalid UTF-8 byte 0x{data[exc.start]:02x}", path=path, line=line, expected="UTF-8 text"
        ) from exc


def describe_os_error(exc: OSError, action: str) -> str:
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



def file_kind(mode: int) -> str:
    kinds = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symlink"))
    return next((name for test, name in kinds if test(mode)), "a special file")
