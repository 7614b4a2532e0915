"""``remote/wave_progress.py``: a merged wave written into the plan on the feature branch, committed
in one git call, and as before where that call commits nothing. Real repository and worktree."""

from __future__ import annotations

from pathlib import Path

import pytest

from guardkit_state.features.progress import TaskState
from guardkit_state.git.repo import GitRepo
from guardkit_state.plans.plan import load_plan
from guardkit_state.plans.waves import plan_waves
from guardkit_state.remote.ready import WaveTurn
from guardkit_state.remote.wave_progress import write_wave_progress

from .feature_support import FEATURE_BRANCH, PLAN_REL, FeatureProject, TaskSpec, count_git_runs, git, make_feature

T1, T2 = "TASK-FB-001", "TASK-FB-002"
MESSAGE = "guardkit: FEAT-FB progress after wave 1 in its plan"


@pytest.fixture
def project(tmp_path: Path) -> FeatureProject:
    project = make_feature(tmp_path, [TaskSpec(T1), TaskSpec(T2)])
    git(project.root, "worktree", "add", "-q", "-b", FEATURE_BRANCH, str(project.feature_worktree))
    return project


def _write(project: FeatureProject) -> bool:
    feature = GitRepo.discover(project.feature_worktree)
    assert feature is not None
    plan = load_plan(project.root / PLAN_REL)
    states = {task: TaskState(task, "approved", 1, ("approve",), "approved", "approved by the Coach in turn 1")
              for task in (T1, T2)}
    turn = WaveTurn(1, (T1, T2), states)
    merged: dict[str, str | None] = {task: git(project.root, "rev-parse", "main").strip() for task in (T1, T2)}
    return write_wave_progress(feature, project.root, plan, plan_waves(plan), turn, merged,
                               state_of=states.__getitem__, note=lambda text: None)


def test_write_wave_progress_commits_the_plan_in_one_git_call(project: FeatureProject,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    calls = count_git_runs(monkeypatch)
    assert _write(project) is True
    assert [call[0] for call in calls if call[0] != "config"] == ["commit"], calls
    worktree = project.feature_worktree
    assert git(worktree, "log", "-1", "--format=%s").strip() == MESSAGE
    assert git(worktree, "show", "--name-only", "--format=", "HEAD").split() == [PLAN_REL.as_posix()]
    assert git(worktree, "status", "--porcelain") == ""
    assert "status: completed" in git(worktree, "show", f"HEAD:{PLAN_REL.as_posix()}")


def test_write_wave_progress_of_a_plan_the_branch_does_not_track_adds_it_as_before(project: FeatureProject) -> None:
    # The plan is a file of the worktree git does not track (someone put it there): `commit --include`
    # commits nothing then, and the plan is added and committed as it always was.
    worktree = project.feature_worktree
    git(worktree, "rm", "-q", "--cached", PLAN_REL.as_posix())
    git(worktree, "commit", "-q", "-m", "the plan untracked")
    assert git(worktree, "status", "--porcelain", "--untracked-files=all").strip() == f"?? {PLAN_REL.as_posix()}"
    _write(project)
    assert git(worktree, "log", "-1", "--format=%s").strip() == MESSAGE
    assert git(worktree, "status", "--porcelain", "--untracked-files=all") == ""
    assert "status: completed" in git(worktree, "show", f"HEAD:{PLAN_REL.as_posix()}")


def test_plan_on_branch_never_reads_a_plan_over_the_cap(project: FeatureProject,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # A plan of gigabytes pushed on the feature branch (the cap monkeypatched small): it holds no
    # plan that can be read, as one on disk over the cap, and is never read.
    from guardkit_state.remote.wave_progress import plan_on_branch
    from guardkit_state.store import reads

    from .conftest import commit_on_branch, git_answer_sizes

    repo = GitRepo.discover(project.root)
    assert repo is not None
    plan = load_plan(project.root / PLAN_REL)
    assert plan_on_branch(repo, plan, FEATURE_BRANCH) is not None
    padded = (project.root / PLAN_REL).read_bytes() + b"# " + b"x" * 3000 + b"\n"
    commit_on_branch(project.root, FEATURE_BRANCH, PLAN_REL.as_posix(), padded)
    monkeypatch.setattr(reads, "MAX_FILE_BYTES", 3000)
    answers = git_answer_sizes(monkeypatch)
    assert plan_on_branch(repo, plan, FEATURE_BRANCH) is None
    assert max(answers) < 3000, answers
