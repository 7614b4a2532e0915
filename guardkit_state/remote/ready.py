"""Which task of a feature shared through a remote is ready to claim, and claiming it in one call.

:func:`wave_turn` and :meth:`WaveTurn.claimable` are the rule every worker of ``feature-build
--remote`` decides by (:mod:`~guardkit_state.remote.worker`): the first wave not wholly merged is
the one whose turn has come; when all its tasks are approved it is merged, else a task of it that
has to run (new, or interrupted) is claimable when nobody holds its claim or the claim is stale.
:func:`claim_next_task` applies the same rule once, for an agent working outside a worker (the MCP
server's ``claim_next_task``): sync from the remote as a worker does, then claim through the same
:class:`~guardkit_state.remote.claims.ClaimBoard` push.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from guardkit_state.errors import InputError
from guardkit_state.features.progress import FeatureGit, TaskState, read_task_state
from guardkit_state.git.repo import GitRepo
from guardkit_state.plans.plan import find_plan, load_plan
from guardkit_state.plans.waves import plan_waves
from guardkit_state.remote.branches import RemoteBranches
from guardkit_state.remote.claim_record import Claim, check_lease, utc_text
from guardkit_state.remote.claims import ClaimBoard
from guardkit_state.remote.going_on import GoingOn
from guardkit_state.remote.ledgers import RemoteLedgers
from guardkit_state.remote.quarantine import held_back, read_quarantine
from guardkit_state.store.layout import branch_for, worktrees_dir

#: How long a claim made by :func:`claim_next_task` holds without a renewal, by default (seconds).
DEFAULT_LEASE = 1800.0


@dataclass(frozen=True)
class WaveTurn:
    """The wave whose turn has come (``number`` counts from 1) and where each of its tasks stands."""

    number: int
    tasks: tuple[str, ...]
    states: Mapping[str, TaskState]

    @property
    def mergeable(self) -> bool:
        """Every task approved (or merged): the wave is merged next, no task of it is claimed."""
        return all(state.phase in ("approved", "merged", "closed") for state in self.states.values())

    @property
    def failed(self) -> list[TaskState]:
        """Tasks whose loop ended without approval: the next wave cannot start."""
        return [state for state in self.states.values() if state.phase == "failed"]

    def claimable(self, claims: Mapping[str, Claim], *, stale: Callable[[Claim], bool]) -> list[str]:
        """The tasks that have to run whose claim is free or ``stale``, in plan order."""
        return [task for task in self.tasks if self.states[task].runs
                and (claims.get(task) is None or stale(claims[task]))]


def wave_turn(waves: Iterable[tuple[str, ...]], state_of: Callable[[str], TaskState], *,
              written: Callable[[int, Mapping[str, TaskState]], bool] | None = None) -> WaveTurn | None:
    """The first wave not wholly merged (or closed); None when every wave is. With ``written``, a
    wave wholly merged or closed that it says is not written into the plan yet is that wave too
    (mergeable: its merge step writes it; :class:`~guardkit_state.remote.wave_progress.WrittenWaves`)."""
    for number, wave in enumerate(waves, start=1):
        states = {task: state_of(task) for task in wave}
        if not all(state.phase in ("merged", "closed") for state in states.values()) or (
                written is not None and not written(number, states)):
            return WaveTurn(number, tuple(wave), states)
    return None


@dataclass(frozen=True)
class ClaimAnswer:
    """What :func:`claim_next_task` did: ``claimed``, ``nothing_ready`` or ``lost_race``."""

    feature: str
    remote: str
    worker: str
    status: str
    reason: str
    claim: Claim | None = None
    wave: int | None = None
    lost: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, object]:
        done: dict[str, object] = {"status": self.status, "feature_id": self.feature, "remote": self.remote,
                                   "worker": self.worker, "wave": self.wave, "reason": self.reason}
        if self.lost:
            done["lost_to_others"] = list(self.lost)
        if self.claim is not None:
            task = self.claim.task
            done |= {"task_id": task, "claim_ref": self.claim.ref, "claim_sha": self.claim.sha,
                     "lease_until": self.claim.lease_until,
                     "lease_until_utc": utc_text(self.claim.lease_until), "branch": branch_for(task),
                     "base_branch": branch_for(self.feature)}
        return done


def claim_next_task(repo_root: Path | str, feature: str, remote: str, *, worker: str | None = None,
                    lease: float = DEFAULT_LEASE) -> ClaimAnswer:
    """Claim the next ready task of ``feature`` on ``remote`` as a worker would, once.

    Syncs the ``autobuild/*`` branches and turn ledgers from the remote (as a worker does before
    deciding), reads the wave whose turn has come and claims its first free task that has to run;
    a task lost to another claimant is skipped for the next. A stale claim is never taken over
    here: staleness is a heartbeat seen standing still, which one look cannot see.

    Raises:
        InputError: not a git repository, no such remote, plan or feature, a bad lease.
        RemoteUnreachableError: the remote could not be reached (nothing is claimed).
        RemoteRejectedError: the remote refused the claim's push.
    """
    check_lease(lease)  # before anything is fetched or pushed
    repo = GitRepo.discover(repo_root)
    if repo is None:
        raise InputError(f"{repo_root} is not a git repository", path=repo_root, expected="a clone of the remote")
    plan = load_plan(find_plan(repo.root, feature))
    board = ClaimBoard(repo, remote, worker)
    ledgers = RemoteLedgers(repo, remote, plan.feature_id)
    branches = RemoteBranches(repo, remote)
    on_remote = branches.sync(ledgers.fetch_refspec())  # as the worker's sync: one fetch for both
    ledgers.import_fetched()
    feature_branch = branch_for(plan.feature_id)
    fgit = FeatureGit(repo, repo.root, feature_branch, worktrees_dir(repo.root) / plan.feature_id,
                      worktrees_dir(repo.root))

    def state_of(task: str) -> TaskState:  # as a worker reads it: a quarantined task is not claimed
        quarantine = read_quarantine(repo, task, on_remote.get(branch_for(task)))
        return held_back(read_task_state(fgit, task), quarantine, plan.feature_id, remote)

    going_on = GoingOn(plan, None)  # a failure the plan says does not stop the feature: its dependents are skipped
    turn = wave_turn(plan_waves(plan), lambda task: going_on.state(state_of(task)))

    def answer(status: str, reason: str, claim: Claim | None = None, lost: tuple[str, ...] = ()) -> ClaimAnswer:
        return ClaimAnswer(plan.feature_id, remote, board.worker, status, reason, claim,
                           turn.number if turn is not None else None, lost)

    if turn is None:
        return answer("nothing_ready", f"every wave is merged into {feature_branch}")
    if turn.mergeable:
        return answer("nothing_ready", f"wave {turn.number}: every task is approved; it waits for a worker "
                                       f"of 'feature-build --remote' to merge it")
    claimable = turn.claimable(board.read(plan.feature_id), stale=lambda claim: False)
    lost: list[str] = []
    for task in (task for task in claimable if task not in board.foreign):  # (a ref in the way: no push goes)
        claim = board.claim(plan.feature_id, task, lease)
        if claim is not None:
            return answer("claimed", f"{task} is yours until its lease ends", claim=claim, lost=tuple(lost))
        if task not in board.foreign:  # (one the push found in the way, above the claim refs, is no race)
            lost.append(task)
    if lost:
        return answer("lost_race", f"wave {turn.number}: other claimants took {', '.join(lost)} first; "
                                   f"ask again", lost=tuple(lost))
    failed = turn.failed
    if failed:
        return answer("nothing_ready", "; ".join(f"{s.task_id}: {s.reason}" for s in failed)
                      + f" (wave {turn.number + 1} cannot start)")
    blocked = [task for task in claimable if task in board.foreign]
    if blocked:  # as a worker says it: no claimant holds it, and asking again never helps
        return answer("nothing_ready", f"wave {turn.number}: "
                                       + board.foreign_note(plan.feature_id, blocked[0], f"{blocked[0]} runs nowhere"))
    return answer("nothing_ready", f"wave {turn.number}: every task that has to run is claimed or approved; "
                                   f"the next wave starts when this one is merged")


def release_claim(repo_root: Path | str, feature: str, task: str, remote: str, worker: str) -> dict[str, object]:
    """Release ``worker``'s claim on ``task``: ``released`` False when it is not there or not
    ``worker``'s (taken over, expired and claimed by another: never deleted then).

    Raises:
        InputError: not a git repository, no such remote.
        RemoteUnreachableError, RemoteRejectedError: as :meth:`ClaimBoard.release`.
    """
    repo = GitRepo.discover(repo_root)
    if repo is None:
        raise InputError(f"{repo_root} is not a git repository", path=repo_root, expected="a clone of the remote")
    board = ClaimBoard(repo, remote, worker)
    held = board.read(feature).get(task)
    done: dict[str, object] = {"feature_id": feature, "task_id": task, "remote": remote, "worker": worker}
    if held is None:
        return done | {"released": False, "reason": f"no claim on {task} on {remote!r}"}
    if held.worker != worker:
        return done | {"released": False, "reason": f"the claim on {task} is {held.worker}'s, not {worker}'s"}
    if not board.release(held):
        return done | {"released": False, "reason": f"the claim on {task} moved meanwhile (taken over or gone)"}
    return done | {"released": True, "reason": f"released {held.ref}"}


__all__ = ["DEFAULT_LEASE", "ClaimAnswer", "WaveTurn", "claim_next_task", "release_claim", "wave_turn"]
