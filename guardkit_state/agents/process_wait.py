"""Waiting for an agent's process, not for its pipes.

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
from pathlib import Path
from typing import IO

#: After the agent exits, how long what it printed is still read (a child may hold its pipes).
PIPE_GRACE = 2.0
#: Without a pidfd, how often the agent's exit is looked for while its pipes are silent.
_POLL = 0.05
_CHUNK = 65536


def wait_for_exit(proc: subprocess.Popen[bytes], stdin: bytes | None, timeout: float | None) -> tuple[bytes, bytes]:
    """Feed ``stdin`` to ``proc``, read its stdout and stderr until it exits (plus the grace); both outputs.

    Raises :class:`subprocess.TimeoutExpired` when ``timeout`` seconds pass before it exits (its
    output so far is then dropped, as ``communicate`` drops it).
    """
    assert proc.stdout is not None and proc.stderr is not None  # run with both piped
    deadline = None if timeout is None else time.monotonic() + timeout
    out, err = proc.stdout.fileno(), proc.stderr.fileno()
    chunks: dict[int, list[bytes]] = {out: [], err: []}
    with selectors.DefaultSelector() as selector:
        for pipe in (proc.stdout, proc.stderr):
            selector.register(pipe, selectors.EVENT_READ)
        feed = _Feed(proc.stdin, stdin, selector)
        exit_fd = _pidfd(proc.pid)
        if exit_fd is not None:
            selector.register(exit_fd, selectors.EVENT_READ)
        try:
            _pump(proc, selector, chunks, feed, exit_fd, deadline, timeout)
        finally:
            if exit_fd is not None:
                os.close(exit_fd)
    _close(proc.stdin, proc.stdout, proc.stderr)
    return b"".join(chunks[out]), b"".join(chunks[err])


def _pump(proc: subprocess.Popen[bytes], selector: selectors.BaseSelector, chunks: dict[int, list[bytes]],
          feed: _Feed, exit_fd: int | None, deadline: float | None, timeout: float | None) -> None:
    exited_at: float | None = None
    while True:
        now = time.monotonic()
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        reading = any(key.fd in chunks for key in selector.get_map().values())
        if exited_at is not None and (not reading or now - exited_at >= PIPE_GRACE):
            return
        if exited_at is None and deadline is not None and now >= deadline:
            raise subprocess.TimeoutExpired(proc.args, timeout or 0.0)
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
                    chunks[key.fd].append(data)
                else:
                    selector.unregister(key.fileobj)


class _Feed:
    """The agent's stdin, written as it reads (never blocking the loop on a full pipe), then closed."""

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
        except OSError:  # BrokenPipeError: the agent stopped reading its stdin
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


def group_commands(pgid: int) -> list[str]:
    """The command lines of the live processes in process group ``pgid`` (Linux ``/proc``; else none)."""
    found: list[str] = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text(encoding="ascii", errors="replace").rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid or fields[0] == "Z":
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        found.append(" ".join(a.decode("utf-8", "replace") for a in argv if a)[:120])
    return found


__all__ = ["PIPE_GRACE", "group_commands", "wait_for_exit"]
