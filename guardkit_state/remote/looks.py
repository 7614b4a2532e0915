"""What a worker of ``feature-build --remote`` knows of the remote between its fetches.

Each step of a worker (:mod:`~guardkit_state.remote.worker`) begins with one look at the remote
(``ls-remote`` of the loop branches and the feature's claims). A fetch is made only when the look
says something the worker has not read may change what it does:

* nothing moved, or only the branches of tasks running elsewhere under claims it read
  (:func:`~guardkit_state.remote.known_states.what_moved` ``running``): what it read still holds;
* claims made since its last fetch, while it waits (``claimed``): it waits on, for the same reason
  (or because another worker merges, when the new claim is the merge claim), since a new claim
  only takes work away. At a wave's end all the waiting workers used to fetch for the merge claim,
  then for the next task's claim, on the CPUs the merger and that task need. A claim it has not
  read is read once it changes or goes, or grows older than a quarter of the time a claim takes to
  go stale (a holder that died at once is found out long before its claim can be taken over);
* a claim it has read (by its fetch, or in a lost race since) gone or moved: a fetch, whatever
  else the look says (made after a look and gone before the next, such a claim leaves the looks
  alike, and the worker would wait on it for good).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from guardkit_state.remote.branches import listed_refs
from guardkit_state.remote.claim_record import CLAIMS_PREFIX, MERGE_CLAIM, Claim, claim_ref
from guardkit_state.remote.known_states import what_moved

#: What a look decides: ``fetch`` (read the remote), ``read`` (what the last fetch read holds: decide
#: from it), ``wait`` (wait on, for :attr:`Looks.deferred`).
Decision = Literal["fetch", "read", "wait"]


@dataclass
class Looks:
    """One worker's looks at the remote: the last one, the one its last fetch was made at, and why
    it waits without a fetch (``deferred``: ``(why, merging)``, None when its last fetch decided)."""

    feature: str
    stale: float  # seconds a claim takes to go stale (WorkerOptions.stale)
    last: str | None = None
    fetched: str | None = None
    fetched_at: float = 0.0  # time.monotonic() of the last fetch
    deferred: tuple[str, bool] | None = None
    waited: tuple[str, bool] | None = None  # why the worker's last step waited (None: it did not wait)

    @property
    def claims_prefix(self) -> str:
        return f"{CLAIMS_PREFIX}/{self.feature}"

    def made_fetch(self, look: str) -> None:
        """A fetch was made at ``look``."""
        self.last = self.fetched = look
        self.fetched_at, self.deferred = time.monotonic(), None

    def forget(self) -> None:
        """What was read no longer holds: the next look fetches."""
        self.last = self.fetched = self.deferred = None

    def read_claims_moved(self, look: str, read: Mapping[str, str]) -> bool:
        """Whether a claim ref this worker read (``read``: ref -> sha, as the remote names them) is
        gone from ``look`` or moved; then the next decision is a fetch."""
        refs = listed_refs(look)
        if any(refs.get(ref) != sha for ref, sha in read.items()):
            self.last = self.deferred = None
            return True
        return False

    def decide(self, look: str, claims: Mapping[str, Claim], running_elsewhere: Callable[[Claim], bool], *,
               wave: int, stale_read: bool, no_shortcut: bool = False) -> Decision:
        """What ``look`` asks for, given the ``claims`` the last fetch read (``running_elsewhere``:
        which are live on another worker; ``stale_read``: one of them is stale by now), the wave the
        last step decided on, and ``no_shortcut`` (under ``--max-cost`` every move is fetched: what the
        running tasks spent is on their branches)."""
        moved = None
        if look != self.last and self.last is not None and self.fetched is not None and not no_shortcut:
            moved = what_moved(self.fetched, self.last, look, claims, running_elsewhere, self.claims_prefix)
        waiting = (self.waited is not None and time.monotonic() - self.fetched_at < self.stale / 4
                   and not stale_read)
        if self.deferred is not None and not waiting:
            # Claims this worker has not read are getting old, or one it read is stale: read them.
            self.deferred, self.last, moved = None, None, None
        if moved == "running" or (moved == "claimed" and waiting):
            self.last = look  # turns pushed by tasks running elsewhere: nothing to read
            if moved == "claimed":  # and this worker waited: it waits still (a claim only takes work away)
                self.deferred = self._merge_started(look, wave) or self.deferred or self.waited
        if self.deferred is not None and look == self.last:
            return "wait"
        return "fetch" if look != self.last else "read"

    def _merge_started(self, look: str, wave: int) -> tuple[str, bool] | None:
        """Why the worker waits when ``look`` found a merge claim the last fetch did not: another
        worker merges the wave it found mergeable."""
        merge = claim_ref(self.feature, MERGE_CLAIM)
        if merge in listed_refs(look) and merge not in listed_refs(self.fetched or ""):
            return f"wave {wave}: another worker is merging it", True
        return None


__all__ = ["Decision", "Looks"]
