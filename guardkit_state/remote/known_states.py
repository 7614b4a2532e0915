"""Where the other workers' tasks stand, known without reading them or fetching.

A worker of ``feature-build --remote`` with nothing to claim looks at the remote often
(:mod:`~guardkit_state.remote.worker`). Reading a task means a ``git show`` of its task file on its
branch, a parse, and checks of its commits (about six git calls), and a fetch costs the most of any
call; with six workers on a wave, those readings and fetches were most of what the waiting workers
spent, on the CPUs the running tasks share. Three things are known without them:

* a task another worker approved: its turn ledger (:mod:`~guardkit_state.remote.ledgers`), fetched
  with the branches and pushed with each turn in one atomic push by the worker that ran it, ends
  with an approval at the tip of its branch (:func:`approved_in_ledger`);
* a look that found only turns pushed by tasks running elsewhere: those tasks are not read while
  their claims hold, so no fetch would change what the worker decides (:func:`what_moved`);
* a look that found claims made since the last fetch (and the turns their holders push): a worker
  that was waiting still has nothing to do, since a new claim only takes work away
  (:func:`what_moved`; what the worker does with it: :mod:`~guardkit_state.remote.looks`).

Only what to do next is decided from these; the merger reads every task's files before it merges.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from guardkit_state.features.progress import TaskState
from guardkit_state.git.turn_ledger import ProvenTurnCommit
from guardkit_state.remote.branches import listed_refs, task_ref_place
from guardkit_state.remote.claim_record import Claim
from guardkit_state.store.layout import BRANCH_PREFIX

#: See :func:`what_moved`.
Moved = Literal["running", "claimed"]


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


def what_moved(fetched: str, before: str, look: str, claims: Mapping[str, Claim],
               running_elsewhere: Callable[[Claim], bool], claims_prefix: str) -> Moved | None:
    """What moved between two ``ls-remote`` looks, ``before`` and ``look``, when no fetch is needed
    to know it; None when one is. ``running``: only the branches of tasks whose ``claims`` (as the
    fetch at the look ``fetched`` brought them) are ``running_elsewhere``, those claims unchanged.
    ``claimed``: besides those, claims (``claims_prefix``/task) made since the look ``fetched``, never
    changed or gone since, and the branches of their tasks."""
    base, then, now = listed_refs(fetched), listed_refs(before), listed_refs(look)
    moved: Moved = "running"
    for ref in then.keys() | now.keys():
        if then.get(ref) == now.get(ref):
            continue
        if ref.startswith(f"{claims_prefix}/"):
            if task_ref_place(ref, claims_prefix) is None:
                continue  # the claim of no task, in the way of none: nothing a worker decides on
            if ref in then or ref not in now or ref in base:  # changed or gone: renewed, taken over, released
                return None
            moved = "claimed"
            continue
        branch = ref.removeprefix("refs/heads/")
        task = branch.removeprefix(BRANCH_PREFIX) if branch.startswith(BRANCH_PREFIX) else None
        claim_ref = f"{claims_prefix}/{task}"
        if task is not None and claim_ref in now and claim_ref not in base:
            continue  # a turn pushed under a claim made since the fetch
        claim = claims.get(task) if task is not None else None
        if claim is None or not running_elsewhere(claim) or then.get(claim.ref) != now.get(claim.ref):
            return None
    return moved


__all__ = ["Moved", "approved_in_ledger", "what_moved"]
