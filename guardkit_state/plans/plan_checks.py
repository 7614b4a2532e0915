"""What makes a plan unsafe to run, found before a feature run makes anything.

The feature's branch, lock and worktree are named from the plan's ``id``, and each task's from the
task's id. So a plan copied without changing its ``id`` (``FEAT-B.yaml`` saying ``id: FEAT-A``)
would run in FEAT-A's branch; a plan whose ``id`` is one of its task ids would share that task's
branch and lock; and a task whose branch was made by another feature (or a run of its own) would
bring that run's work into this feature. Each is refused, naming the plan and the fix.
"""

from __future__ import annotations

from pathlib import Path

from guardkit_state.errors import FeaturePlanError, shorten
from guardkit_state.git.repo import GitRepo
from guardkit_state.plans.plan import FeaturePlan
from guardkit_state.store.layout import branch_for


def check_plan_identity(plan: FeaturePlan, path: Path) -> None:
    """Refuse a plan whose ``id`` is not its file's name, or is one of its own task ids."""
    if plan.feature_id != path.stem:
        raise FeaturePlanError(f"the plan's id {shorten(repr(plan.feature_id))} is not its file's name "
                               f"({shorten(path.name)}): a copied plan would run in the other feature's "
                               "branch", path=path, expected=f"id: {shorten(path.stem)} (or rename the file)")
    if plan.feature_id in {task.id for task in plan.tasks}:
        raise FeaturePlanError(f"the plan's id {shorten(plan.feature_id)} is also one of its task ids: the feature "
                               "and that task would share a branch and a lock", path=path,
                               task_ids=[plan.feature_id], expected="a feature id no task of it has")


def check_task_branches(git: GitRepo, plan: FeaturePlan, path: Path) -> None:
    """Refuse a task whose ``autobuild/TASK`` branch does not start from this feature's branch.

    A task listed in two plans (or run on its own before) has one branch; running it here would
    merge the other run's work into this feature. It is refused, not silently re-branched: the
    user merges or deletes that branch (``guardkit-state worktrees prune``) first.
    """
    feature_branch = branch_for(plan.feature_id)
    for task in plan.tasks:
        branch = branch_for(task.id)
        if not git.branch_exists(branch):
            continue
        base = git.upstream_of(branch)
        # No recorded base: git was killed between making the branch and writing its tracking
        # config (a resumed run of this feature meets that); only a base that names another
        # branch is proof of another run.
        if base is not None and base != feature_branch:
            raise FeaturePlanError(
                f"{task.id} already has a branch {branch} from {base or 'another run'}, not from {feature_branch}: "
                "a task in two features (or run on its own first) would bring that run's work into this one",
                path=path, task_ids=[task.id],
                fix=f"merge or delete {branch} first (guardkit-state worktrees prune), then run {plan.feature_id}")


__all__ = ["check_plan_identity", "check_task_branches"]
