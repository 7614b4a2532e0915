"""Waiting for a process, not for its pipes.

``Popen.communicate`` returns when the pipes reach end-of-file, which is when *every* process holding
them has closed them: a Player that starts a dev server in the background (``npm run dev &``) and
exits 0 would be waited for as long as the server runs, and with ``--turn-timeout`` its good turn
would be recorded as a timeout. Here the process's exit is what is waited for (a pidfd where Linux
has one, else a short poll); what it printed is then read for :data:`PIPE_GRACE` seconds more at
most, and the pipes are closed.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import subprocess
import time
from typing import IO

#: After the process exits, how long what it printed is still read (a child may hold its pipes).
PIPE_GRACE = 2.0
#: Without a pidfd, how often the process's exit is looked for while its pipes are silent.
_POLL = 0.05
_CHUNK = 65536


def wait_for_exit(proc: subprocess.Popen[bytes], stdin: bytes | None, timeout: float | None,
                  keep: tuple[int | None, int | None] = (None, None)) -> tuple[bytes, bytes, bool]:
    """Feed ``stdin`` to ``proc``, read its stdout and stderr until it exits (plus the grace): both
    outputs, and whether it exited (False: ``timeout`` seconds passed first; it still runs, and its
    output is what it printed until then).

    ``keep``: at most that many bytes of stdout and of stderr are kept, their last ones (a process
    printing without end never fills this one's memory; None: all). A stream not piped reads as ``b""``.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    fds = [None if pipe is None else pipe.fileno() for pipe in (proc.stdout, proc.stderr)]
    streams = [pipe for pipe in (proc.stdout, proc.stderr) if pipe is not None]
    chunks = _Kept({fd: limit for fd, limit in zip(fds, keep, strict=True) if fd is not None})
    with selectors.DefaultSelector() as selector:
        for pipe in streams:
            selector.register(pipe, selectors.EVENT_READ)
        feed = _Feed(proc.stdin, stdin, selector)
        exit_fd = _pidfd(proc.pid)
        if exit_fd is not None:
            selector.register(exit_fd, selectors.EVENT_READ)
        try:
            exited = _pump(proc, selector, chunks, feed, exit_fd, deadline)
        finally:
            if exit_fd is not None:
                os.close(exit_fd)
    _close(proc.stdin, proc.stdout, proc.stderr)
    out, err = (b"" if fd is None else chunks.text(fd) for fd in fds)
    return out, err, exited


class _Kept:
    """What each stream (by descriptor) printed: its last ``limits[fd]`` bytes, or all with None."""

    def __init__(self, limits: dict[int, int | None]) -> None:
        self.limits = limits
        self.parts: dict[int, list[bytes]] = {fd: [] for fd in limits}
        self.sizes = dict.fromkeys(limits, 0)

    def add(self, fd: int, data: bytes) -> None:
        self.parts[fd].append(data)
        self.sizes[fd] += len(data)
        limit = self.limits[fd]
        if limit is not None and self.sizes[fd] > 2 * limit:  # cut now and then, not at every read
            self.parts[fd] = [self.text(fd)]
            self.sizes[fd] = len(self.parts[fd][0])

    def text(self, fd: int) -> bytes:
        data, limit = b"".join(self.parts[fd]), self.limits[fd]
        return data if limit is None else data[-limit:]


def _pump(proc: subprocess.Popen[bytes], selector: selectors.BaseSelector, chunks: _Kept,
          feed: _Feed, exit_fd: int | None, deadline: float | None) -> bool:
    """Read and write until the process exits (True) or the deadline passes (False)."""
    exited_at: float | None = None
    while True:
        now = time.monotonic()
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        reading = any(key.fd in chunks.parts for key in selector.get_map().values())
        if exited_at is not None and (not reading or now - exited_at >= PIPE_GRACE):
            return True
        if exited_at is None and deadline is not None and now >= deadline:
            return False
        if exited_at is not None:
            wait: float | None = exited_at + PIPE_GRACE - now
        else:
            wait = None if deadline is None else deadline - now
            if exit_fd is None or exit_fd not in {key.fd for key in selector.get_map().values()}:
                wait = _POLL if wait is None else min(wait, _POLL)
        if not selector.get_map():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=wait)
            continue
        for key, events in selector.select(wait):
            if key.fd == exit_fd:
                selector.unregister(key.fd)  # exited: seen by poll() above
            elif events & selectors.EVENT_WRITE:
                feed.write()
            else:
                data = _read(key.fd)
                if data:
                    chunks.add(key.fd, data)
                else:
                    selector.unregister(key.fileobj)


class _Feed:
    """The process's stdin, written as it reads (never blocking the loop on a full pipe), then closed."""

    def __init__(self, pipe: IO[bytes] | None, data: bytes | None, selector: selectors.BaseSelector) -> None:
        self.pipe, self.selector = pipe, selector
        self.left = memoryview(data or b"")
        if pipe is None:
            return
        if not self.left:
            _close(pipe)
            return
        os.set_blocking(pipe.fileno(), False)
        selector.register(pipe, selectors.EVENT_WRITE)

    def write(self) -> None:
        assert self.pipe is not None
        try:
            self.left = self.left[os.write(self.pipe.fileno(), self.left[:_CHUNK]):]
        except BlockingIOError:
            return
        except OSError:  # BrokenPipeError: the process stopped reading its stdin
            self.left = memoryview(b"")
        if not self.left:
            self.selector.unregister(self.pipe)
            _close(self.pipe)


def _read(fd: int) -> bytes:
    """What the pipe has (select said it is readable, so this does not block); b"" at its end."""
    try:
        return os.read(fd, _CHUNK)
    except OSError:
        return b""


def _pidfd(pid: int) -> int | None:
    """A descriptor readable once ``pid`` exits (Linux 5.3+), or None: the exit is then polled for."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return int(opener(pid))
    except OSError:
        return None


def _close(*pipes: IO[bytes] | None) -> None:
    for pipe in pipes:
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


__all__ = ["PIPE_GRACE", "wait_for_exit"]
