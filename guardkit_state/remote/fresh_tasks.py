"""Tasks nobody has started, found from one look at the remote's refs: no fetch, no task read in git.

While a wave has tasks nobody has started, a free worker needs no fetch to find one. The look it
makes at every step anyway (``ls-remote`` of the loop branches and the feature's claims) says which
tasks have no branch and no claim on the remote; with the feature branch where this clone last
fetched it (so its merges are known here), the first wave not wholly merged is known too, and a task
of it with no branch or worktree in this clone either is new
(:func:`~guardkit_state.features.progress.unstarted_state`, what a full reading answers then). The
worker claims it at once. A task claimed, run and released elsewhere between the look and the claim
is caught by the check every fresh claim makes (its branch looked up on the remote once more).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from guardkit_state.features.progress import TaskState
from guardkit_state.plans.waves import Waves
from guardkit_state.remote.branches import RefRecord, listed_refs, task_ref_place
from guardkit_state.store.layout import branch_for


def fresh_tasks(refs: Mapping[str, str], waves: Waves, merged: Mapping[str, str], claims_prefix: str,
                worktrees: Path, local_branches: set[str],
                unstarted: Callable[[str], TaskState]) -> list[str]:
    """The tasks of the first wave not wholly merged that nobody has started (remote and clone
    alike), in plan order: empty when there is none, or the wave's tasks cannot be told apart from
    the look (a task of it with a branch but no merge: only a reading says whether it is done).
    A task whose claim ref, or a ref below it, is in ``refs`` is claimed (or in the way of a claim)."""
    claimed = {place[0] for ref in refs if (place := task_ref_place(ref, claims_prefix)) is not None}
    for wave in waves:
        fresh: list[str] = []
        open_wave = False
        for task in wave:
            if task in merged:
                continue
            if f"refs/heads/{branch_for(task)}" in refs or started_here(task, local_branches, worktrees):
                open_wave = True  # started: running, approved or failed, which only a reading tells
                continue
            state = unstarted(task)
            if state.phase == "closed":
                continue
            open_wave = True
            if task not in claimed and state.runs:
                fresh.append(task)
        if open_wave:
            return fresh
    return []


def started_here(task: str, local_branches: set[str], worktrees: Path) -> bool:
    """Whether this clone holds a run of ``task``: its branch (as last listed) or its worktree."""
    return branch_for(task) in local_branches or (worktrees / task).exists()


def branches_here(listing: list[RefRecord]) -> set[str]:
    """The clone's own branches in a :func:`~guardkit_state.remote.branches.list_refs` listing."""
    return {name.removeprefix("refs/heads/") for name, _, _ in listing if name.startswith("refs/heads/")}


def fresh_in_look(look: str, *, feature_branch: str, fetched_tip: str | None,
                  merged: Callable[[str], Mapping[str, str]], waves: Waves, claims_prefix: str, worktrees: Path,
                  listing: list[RefRecord], unstarted: Callable[[str], TaskState]) -> list[str]:
    """:func:`fresh_tasks` of an ``ls-remote`` ``look``, when the feature branch in it is where this
    clone last fetched it (``fetched_tip``; ``merged`` gives its merges); else none."""
    refs = listed_refs(look)
    tip = refs.get(f"refs/heads/{feature_branch}")
    if tip is None or tip != fetched_tip:
        return []
    return fresh_tasks(refs, waves, merged(tip), claims_prefix, worktrees, branches_here(listing), unstarted)


__all__ = ["branches_here", "fresh_in_look", "fresh_tasks", "started_here"]
