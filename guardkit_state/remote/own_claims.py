"""The claims this clone's workers made, kept in the clone: a worker restarted here takes a dead one's back at once.

Each worker of ``feature-build --remote`` holds an ``flock`` on
``<git common dir>/guardkit-state/workers/<remote>/<key>.lock`` for its life, and writes beside it
(``<key>.json``) the nonce of every claim commit it makes, before that commit's push. The kernel
drops the lock when its process dies, however it dies: a worker starting in this clone that can
take another worker's lock knows that one is dead, and adopts its claims (:meth:`ClaimKeeper.adopt`).
On the remote, a claim that still carries an adopted nonce was made here by a process that is gone
(a takeover or a claim of another worker carries a nonce of its own): it is taken back at once,
not after its lease (:attr:`~guardkit_state.remote.claims.ClaimBoard.orphans`).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guardkit_state.errors import GuardkitStateError, LockedError
from guardkit_state.store.fsio import atomic_write_bytes, remove_stale_temp_files
from guardkit_state.store.jsonio import dump_json, load_json
from guardkit_state.store.layout import WORKERS_IN_GIT_DIR
from guardkit_state.store.locks import exclusive_lock

if TYPE_CHECKING:
    from guardkit_state.git.repo import GitRepo
    from guardkit_state.remote.claim_record import Claim

#: A lock file with no record beside it is removed only once this old (seconds): a worker that has
#: just created its lock file, and not yet locked it, is not taken for a dead one for long.
_EMPTY_LOCK_AGE = 60.0


class ClaimKeeper:
    """One worker's record of its claims in the clone, and the claims it adopted from dead workers.

    Use as a context manager: the worker's lock is held from ``__enter__`` to ``__exit__``.
    """

    def __init__(self, repo: GitRepo, remote: str, worker: str) -> None:
        self.folder = repo.common_dir / WORKERS_IN_GIT_DIR / re.sub(r"[^A-Za-z0-9._-]", "_", remote)
        self.key = f"{os.getpid()}-{secrets.token_hex(4)}"
        self.worker = worker
        #: ref -> the nonce of this worker's latest claim commit there (adopted ones included).
        self.nonces: dict[str, str] = {}
        self._lock = threading.Lock()  # the heartbeat thread makes claim commits too
        self._held = contextlib.ExitStack()

    @property
    def record(self) -> Path:
        return self.folder / f"{self.key}.json"

    def __enter__(self) -> ClaimKeeper:
        # A few seconds' wait: a worker probing this lock (adopt) holds it for an instant.
        self._held.enter_context(exclusive_lock(self.folder / f"{self.key}.lock", wait=5.0, holder=self.worker))
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            if not self.nonces:  # nothing held: nothing for a successor to take back
                self.record.unlink(missing_ok=True)
                (self.folder / f"{self.key}.lock").unlink(missing_ok=True)
        self._held.close()

    # -- ClaimKeeping ------------------------------------------------------------------------

    def made(self, claim: Claim) -> None:
        with self._lock:
            if self.nonces.get(claim.ref) != claim.nonce:
                self.nonces[claim.ref] = claim.nonce
                self._write()

    def released(self, claim: Claim) -> None:
        with self._lock:
            if self.nonces.get(claim.ref) == claim.nonce:
                del self.nonces[claim.ref]
                self._write()

    # -- the dead -----------------------------------------------------------------------------

    def adopt(self) -> dict[str, str]:
        """The claims of this clone's dead workers (ref -> nonce), now kept as this worker's own
        (so a successor of this one finds them too), their records removed."""
        adopted: dict[str, str] = {}
        remove_stale_temp_files(self.folder)  # a record write its worker's death cut short: nothing else looks here
        for lock in sorted(self.folder.glob("*.lock")) if self.folder.is_dir() else []:
            if lock.stem == self.key:
                continue
            record = lock.with_suffix(".json")
            try:
                made_at = lock.stat().st_mtime  # before the probe below writes its pid into it
                with exclusive_lock(lock):
                    nonces = _read(record)
                    if nonces is None and time.time() - made_at < _EMPTY_LOCK_AGE:
                        continue  # a worker starting this instant: not locked yet, nothing claimed yet
                    adopted.update(nonces or {})
                    with self._lock:
                        self.nonces.update(nonces or {})
                        self._write()
                    record.unlink(missing_ok=True)
                    lock.unlink(missing_ok=True)
            except LockedError:
                continue  # alive: its claims are its own
            except (GuardkitStateError, OSError):
                continue  # unreadable or gone meanwhile: nothing to adopt from it
        return adopted

    def _write(self) -> None:
        data: dict[str, Any] = {"worker": self.worker, "claims": dict(sorted(self.nonces.items()))}
        atomic_write_bytes(self.record, dump_json(data).encode())


def _read(record: Path) -> dict[str, str] | None:
    """A dead worker's claims (ref -> nonce), or None without a record."""
    if not record.is_file():
        return None
    data = load_json(record)
    claims = data.get("claims") if isinstance(data, dict) else None
    if not isinstance(claims, dict):
        return {}
    return {ref: nonce for ref, nonce in claims.items() if isinstance(ref, str) and isinstance(nonce, str)}


__all__ = ["ClaimKeeper"]
