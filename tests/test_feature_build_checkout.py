"""A fresh feature run makes its branch first and checks out its worktree later: what the user is
told about their checkout, and what the run leaves, must be what they were when both were made at once."""

from __future__ import annotations

import json
from pathlib import Path

from .feature_support import (
    FEATURE_BRANCH,
    FeatureProject,
    TaskSpec,
    git,
    make_feature,
    run_cli,
    task_rel,
)

T1, T2, T3 = "TASK-FB-001", "TASK-FB-002", "TASK-FB-003"
DIRTY = "your checkout has uncommitted changes"


def _project(tmp_path: Path) -> FeatureProject:
    return make_feature(tmp_path, [TaskSpec(T1), TaskSpec(T2), TaskSpec(T3, [T1, T2])], None)


def test_the_live_report_written_in_a_clean_checkout_does_not_make_it_uncommitted(tmp_path: Path) -> None:
    project = _project(tmp_path)
    run = run_cli(project, "--report", "report.html")
    assert run.returncode == 0, run.stderr
    assert (project.root / "report.html").is_file()
    assert DIRTY not in run.stderr  # the page is the run's own file, written after the run started


def test_a_dirty_checkout_is_still_said_once(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project.root / "README.md").write_text("# edited by the user\n")
    run = run_cli(project, "--json")
    assert run.returncode == 0, run.stderr
    notes = json.loads(run.stdout)["notes"]
    assert [note for note in notes if DIRTY in note] == [
        "your checkout has uncommitted changes; they are not part of the worktree"]


def test_a_detached_head_is_said_once(tmp_path: Path) -> None:
    project = _project(tmp_path)
    git(project.root, "checkout", "-q", "--detach", "HEAD")
    run = run_cli(project, "--json")
    assert run.returncode == 0, run.stderr
    notes = json.loads(run.stdout)["notes"]
    assert len([note for note in notes if "HEAD is detached" in note]) == 1, notes


def test_a_run_with_nothing_to_run_or_merge_still_leaves_its_worktree(tmp_path: Path) -> None:
    project = _project(tmp_path)
    for task_id in (T1, T2, T3):  # finished before the feature ran them: each is skipped
        path = project.root / task_rel(task_id)
        path.write_text(path.read_text().replace("status: backlog", "status: completed"))
    git(project.root, "commit", "-qam", "tasks done by hand")
    run = run_cli(project)
    assert run.returncode == 0, run.stderr
    assert f"branch {FEATURE_BRANCH} in {project.feature_worktree}" in run.stdout
    assert project.feature_worktree.is_dir()
    assert git(project.feature_worktree, "symbolic-ref", "--short", "HEAD").strip() == FEATURE_BRANCH


def test_something_at_the_worktree_path_is_refused_before_any_task_runs(tmp_path: Path) -> None:
    project = _project(tmp_path)
    leftover = project.feature_worktree
    leftover.mkdir(parents=True)
    (leftover / "notes.txt").write_text("kept from an earlier try\n")
    plan_before = project.plan_path.read_bytes()
    run = run_cli(project)
    assert run.returncode != 0
    assert "already exists" in run.stderr and "started" not in run.stderr
    assert project.invocations() == []  # no agent ran
    assert project.plan_path.read_bytes() == plan_before
    assert git(project.root, "branch", "--list", FEATURE_BRANCH).strip() == ""  # nothing made: start again
    (leftover / "notes.txt").unlink()
    leftover.rmdir()
    again = run_cli(project)
    assert again.returncode == 0, again.stderr
