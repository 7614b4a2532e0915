"""The feature branch and worktree of one ``feature-build`` run: made or found, repaired after a
kill, and the worktree checked out on first need.

A fresh run makes the branch ``autobuild/FEAT-X`` only (its tasks start from it); the worktree
``.guardkit/worktrees/FEAT-X``, where the merges happen, is checked out while they run, so the
checkout it starts from shows only the user's changes. A resumed run finds both, and puts right
what a kill left there: the merge queue stopped at a candidate, a merge half done.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from guardkit_state.errors import ResumeError
from guardkit_state.features.merge_queue import restore_worktree
from guardkit_state.features.result import resume_command
from guardkit_state.git.merge import recover_interrupted_merge
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.worktrees import Worktree, WorktreeManager
from guardkit_state.store.fsio import crash_point, remove_stale_temp_files
from guardkit_state.store.layout import branch_for, worktrees_dir


class FeatureCheckout:
    """The feature's branch and worktree for a run (:meth:`prepare` makes or finds them)."""

    def __init__(self, git: GitRepo, worktree: Worktree, *, checked_out: bool, worktrees: Path) -> None:
        self.git = git
        self.worktree = worktree
        self.worktrees = worktrees  # the folder of the loops' worktrees (the main checkout's)
        self._repo = worktree.repo() if checked_out else None

    @property
    def path(self) -> Path:
        return self.worktree.path

    @classmethod
    def prepare(cls, git: GitRepo, feature_id: str, *, resume: bool, base_branch: str | None,
                argv: Sequence[str], plan_path: Path, task_ids: Sequence[str],
                note: Callable[[str], None]) -> FeatureCheckout:
        """A fresh start (the branch made; refused when it exists) or a resume (the branch and worktree
        found, and repaired; refused when there is no branch), checked under the feature's lock."""
        branch = branch_for(feature_id)
        exists = git.branch_exists(branch)
        if resume and not exists:
            raise ResumeError(f"{feature_id} has nothing to resume (no branch {branch}); start it with "
                              f"'guardkit-state feature-build {feature_id} --player CMD --coach CMD'")
        if not resume and exists:
            raise ResumeError(f"{feature_id} has already started (branch {branch} exists); continue it "
                              f"with {resume_command(feature_id, argv)}")
        removed = remove_stale_temp_files(plan_path.parent)
        if removed:
            note(f"removed {len(removed)} temp file(s) an interrupted plan write left")
        manager = WorktreeManager(git)
        # A fresh run makes only the branch now: the tasks start from it, and its worktree is checked
        # out while they do (see repo()). A run killed in between is resumed like any other.
        worktree = manager.create(feature_id, base_branch) if resume else manager.create_branch(feature_id, base_branch)
        checkout = cls(git, worktree, checked_out=resume, worktrees=worktrees_dir(manager.root))
        for text in worktree.notes:
            note(text)
        if resume:
            branches = [branch_for(task_id) for task_id in task_ids]
            if restore_worktree(checkout.repo(), branch):
                note(f"the merge queue was stopped at a candidate; {worktree.path} is back on {branch}")
            for text in recover_interrupted_merge(checkout.repo(), lambda: branches):
                note(text)
        return checkout

    def repo(self) -> GitRepo:
        """The feature worktree, checked out on first need in a fresh run."""
        if self._repo is None:
            crash_point("feature.before_checkout")  # the branch exists, its tasks may run, no worktree yet
            # Its notes were said when the branch was made (before the run wrote into the checkout).
            self._repo = WorktreeManager(self.git).check_out(self.worktree).repo()
        return self._repo


__all__ = ["FeatureCheckout"]
