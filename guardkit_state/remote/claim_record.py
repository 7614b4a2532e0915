"""A claim as its commit says it: the record (who holds a task, until when, which beat), its
message written and read back, and the bounds on what such a message, written by anyone with push
access, may say (lease lengths and ends, worker ids). The protocol that pushes these commits is
:mod:`~guardkit_state.remote.claims`."""

from __future__ import annotations

import math
import os
import re
import secrets
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from guardkit_state.errors import InputError
from guardkit_state.store.safe_paths import validate_task_id

CLAIMS_PREFIX = "refs/guardkit/claims"
#: The claim a worker holds while it merges a wave of a feature (one merger at a time).
MERGE_CLAIM = "MERGE-WAVES"
_FIELDS = {"kind": "Guardkit-Claim", "worker": "Guardkit-Worker", "nonce": "Guardkit-Nonce",
           "lease_until": "Guardkit-Lease-Until", "beat": "Guardkit-Beat", "task": "Guardkit-Task",
           "feature": "Guardkit-Feature", "previous": "Guardkit-Previous-Worker", "lease": "Guardkit-Lease-Seconds"}
#: Test-only: seconds added to this process's wall clock (the lease ends it writes and reads), as a
#: machine whose clock is off would; set in the environment of a process the chaos campaign starts
#: (read once, at import, like :func:`~guardkit_state.store.fsio.crash_point`'s variable).
CLOCK_SKEW_VARIABLE = "GUARDKIT_STATE_CLOCK_SKEW"


def _skew() -> float:
    try:
        skew = float(os.environ.get(CLOCK_SKEW_VARIABLE) or 0.0)
    except ValueError:
        return 0.0
    return skew if math.isfinite(skew) else 0.0


_SKEW = _skew()


def wall_clock() -> float:
    """The wall clock lease ends are written in (``time.time``, skewed only under test)."""
    return time.time() + _SKEW


_TRAILER = re.compile(r"^(Guardkit-[A-Za-z-]+): (.*)$", re.MULTILINE)

#: The longest lease a claim may ask for (seconds): a day. A worker renews its claims; a claim made
#: through MCP (not renewed) holds an agent's task for at most this long. A lease length a claim
#: carries above it is no lease: the claim is judged by its lease's end, as an older worker's.
MAX_LEASE = 86_400.0
#: How far in the past a lease's end may lie and still read as a time (seconds): a day.
LEASE_PAST = 86_400.0


@dataclass(frozen=True)
class Claim:
    """One claim commit as its message says: who holds the task, until when, which beat.

    ``kind`` is ``claim`` (the root commit), ``renew`` or ``takeover``; ``previous`` names the
    worker a takeover replaced; ``lease`` is the lease's length in seconds (None in a claim of an
    older worker, which did not write it).
    """

    feature: str
    task: str
    sha: str
    worker: str
    nonce: str
    lease_until: float
    beat: int
    kind: str = "claim"
    previous: str | None = None
    lease: float | None = None

    @property
    def ref(self) -> str:
        return claim_ref(self.feature, self.task)

    def message(self) -> str:
        """The claim commit's message, as :func:`parse_claim` reads it back."""
        lines = [f"guardkit {self.kind} {self.task} of {self.feature}", ""]
        values = {"kind": self.kind, "worker": self.worker, "nonce": self.nonce,
                  "lease_until": f"{self.lease_until:.3f}", "beat": str(self.beat), "task": self.task,
                  "feature": self.feature, "previous": self.previous,
                  "lease": None if self.lease is None else f"{self.lease:.3f}"}
        lines += [f"{_FIELDS[key]}: {value}" for key, value in values.items() if value is not None]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, object]:
        return {"feature": self.feature, "task": self.task, "sha": self.sha, "worker": self.worker,
                "lease_until": self.lease_until, "beat": self.beat, "kind": self.kind, "previous": self.previous}


def claim_ref(feature: str, task: str) -> str:
    """``refs/guardkit/claims/<FEAT>/<TASK>``; both ids checked (they become ref names)."""
    validate_task_id(feature)
    validate_task_id(task)
    return f"{CLAIMS_PREFIX}/{feature}/{task}"


def check_lease(lease: float, *, name: str = "lease") -> float:
    """``lease`` when it is a number of seconds a claim may ask for (above 0, at most :data:`MAX_LEASE`).

    Raises:
        InputError: anything else (checked before anything is pushed).
    """
    if isinstance(lease, bool) or not isinstance(lease, (int, float)) or not (
            math.isfinite(lease) and 0 < lease <= MAX_LEASE):
        raise InputError(f"{name} is {lease!r}; expected a number of seconds above 0 and at most {MAX_LEASE:g} "
                         f"(a day)", expected=f"0 < seconds <= {MAX_LEASE:g}")
    return float(lease)


def lease_readable(lease_until: float, now: float) -> bool:
    """Whether a claim's lease end is a time this protocol can have written, seen at ``now``."""
    return math.isfinite(lease_until) and now - LEASE_PAST <= lease_until <= now + 10 * MAX_LEASE


#: A worker id: one line of safe characters (it is written as a claim commit's trailer line, and
#: shown on terminals), as its host name, process and random part spell it.
_WORKER_ID = re.compile(r"[A-Za-z0-9._:@+-]{1,200}")


def check_worker_id(worker: str) -> str:
    """``worker`` when it is a worker id: 1-200 of ``A-Z a-z 0-9 . _ : @ + -``, one line.

    Refused, not cleaned: two ids cleaned alike would pass for one worker, whose claims each may release.

    Raises:
        InputError: anything else (a newline would add trailer lines to the claim commit).
    """
    if not isinstance(worker, str) or _WORKER_ID.fullmatch(worker) is None:
        shown = repr(worker)[:60]
        raise InputError(f"worker id {shown} is not one line of letters, digits and . _ : @ + - (at most 200)",
                         expected="a worker id such as host:1234:ab12cd")
    return worker


def new_worker_id() -> str:
    """A worker's id: its host, its process, and a random part (two runs never share one)."""
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:150] or "host"
    return f"{host}:{os.getpid()}:{secrets.token_hex(3)}"


def parse_claim(feature: str, task: str, sha: str, message: str) -> Claim | None:
    """The claim a commit message describes; None when it is not one (a missing or bad field)."""
    fields = dict(_TRAILER.findall(message))
    try:
        return Claim(feature, task, sha, fields[_FIELDS["worker"]], fields[_FIELDS["nonce"]],
                     float(fields[_FIELDS["lease_until"]]), int(fields[_FIELDS["beat"]]),
                     fields.get(_FIELDS["kind"], "claim"), fields.get(_FIELDS["previous"]),
                     _lease_seconds(fields.get(_FIELDS["lease"])))
    except (KeyError, ValueError):
        return None


def _lease_seconds(text: str | None) -> float | None:
    """A claim's lease length: a finite positive number of seconds, else None (judged by its end)."""
    try:
        seconds = float(text) if text is not None else math.nan
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and 0 < seconds <= MAX_LEASE else None


def utc_text(at: float) -> str:
    """A wall-clock time (a lease's end) as ISO 8601 UTC, to the second; a value no date can
    hold (``nan``, ``inf``, 1e300: read from a claim someone wrote by hand) as itself."""
    try:
        return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")
    except (OverflowError, ValueError, OSError):
        return f"{at!r} (no time)"


__all__ = ["CLAIMS_PREFIX", "CLOCK_SKEW_VARIABLE", "LEASE_PAST", "MAX_LEASE", "MERGE_CLAIM", "Claim", "check_lease",
           "check_worker_id", "claim_ref", "lease_readable", "new_worker_id", "parse_claim", "utc_text", "wall_clock"]
