"""Where a feature shared through a remote stands, read from the remote alone (read-only here).

Fetches the claims and the ``autobuild/*`` branches into this clone's remote-tracking refs (never
touching its own branches or worktrees) and says, per task: merged, approved (waiting for its
wave's merge), running (who holds the claim, since when, the last heartbeat, whether its lease
has ended), failed, quarantined (its runs ended in a dead worker or a crash too often: no worker
claims it until it is released), or waiting (its wave has not come, or nobody has claimed it yet);
with each run of it that ended badly since its last release, and why; and the turns kept on refs
of their own (``refs/guardkit/kept/...``) when its branch moved under them.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from guardkit_state.errors import InputError
from guardkit_state.features.progress import ENDED_UNAPPROVED
from guardkit_state.git.merge import find_task_merge
from guardkit_state.git.repo import GitRepo
from guardkit_state.plans.merge_queue_log import QueueStep, recorded_steps
from guardkit_state.plans.plan import find_plan, load_plan
from guardkit_state.plans.waves import plan_waves
from guardkit_state.remote.alignment import KEPT_PREFIX
from guardkit_state.remote.branches import RemoteBranches
from guardkit_state.remote.claim_record import MERGE_CLAIM, Claim
from guardkit_state.remote.claims import SEEN_PREFIX, ClaimBoard
from guardkit_state.remote.quarantine import FailedRun, Quarantine, copy_and_quarantine
from guardkit_state.remote.wave_progress import plan_on_branch
from guardkit_state.store.layout import branch_for
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.turns.sent_back import pending_send_back


@dataclass(frozen=True)
class RemoteTask:
    """One task as the remote tells it."""

    task_id: str
    wave: int
    state: str  # merged, approved, running, failed, quarantined, waiting, skipped (it needs a failed task)
    turns: int = 0
    outcome: str | None = None
    holder: str | None = None
    claimed_at: float | None = None
    heartbeat_at: float | None = None
    lease_until: float | None = None
    failed_runs: tuple[FailedRun, ...] = ()
    #: Turns kept on refs of their own on the remote (the ref and its commit's subject), oldest first.
    kept: tuple[tuple[str, str], ...] = ()
    #: Why no worker takes it, and what a person does about it: a ref in the way of its claim, its
    #: task file on the remote's branch unreadable (None: nothing holds it but its turn).
    held: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"task_id": self.task_id, "wave": self.wave, "state": self.state, "turns": self.turns,
                "outcome": self.outcome, "holder": self.holder, "claimed_at": self.claimed_at,
                "heartbeat_at": self.heartbeat_at, "lease_until": self.lease_until,
                "failed_runs": [run.to_dict() for run in self.failed_runs],
                "kept": [{"ref": ref, "commit": subject} for ref, subject in self.kept], "held": self.held}


@dataclass
class RemoteFeature:
    feature: str
    remote: str
    tasks: list[RemoteTask] = field(default_factory=list)
    merger: str | None = None  # the worker holding the merge claim, if any
    #: The merge queue's steps the plan on the remote's feature branch records (candidates, gate
    #: results, tasks sent back).
    queue: list[QueueStep] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"feature": self.feature, "remote": self.remote, "merger": self.merger,
                "tasks": [task.to_dict() for task in self.tasks], "merge_queue": [s.to_dict() for s in self.queue]}


def remote_progress(repo_root: Path | str, feature: str, remote: str) -> RemoteFeature:
    """Read ``feature``'s progress from ``remote`` (fetches; writes only remote-tracking refs)."""
    repo = GitRepo.discover(repo_root)
    if repo is None:
        raise InputError(f"{repo_root} is not a git repository", path=repo_root, expected="a clone of the remote")
    plan = load_plan(find_plan(repo.root, feature))
    board = ClaimBoard(repo, remote)
    branches = RemoteBranches(repo, remote)
    seen = f"{SEEN_PREFIX}/{remote}/kept/{plan.feature_id}"
    on_remote = branches.fetch(f"+{KEPT_PREFIX}/{plan.feature_id}/*:{seen}/*", listed=(seen,))
    kept: dict[str, list[tuple[str, str]]] = {}
    for name, _, message in branches.listing:
        if name.startswith(f"{seen}/"):
            task, _, rest = name.removeprefix(f"{seen}/").partition("/")
            kept.setdefault(task, []).append((f"{KEPT_PREFIX}/{plan.feature_id}/{task}/{rest}",
                                              message.strip().split("\n", 1)[0]))
    claims = board.read(plan.feature_id)
    feature_ref = branches.tracking(branch_for(plan.feature_id))
    result = RemoteFeature(plan.feature_id, remote)
    merge_claim = claims.get(MERGE_CLAIM)
    result.merger = merge_claim.worker if merge_claim is not None else None
    merged_plan = plan_on_branch(repo, plan, feature_ref)
    # Tasks the merger recorded as skipped: a task they need failed without stopping the feature.
    skipped = {t.id for t in merged_plan.tasks if t.status == "skipped"} if merged_plan is not None else set()
    for number, wave in enumerate(plan_waves(plan), start=1):
        for task in wave:
            branch = branch_for(task)
            copy, ended = copy_and_quarantine(repo, task, branches.tracking(branch) if branch in on_remote else None)
            found = _task(repo, task, number, copy, ended, claims.get(task), feature_ref)
            if found.state == "waiting" and task in skipped:
                found = replace(found, state="skipped", outcome="dependency_failed")
            held = _held(found, ended, board, plan.feature_id)
            result.tasks.append(replace(found, kept=tuple(kept.get(task, ())), held=held))
    result.queue = recorded_steps(merged_plan) if merged_plan is not None else []
    return result


def _held(task: RemoteTask, ended: Quarantine, board: ClaimBoard, feature: str) -> str | None:
    """Why no worker takes ``task`` although it is not done, and what clears it: its file on the
    remote unreadable, or a ref in its claim's way (None: nothing holds it but its turn)."""
    if task.state not in ("waiting", "quarantined"):
        return None
    if ended.unreadable:
        return ended.reason(feature, board.remote)
    return board.foreign_note(feature, task.task_id, "no worker claims it") if task.task_id in board.foreign else None


def _task(repo: GitRepo, task: str, wave: int, copy: TaskFile | None, ended: Quarantine, claim: Claim | None,
          feature_ref: str) -> RemoteTask:
    """The task as the remote tells it: its file on its branch there (``copy``), the quarantine that
    file tells (``ended``), its claim."""
    state = copy.state if copy is not None else None
    turns = len(state.turns) if state is not None else 0
    outcome = state.extra.get("outcome") if state is not None else None
    outcome = outcome if isinstance(outcome, str) else None
    if find_task_merge(repo, task, feature_ref) is not None:
        return RemoteTask(task, wave, "merged", turns, outcome or "approved")
    if claim is not None:
        claimed, beat = _claim_times(repo, claim)
        lease = claim.lease_until if math.isfinite(claim.lease_until) else None  # JSON has no nan or inf
        return RemoteTask(task, wave, "running", turns, outcome, claim.worker, claimed, beat, lease, ended.runs)
    if pending_send_back(state) is not None:  # its approval broke the gate: it runs again, or ended failed
        if outcome in ENDED_UNAPPROVED:
            return RemoteTask(task, wave, "failed", turns, outcome, failed_runs=ended.runs)
        return RemoteTask(task, wave, "quarantined" if ended.quarantined else "waiting", turns, "sent back",
                          failed_runs=ended.runs)
    if outcome == "approved" or (state is not None and state.turns and state.turns[-1].decision == "approve"):
        return RemoteTask(task, wave, "approved", turns, "approved")
    if outcome in ENDED_UNAPPROVED:  # as a worker reads it (features.progress): the loop ended, not approved
        return RemoteTask(task, wave, "failed", turns, outcome, failed_runs=ended.runs)
    return RemoteTask(task, wave, "quarantined" if ended.quarantined else "waiting", turns, outcome,
                      failed_runs=ended.runs)


def _claim_times(repo: GitRepo, claim: Claim) -> tuple[float | None, float | None]:
    """When the claim was made (its root commit) and its last heartbeat (its tip), by their commit times."""
    _, out, _ = repo.run("log", "--format=%ct", claim.sha, "--", check=False)
    times = [float(line) for line in out.decode().split() if line.strip().isdigit()]
    return (times[-1], times[0]) if times else (None, None)


def describe_age(at: float | None, now: float | None = None) -> str:
    if at is None:
        return "?"
    seconds = max(0, int((now if now is not None else time.time()) - at))
    return f"{seconds}s ago" if seconds < 120 else f"{seconds // 60}m ago"


__all__ = ["RemoteFeature", "RemoteTask", "describe_age", "remote_progress"]
