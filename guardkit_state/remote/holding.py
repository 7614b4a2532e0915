"""The claims a worker holds: renewed by its heartbeat while it works, released however its work ends."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from guardkit_state.errors import RemoteError
from guardkit_state.remote.claim_record import Claim
from guardkit_state.remote.claims import ClaimBoard
from guardkit_state.remote.heartbeat import Heartbeat


class HeldClaims:
    """One worker's claims: its :class:`Heartbeat`, the tasks whose claims were taken over from it
    (``lost``: it stops them at their next step), and their releases."""

    def __init__(self, board: ClaimBoard, lease: float, note: Callable[[str], None]) -> None:
        self.note = note
        self.heartbeat = Heartbeat(board, lease, on_lost=self._lost,
                                   on_wait=lambda exc: note(f"heartbeat: {exc.message}; will retry"))
        self.lost: set[str] = set()
        self.released_at_stop: list[str] = []

    def _lost(self, claim: Claim) -> None:
        self.lost.add(claim.task)
        self.note(f"{claim.task}: claim taken over by another worker; stopping it here")

    @contextlib.contextmanager
    def holding(self, claim: Claim) -> Iterator[None]:
        """Renewed by the heartbeat while the block runs; released after it, however it ends
        (a Ctrl-C or SIGTERM included: that release is told in the interruption's message)."""
        self.heartbeat.hold(claim)
        stopped = False
        try:
            yield
        except KeyboardInterrupt:
            stopped = True
            raise
        finally:
            held = self.heartbeat.drop(claim)
            if held is not None and self.release(held) and stopped:
                self.released_at_stop.append(claim.task)

    def release(self, claim: Claim) -> bool:
        """Delete ``claim`` on the remote if it is still this one; said, not raised, when the remote fails."""
        try:
            return self.heartbeat.board.release(claim)
        except RemoteError as exc:
            self.note(f"could not release {claim.ref} ({exc.message}); it expires after its lease")
            return False

    def release_all(self) -> list[str]:
        """Every claim still held released (the worker is stopping); the tasks released."""
        released = self.released_at_stop
        for claim in self.heartbeat.held():
            latest = self.heartbeat.drop(claim)  # after a beat in flight: the claim at its new beat
            if latest is not None and self.release(latest):
                released.append(claim.task)
        if released:
            self.note(f"released the claim(s) of {', '.join(released)}")
        return released


__all__ = ["HeldClaims"]
