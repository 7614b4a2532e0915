"""How a worker writes where a task's run ended badly in the task's history on the remote.

A takeover (the run's worker died: :func:`~guardkit_state.remote.takeover_record.write_takeover`,
committed where the task resumes) and a crash of its loop
(:func:`~guardkit_state.remote.quarantine.write_crash`, committed without a checkout), each pushed
before the task goes on or its claim is let go: they count toward its quarantine
(:mod:`~guardkit_state.remote.quarantine`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from guardkit_state.errors import GuardkitStateError
from guardkit_state.git.repo import GitRepo
from guardkit_state.remote.branches import RemoteBranches
from guardkit_state.remote.claim_record import Claim
from guardkit_state.remote.quarantine import crash_entry, write_crash
from guardkit_state.remote.takeover_record import write_takeover
from guardkit_state.store.fsio import crash_point
from guardkit_state.store.layout import branch_for


@dataclass
class RunHistory:
    """One worker's writer of run ends: ``remote`` runs an action against the remote (retried while
    it is unreachable, saying so), ``limit`` is the worker's ``--quarantine-after``."""

    repo: GitRepo
    branches: RemoteBranches
    feature_branch: str
    worker: str
    limit: int
    remote: Callable[[Callable[[], object], str], object]
    note: Callable[[str], None]

    def takeover(self, task: str, old: Claim, tip: str | None, *, restart: bool) -> str:
        """The takeover of ``old`` written in the task's history and pushed onto ``tip``; the sha pushed."""
        write_takeover(self.repo, task, self.feature_branch, by=self.worker, old=old, note=self.note,
                       more={"how": "restart" if restart else "lease", "quarantine_after": self.limit})
        crash_point("remote.takeover_recorded")
        return str(self.remote(lambda: self.branches.push(branch_for(task), tip), f"{task}: push"))

    def crash(self, task: str, reason: str, tip: str | None) -> None:
        """The loop of ``task`` that stopped on ``reason``, written in its history on the remote's
        branch (``tip``, as this worker last pushed it); said, not raised, when that fails."""
        base = self.repo.resolve(self.branches.tracking(self.feature_branch)) or self.feature_branch
        entry = crash_entry(worker=self.worker, reason=reason, limit=self.limit)
        try:
            self.remote(lambda: write_crash(self.repo, self.branches, task, base, tip, entry), f"{task}: push")
        except GuardkitStateError as exc:
            self.note(f"{task}: the crash could not be written in its history ({exc.message})")


__all__ = ["RunHistory"]
