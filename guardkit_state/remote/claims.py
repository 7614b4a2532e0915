"""Claims on a task through the git remote: one atomic push, a lease, heartbeats, a safe takeover.

The protocol (docs/features.md, "Many machines"), with no server but the user's git remote:

* **Claim**: a push creating ``refs/guardkit/claims/<FEAT>/<TASK>`` at a fresh root commit (a
  random nonce, the worker's id and the lease's end in its message). A root commit never
  fast-forwards anything, so without ``--force`` exactly one of many racing pushes creates the ref
  (the push's own report says so; ``ls-remote`` looks only after a failed one). Losing the race
  (the ref is someone else's) and the remote failing (unreachable, or refusing the push) are
  different outcomes: ``None`` for the first, :class:`RemoteUnreachableError` /
  :class:`RemoteRejectedError` for the others.
* **Heartbeat**: the holder renews before the lease ends by pushing a child commit (a later lease
  end, the next beat number) with ``--force-with-lease=<ref>:<its sha>``: the claim ref moving is
  the heartbeat, and a renewal that finds the ref moved learns that the claim is lost.
* **Takeover**: only when the taker has seen the ref stand still for the claim's whole lease (its
  length is in the claim) and for ``stale_after`` seconds, both by its own monotonic clock: two
  machines' clocks are never compared, so a clock skewed by minutes neither holds a dead worker's
  task for minutes nor takes a live one's (its renewals move the ref three times a lease). A claim
  without its lease's length (an older worker's) is judged by its lease's end on the taker's clock.
  The takeover is a child commit pushed with ``--force-with-lease=<ref>:<the sha seen>``, so a
  renewal landing first makes it fail: a takeover racing a renewal has one winner. The ref's
  history records the claim, its beats and takeovers.
* **A worker's own dead claim**: a worker restarted in the clone of a dead one takes back the claims
  that one made at once, without waiting for the lease, when the claim on the remote still carries
  a nonce the dead worker kept in the clone (:mod:`~guardkit_state.remote.own_claims`): ``orphans``.
* **Release**: a delete pushed with the same lease; a claim already taken over is left alone.

A lease is read from a commit anyone with push access can write, so what it says is bounded: a
claim asks for at most :data:`MAX_LEASE` (checked before any push); a lease length above it (or no
number) is no length, and the claim is judged by its lease's end; an end outside
[now − :data:`LEASE_PAST`, now + 10 × :data:`MAX_LEASE`] by the taker's clock (the year 3000, ``inf``,
``nan``) counts as ended. A dead worker's claim never blocks its task for good nor stops the worker
taking it over.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol, TypeVar

from guardkit_state.errors import ClaimLostError, InputError, RemoteRejectedError, RemoteUnreachableError, safe
from guardkit_state.remote.branches import (
    REFS_TIMEOUT,
    RefRecord,
    busy_lock,
    clear_remote_lock,
    fetch_refs,
    first_line,
    list_refs,
    listed_refs,
    lock_contention,
    ls_remote,
    remote_refs,
    task_ref_place,
)
from guardkit_state.remote.claim_record import (
    CLAIMS_PREFIX,
    Claim,
    check_lease,
    check_worker_id,
    claim_ref,
    lease_readable,
    new_worker_id,
    parse_claim,
    wall_clock,
)
from guardkit_state.store.fsio import crash_point
from guardkit_state.store.safe_paths import validate_task_id

if TYPE_CHECKING:
    from guardkit_state.git.repo import GitRepo

#: Where a worker keeps its copy of the remote's claims (fetched, pruned), per remote.
SEEN_PREFIX = "refs/guardkit/seen"
T = TypeVar("T")



class ClaimKeeping(Protocol):
    """Where a board tells the claims it makes and releases (:class:`~guardkit_state.remote.own_claims.ClaimKeeper`
    keeps their nonces in the clone)."""

    def made(self, claim: Claim) -> None: ...

    def released(self, claim: Claim) -> None: ...


@dataclass(frozen=True)
class _Push:
    # "ok", "rejected" (lost a race / stale lease), "busy" (the remote's ref lock was held: a racing
    # push, or a git that died there), "refused" (the remote said no), "unreachable"
    status: str
    detail: str


class ClaimBoard:
    """A worker's view of one remote's claims: claim, renew, take over, release, read.

    ``clock`` is wall time (lease ends are written in it); ``monotonic`` measures how long a claim
    has stood still here. Both are parameters so tests can move time without waiting.
    """

    def __init__(self, repo: GitRepo, remote: str, worker: str | None = None, *,
                 clock: Callable[[], float] = wall_clock, monotonic: Callable[[], float] = time.monotonic,
                 keep: ClaimKeeping | None = None) -> None:
        self.repo = repo
        self.remote = remote
        self.worker = new_worker_id() if worker is None else check_worker_id(worker)
        self.clock = clock
        self.monotonic = monotonic
        self._seen: dict[str, tuple[str, float]] = {}  # ref -> (sha, when first seen at that sha)
        #: Claim refs the last :meth:`read_fetched` found holding a commit that is no claim, and refs
        #: below a claim ref (task id -> (the ref on the remote, its sha); see
        #: :func:`~guardkit_state.remote.branches.task_ref_place`): pushed by something else, never
        #: taken over, and in the way of every claim push.
        self.foreign: dict[str, tuple[str, str]] = {}
        self._made: dict[str, Claim] = {}  # the claim commits this board made, by sha (see _own)
        #: Tasks the last failed claim found claimed on the remote (see :meth:`_listed_claims`).
        self.taken: set[str] = set()
        #: The claim refs every failed claim found on the remote since the owner last emptied this
        #: (ref -> sha): what a worker that waits then decided on, beside the claims it fetched.
        self.raced: dict[str, str] = {}
        #: Claim refs a dead worker of this clone held, with the nonce it kept here: taken back at once.
        self.orphans: dict[str, str] = {}
        #: Told every claim commit this board makes, before its push (to keep its nonce in the clone).
        self.keep = keep
        status, _, _ = repo.run("remote", "get-url", remote, check=False)
        if status != 0:
            raise InputError(f"no git remote named {remote!r} in {repo.root}", path=repo.root,
                             fix="'git remote -v' lists this repository's remotes")

    # -- the four moves ---------------------------------------------------------------------

    def claim(self, feature: str, task: str, lease: float) -> Claim | None:
        """Create the claim: the :class:`Claim` when won, ``None`` when another worker holds it.

        Raises:
            RemoteUnreachableError: the remote could not be reached (nothing is claimed).
            RemoteRejectedError: the remote refused the push (a hook, permissions).
        """
        ref = claim_ref(feature, task)
        check_lease(lease)
        mine = Claim(feature, task, "", self.worker, secrets.token_hex(8), self.clock() + lease, 0, lease=lease)
        sha = self._commit(mine, parent=None)
        pushed = self._push(f"{sha}:{ref}")
        crash_point("remote.after_claim")
        if pushed.status == "unreachable":
            raise RemoteUnreachableError(f"cannot reach remote {self.remote!r}: {pushed.detail}", path=self.repo.root)
        if pushed.status == "ok":
            # The remote updated the ref from "absent" in one ref transaction: a concurrent claimant's
            # update would have failed it, so no ls-remote is needed to know it is ours.
            return replace(mine, sha=sha)
        # What tells a lost race from a refusal; the feature's other claims listed by the same call.
        listed, above = self._listed_claims(feature)
        there = listed.get(ref)
        if there == sha:
            return replace(mine, sha=sha)
        own = self._own(feature, task, there)
        if own is not None:  # an earlier try of this claim landed though its push was not told so
            return own
        if task in self.taken or pushed.status == "rejected":
            # Another worker's claim is (or was, when git compared: since released) there: the race
            # is lost, not an error. A refusal by the remote's ref lock is such a race too, and so is
            # a ref below the claim ref (the remote cannot create it: "failed to update ref").
            return None
        if above:  # a ref the claim refs would be below: no claim ref of the feature can be created
            self.foreign[task] = next(iter(above.items()))
            return None
        if pushed.status == "busy":  # a racing push that has come and gone (claimed, run, released): look again
            raise RemoteUnreachableError(pushed.detail, path=self.repo.root)
        raise RemoteRejectedError(f"remote {self.remote!r} refused the claim {ref}: {pushed.detail}",
                                  path=self.repo.root)

    def renew(self, held: Claim, lease: float) -> Claim:
        """Push the next heartbeat: the lease extended to ``lease`` seconds from now.

        Raises:
            ClaimLostError: the ref moved (taken over) or is gone: stop working on the task.
            RemoteUnreachableError: the beat did not reach the remote (retry before the lease ends).
        """
        beat = replace(held, lease_until=self.clock() + lease, beat=held.beat + 1, kind="renew", previous=None,
                       lease=lease)
        return self._replace(held.sha, beat, lost=f"claim {held.ref} is no longer {self.worker}'s")

    def take_over(self, feature: str, task: str, lease: float, *, stale_after: float) -> Claim | None:
        """Take a claim that is stale (:meth:`is_stale`), or an orphan of this clone's dead worker.

        Returns ``None`` when the claim is live (lease running, a recent beat, a renewal that won the
        race) or gone; the new :class:`Claim` when taken over. The caller must have read the claim
        at least once before (:meth:`read`): staleness is what this worker has seen.
        """
        ref = claim_ref(feature, task)
        current = self.read(feature).get(task)
        if current is not None and self._own(feature, task, current.sha) is not None:
            return current  # an earlier try of this takeover landed though its push was not told so
        if current is None or not self.is_stale(current, stale_after=stale_after):
            return None
        mine = Claim(feature, task, "", self.worker, secrets.token_hex(8), self.clock() + lease, current.beat + 1,
                     kind="takeover", previous=current.worker, lease=lease)
        try:
            taken = self._replace(current.sha, mine, lost=f"claim {ref} moved while it was taken over")
        except ClaimLostError:
            return None  # the holder's renewal (or another taker) came first
        crash_point("remote.after_takeover")
        return taken

    def release(self, held: Claim) -> bool:
        """Delete the claim if it is still this one; False when it was already taken over or gone."""
        pushed = self._push(f":{held.ref}", lease=(held.ref, held.sha))
        if pushed.status == "unreachable":
            raise RemoteUnreachableError(f"cannot reach remote {self.remote!r}: {pushed.detail}", path=self.repo.root)
        if pushed.status == "ok":
            if self.keep is not None:
                self.keep.released(held)
            return True
        there = self.remote_sha(held.ref)
        own = self._own(held.feature, held.task, there)
        if own is not None and own.nonce == held.nonce and own.sha != held.sha:
            return self.release(own)  # a beat of this claim landed though its push was not told so
        if there != held.sha:
            return False  # taken over, or gone: not ours to delete
        if pushed.status == "busy":
            raise RemoteUnreachableError(pushed.detail, path=self.repo.root)
        raise RemoteRejectedError(f"remote {self.remote!r} refused to release {held.ref}: {pushed.detail}",
                                  path=self.repo.root)

    # -- reading ----------------------------------------------------------------------------

    def read(self, feature: str) -> dict[str, Claim]:
        """The feature's claims on the remote, by task id (fetched; staleness clocks updated)."""
        status, err = fetch_refs(self.repo, self.remote, self.fetch_refspec(feature), timeout=REFS_TIMEOUT)
        if status != 0:
            raise RemoteUnreachableError(f"cannot fetch claims from {self.remote!r}: {first_line(err)}",
                                         path=self.repo.root)
        return self.read_fetched(feature)

    def fetch_refspec(self, feature: str) -> str:
        """The refspec fetching the feature's claims (for a fetch that brings other refs too)."""
        return f"+{CLAIMS_PREFIX}/{feature}/*:{self.seen_prefix(feature)}/*"

    def seen_prefix(self, feature: str) -> str:
        """Where this clone keeps the feature's claims as fetched last."""
        validate_task_id(feature)
        return f"{SEEN_PREFIX}/{self.remote}/claims/{feature}"

    def read_fetched(self, feature: str, listing: list[RefRecord] | None = None) -> dict[str, Claim]:
        """The claims the last fetch of :meth:`fetch_refspec` brought, by task id (staleness clocks
        updated); from ``listing`` when the refs were listed already (:func:`list_refs`)."""
        seen = self.seen_prefix(feature)
        claims: dict[str, Claim] = {}
        self.foreign = {}
        now = self.monotonic()
        for name, sha, message in list_refs(self.repo, seen) if listing is None else listing:
            place = task_ref_place(name, seen)
            if place is None:
                continue  # (no claim ref, in the way of none: another depth, or no task id)
            task, exact = place
            claim = parse_claim(feature, task, sha, message) if exact else None
            if claim is None:  # not a claim commit of ours, or a ref below the claim ref: never taken over
                self.foreign[task] = (f"{CLAIMS_PREFIX}/{feature}{name.removeprefix(seen)}", sha)
                continue
            claims[task] = claim
            ref = claim.ref
            if self._seen.get(ref, ("", 0.0))[0] != sha:
                self._seen[ref] = (sha, now)
        return claims

    def foreign_note(self, feature: str, task: str, what: str) -> str:
        """Which ref holds ``task`` in :attr:`foreign`, with ``what`` that stops, and the command that
        clears it: such a ref is never taken over (something else pushed it)."""
        ref, sha = self.foreign[task]
        own = claim_ref(feature, task)
        held = (f"holds {sha[:10]}, which is no guardkit claim" if ref == own
                else f"({sha[:10]}) keeps git from creating the claim ref {own}")  # a ref below it
        shown = safe(ref)  # (a name git takes may hold bytes no UTF-8, or a bidi control)
        return f"{shown} on the remote {held}: {what} until it is deleted (git push {self.remote} :{shown})"

    def is_stale(self, claim: Claim, *, stale_after: float) -> bool:
        """This worker saw the same beat for the claim's whole lease and ``stale_after`` seconds, by
        its monotonic clock (no wall clocks compared); a claim without its lease's length (or with
        one no claim may ask for): its lease ended by this clock, or its end no time this protocol
        can have written (:func:`lease_readable`), and the beat seen for ``stale_after``. An orphan
        (:attr:`orphans`) is stale at once: the worker that made it is dead, and this clone kept its nonce."""
        if self.orphans.get(claim.ref) == claim.nonce:
            return True
        sha, since = self._seen.get(claim.ref, ("", 0.0))
        still = self.monotonic() - since if sha == claim.sha else -1.0
        if still < stale_after:
            return False
        if claim.lease is not None:
            return still >= claim.lease
        now = self.clock()
        return not lease_readable(claim.lease_until, now) or now > claim.lease_until

    def remote_sha(self, ref: str) -> str | None:
        """The ref's sha on the remote now (``ls-remote``), None when absent."""
        return remote_refs(self.repo, self.remote, ref).get(ref)

    def _listed_claims(self, feature: str) -> tuple[dict[str, str], dict[str, str]]:
        """The feature's claim refs on the remote now (ref -> sha), the tasks they claim kept in
        :attr:`taken` (a worker that lost a race for a task tries next one nobody claimed meanwhile:
        workers that look at one moment lose races to each other in turn otherwise); and, by the same
        call, the refs the claim refs would be below (``refs/guardkit/claims/<FEAT>``,
        ``refs/guardkit/claims``: git keeps no ref under another ref's name), none but by hand."""
        prefix = f"{CLAIMS_PREFIX}/{feature}"
        names_above = (prefix, CLAIMS_PREFIX)
        found = listed_refs(ls_remote(self.repo, self.remote, f"{prefix}/*", *names_above))
        listed = {ref: sha for ref, sha in found.items() if ref.startswith(f"{prefix}/")}
        self.taken = {place[0] for ref in listed if (place := task_ref_place(ref, prefix)) is not None}
        self.raced.update(listed)
        return listed, {ref: sha for ref, sha in found.items() if ref in names_above}

    def _own(self, feature: str, task: str, sha: str | None) -> Claim | None:
        """The claim commit ``sha`` when this board made it (pushed, its answer lost); None for any
        other commit (another worker's, or one of another board, whatever its worker id says)."""
        made = self._made.get(sha) if sha is not None else None
        return made if made is not None and (made.feature, made.task) == (feature, task) else None

    # -- git --------------------------------------------------------------------------------

    def _replace(self, old: str, claim: Claim, *, lost: str) -> Claim:
        sha = self._commit(claim, parent=old)
        pushed = self._push(f"{sha}:{claim.ref}", lease=(claim.ref, old))
        if pushed.status == "unreachable":
            raise RemoteUnreachableError(f"cannot reach remote {self.remote!r}: {pushed.detail}", path=self.repo.root)
        if pushed.status == "ok":  # moved from ``old`` in one ref transaction (the lease): ours
            return replace(claim, sha=sha)
        there = self.remote_sha(claim.ref)
        if there == sha:
            return replace(claim, sha=sha)
        own = self._own(claim.feature, claim.task, there)
        if own is not None and own.nonce == claim.nonce and there != old:
            # A beat of this claim landed though its push was not told so (the connection dropped
            # after the remote took it, or Ctrl-C killed git as it read the answer): still ours.
            return self._replace(own.sha, replace(claim, beat=own.beat + 1), lost=lost)
        if there != old or pushed.status == "rejected":  # moved since (or when git compared): not ours
            raise ClaimLostError(lost, path=self.repo.root)
        if pushed.status == "busy":  # the ref stood still: its lock was held by a push that failed, or a dead git
            raise RemoteUnreachableError(pushed.detail, path=self.repo.root)
        raise RemoteRejectedError(f"remote {self.remote!r} refused {claim.ref}: {pushed.detail}", path=self.repo.root)

    def _commit(self, claim: Claim, *, parent: str | None) -> str:
        args = ["commit-tree", self.repo.empty_tree(), "-m", claim.message()]
        if parent is not None:
            args += ["-p", parent]
        _, out, _ = self.repo.run(*args, pre=self.repo.identity_args())
        sha = out.decode().strip()
        self._made[sha] = made = replace(claim, sha=sha)
        if self.keep is not None:
            self.keep.made(made)  # before the push: a worker killed as it lands still left its nonce here
        return sha

    def _push(self, refspec: str, *, lease: tuple[str, str] | None = None) -> _Push:
        args = ["push", "--porcelain", "--no-verify"]
        if lease is not None:
            args.append(f"--force-with-lease={lease[0]}:{lease[1]}")
        status, out, err = self.repo.run(*args, self.remote, refspec, check=False, timeout=REFS_TIMEOUT)
        lines = [line for line in out.decode("utf-8", "replace").splitlines() if "\t" in line]
        if status == 0 and lines and not lines[0].startswith("!"):
            return _Push("ok", lines[0])
        if not lines:  # git never talked to the remote (exit 128: unreachable, no repository there)
            return _Push("unreachable", first_line(err))
        summary = lines[0].split("\t")[-1]
        if "remote rejected" in summary:
            if lock_contention(summary):  # a push racing it; or a stale lock a killed push left (removed when
                clear_remote_lock(self.repo, self.remote, err)  # it is on this machine's file system)
                return _Push("busy", busy_lock(self.remote, refspec.rsplit(":", 1)[-1], summary, err))
            return _Push("refused", f"{summary} {first_line(err)}".strip())
        return _Push("rejected", summary)


def retrying(action: Callable[[], T], *, on_wait: Callable[[int, RemoteUnreachableError], None],
             sleep: Callable[[float], None] = time.sleep, first_delay: float = 1.0, max_delay: float = 30.0,
             attempts: int | None = None) -> T:
    """``action()`` again while the remote is unreachable, saying so through ``on_wait`` each time.

    Only unreachability is retried: a lost claim or a refusal is an answer, not a failure.
    """
    delay, attempt = first_delay, 0
    while True:
        try:
            return action()
        except RemoteUnreachableError as exc:
            attempt += 1
            if attempts is not None and attempt >= attempts:
                raise
            on_wait(attempt, exc)
            sleep(delay)
            delay = min(delay * 2, max_delay)


__all__ = ["SEEN_PREFIX", "ClaimBoard", "ClaimKeeping", "retrying"]
