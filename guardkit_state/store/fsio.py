"""Durable writes: atomic replace, appends, the temp files a killed writer leaves, and the test
crash points (the reads are :mod:`.reads`, the locks :mod:`.locks`).

Every write guardkit-state makes goes through :func:`atomic_write_bytes`: a temp file in the same
directory, the original mode, owner and group kept, fsync, ``os.replace``, fsync of the directory.
A reader never sees a torn file, and a crash at any instant leaves either the old or the new bytes.
Writes are capped like reads, and nothing that a replace would damage (a hard link, a read-only
file, a FIFO) is replaced.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import stat
import time
from collections.abc import Callable
from pathlib import Path

from guardkit_state.errors import (
    FileTooLargeError,
    GuardkitStateError,
    NotRegularFileError,
    UnsafePathError,
    UnwritableFileError,
)
from guardkit_state.store.layout import GUARDKIT_DIR, TASKS_DIR
from guardkit_state.store.reads import MAX_FILE_BYTES, describe_os_error, file_kind
from guardkit_state.store.safe_paths import resolve_inside

TEMP_PREFIX = ".gks-tmp-"
#: The exact name :func:`atomic_write_bytes` gives its temp file: ``.gks-tmp-<name>.<pid>.<ns>``, ns
#: being ``time.monotonic_ns()`` (never under 6 digits). Only a name in this form is ever ours to
#: delete or keep out of a commit: a user's ``.gks-tmp-release.2024.11`` is not.
TEMP_NAME = re.compile(rf"{re.escape(TEMP_PREFIX)}.+\.([1-9][0-9]*)\.[0-9]{{6,}}")


def crash_point(name: str) -> None:
    """Test-only hook: SIGKILL this process when ``GUARDKIT_STATE_CRASH_AT`` names this point.

    The variable holds ``name`` or ``name:N`` (die at the N-th time the point is reached, 1-based).
    The reliability harness uses it to kill the loop inside each write step, in a process it starts
    with the variable set. A process started without it never looks again (a turn passes ~18
    points; each lookup in ``os.environ`` costs ~2 µs); one started with it reads it at each point,
    so that removing it (as the test suite does, after importing the package) disarms the hook.
    """
    if not _CRASH_ARMED_AT_START:
        return
    spec = os.environ.get(_CRASH_VARIABLE)
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
_CRASH_VARIABLE = "GUARDKIT_STATE_CRASH_AT"
_CRASH_ARMED_AT_START = bool(os.environ.get(_CRASH_VARIABLE))


def fsync_directory(directory: Path | str) -> None:
    """fsync a directory so a rename inside it survives power loss."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes, *, mode: int | None = None,
                       precondition: Callable[[], bool] | None = None,
                       limit: int | None = MAX_FILE_BYTES) -> bool:
    """Replace ``path`` with ``data`` atomically and durably; returns True when replaced.

    Refused before anything is created (typed :class:`InputError` subclasses naming the file):
    ``data`` over ``limit`` bytes (the read cap: the store never writes a file it could not read
    back), a FIFO or device, a read-only file, a file with several hard links, a file whose owner
    or group could not be kept, a symlink leaving its checkout. A symlink inside it is written
    through: the target is replaced (the temp file sits beside it) and the link stays a link.

    Mode, owner and group are kept; a new file gets ``mode``, or is made 0644 as any program makes
    one there (less the umask, or as the folder's default ACL says). OS errors
    (ENOSPC, EROFS, EACCES ...) raise :class:`GuardkitStateError` with the path after the temp
    file is removed, so the original is untouched. ``precondition`` is called after the fsync,
    just before the rename: when it returns False the temp file is removed, nothing is replaced
    and False is returned (the caller re-reads and retries; this keeps the window for a
    concurrent editor save to microseconds, not an fsync).
    """
    return atomic_write_stat(path, data, mode=mode, precondition=precondition, limit=limit) is not None


def atomic_write_stat(path: Path, data: bytes, *, mode: int | None = None,
                      precondition: Callable[[], bool] | None = None,
                      limit: int | None = MAX_FILE_BYTES) -> os.stat_result | None:
    """:func:`atomic_write_bytes`, returning the new file's status (None when ``precondition``
    said no): taken from the file's own descriptor after the rename, so it is this write's file
    even if another writer replaced it since, and no path is looked up again to learn it."""
    path = path if isinstance(path, Path) else Path(path)
    target, existing = _prepare(path, len(data), limit, check_folder=False)
    if mode is None and existing is not None:
        mode = stat.S_IMODE(existing.st_mode)
    # Plain strings from here on: the names go to half a dozen system calls, and a Path is turned
    # back into a string for each (a measurable share of writing a small file).
    target_name = os.fspath(target)
    directory, name = os.path.split(target_name)
    directory = directory or "."
    tmp = os.path.join(directory, f"{TEMP_PREFIX}{name}.{os.getpid()}.{time.monotonic_ns()}")
    fd = -1
    try:
        try:
            fd = _write_temp(tmp, data, mode, existing, target)
        except OSError:
            # Checked here, not before each write: a folder that cannot take the temp file is rare,
            # and this names the reason (read-only file system, folder permissions) as check_writable does.
            _discard(tmp)
            _check_folder(target)
            raise
        crash_point("write.before_replace")
        if precondition is not None and not precondition():
            os.unlink(tmp)
            return None
        os.replace(tmp, target_name)
        crash_point("write.after_replace")
        written = os.fstat(fd)  # after the rename: its ctime is the file's from now on
        fsync_directory(directory)
    except OSError as exc:
        _discard(tmp)
        raise GuardkitStateError(describe_os_error(exc, "write"), path=path) from exc
    except BaseException:
        _discard(tmp)
        raise
    finally:
        if fd >= 0:
            os.close(fd)
    return written


def _write_temp(tmp: str, data: bytes, mode: int | None, existing: os.stat_result | None, target: Path) -> int:
    """Write and fsync the temp file; its descriptor, still open (the caller closes it). ``mode``
    None: a new file's, 0644 less the umask (as the kernel applies it when the file is created: no
    umask call, which would race other threads' files)."""
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644 if mode is None else 0o600)
    try:
        crash_point("write.temp_open")
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if existing is not None:
            _keep_owner(fd, existing, target)  # before fchmod: a chown may clear set-id bits
        if mode is not None:
            os.fchmod(fd, mode)
        crash_point("write.before_fsync")
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _discard(tmp: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def atomic_write_text(path: Path, text: str, *, precondition: Callable[[], bool] | None = None,
                      limit: int | None = MAX_FILE_BYTES) -> bool:
    """:func:`atomic_write_bytes` for UTF-8 text (newlines are written exactly as given)."""
    return atomic_write_bytes(path, text.encode("utf-8"), precondition=precondition, limit=limit)


def append_line(path: Path, line: str) -> None:
    """Append ``line`` (no newline in it) to ``path`` durably: written, flushed and fsynced before
    this returns. An append, not a rewrite, for the ledgers read line by line: a line a kill cuts
    short fails its reader's check and is not trusted, the lines before it stay whole, and the next
    append starts on a line of its own."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as handle:
        torn = handle.tell() > 0 and _last_byte(path) != b"\n"
        handle.write((("\n" if torn else "") + line + "\n").encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())


def _last_byte(path: Path) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1)


# --------------------------------------------------------------------------- what a write may replace


def check_writable(path: Path, size: int = 0, *, limit: int | None = MAX_FILE_BYTES) -> Path:
    """Raise what :func:`atomic_write_bytes` would refuse for ``size`` bytes at ``path``, writing
    nothing (check the last of several files before writing the first); returns the file replaced."""
    return _prepare(Path(path), size, limit)[0]


def _prepare(path: Path, size: int, limit: int | None, *,
             check_folder: bool = True) -> tuple[Path, os.stat_result | None]:
    if limit is not None and size > limit:
        # The cap is the one every read applies: a file written over it could never be read again.
        cap = f"{limit // 2**20} MiB" if limit % 2**20 == 0 else f"{limit}-byte"
        raise FileTooLargeError(f"refusing to write {size} bytes: over the {cap} limit task files are read with; "
                                "nothing was written", path=path, expected=f"at most {limit} bytes")
    info = _lstat(path)
    if info is not None and stat.S_ISLNK(info.st_mode):
        target = _write_target(path)
        info = _replaceable(target, _lstat(target))
    else:
        target, info = path, _replaceable(path, info)
    if check_folder:
        _check_folder(target)
    return target, info


def _check_folder(target: Path) -> None:
    """The new file is renamed into ``target``'s folder: that folder must take it too."""
    folder = target.parent
    read_only = _read_only_fs(folder)
    if read_only is None:
        return  # a folder that is not there: the write itself says so, with the path
    if read_only:
        raise UnwritableFileError(f"{folder} is on a read-only file system; nothing was written", path=target,
                                  fix="work in a checkout on a writable file system")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UnwritableFileError(f"its folder {folder} cannot take a new file (read-only or immutable); "
                                  "nothing was written", path=target,
                                  fix=f"make the folder writable (chmod u+w {folder})")


def _write_target(path: Path) -> Path:
    """The file a write to ``path`` replaces: ``path``, or a symlink's final target (replacing the
    link would make it a regular file and starve the target). Followed only inside its checkout:
    a link planted in a repository must not make the store write outside it."""
    if not os.path.islink(path):
        return path
    boundary = _checkout_of(path)
    if boundary is None:
        raise UnsafePathError(
            "is a symlink outside any checkout (no .git, tasks/ or .guardkit/ above it); not written through",
            path=path, expected="a regular file, or a symlink to a file inside the repository",
        )
    return resolve_inside(boundary, path)


def _checkout_of(path: Path) -> Path | None:
    """The checkout ``path`` lies in: the nearest folder holding ``.git``, or the parent of the
    nearest ``tasks``/``.guardkit`` folder (every file the store writes lives under one of them)."""
    folder = Path(os.path.abspath(path)).parent
    for candidate in (folder, *folder.parents):
        if os.path.lexists(candidate / ".git"):
            return candidate
        if candidate.name in (TASKS_DIR, GUARDKIT_DIR):
            return candidate.parent
    return None


def _lstat(path: Path) -> os.stat_result | None:
    """``os.lstat(path)``, None when nothing is there; other OS errors name the file."""
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise GuardkitStateError(describe_os_error(exc, "write"), path=path) from exc


def _replaceable(target: Path, info: os.stat_result | None) -> os.stat_result | None:
    """``info`` (the lstat of ``target``, None when there is none) once ``target`` is safe to replace."""
    if info is None:
        return None
    if not stat.S_ISREG(info.st_mode):
        raise NotRegularFileError(f"not a regular file ({file_kind(info.st_mode)}); refusing to replace it",
                                  path=target, expected="a regular file")
    if info.st_nlink > 1:
        # os.replace gives the name a new inode: the other names would keep the old text for ever.
        # No write is both atomic and shared by every link, so refuse rather than split them.
        raise UnwritableFileError(
            f"has {info.st_nlink} hard links; an atomic replace would cut it off from the others, "
            "so nothing was written",
            path=target, fix="replace the hard link by a copy or a symlink",
        )
    if not info.st_mode & stat.S_IWUSR:
        raise UnwritableFileError("read-only; make it writable (chmod u+w) to record turns", path=target)
    _check_owner(target, info)
    if not os.access(target, os.W_OK) and not _read_only_fs(target.parent):
        raise UnwritableFileError("not writable by this user; make it writable (chmod u+w) to record turns",
                                  path=target)
    return info


def _check_owner(target: Path, info: os.stat_result) -> None:
    """Refuse a replace that would give the file another owner or group: renamed over by us, another
    user's 0644 file would become ours and unwritable for its owner. Root can fchown it back."""
    euid = os.geteuid()
    if euid == 0:
        return
    if info.st_uid != euid:
        raise UnwritableFileError(
            f"owned by uid {info.st_uid}, not by this user (uid {euid}): replacing it would change its owner, "
            "so nothing was written",
            path=target, fix="run as the file's owner",
        )
    if info.st_gid != _new_file_gid(target.parent) and info.st_gid not in {os.getegid(), *os.getgroups()}:
        raise UnwritableFileError(
            f"its group (gid {info.st_gid}) is not one of this user's: replacing it would change its group, "
            "so nothing was written",
            path=target, fix="give the file a group this user belongs to (chgrp)",
        )


def _keep_owner(fd: int, existing: os.stat_result, target: Path) -> None:
    current = os.fstat(fd)
    if (current.st_uid, current.st_gid) == (existing.st_uid, existing.st_gid):
        return
    try:
        os.fchown(fd, existing.st_uid, existing.st_gid)
    except PermissionError as exc:
        raise UnwritableFileError(
            f"the replacement cannot keep the file's owner and group (uid {existing.st_uid}, gid "
            f"{existing.st_gid}), so nothing was written",
            path=target,
            fix="run as the file's owner",
        ) from exc


def _new_file_gid(directory: Path) -> int:
    """The group a file created in ``directory`` gets (the folder's when it is set-group-id)."""
    try:
        info = os.stat(directory)
    except OSError:
        return os.getegid()
    return info.st_gid if info.st_mode & stat.S_ISGID else os.getegid()


def _read_only_fs(directory: Path) -> bool | None:
    """Whether ``directory`` is on a read-only file system (None: it cannot be looked at)."""
    try:
        return bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
    except OSError:
        return None


# --------------------------------------------------------------------------- temp files


#: A temp file this old is debris even if a process with its writer's pid is alive (the pid was
#: reused, or the writer is on another host sharing the folder): a write takes milliseconds.
STALE_TEMP_SECONDS = 10 * 60


def remove_stale_temp_files(directory: Path) -> list[Path]:
    """Delete temp files killed writers left in ``directory``; returns what was removed.

    Safe while others write there (at the start of ``record`` as of the loop): only a temp file
    whose writer (the pid in its name) is gone, or older than :data:`STALE_TEMP_SECONDS`, is removed;
    a live writer's, this process's included, never is.
    """
    removed: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return removed
    now = time.time()
    for entry in entries:
        # Only names in the exact form this module writes: a user's ``.gks-tmp-notes.md`` is theirs.
        if _writer_pid(entry.name) is not None and _is_stale(entry, now):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


def _is_stale(entry: os.DirEntry[str], now: float) -> bool:
    try:
        info = entry.stat(follow_symlinks=False)
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(info.st_mode):
        return False
    pid = _writer_pid(entry.name)
    if pid is None or pid == os.getpid():
        return False
    return now - info.st_mtime > STALE_TEMP_SECONDS or not _pid_alive(pid)


def _writer_pid(name: str) -> int | None:
    """The pid in ``.gks-tmp-<name>.<pid>.<ns>``, or None for a name not in that form (:data:`TEMP_NAME`)."""
    match = TEMP_NAME.fullmatch(name)
    return int(match.group(1)) if match else None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except PermissionError:  # alive, owned by another user
        return True
    except (OverflowError, OSError):  # ProcessLookupError: gone
        return False
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """True when ``pid`` has exited and waits to be reaped (Linux /proc): it never writes again. A
    killed feature run's orphaned task loop stays so until init reaps it (seconds on some hosts, for
    ever under a container's PID 1 that never reaps), and ``kill(pid, 0)`` still finds it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()  # after the command name, which may hold ")"
    except (OSError, IndexError):
        return False
    return bool(fields) and fields[0] in (b"Z", b"X")


def ensure_private_dir(directory: Path, *, marker: str = "*\n") -> Path:
    """Create ``directory`` with a ``.gitignore`` of ``*`` (``marker``, which may say why above it)
    so git never sees what we keep there.

    Used for scratch, logs and caches inside a user's checkout: ``git status`` must not change
    because guardkit-state ran. The folder is ours alone, so the temp files killed writers left in
    it (of the marker itself, or of a cache) are removed here: some such folders (a plan's locks)
    are looked at by no run's tidy-up, and the ``*`` hides what stays from git status.
    """
    directory.mkdir(parents=True, exist_ok=True)
    remove_stale_temp_files(directory)
    ignore = directory / ".gitignore"
    if not ignore.exists():
        atomic_write_text(ignore, marker)
    return directory
