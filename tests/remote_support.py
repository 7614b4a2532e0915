"""Remotes for the many-machines tests: a bare repository over file:// and over git daemon on
loopback, and clones of it as the machines."""

from __future__ import annotations

import contextlib
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import run_git


def make_bare(root: Path, seed: Path) -> Path:
    """A bare repository at ``root/remote.git`` holding ``seed``'s ``main``."""
    bare = root / "remote.git"
    run_git(root, "init", "-q", "--bare", "-b", "main", str(bare))
    run_git(seed, "push", "-q", str(bare), "main")
    return bare


def clone(url: str, where: Path) -> Path:
    run_git(where.parent, "clone", "-q", url, str(where))
    return where


@dataclass
class Daemon:
    """``git daemon`` serving ``base`` on 127.0.0.1:``port``; stopped by :meth:`stop`."""

    base: Path
    port: int
    process: subprocess.Popen[bytes] | None = None

    def url(self, name: str) -> str:
        return f"git://127.0.0.1:{self.port}/{name}"

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack", "--informative-errors",
             f"--base-path={self.base}", "--listen=127.0.0.1", f"--port={self.port}", str(self.base)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(500):  # until it accepts connections (or died)
            assert self.process.poll() is None, "git daemon exited at start"
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return
            subprocess.run(["sleep", "0.02"], check=False)
        raise AssertionError("git daemon never listened")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()  # the one process this test started, by its handle
            self.process.wait()
        self.process = None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def git_daemon(base: Path) -> Iterator[Daemon]:
    daemon = Daemon(base, free_port())
    daemon.start()
    try:
        yield daemon
    finally:
        daemon.stop()
