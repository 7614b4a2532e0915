"""What a worker of ``feature-build --remote`` is told and what it tells back: its options, its
result, and the interruption that ends it with its claims released (:mod:`~guardkit_state.remote.worker`
runs it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from guardkit_state.errors import InputError
from guardkit_state.remote.claims import check_lease


@dataclass(frozen=True)
class WorkerOptions:
    """How a worker runs: the remote, its lease, how long a heartbeat must stand still to be
    stale (default: half the lease), how often it looks again while waiting."""

    remote: str
    lease: float = 120.0
    stale_after: float | None = None
    poll: float = 2.0
    max_turns: int | None = None
    turn_timeout: float | None = None
    worker: str | None = None
    max_cost: float | None = None
    continue_session: bool = False

    def __post_init__(self) -> None:
        check_lease(self.lease, name="--lease")
        if not self.poll > 0 or self.poll == float("inf"):
            raise InputError(f"--poll is {self.poll!r}; expected a positive number of seconds", expected="seconds > 0")

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

    @property
    def exit_code(self) -> int:
        return 0 if self.done else 1

    def to_dict(self) -> dict[str, object]:
        return {"feature": self.feature, "worker": self.worker, "ran": self.ran, "taken_over": self.taken_over,
                "merged": self.merged, "done": self.done, "reason": self.reason}


class WorkerInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped the worker; its claims were released (``released``)."""

    def __init__(self, feature: str, released: list[str]) -> None:
        told = f"released the claim(s) of {', '.join(released)}" if released else "it held no claim"
        super().__init__(f"worker on {feature} interrupted; {told}; run the same command to go on")
        self.feature = feature
        self.released = released


__all__ = ["WorkerInterrupted", "WorkerOptions", "WorkerResult"]
