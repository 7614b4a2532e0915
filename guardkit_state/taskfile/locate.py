"""Which copy of a task is the truth: the resolver's pick in the main checkout, its own loop's
worktree copy, or — for a task a feature ran — the feature's copy.

While a loop runs in ``.guardkit/worktrees/TASK-ID``, that worktree's copy of TASK-ID and its turn
files are the truth; another loop's worktree is never read for this task. Within a checkout the
copy is chosen by :func:`guardkit_state.taskfile.resolve.resolve_task`, so every command reads the same one.

A feature run (``feature-build FEAT-X``) records a task's turns in the task's worktree, then merges
its branch into the feature branch ``autobuild/FEAT-X``; the main checkout's copy stays as it was
until the user merges the feature. Once the task's worktree is pruned, its turns are read, in this
order, from its own branch when that is not merged yet, from the feature's worktree
(``.guardkit/worktrees/FEAT-X``), else from the feature branch through git. The main checkout is
read again once the feature branch is part of its HEAD. Every location says which copy it is.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

from guardkit_state.errors import FileTooLargeError, GuardkitStateError, TaskNotFoundError
from guardkit_state.git.checkouts import worktrees_home
from guardkit_state.git.repo import GitRepo, branches_named
from guardkit_state.store.layout import BRANCH_PREFIX, artifacts_dir, branch_for, worktree_path
from guardkit_state.store.turn_files import TurnStore
from guardkit_state.taskfile.discovery import STATE_MARKERS, scoped
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.taskfile.read_scope import resolved_root
from guardkit_state.taskfile.resolve import REASON_GIVEN, Resolution, holds_state, plan_listings, resolve_task

#: Where a location's copy comes from: the main checkout, the task's loop worktree, the task's
#: branch (its worktree gone), a feature's worktree, or the feature branch (through git).
Source = Literal["main", "worktree", "task branch", "feature worktree", "feature branch"]




@dataclass(frozen=True)
class TaskLocation:
    """A task as found: the checkout holding its live state, its file, and how it was chosen.

    ``in_worktree`` is True for the task's own loop worktree only (the copy its loop continues);
    ``source`` says which copy it is, and ``rev`` is the branch a git copy is read from (its file
    then does not exist on disk as read: ``task_path`` is where it sits in that branch).
    """

    task_id: str
    checkout: Path
    task_path: Path
    in_worktree: bool
    resolution: Resolution | None = None
    source: Source = "main"
    rev: str | None = None
    feature_id: str | None = None

    @property
    def note(self) -> str:
        return f"reading {self.describe()}"

    def describe(self) -> str:
        """Which copy this is, for people: ``the feature worktree copy (FEAT-X): <path>`` ..."""
        if self.rev is not None:
            rel = self._relative()
            return f"{self.source} {self.rev} (from git, its worktree was removed): {rel}"
        where = {"main": "the main checkout", "worktree": "the loop's worktree copy",
                 "feature worktree": f"the feature worktree copy ({self.feature_id})"}.get(self.source, self.source)
        return f"{where}: {self.task_path}"

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "path": str(self.task_path), "rev": self.rev, "feature_id": self.feature_id,
                "checkout": str(self.checkout)}

    def load(self) -> tuple[TaskFile, TurnStore]:
        task = self._read_from_git() if self.rev is not None else TaskFile.load(self.task_path)
        return task, TurnStore(artifacts_dir(self.checkout, self.task_id), self.task_id)

    def _relative(self) -> str:
        try:
            return self.task_path.relative_to(self.checkout).as_posix()
        except ValueError:
            return str(self.task_path)

    def _read_from_git(self) -> TaskFile:
        raw = _git_copy(GitRepo.discover(self.checkout), str(self.rev), self._relative())
        if raw is None:
            raise TaskNotFoundError(f"{self.task_id} is no longer on {self.rev}", path=self.task_path,
                                    task_id=self.task_id)
        return TaskFile.from_bytes(raw, self.task_path)


def locate_task(repo_root: Path | str, task: str) -> TaskLocation:
    """Find ``task`` (an id or a task file's path), preferring its own loop's worktree copy, then
    (for a task of a feature run not yet merged into HEAD) the feature's copy; see the module."""
    root = resolved_root(repo_root)
    found = resolve_task(root, task)
    if found.reason == REASON_GIVEN:  # a path names its checkout (a worktree's file is read there)
        source: Source = "worktree" if found.checkout != root else "main"
        return TaskLocation(found.task_id, found.checkout, found.path, found.checkout != root, found, source)
    # Loop worktrees live in the repository's main checkout, also when this is a linked worktree.
    home = worktrees_home(root)
    worktree = worktree_path(home, found.task_id)
    if worktree.is_dir():
        try:
            copy = resolve_task(worktree, found.task_id)
        except TaskNotFoundError:
            copy = None
        if copy is not None:
            return TaskLocation(found.task_id, worktree, copy.path, True, copy, "worktree")
    return _feature_copy(root, home, found) or TaskLocation(found.task_id, root, found.path, False, found)


# --------------------------------------------------------------------------- features


def features_of_task(root: Path | str, task_id: str) -> list[str]:
    """The ids of the feature plans in ``root`` that list ``task_id``, by plan file name (a plan
    the strict reader refuses lists none: a broken plan must not stop a task from being read)."""
    return list(_plan_index(root).get(task_id, ()))


def _plan_index(root: Path | str) -> dict[str, tuple[str, ...]]:
    """Task id -> the features whose plan lists it, in plan file order (the plan's own id names
    its branch; its file name else)."""
    def build() -> dict[str, tuple[str, ...]]:
        index: dict[str, list[str]] = {}
        for plan in plan_listings(root):
            for task_id in dict.fromkeys(task_id for task_id, _ in plan.tasks if task_id):
                index.setdefault(task_id, []).append(plan.feature_id)
        return {task_id: tuple(features) for task_id, features in index.items()}

    return scoped(("plan index", os.fspath(root)), build)


def feature_branch_of_task(repo: GitRepo, root: Path | str, task_id: str) -> tuple[str, str] | None:
    """``(feature id, branch)`` of a feature that ran ``task_id`` and is not yet merged into HEAD.

    None when no feature lists the task, none has a branch, or each is part of HEAD already (the
    checkout then holds the feature's copies itself).
    """
    for feature_id in features_of_task(root, task_id):
        branch = branch_for(feature_id)
        if scoped(("unmerged", str(repo.root), branch), partial(_unmerged, repo, branch)):
            return feature_id, branch
    return None


def _unmerged(repo: GitRepo, branch: str) -> bool:
    """True when ``branch`` exists and is not part of HEAD (False when git cannot tell)."""
    from guardkit_state.git.merge import is_ancestor  # here: only a feature that has a branch asks

    with contextlib.suppress(GuardkitStateError):
        # Whether it exists, from the autobuild/ branches the read listed once (no git call of its own).
        return branch in autobuild_branches_at(repo.root) and not is_ancestor(repo, branch, "HEAD")
    return False


def _feature_copy(root: Path, home: Path, found: Resolution) -> TaskLocation | None:
    """The copy a feature run left of ``found``'s task (see the module), or None."""
    features = features_of_task(root, found.task_id)
    if not features:
        return None  # the common case: no git call at all
    branches = autobuild_branches_at(root)
    if not branches & {branch_for(feature) for feature in features}:
        return None  # no feature branch here (GuardKit's own runs leave none): one git call
    repo = repository_at(root)
    if repo is None:
        return None
    feature = feature_branch_of_task(repo, root, found.task_id)
    if feature is None:
        return None
    from guardkit_state.git.merge import is_ancestor

    feature_id, feature_branch = feature
    rel = found.path.relative_to(root).as_posix()
    task_id = found.task_id
    task_branch = branch_for(task_id)
    with contextlib.suppress(GuardkitStateError):
        # Whether the task's branch exists, from the autobuild/ branches just listed (no git call of its own).
        if (task_branch in branches and not is_ancestor(repo, task_branch, feature_branch)
                and _holds_state_at(repo, task_branch, rel)):
            return TaskLocation(task_id, root, found.path, False, found, "task branch", task_branch, feature_id)
    tree = worktree_path(home, feature_id)
    if (tree / rel).is_file() and holds_state(tree / rel):
        return TaskLocation(task_id, tree, tree / rel, False, found, "feature worktree", None, feature_id)
    if _holds_state_at(repo, feature_branch, rel):
        return TaskLocation(task_id, root, found.path, False, found, "feature branch", feature_branch, feature_id)
    return None


def repository_at(root: Path) -> GitRepo | None:
    """The git repository of the checkout ``root`` (None without one), discovered once per
    :func:`~guardkit_state.taskfile.read_scope.listing_scope`."""
    return scoped(("git", os.fspath(root)), partial(GitRepo.discover, root))


def autobuild_branches_at(root: Path) -> frozenset[str]:
    """The local ``autobuild/...`` branches (the loops' and the features' branches) of the repository
    at ``root``: one git call, once per :func:`~guardkit_state.taskfile.discovery.listing_scope`."""
    return scoped(("autobuild branches", os.fspath(root)), partial(branches_named, root, BRANCH_PREFIX))


def _git_copy(repo: GitRepo | None, rev: str, rel: str) -> bytes | None:
    """The bytes of ``rev:rel`` (None when absent), read under the cap a file on disk is.

    Raises:
        FileTooLargeError: the copy is over the cap (never read).
    """
    return repo.blob(rev, rel) if repo is not None else None


def _holds_state_at(repo: GitRepo | None, rev: str, rel: str) -> bool:
    """True when ``rev:rel`` has a state block, or is over the cap (as :func:`holds_state` answers of
    a copy on disk: ``show`` then reports on that copy, naming ``rev:rel``, rather than another)."""
    try:
        raw = _git_copy(repo, rev, rel)
    except FileTooLargeError:
        return True
    except GuardkitStateError:
        return False
    return raw is not None and any(marker in raw for marker in STATE_MARKERS)


__all__ = ["Source", "TaskLocation", "autobuild_branches_at", "feature_branch_of_task", "features_of_task",
           "locate_task"]
