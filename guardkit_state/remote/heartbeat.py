"""A worker's heartbeat: a thread that renews its claims before their leases end.

Each beat renews every held claim (:meth:`ClaimBoard.renew`) at a third of the lease. A claim
found taken over is dropped and reported through ``on_lost`` (the worker must stop that task); a
remote that cannot be reached is reported through ``on_wait`` and tried again soon, at a twelfth
of the lease (so is a git that could not run: a refused fork, a full disk): a claim is taken over
only once it stood still a whole lease, so a network that drops a beat or two (or stalls one for
seconds) does not cost a live worker its task.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from guardkit_state.errors import ClaimLostError, GitError
from guardkit_state.remote.claim_record import Claim
from guardkit_state.remote.claims import ClaimBoard

log = logging.getLogger("guardkit_state.remote.heartbeat")


class Heartbeat:
    """Renews the claims it holds every ``lease / 3`` seconds until :meth:`stop`."""

    def __init__(self, board: ClaimBoard, lease: float, *,
                 on_lost: Callable[[Claim], None] = lambda claim: None,
                 on_wait: Callable[[GitError], None] = lambda error: None) -> None:
        self.board = board
        self.lease = lease
        self.on_lost = on_lost
        self.on_wait = on_wait
        self._held: dict[str, Claim] = {}
        self._lock = threading.Lock()
        # Held for a whole beat: a claim dropped while its renewal is being pushed is handed back at
        # its new beat (the one on the remote), or its release would find the ref moved and leave it.
        self._beating = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def hold(self, claim: Claim) -> None:
        with self._lock:
            self._held[claim.ref] = claim

    def drop(self, claim: Claim) -> Claim | None:
        """Stop renewing ``claim``; its latest beat (to release it with), or None if it was lost.
        Waits for a beat in flight."""
        with self._beating, self._lock:
            return self._held.pop(claim.ref, None)

    def held(self) -> list[Claim]:
        with self._lock:
            return list(self._held.values())

    def beat(self) -> bool:
        """Renew every held claim once (the thread calls this; tests may too); False when a renewal
        did not reach the remote (it is tried again soon)."""
        with self._beating:
            return self._beat()

    def _beat(self) -> bool:
        reached = True
        for claim in self.held():
            try:
                renewed = self.board.renew(claim, self.lease)
            except ClaimLostError:
                with self._lock:
                    self._held.pop(claim.ref, None)
                log.warning("claim %s was taken over", claim.ref)
                self.on_lost(claim)
                continue
            except GitError as exc:  # unreachable, refused, or git could not run: the lease still runs; next beat
                self.on_wait(exc)  # (never let it end the thread: the claims would stop beating unseen)
                reached = False
                continue
            with self._lock:
                if claim.ref in self._held:
                    self._held[claim.ref] = renewed
        return reached

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="guardkit-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        pause = self.lease / 3
        while not self._stop.wait(pause):
            pause = self.lease / 3 if self.beat() else self.lease / 12


__all__ = ["Heartbeat"]
