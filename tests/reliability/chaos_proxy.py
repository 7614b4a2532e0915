"""A TCP proxy on loopback that makes a network unreliable: in front of ``git daemon`` in the chaos campaign.

Each connection it accepts is forwarded to ``target`` and, as a seeded draw decides, delayed (every
chunk held a while), dropped (both ends closed after a few chunks, mid-conversation: a push may
land with its answer lost), or stalled (nothing forwarded for a second or two, then dropped or
let go on). What it did is counted in :attr:`ChaosProxy.counts`. The draws are seeded; which git
call meets which fault depends on the order the connections come in.
"""

from __future__ import annotations

import contextlib
import random
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass


@dataclass(frozen=True)
class Faults:
    """How often (per connection) each fault is drawn, and how long a delay or a stall lasts."""

    delay: float = 0.25
    drop: float = 0.06
    stall: float = 0.04
    max_delay: float = 0.08  # per chunk
    stall_seconds: tuple[float, float] = (0.5, 2.0)


class ChaosProxy:
    """Listens on 127.0.0.1 (``port``) and forwards to ``target`` (host, port) with :class:`Faults`."""

    def __init__(self, target: tuple[str, int], seed: int, faults: Faults = Faults()) -> None:
        self.target = target
        self.faults = faults
        self.random = random.Random(seed)
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(128)
        self.port = int(self._server.getsockname()[1])
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="chaos-proxy", daemon=True)

    def url(self, name: str) -> str:
        return f"git://127.0.0.1:{self.port}/{name}"

    def __enter__(self) -> ChaosProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        with contextlib.suppress(OSError):
            self._server.close()
        self._thread.join(5)

    def _draw(self) -> tuple[str, int, float]:
        """This connection's fault: its kind, after how many chunks, and how long (seconds)."""
        with self._lock:
            roll = self.random.random()
            after = self.random.randint(0, 4)
            low, high = self.faults.stall_seconds
            seconds = self.random.uniform(low, high)
            kind = ("drop" if roll < self.faults.drop else "stall" if roll < self.faults.drop + self.faults.stall
                    else "delay" if roll < self.faults.drop + self.faults.stall + self.faults.delay else "clean")
            self.counts["connections"] += 1
            self.counts[kind] += 1
            return kind, after, seconds

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            kind, after, seconds = self._draw()
            state = _Link(client, upstream, kind, after, seconds, self.faults.max_delay, random.Random(seconds))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=state.pump, args=(source, sink), daemon=True).start()


class _Link:
    """One proxied connection: both directions pumped, the fault applied once ``after`` chunks passed."""

    def __init__(self, client: socket.socket, upstream: socket.socket, kind: str, after: int, seconds: float,
                 max_delay: float, rng: random.Random) -> None:
        self.sockets = (client, upstream)
        self.kind, self.after, self.seconds, self.max_delay = kind, after, seconds, max_delay
        self.rng = rng
        self.chunks = 0
        self.lock = threading.Lock()
        self.closed = False

    def pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if not self._before_forward():
                    break
                sink.sendall(data)
        except OSError:
            pass
        self.close()

    def _before_forward(self) -> bool:
        """Apply the fault before a chunk is forwarded; False when the connection is dropped."""
        with self.lock:
            self.chunks += 1
            due = self.chunks > self.after
            kind = self.kind
            if due and kind == "stall":
                self.kind = "drop" if self.rng.random() < 0.5 else "clean"  # then dropped, or let go on
            pause = self.rng.uniform(0, self.max_delay) if kind == "delay" else 0.0
        if self.closed:
            return False
        if due and kind == "drop":
            return False
        if due and kind == "stall":
            time.sleep(self.seconds)
            return self._before_forward() if self.kind == "drop" else not self.closed
        if pause:
            time.sleep(pause)
        return not self.closed

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


__all__ = ["ChaosProxy", "Faults"]
