"""Knowing that nothing changed under some folders without a stat per file: Linux inotify.

A long-running reader (the MCP server) answers the same questions again and again from files that
mostly did not change; telling that they did not took a stat of every file (3,400 on GuardKit's
repository, ~25 ms) per call. A :class:`TreeWatch` asks the kernel instead: it holds an inotify
watch on every folder below its tops (and on some folders alone), and its :meth:`~TreeWatch.generation`
is a number that moves whenever anything in them changed — a file written in place, created,
removed, renamed, its mode or times changed, a folder added (watched at once, before the number is
returned) or removed. A reader keeps what it derived with the generation read *before* it read the
files, and uses it again only while the generation is the same: a change made while it read moves
the number, so it is read again next time.

The generation is None — the reader reads the files as it always did — wherever the kernel's word
could miss a change: no inotify (not Linux, no ``libc``), a folder on a file system whose changes
may come from elsewhere (NFS, SMB, FUSE, 9p, virtiofs: another machine's writes raise no event
here), a symlink below a top (a link's target can change with no event in the folder holding the
link), or a watch the kernel refused (the per-user limit). An overflowed event queue loses no
change: the generation moves and every folder is watched again.

Nothing here reads the files themselves: what to watch, and what a change invalidates, are the
callers' (:func:`guardkit_state.taskfile.read_scope.watch_reads`).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import struct
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # ctypes is loaded by a process that watches (a server), never by a command
    import ctypes

log = logging.getLogger("guardkit_state.store.tree_watch")

_IN_MODIFY, _IN_ATTRIB, _IN_CLOSE_WRITE = 0x2, 0x4, 0x8
_IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x40, 0x80, 0x100, 0x200
_IN_DELETE_SELF, _IN_MOVE_SELF = 0x400, 0x800
_IN_Q_OVERFLOW, _IN_IGNORED, _IN_ISDIR = 0x4000, 0x8000, 0x40000000
_IN_ONLYDIR, _IN_DONT_FOLLOW = 0x01000000, 0x02000000
_IN_NONBLOCK, _IN_CLOEXEC = 0o4000, 0o2000000
#: Every change to a folder's entries or to a file in it (reads and opens are not changes).
_MASK = (_IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE
         | _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_ONLYDIR | _IN_DONT_FOLLOW)
_EVENT = struct.Struct("iIII")
#: File systems whose every change is made through this kernel, so raises an event here.
LOCAL_FILE_SYSTEMS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "f2fs", "jfs", "reiserfs",
                                "bcachefs", "zfs", "overlay", "ramfs", "nilfs2"})


@dataclass(frozen=True)
class Watched:
    """A folder to watch: with everything below it (``deep``, but for its own sub-folders named in
    ``skip``), or alone (its own entries: a new folder in it has the watch planned again)."""

    path: str
    deep: bool = True
    skip: frozenset[str] = frozenset()


class TreeWatch:
    """inotify watches on the folders ``plan()`` names (see the module); planned again whenever a
    folder appears in a folder watched alone (a new loop worktree, a ``tasks/`` created), or
    events were lost."""

    def __init__(self, plan: Callable[[], list[Watched]]) -> None:
        self.plan = plan
        self.tops: list[Watched] = []
        self._mounts: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._generation = 0
        #: False once something made the kernel's word insufficient (see the module): for good.
        self.trusted = True
        self.why_not: str | None = None
        self._wds: dict[int, tuple[str, Watched]] = {}
        self._fd = -1
        self._libc = _libc()
        if self._libc is None:
            self._distrust("no inotify here")
            return
        fd = self._libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            self._distrust(f"inotify_init1: {os.strerror(_errno())}")
            return
        self._fd = fd
        self._replan()

    def _replan(self) -> None:
        """Watch every folder of the plan (a folder watched already keeps its watch)."""
        try:
            self.tops = self.plan()
        except Exception as exc:  # a plan that cannot be made is a watch that cannot be trusted
            self._distrust(f"planning the watch: {exc}")
            return
        self._mounts = _mounts()
        for top in self.tops:
            self._watch_tree(top.path, top)

    def generation(self) -> int | None:
        """A number that moves whenever anything watched changed since it was last asked; None
        when the kernel's word cannot be trusted here (then read the files)."""
        with self._lock:
            if not self.trusted:
                return None
            self._drain()
            return self._generation if self.trusted else None

    def close(self) -> None:
        with self._lock:
            self._distrust("closed")

    def _distrust(self, why: str) -> None:
        if self.trusted:
            log.debug("not watching for changes: %s", why)
        self.trusted = False
        self.why_not = self.why_not or why
        if self._fd >= 0:  # its watches are the user's (a limited number): given back at once
            os.close(self._fd)
            self._fd = -1

    def _drain(self) -> None:
        while self.trusted:
            try:
                data = os.read(self._fd, 64 * 1024)
            except BlockingIOError:
                return
            except OSError as exc:
                self._distrust(f"reading inotify events: {exc}")
                return
            self._generation += 1  # something changed: whatever was read before is read again
            self._events(data)

    def _events(self, data: bytes) -> None:
        offset = 0
        while offset + _EVENT.size <= len(data):
            wd, mask, _, length = _EVENT.unpack_from(data, offset)
            name = data[offset + _EVENT.size: offset + _EVENT.size + length].split(b"\0", 1)[0]
            offset += _EVENT.size + length
            if mask & _IN_Q_OVERFLOW:  # events were lost: a folder created meanwhile may be unwatched
                self._replan()
                continue
            if mask & _IN_IGNORED:
                self._wds.pop(wd, None)
                continue
            where = self._wds.get(wd)
            if where is None or not name:
                continue
            folder, top = where
            path = os.path.join(folder, os.fsdecode(name))
            if mask & _IN_ISDIR and mask & (_IN_CREATE | _IN_MOVED_TO):
                # A new folder: watched (with what it already holds) before anyone reads it.
                if not top.deep or (folder == top.path and os.fsdecode(name) in top.skip):
                    self._replan()  # it may be a folder the plan watches apart (a loop worktree's)
                else:
                    self._watch_tree(path, top)
            elif mask & (_IN_CREATE | _IN_MOVED_TO) and _is_symlink(path):
                self._distrust(f"a symlink appeared: {path}")

    def _watch_tree(self, path: str, top: Watched) -> None:
        """Watch ``path`` (and, for a deep top, every folder below it but the skipped ones)."""
        stack = [path]
        while stack and self.trusted:
            folder = stack.pop()
            if not self._add(folder, top):
                continue
            if not top.deep:
                continue
            try:
                with os.scandir(folder) as listing:
                    entries = list(listing)
            except OSError:
                continue  # gone meanwhile: its parent's event said so
            for entry in entries:
                if entry.is_symlink():
                    self._distrust(f"a symlink below a watched folder: {entry.path}")
                    return
                if entry.is_dir(follow_symlinks=False) and not (folder == top.path and entry.name in top.skip):
                    stack.append(entry.path)

    def _add(self, folder: str, top: Watched) -> bool:
        assert self._libc is not None
        try:
            info = os.stat(folder, follow_symlinks=False)
        except OSError:
            return False  # not there (yet): the watched folder above it sees it arrive
        if not stat.S_ISDIR(info.st_mode):
            return False
        kind = _file_system(folder, self._mounts)
        if kind not in LOCAL_FILE_SYSTEMS:
            self._distrust(f"{folder} is on a {kind or 'unknown'} file system")
            return False
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(folder), _MASK)
        if wd < 0:
            code = _errno()
            if code in (errno.ENOENT, errno.ENOTDIR):
                return False
            self._distrust(f"inotify_add_watch {folder}: {os.strerror(code)}")  # ENOSPC: the watch limit
            return False
        self._wds[wd] = (folder, top)
        return True


def _is_symlink(path: str) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def _errno() -> int:
    import ctypes

    return ctypes.get_errno()


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    except (OSError, AttributeError):
        return None
    return libc


def file_system_of(path: str) -> str | None:
    """The type of the file system holding ``path`` (``ext4``, ``nfs4`` ...), from the mount table;
    None when it cannot be told."""
    return _file_system(path, _mounts())


def _mounts() -> list[tuple[str, str]]:
    """(mount point, file system type) of every mount this process sees."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        fields, _, after = line.partition(" - ")
        parts = fields.split()
        if len(parts) >= 5 and after:
            found.append((parts[4].replace("\\040", " "), after.split()[0]))
    return found


def _file_system(path: str, mounts: list[tuple[str, str]]) -> str | None:
    real = os.path.realpath(path)
    best, kind = "", None
    for point, fs in mounts:
        if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, kind = point, fs
    return kind


#: The watch of each checkout this process asked to watch (:func:`start`), by its path; the oldest
#: is stopped past a few (a server watches one; each watch holds one of the user's inotify instances).
_WATCHES: dict[str, TreeWatch] = {}
_MOST = 4


def start(key: str, plan: Callable[[], list[Watched]]) -> TreeWatch:
    """Watch what ``plan()`` names for the checkout ``key`` (its resolved path) from now on, in
    this process."""
    stop(key)
    while len(_WATCHES) >= _MOST:
        stop(next(iter(_WATCHES)))
    watch = _WATCHES[key] = TreeWatch(plan)
    return watch


def stop(key: str) -> None:
    watch = _WATCHES.pop(key, None)
    if watch is not None:
        watch.close()


def generation(key: str) -> int | None:
    """The generation of the checkout ``key``'s watch (see :meth:`TreeWatch.generation`); None when
    this process watches it not (a command: it reads the files) or cannot trust its watch."""
    watch = _WATCHES.get(key)
    return None if watch is None else watch.generation()


with contextlib.suppress(Exception):  # a process that forks keeps no watch of its parent's
    os.register_at_fork(after_in_child=_WATCHES.clear)


__all__ = ["LOCAL_FILE_SYSTEMS", "TreeWatch", "Watched", "file_system_of", "generation", "start", "stop"]
