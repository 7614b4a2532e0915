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
from guardkit_state.remote.branches import RefRecord
from guardkit_state.store.layout import branch_for


def listed_refs(look: str) -> dict[str, str]:
    """``ls-remote``'s lines as ref -> sha."""
    refs: dict[str, str] = {}
    for line in look.splitlines():
        sha, _, ref = line.partition("\t")
        if ref:
            refs[ref] = sha
    return refs


def fresh_tasks(refs: Mapping[str, str], waves: Waves, merged: Mapping[str, str], claims_prefix: str,
                worktrees: Path, local_branches: set[str],
                unstarted: Callable[[str], TaskState]) -> list[str]:
    """The tasks of the first wave not wholly merged that nobody has started (remote and clone
    alike), in plan order: empty when there is none, or the wave's tasks cannot be told apart from
    the look (a task of it with a branch but no merge: only a reading says whether it is done)."""
    for wave in waves:
        fresh: list[str] = []
        open_wave = False
        for task in wave:
            if task in merged:
                continue
            branch = branch_for(task)
            started = (f"refs/heads/{branch}" in refs or branch in local_branches
                       or (worktrees / task).exists())
            if started:
                open_wave = True  # started: running, approved or failed, which only a reading tells
                continue
            state = unstarted(task)
            if state.phase == "closed":
                continue
            open_wave = True
            if f"{claims_prefix}/{task}" not in refs and state.runs:
                fresh.append(task)
        if open_wave:
            return fresh
    return []


def fresh_in_look(look: str, *, feature_branch: str, fetched_tip: str | None,
                  merged: Callable[[str], Mapping[str, str]], waves: Waves, claims_prefix: str, worktrees: Path,
                  listing: list[RefRecord], unstarted: Callable[[str], TaskState]) -> list[str]:
    """:func:`fresh_tasks` of an ``ls-remote`` ``look``, when the feature branch in it is where this
    clone last fetched it (``fetched_tip``; ``merged`` gives its merges); else none."""
    refs = listed_refs(look)
    tip = refs.get(f"refs/heads/{feature_branch}")
    if tip is None or tip != fetched_tip:
        return []
    local = {name.removeprefix("refs/heads/") for name, _, _ in listing if name.startswith("refs/heads/")}
    return fresh_tasks(refs, waves, merged(tip), claims_prefix, worktrees, local, unstarted)


__all__ = ["fresh_in_look", "fresh_tasks", "listed_refs"]
