"""Where each task of a feature stands, and the feature's counts: the one reading behind ``status``,
``show FEAT-X``, ``log FEAT-X`` and ``report FEAT-X``.

Two kinds of runner report on a feature. A run of ours leaves files and git (a task's own branch or
worktree, its merge on the feature branch), and those decide (:func:`read_task_state`). GuardKit's own
runner, or a run whose branches are gone, leaves only the plan: each task's ``status``, ``result``,
``turns_completed``, and the ``execution`` block. So, task by task:

1. When git holds a run of ours of the task (a merge on the feature branch, its own branch or
   worktree), its files and git decide: ``completed`` (merged), ``approved``, ``blocked``,
   ``failed``, ``in_progress``.
2. Otherwise the plan's word decides when it records one beyond ``pending``: GuardKit's
   ``completed``, ``failed``, ``blocked``, ``in_progress``, and any other word it wrote
   (``deferred``, ``in_review``, ...), shown as written; a ``pending`` beside a recorded
   ``result`` (GuardKit leaves some so) is the result's word (``approved``: completed; a
   ``final_decision`` that ended it otherwise: failed). The turns are the plan's too.
3. Otherwise the task file: closed before the feature ran it (completed, cancelled ... or approved)
   is ``skipped``, else ``pending``, with the turns its file records.

Done is ``completed`` + ``skipped`` (closed before the feature ran it); failed is ``failed`` +
``blocked``. A ``skipped`` the plan records is a task a runner did not run because a task it needs
failed (``--no-stop-on-failure``, GuardKit's ``stop_on_failure``): shown as skipped, never done.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guardkit_state.features.progress import FeatureGit, TaskState, read_task_state, unstarted_state
from guardkit_state.git.checkouts import worktrees_home
from guardkit_state.git.merge import merged_task_ids
from guardkit_state.git.repo import GitRepo
from guardkit_state.model import Fields
from guardkit_state.plans.plan import FeaturePlan, PlanTask
from guardkit_state.store.layout import branch_for, worktrees_dir
from guardkit_state.taskfile.locate import autobuild_branches_at

#: A task's phase (from its files and git) -> the word shown, GuardKit's plan words where they exist.
PHASE_STATUS = {"new": "pending", "resume": "in_progress", "approved": "approved", "merged": "completed",
                "failed": "failed", "closed": "skipped"}
#: Statuses that count as done, and as failed.
DONE = ("completed", "skipped")
FAILED = ("failed", "blocked")
#: A plan task's ``result.final_decision`` (or legacy word result) that ended it, by what it means.
_APPROVED = ("approved", "passed")
_NOT_APPROVED = ("max_turns_exceeded", "unrecoverable_stall", "error", "failed")
#: Phases that mean git holds a run of ours of the task (rule 1).
_RUN_PHASES = ("resume", "approved", "merged", "failed")


@dataclass(frozen=True)
class TaskStanding:
    """One task as the reading says: its ``status`` word, its turns, and which rule decided
    (``source``: ``run`` for files and git, ``plan``, ``task_file``)."""

    task_id: str
    status: str
    turns: int
    source: str
    state: TaskState

    def to_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "status": self.status, "turns": self.turns, "source": self.source}


@dataclass(frozen=True)
class FeatureTally(Fields):
    """A feature's counts from its tasks' standings: what every view prints."""

    tasks: int
    done: int
    failed: int
    turns: int
    by_status: dict[str, int]

    def describe(self) -> str:
        """``7/10 task(s) done · 59 turn(s) · 2 failed/blocked`` (the last part only when some are)."""
        text = f"{self.done}/{self.tasks} task(s) done · {self.turns} turn(s)"
        return text + (f" · {self.failed} failed/blocked" if self.failed else "")

    @property
    def progressed(self) -> bool:
        """True when any task got anywhere: done, failed, turns taken, or a status beyond pending."""
        return bool(self.done or self.failed or self.turns or set(self.by_status) - {"pending"})


def branch_note(branch: str, exists: bool, tally: FeatureTally) -> str:
    """How every view names the feature branch: ``branch autobuild/FEAT-X`` when it exists; else
    ``not started`` only when nothing has happened, and otherwise where the progress shown comes
    from (GuardKit's own runner leaves no branch of ours: its plan and task files say it)."""
    if exists:
        return f"branch {branch}"
    if not tally.progressed:
        return f"not started (no branch {branch})"
    return f"no branch {branch} here: the progress is what the plan and the task files record"


def task_standing(entry: PlanTask, state: TaskState) -> TaskStanding:
    """Where the plan task ``entry`` stands, given what its files and git say (``state``); see the module."""
    if state.phase in _RUN_PHASES:
        status = PHASE_STATUS[state.phase]
        # Only a run can know a merge conflicted (it aborts the merge at once): the plan says so.
        if state.phase == "approved" and entry.status == "blocked":
            status = "blocked"
        return TaskStanding(entry.id, status, state.turns, "run", state)
    word = plan_word(entry)
    if word is not None:
        return TaskStanding(entry.id, word, plan_turns(entry), "plan", state)
    return TaskStanding(entry.id, PHASE_STATUS[state.phase], state.turns, "task_file", state)


def plan_word(entry: PlanTask) -> str | None:
    """What the plan records of a task beyond ``pending``: its ``status``, else (a ``pending`` status
    beside a recorded result, as GuardKit leaves a task its run finished) the result's word."""
    if entry.status is not None and entry.status != "pending":
        return entry.status
    decision = entry.final_decision
    if decision in _APPROVED:
        return "completed"
    if decision in _NOT_APPROVED:
        return "failed"
    return None


def plan_turns(entry: PlanTask) -> int:
    """The turns the plan records for a task: ``turns_completed``, else ``result.total_turns``, else 0."""
    if entry.turns_completed:
        return entry.turns_completed
    result = entry.result
    total = result.get("total_turns") if isinstance(result, dict) else None
    return total if isinstance(total, int) and not isinstance(total, bool) and total > 0 else 0


def tally(standings: Iterable[TaskStanding]) -> FeatureTally:
    """The feature's counts (pure)."""
    by_status: dict[str, int] = {}
    turns = not_run = 0
    for standing in standings:
        by_status[standing.status] = by_status.get(standing.status, 0) + 1
        turns += standing.turns
        not_run += standing.status == "skipped" and standing.source == "plan"  # (see the module)
    return FeatureTally(sum(by_status.values()), sum(by_status.get(s, 0) for s in DONE) - not_run,
                        sum(by_status.get(s, 0) for s in FAILED), turns, by_status)


def read_standings(root: Path, plan: FeaturePlan, fgit: FeatureGit | None,
                   branches: frozenset[str] | None = None, *, counts_only: bool = False) -> list[TaskStanding]:
    """Every task of ``plan`` as it stands, in plan order; reads only.

    A task git holds no run of (no feature branch, no branch or worktree of its own) is read from
    its task file alone: no git call (``branches``, the ``autobuild/`` branches, saves listing them
    once per feature when the caller reads many). ``counts_only``: the caller wants statuses and
    turns only, so a task the plan decides (rule 2) is not read at all (its ``state`` is a bare
    ``new``); the statuses and turns are the same either way.
    """
    known = frozenset() if fgit is None else branches if branches is not None else autobuild_branches(fgit.main)
    # The feature branch's merges, in one call: a task with no merge there, no branch and no
    # worktree of its own is one git holds no run of (what read_task_state would find, asked each).
    merged = merged_task_ids(fgit.main, f"refs/heads/{fgit.feature_branch}") \
        if fgit is not None and fgit.feature_branch in known else frozenset()
    trees = _worktree_names(fgit.worktrees) if fgit is not None else frozenset()
    standings = []
    for task in plan.tasks:
        ran = fgit is not None and (task.id in merged or branch_for(task.id) in known or task.id in trees)
        if fgit is not None and ran:
            state = read_task_state(fgit, task.id)
        elif counts_only and plan_word(task) is not None:
            state = TaskState(task.id, "new")
        else:
            state = unstarted_state(root, task.id)
        standings.append(task_standing(task, state))
    return standings


def _worktree_names(folder: Path) -> frozenset[str]:
    """The names of the folders in the loops' worktrees folder (one listing, not a stat per task)."""
    try:
        with os.scandir(folder) as listing:
            return frozenset(entry.name for entry in listing if entry.is_dir(follow_symlinks=False))
    except OSError:
        return frozenset()


def feature_git(root: Path, git: GitRepo | None, feature_id: str) -> FeatureGit | None:
    """The git side of ``feature_id`` in the repository at ``root`` (None without git)."""
    if git is None:
        return None
    home = worktrees_dir(worktrees_home(root))
    return FeatureGit(git, root, branch_for(feature_id), home / feature_id, home)


def autobuild_branches(repo: GitRepo) -> frozenset[str]:
    """The local branches named ``autobuild/...`` (the loops' and the features' branches): one git
    call, once per listing scope (a read command; a run asks afresh each time)."""
    return autobuild_branches_at(repo.root)


__all__ = ["DONE", "FAILED", "PHASE_STATUS", "FeatureTally", "TaskStanding", "autobuild_branches", "branch_note",
           "feature_git",
           "plan_turns", "plan_word",
           "read_standings", "tally", "task_standing"]
