"""What a worker of ``feature-build --remote`` is told and what it tells back: its options, its
result, and the interruption that ends it with its claims released (:mod:`~guardkit_state.remote.worker`
runs it)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from guardkit_state.errors import InputError
from guardkit_state.remote.claim_record import check_lease


@dataclass(frozen=True)
class WorkerOptions:
    """How a worker runs: the remote, its lease, how long a heartbeat must stand still to be
    stale (at least; a claim is taken over only once it stood still its whole lease), how often it
    looks again while waiting, and after how many runs ending in a dead worker or a crash a task
    is quarantined."""

    remote: str
    lease: float = 120.0
    stale_after: float | None = None
    poll: float = 2.0
    max_turns: int | None = None
    turn_timeout: float | None = None
    worker: str | None = None
    max_cost: float | None = None
    continue_session: bool = False
    quarantine_after: int = 3
    #: False: a failed task does not stop the feature (its dependents are skipped); None: as the plan says.
    stop_on_failure: bool | None = None

    def __post_init__(self) -> None:
        check_lease(self.lease, name="--lease")
        if not self.poll > 0 or self.poll == float("inf"):
            raise InputError(f"--poll is {self.poll!r}; expected a positive number of seconds", expected="seconds > 0")
        if not 1 <= self.quarantine_after <= 1000:
            raise InputError(f"--quarantine-after is {self.quarantine_after!r}; expected a number of runs from 1 "
                             f"to 1000", expected="1 to 1000")

    @property
    def stale(self) -> float:
        return self.stale_after if self.stale_after is not None else self.lease / 2


@dataclass
class WorkerResult:
    """What one worker did: the tasks it ran (and took over), the waves it merged, how it ended."""

    feature: str
    worker: str
    ran: list[str] = field(default_factory=list)
    taken_over: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    done: bool = False
    reason: str = ""
    #: Every wave done, but without these tasks (failed, or skipped for a failure that did not stop
    #: the feature: ``--no-stop-on-failure``); ``done`` is then False.
    without: list[str] = field(default_factory=list)
    #: Where its time went, in seconds, by kind: ``start`` (before its first look), ``look``
    #: (``ls-remote``), ``fetch``, ``claim`` (claims, takeovers, releases), ``push``, ``run`` (task
    #: loops, their pushes apart), ``merge`` (its pushes apart), ``merge_wait`` (waiting on another
    #: worker's merge), ``wait`` (nothing to claim), ``step`` (reading where tasks stand, deciding).
    seconds: dict[str, float] = field(default_factory=dict)
    _kind: str | None = field(default=None, repr=False)
    _mark: float = field(default=0.0, repr=False)

    @property
    def exit_code(self) -> int:
        return 0 if self.done else 1

    @contextlib.contextmanager
    def timed(self, kind: str) -> Iterator[None]:
        """Count the block's time as ``kind``'s (a block inside it counts as its own kind only)."""
        outer = self._kind
        self._charge()
        self._kind = kind
        try:
            yield
        finally:
            self._charge()
            self._kind = outer

    def _charge(self) -> None:
        now = time.perf_counter()
        if self._kind is not None:
            self.seconds[self._kind] = self.seconds.get(self._kind, 0.0) + now - self._mark
        self._mark = now

    def to_dict(self) -> dict[str, object]:
        return {"feature": self.feature, "worker": self.worker, "ran": self.ran, "taken_over": self.taken_over,
                "merged": self.merged, "done": self.done, "without": self.without, "reason": self.reason,
                "seconds": {kind: round(value, 3) for kind, value in sorted(self.seconds.items())}}


class WorkerInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped the worker; its claims were released (``released``)."""

    def __init__(self, feature: str, released: list[str]) -> None:
        told = f"released the claim(s) of {', '.join(released)}" if released else "it held no claim"
        super().__init__(f"worker on {feature} interrupted; {told}; run the same command to go on")
        self.feature = feature
        self.released = released


__all__ = ["WorkerInterrupted", "WorkerOptions", "WorkerResult"]
