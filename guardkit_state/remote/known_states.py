"""Where the other workers' tasks stand, known without reading them or fetching.

A worker of ``feature-build --remote`` with nothing to claim looks at the remote often
(:mod:`~guardkit_state.remote.worker`). Reading a task means a ``git show`` of its task file on its
branch, a parse, and checks of its commits (about six git calls), and a fetch costs the most of any
call; with six workers on a wave, those readings and fetches were most of what the waiting workers
spent, on the CPUs the running tasks share. Two things are known without them:

* a task another worker approved: its turn ledger (:mod:`~guardkit_state.remote.ledgers`), fetched
  with the branches and pushed with each turn in one atomic push by the worker that ran it, ends
  with an approval at the tip of its branch (:func:`approved_in_ledger`);
* a look that found only turns pushed by tasks running elsewhere: those tasks are not read while
  their claims hold, so no fetch would change what the worker decides (:func:`only_running_moved`).

Only what to do next is decided from these; the merger reads every task's files before it merges.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from guardkit_state.features.progress import TaskState
from guardkit_state.git.turn_ledger import ProvenTurnCommit
from guardkit_state.remote.claims import Claim
from guardkit_state.remote.fresh_tasks import listed_refs
from guardkit_state.store.layout import BRANCH_PREFIX


def approved_in_ledger(task: str, turns: Sequence[ProvenTurnCommit], tip: str | None,
                       merge: str | None) -> TaskState | None:
    """``task`` approved (or merged since: ``merge``, its merge commit found by its ``Guardkit-Task``
    line) when its ledger's ``turns`` (by turn) end with an approval at ``tip``, its branch on the
    remote; else None: its files say. A branch moved by anything but its loop (a person, a
    send-back) no longer ends at its ledger's last entry."""
    if tip is None or not turns or turns[-1].sha != tip or turns[-1].decision != "approve":
        return None
    last, decisions = turns[-1].turn, tuple(entry.decision for entry in turns)
    if merge is not None:
        return TaskState(task, "merged", last, decisions, "approved", "merged into the feature branch", merge)
    return TaskState(task, "approved", last, decisions, "approved", f"approved by the Coach in turn {last}")


def only_running_moved(before: str, look: str, claims: Mapping[str, Claim],
                       running_elsewhere: Callable[[Claim], bool]) -> bool:
    """Whether all that moved between two ``ls-remote`` looks is the branches of tasks whose
    ``claims`` (as last fetched) are ``running_elsewhere``, those claims unchanged."""
    then, now = listed_refs(before), listed_refs(look)
    for ref in then.keys() | now.keys():
        if then.get(ref) == now.get(ref):
            continue
        branch = ref.removeprefix("refs/heads/")
        claim = claims.get(branch.removeprefix(BRANCH_PREFIX)) if branch.startswith(BRANCH_PREFIX) else None
        if claim is None or not running_elsewhere(claim) or then.get(claim.ref) != now.get(claim.ref):
            return False
    return True


__all__ = ["approved_in_ledger", "only_running_moved"]
