"""What a loop or a feature run refuses before it makes anything — ids git or the file system cannot
use, plans that would run in another feature's (or a task's) branch, a ``.guardkit`` that is a file
or leaves the repository, a lone-CR task file — and errors that stay on one line. Real git, real
subprocess agents (``tests/feature_agents``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from guardkit_state.errors import FeaturePlanError, FrontmatterError, InputError, InvalidTaskIdError, UnsafePathError
from guardkit_state.features.build import FeatureOptions, build_feature
from guardkit_state.loop.run import LoopOptions, run_task_loop
from guardkit_state.report.write import write_report
from guardkit_state.turns.lifecycle import record_turn

from .feature_support import (
    FEATURE_ID,
    PLAN_REL,
    FeatureProject,
    TaskSpec,
    git,
    make_feature,
    merged_tasks,
    task_rel,
)
from .helpers import coach_decision, make_task_repo, player_report

T1 = "TASK-FB-001"


def _task(project: FeatureProject, monkeypatch: pytest.MonkeyPatch, task_id: str = T1) -> Any:
    for name, value in project.env().items():
        monkeypatch.setenv(name, value)
    return run_task_loop(project.root, task_id, *project.agents(), LoopOptions())


def _feature(project: FeatureProject, monkeypatch: pytest.MonkeyPatch, feature: str = FEATURE_ID) -> Any:
    for name, value in project.env().items():
        monkeypatch.setenv(name, value)
    return build_feature(project.root, feature, *project.agents(), FeatureOptions())


def _made_nothing(project: FeatureProject) -> None:
    assert not (project.root / ".guardkit" / "worktrees").exists()
    assert not (project.root / ".guardkit" / "logs").exists()
    assert git(project.root, "branch", "--list", "autobuild/*") == ""
    assert project.invocations() == []


@pytest.mark.parametrize("task_id", ["TASK-A.lock", "TASK-A."])
def test_an_id_git_refuses_as_a_branch_name_is_refused_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, task_id: str) -> None:
    project = make_feature(tmp_path, [TaskSpec(task_id)])
    with pytest.raises(InvalidTaskIdError, match="cannot name a git branch"):
        _task(project, monkeypatch, task_id)
    _made_nothing(project)


def test_an_id_too_long_for_file_names_is_refused_before_the_agents_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task_id = "TASK-" + "A" * 240
    project = make_feature(tmp_path, [TaskSpec(task_id, file="src/long.txt")])
    with pytest.raises(InvalidTaskIdError, match="245 characters long") as caught:
        _task(project, monkeypatch, task_id)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 400
    _made_nothing(project)


def test_a_copied_plan_whose_id_was_not_changed_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1)])
    copy = project.root / PLAN_REL.parent / "FEAT-FC.yaml"
    copy.write_text(project.plan_path.read_text())
    with pytest.raises(FeaturePlanError, match="not its file's name"):
        _feature(project, monkeypatch, "FEAT-FC")
    _made_nothing(project)


def test_a_plan_whose_id_is_one_of_its_task_ids_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1)])
    plan = project.root / PLAN_REL.parent / f"{T1}.yaml"
    plan.write_text(project.plan_path.read_text().replace(f"id: {FEATURE_ID}\n", f"id: {T1}\n", 1))
    with pytest.raises(FeaturePlanError, match="also one of its task ids"):
        _feature(project, monkeypatch, T1)
    _made_nothing(project)


def test_a_task_whose_branch_another_feature_made_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1)])
    first = _feature(project, monkeypatch)
    assert first.exit_code == 0, first.reason
    other = project.root / PLAN_REL.parent / "FEAT-FC.yaml"
    other.write_text(project.plan_path.read_text().replace(f"id: {FEATURE_ID}\n", "id: FEAT-FC\n", 1))
    with pytest.raises(FeaturePlanError, match=f"{T1} already has a branch autobuild/{T1} from autobuild/{FEATURE_ID}"):
        _feature(project, monkeypatch, "FEAT-FC")
    assert git(project.root, "branch", "--list", "autobuild/FEAT-FC") == ""


def test_a_guardkit_symlink_leaving_the_repository_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1)])
    outside = tmp_path / "outside"
    outside.mkdir()
    home = project.root / ".guardkit"
    os.rename(home, outside / "features-home")
    os.symlink(outside / "features-home", home)
    before = sorted(p.relative_to(outside) for p in outside.rglob("*"))
    with pytest.raises(UnsafePathError, match="outside the repository"):
        _task(project, monkeypatch)
    with pytest.raises(UnsafePathError, match="outside the repository"):
        _feature(project, monkeypatch)
    with pytest.raises(UnsafePathError, match="outside the repository"):
        write_report(project.root, T1)
    with pytest.raises(UnsafePathError, match="outside the repository"):
        record_turn(project.root, T1, player_report(1, task_id=T1),
                    coach_decision(1, "approve", task_id=T1, verdicts={"AC-001": "verified"}))
    assert sorted(p.relative_to(outside) for p in outside.rglob("*")) == before


@pytest.mark.parametrize("link", ["autobuild", f"autobuild/{T1}"])
def test_record_refuses_a_store_symlinked_out_of_the_repository(tmp_path: Path, link: str) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1)])
    outside = tmp_path / "outside"
    outside.mkdir()
    store = project.root / ".guardkit" / link
    store.parent.mkdir(parents=True, exist_ok=True)
    store.symlink_to(outside)
    with pytest.raises(UnsafePathError, match="outside the repository"):
        record_turn(project.root, T1, player_report(1, task_id=T1),
                    coach_decision(1, "approve", task_id=T1, verdicts={"AC-001": "verified"}))
    assert list(outside.iterdir()) == []


def test_a_store_an_agent_turned_into_a_symlink_leaving_the_worktree_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Turn 1's Player replaces its task's store with a symlink out: turn 2's context, reports and
    # turn state would be written out there, and the branch would hold only the link.
    outside = tmp_path / "outside"
    outside.mkdir()
    store = f".guardkit/autobuild/{T1}"
    swap = f'test "$GUARDKIT_TURN" = 1 && rm -rf {store} && ln -s {outside} {store}'
    project = make_feature(tmp_path, [TaskSpec(T1, approve_at=2, shell=swap)])
    with pytest.raises(UnsafePathError, match="outside the repository"):
        _task(project, monkeypatch)
    assert list(outside.iterdir()) == []


def test_a_guardkit_file_is_a_typed_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1)])
    git(project.root, "rm", "-q", "-r", ".guardkit")
    git(project.root, "commit", "-q", "-m", "no plans")
    (project.root / ".guardkit").write_text("not a directory\n")
    with pytest.raises(InputError, match=r"\.guardkit is a file"):
        _task(project, monkeypatch)
    assert (project.root / ".guardkit").read_text() == "not a directory\n"
    assert project.invocations() == []


def test_a_lone_cr_task_file_is_refused_naming_its_line_endings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1)])
    path = project.root / task_rel(T1)
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r"))
    git(project.root, "commit", "-q", "-am", "classic Mac line endings")
    with pytest.raises(FrontmatterError, match="lone CR"):
        _task(project, monkeypatch)
    _made_nothing(project)
    with pytest.raises(FrontmatterError, match="lone CR"):
        record_turn(project.root, T1, player_report(1, task_id=T1),
                    coach_decision(1, "approve", task_id=T1, verdicts={"AC-001": "verified"}))
    assert b"\n" not in path.read_bytes()


def test_an_error_echoing_a_criterion_id_with_a_newline_is_one_line(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    make_task_repo(root)
    (tmp_path / "p.json").write_text(json.dumps(player_report(1)))
    verdicts = {"AC-001\nINJECTED": "verified"}
    (tmp_path / "c.json").write_text(json.dumps(coach_decision(1, "approve", verdicts=verdicts)))
    done = subprocess.run([sys.executable, "-m", "guardkit_state", "record", "TASK-AUTH-001", "--player",
                           str(tmp_path / "p.json"), "--coach", str(tmp_path / "c.json")], cwd=root,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "AC-001\\nINJECTED" in done.stderr, done.stderr


def test_a_merge_refused_by_verify_signatures_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1)])
    git(project.root, "config", "merge.verifySignatures", "true")
    result = _feature(project, monkeypatch)
    assert (result.status, result.exit_code) == ("stopped", 1)
    assert merged_tasks(project.root) == []
    reason = result.task(T1).reason
    assert "does not have a GPG signature" in reason and "merge.verifySignatures is set" in reason, reason
