"""``build_feature``: waves of task loops in parallel processes, merged in plan order, with the plan
written surgically. Real git repositories, real subprocess agents (``tests/feature_agents``)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from guardkit_state.agents.protocol import CallableAgent, TurnRequest
from guardkit_state.errors import ResumeError, TaskNotFoundError
from guardkit_state.features.build import FeatureOptions, build_feature
from guardkit_state.features.feature_events import TaskEnded, TaskMerged, TaskStarted, WaveStarted
from guardkit_state.loop.events import Event
from guardkit_state.plans.plan import load_plan
from guardkit_state.plans.waves import WaveError

from .feature_support import (
    FEATURE_BRANCH,
    FEATURE_ID,
    FeatureProject,
    TaskSpec,
    build_in_process,
    git,
    make_feature,
    merged_tasks,
    read_state,
)

T1, T2, T3 = "TASK-FB-001", "TASK-FB-002", "TASK-FB-003"
WAVES = [[T1, T2], [T3]]



def _three(**overrides: dict[str, Any]) -> list[TaskSpec]:
    specs = {T1: TaskSpec(T1), T2: TaskSpec(T2), T3: TaskSpec(T3, [T1, T2])}
    for task_id, values in overrides.items():
        for key, value in values.items():
            setattr(specs[task_id.replace("_", "-")], key, value)
    return list(specs.values())


def test_waves_from_parallel_groups_run_merge_and_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, _three(TASK_FB_001={"approve_at": 2}), WAVES)
    status_before = git(project.root, "status", "--porcelain")
    events: list[Event] = []
    result = build_in_process(project, monkeypatch, events=events)
    assert (result.status, result.exit_code) == ("completed", 0)
    assert result.waves == WAVES
    assert [(t.task_id, t.status, t.outcome, t.turns) for t in result.tasks] == [
        (T1, "completed", "approved", 2), (T2, "completed", "approved", 1), (T3, "completed", "approved", 1)]
    assert merged_tasks(project.root) == [T1, T2, T3]
    # Wave 2's branch starts from the feature branch after wave 1's merges.
    merge_of_t2 = result.task(T2).merge_commit
    git(project.root, "merge-base", "--is-ancestor", merge_of_t2, f"autobuild/{T3}")
    state = read_state(project)
    assert state.feature_files == {"src/TASK-FB-001.txt": "TASK-FB-001 turn 1\nTASK-FB-001 turn 2\n",
                                   "src/TASK-FB-002.txt": "TASK-FB-002 turn 1\n",
                                   "src/TASK-FB-003.txt": "TASK-FB-003 turn 1\n", "src/shared.txt": "base line\n"}
    assert state.execution == {"current_wave": 2, "completed_waves": [1, 2], "tasks_completed": 3,
                               "tasks_failed": 0, "total_turns": 4}
    assert state.plan_status == "completed"
    assert state.tasks[T1]["result"] == {"total_turns": 2, "final_decision": "approved", "error": None}
    # The user's checkout: only the plan changed; the feature worked in its own worktree.
    assert git(project.root, "status", "--porcelain") == status_before + " M .guardkit/features/FEAT-FB.yaml\n"
    assert git(project.root, "branch", "--show-current").strip() == "main"
    assert git(project.feature_worktree, "status", "--porcelain") == ""
    waves = [e for e in events if isinstance(e, WaveStarted)]
    assert [(w.number, w.to_run) for w in waves] == [(1, (T1, T2)), (2, (T3,))]


def test_waves_from_dependencies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, _three(), None)
    events: list[Event] = []
    result = build_in_process(project, monkeypatch, events=events)
    assert result.waves == WAVES and result.exit_code == 0
    order = [(type(e).__name__, e.outcome.task_id if isinstance(e, TaskEnded) else e.task_id)
             for e in events if isinstance(e, (TaskStarted, TaskEnded))]
    # T3 starts only once both tasks of wave 1 have ended.
    assert order.index(("TaskStarted", T3)) > max(order.index(("TaskEnded", T1)), order.index(("TaskEnded", T2)))


def test_merges_follow_plan_order_not_finishing_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, _three(TASK_FB_001={"sleep": 1.5}), WAVES)
    events: list[Event] = []
    result = build_in_process(project, monkeypatch, events=events)
    assert result.exit_code == 0
    ended = [e.outcome.task_id for e in events if isinstance(e, TaskEnded)]
    merged = [e.task_id for e in events if isinstance(e, TaskMerged)]
    assert ended[:2] == [T2, T1]  # the second task in plan order finished first
    assert merged == [T1, T2, T3] == merged_tasks(project.root)


def test_max_parallel_one_runs_tasks_one_after_another(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, _three(), WAVES)
    events: list[Event] = []
    result = build_in_process(project, monkeypatch, options=FeatureOptions(max_parallel=1), events=events)
    assert result.exit_code == 0 and result.max_parallel == 1
    steps = [(type(e).__name__, e.outcome.task_id if isinstance(e, TaskEnded) else e.task_id)
             for e in events if isinstance(e, (TaskStarted, TaskEnded))]
    assert steps == [("TaskStarted", T1), ("TaskEnded", T1), ("TaskStarted", T2), ("TaskEnded", T2),
                     ("TaskStarted", T3), ("TaskEnded", T3)]


def test_a_merge_conflict_blocks_the_task_and_keeps_its_branch(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    shared = {"file": "src/shared.txt", "mode": "replace"}
    project = make_feature(tmp_path, _three(TASK_FB_001=shared, TASK_FB_002=shared), WAVES)
    result = build_in_process(project, monkeypatch)
    assert (result.status, result.exit_code) == ("stopped", 1)
    blocked = result.task(T2)
    assert (blocked.status, blocked.outcome, blocked.conflicts) == ("blocked", "approved", ("src/shared.txt",))
    assert "TASK-FB-002 is blocked: merge conflict in src/shared.txt" in result.reason
    assert "stops before wave 2" in result.reason
    assert result.task(T3).status == "pending" and not result.task(T3).ran
    assert merged_tasks(project.root) == [T1]
    # Nothing lost: the branch and worktree are kept, the feature worktree is clean (merge aborted).
    assert git(project.root, "rev-parse", "--verify", f"autobuild/{T2}").strip()
    assert (project.task_worktree(T2) / "src/shared.txt").read_text() == "TASK-FB-002 turn 1\n"
    assert git(project.feature_worktree, "status", "--porcelain") == ""
    assert (project.feature_worktree / "src/shared.txt").read_text() == "TASK-FB-001 turn 1\n"
    state = read_state(project)
    assert state.tasks[T2]["status"] == "blocked" and state.tasks[T2]["conflicts"] == ["src/shared.txt"]
    assert state.tasks[T2]["result"]["error"] == "merge conflict in src/shared.txt"
    assert state.execution["tasks_failed"] == 1 and state.execution["completed_waves"] == []
    assert state.plan_status == "failed"


def test_a_failed_task_lets_its_wave_finish_and_stops_the_next(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, _three(TASK_FB_001={"approve_at": 0}), WAVES)
    result = build_in_process(project, monkeypatch, options=FeatureOptions(max_turns=2))
    assert (result.status, result.exit_code) == ("stopped", 1)
    failed = result.task(T1)
    assert (failed.status, failed.outcome, failed.turns) == ("failed", "max_turns_exceeded", 2)
    assert result.reason.startswith("TASK-FB-001 ended without approval (max_turns_exceeded)")
    assert result.task(T2).status == "completed" and merged_tasks(project.root) == [T2]
    assert not result.task(T3).ran and not project.task_worktree(T3).exists()
    state = read_state(project)
    assert state.tasks[T1]["status"] == "failed"
    assert state.tasks[T1]["result"]["final_decision"] == "max_turns_exceeded"
    assert state.execution == {"current_wave": 1, "completed_waves": [], "tasks_completed": 1,
                               "tasks_failed": 1, "total_turns": 3}
    # Resuming does not re-run an ended task: the feature stops again at the same place.
    again = build_in_process(project, monkeypatch, options=FeatureOptions(max_turns=2, resume=True))
    assert again.exit_code == 1 and not any(t.ran for t in again.tasks)
    # With a larger budget the failed task goes on, and the feature completes.
    monkeypatch.setenv("FEATURE_SPEC", str(_respec(project, T1, approve_at=3)))
    done = build_in_process(project, monkeypatch, options=FeatureOptions(max_turns=3, resume=True))
    assert done.exit_code == 0, done.reason
    assert [t.task_id for t in done.tasks if t.ran] == [T1, T3]
    assert merged_tasks(project.root) == [T2, T1, T3]


def _respec(project: FeatureProject, task_id: str, **values: Any) -> Path:
    import json

    data = json.loads(project.spec_file.read_text())
    data[task_id].update(values)
    project.spec_file.write_text(json.dumps(data))
    return project.spec_file


def test_resume_of_a_finished_feature_runs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, _three(), WAVES)
    first = build_in_process(project, monkeypatch)
    invocations = len(project.invocations())
    plan_before = project.plan_path.read_text()
    again = build_in_process(project, monkeypatch, options=FeatureOptions(resume=True))
    assert again.exit_code == 0 and not any(t.ran for t in again.tasks)
    assert len(project.invocations()) == invocations
    assert [t.merge_commit for t in again.tasks] == [t.merge_commit for t in first.tasks]
    assert merged_tasks(project.root) == [T1, T2, T3]
    assert _without_times(project.plan_path.read_text()) == _without_times(plan_before)


def _without_times(text: str) -> list[str]:
    return [line for line in text.splitlines() if "_at:" not in line and "last_updated" not in line]


def test_fresh_start_and_resume_are_refused_when_they_cannot_apply(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, _three(), WAVES)
    with pytest.raises(ResumeError, match="nothing to resume"):
        build_in_process(project, monkeypatch, options=FeatureOptions(resume=True))
    assert not git(project.root, "branch", "--list", FEATURE_BRANCH).strip()
    build_in_process(project, monkeypatch)
    with pytest.raises(ResumeError, match=r"already started.*--resume"):
        build_in_process(project, monkeypatch)


def test_a_bad_plan_is_refused_before_anything_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1, [T2]), TaskSpec(T2, [T1])], None)
    with pytest.raises(WaveError, match="cycle"):
        build_in_process(project, monkeypatch)
    other = make_feature(tmp_path, [TaskSpec(T1), TaskSpec(T2)], None, name="other")
    (other.root / "tasks/backlog/TASK-FB-002-part.md").unlink()
    with pytest.raises(TaskNotFoundError):
        build_in_process(other, monkeypatch)
    for checkout in (project.root, other.root):
        assert git(checkout, "branch", "--list", "autobuild/*") == ""
        assert not (checkout / ".guardkit/worktrees").exists()


def test_python_callable_agents_run_in_the_task_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, _three(), WAVES)

    def player(request: TurnRequest) -> dict[str, Any]:
        (request.workdir / f"{request.task_id}.py").write_text(f"TURN = {request.turn}\n")
        return {"summary": "done", "tests_run": True, "tests_passed": True, "files_created": [f"{request.task_id}.py"]}

    def coach(request: TurnRequest) -> dict[str, Any]:
        return {"decision": "approve", "criteria_verification": [{"criterion_id": "AC-001", "result": "verified"}],
                "issues": [], "rationale": "ok", "validation_results": {"tests_passed_count": 1,
                                                                        "tests_failed_count": 0}}

    result = build_feature(project.root, FEATURE_ID, CallableAgent(player), CallableAgent(coach))
    assert result.exit_code == 0
    assert sorted(p.name for p in project.feature_worktree.glob("TASK-*.py")) == [f"{t}.py" for t in (T1, T2, T3)]


def test_the_plan_keeps_its_comments_order_and_unknown_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, _three(), WAVES)
    before = project.plan_path.read_text()
    build_in_process(project, monkeypatch)
    after = project.plan_path.read_text()
    kept = [line for line in before.splitlines() if "status:" not in line]
    lines = iter(after.splitlines())
    assert all(any(line == other for other in lines) for line in kept), "a line of the plan was lost or moved"
    plan = load_plan(project.plan_path)
    assert plan.data["bootstrap_extras"] == {"after_wave_1": "pytest -q"}
    assert list(plan.tasks[0].raw)[:8] == ["id", "name", "file_path", "complexity", "dependencies", "status",
                                           "implementation_mode", "estimated_minutes"]


def test_a_task_completed_before_the_feature_ran_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, _three(), WAVES)
    path = project.root / "tasks/backlog/TASK-FB-002-part.md"
    path.write_text(path.read_text().replace("status: backlog", "status: completed"))
    git(project.root, "commit", "-q", "-am", "TASK-FB-002 was done by hand")
    result = build_in_process(project, monkeypatch)
    assert result.exit_code == 0
    skipped = result.task(T2)
    assert (skipped.status, skipped.ran, skipped.reason) == ("skipped", False, "TASK-FB-002 is completed")
    assert merged_tasks(project.root) == [T1, T3]
    assert {e["task"] for e in project.invocations()} == {T1, T3}
    assert read_state(project).execution["tasks_completed"] == 3


def test_resume_finds_merged_tasks_after_their_worktrees_are_pruned(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, _three(TASK_FB_001={"approve_at": 2}), WAVES)
    first = build_in_process(project, monkeypatch)
    for task_id in (T1, T2, T3):  # what 'worktrees prune' does to merged task worktrees
        git(project.root, "worktree", "remove", str(project.task_worktree(task_id)))
        git(project.root, "branch", "-D", f"autobuild/{task_id}")
    again = build_in_process(project, monkeypatch, options=FeatureOptions(resume=True))
    assert again.exit_code == 0 and not any(t.ran for t in again.tasks)
    assert [(t.turns, t.decisions, t.merge_commit) for t in again.tasks] == \
        [(t.turns, t.decisions, t.merge_commit) for t in first.tasks]
    assert read_state(project).execution["total_turns"] == 4


def test_a_conflict_resolved_by_hand_lets_resume_go_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared = {"file": "src/shared.txt", "mode": "replace"}
    project = make_feature(tmp_path, _three(TASK_FB_001=shared, TASK_FB_002=shared), WAVES)
    assert build_in_process(project, monkeypatch).task(T2).status == "blocked"
    worktree = project.feature_worktree
    subprocess.run(["git", "merge", "-q", f"autobuild/{T2}"], cwd=worktree, capture_output=True, check=False)
    (worktree / "src/shared.txt").write_text("both\n")
    git(worktree, "commit", "-q", "-am", "resolve TASK-FB-002 by hand")
    result = build_in_process(project, monkeypatch, options=FeatureOptions(resume=True))
    assert result.exit_code == 0, result.reason
    assert (result.task(T2).status, result.task(T2).merge_commit, result.task(T2).ran) == ("completed", None, False)
    assert result.task(T3).ran and merged_tasks(project.root) == [T1, T3]
    state = read_state(project)
    assert state.tasks[T2]["status"] == "completed" and state.tasks[T2]["conflicts"] is None
    assert state.feature_files["src/shared.txt"] == "both\n"


T4, T5 = "TASK-FB-004", "TASK-FB-005"


def _five() -> list[TaskSpec]:
    """T1 fails; T3 needs it, T5 needs T3; T2 and T4 (after T2) need nothing of it."""
    return [TaskSpec(T1, approve_at=0), TaskSpec(T2), TaskSpec(T3, [T1]), TaskSpec(T4, [T2]), TaskSpec(T5, [T3])]


def test_no_stop_on_failure_skips_the_failed_tasks_dependents_and_runs_the_others(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, _five())
    result = build_in_process(project, monkeypatch, options=FeatureOptions(max_turns=1, stop_on_failure=False))
    assert (result.status, result.exit_code) == ("incomplete", 1)
    assert result.verdict == f"completed without {T1}, {T3}, {T5}"
    assert merged_tasks(project.root) == [T2, T4]
    assert [t.task_id for t in result.tasks if t.ran] == [T1, T2, T4]
    for task, cause in ((T3, T1), (T5, T1)):
        skipped = result.task(task)
        assert (skipped.status, skipped.outcome) == ("skipped", "dependency_failed")
        assert skipped.reason == f"skipped: it needs {cause}, which ended without approval"
        assert not project.task_worktree(task).exists()
    assert result.reason == (f"{T1} ended without approval (max_turns_exceeded): the Coach did not approve within 1 "
                             f"turns; {T3} skipped: it needs {T1}, which ended without approval; {T5} skipped: it "
                             f"needs {T1}, which ended without approval; every other task merged into {FEATURE_BRANCH}")
    state = read_state(project)
    assert state.plan_status == "failed"  # the plan, as GuardKit words a feature with a failed task
    assert {t: state.tasks[t]["status"] for t in (T1, T2, T3, T4, T5)} == {
        T1: "failed", T2: "completed", T3: "skipped", T4: "completed", T5: "skipped"}
    assert state.tasks[T3]["result"]["final_decision"] == "dependency_failed"
    assert (state.execution["tasks_completed"], state.execution["tasks_failed"]) == (2, 1)
    assert state.execution["completed_waves"] == [1, 2, 3]  # nothing of them is left to run (as workers say)
    # --resume with the same rule runs nothing again and ends the same way.
    options = FeatureOptions(max_turns=1, stop_on_failure=False, resume=True)
    again = build_in_process(project, monkeypatch, options=options)
    assert (again.verdict, again.reason) == (result.verdict, result.reason) and not any(t.ran for t in again.tasks)


def test_a_plans_stop_on_failure_false_goes_on_and_the_flag_overrides_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, _five())
    plan = project.root / ".guardkit" / "features" / f"{FEATURE_ID}.yaml"
    # GuardKit's shape: the key on the wave that lists the task.
    plan.write_text(plan.read_text() + f"waves:\n  wave_1:\n    tasks: [{T1}, {T2}]\n    stop_on_failure: false\n")
    git(project.root, "commit", "-qam", "plan: wave 1 goes on past a failure")
    stopped = build_in_process(project, monkeypatch, options=FeatureOptions(max_turns=1, stop_on_failure=True))
    assert stopped.status == "stopped" and not stopped.task(T4).ran
    result = build_in_process(project, monkeypatch, options=FeatureOptions(max_turns=1, resume=True))
    assert result.status == "incomplete" and merged_tasks(project.root) == [T2, T4]
    assert result.task(T5).status == "skipped"


def test_a_stop_on_failure_that_is_no_boolean_is_refused_with_its_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from guardkit_state.errors import SchemaError

    project = make_feature(tmp_path, _five())
    plan = project.root / ".guardkit" / "features" / f"{FEATURE_ID}.yaml"
    text = plan.read_text() + "stop_on_failure: 'no'\n"
    plan.write_text(text)
    with pytest.raises(SchemaError) as refused:
        build_in_process(project, monkeypatch, options=FeatureOptions(max_turns=1))
    assert refused.value.pointer == "/stop_on_failure" or "stop_on_failure" in str(refused.value)
    assert refused.value.line == text.count("\n")
    assert not git(project.root, "branch", "--list", FEATURE_BRANCH).strip()


def test_no_stop_on_failure_with_every_task_failed_or_skipped_says_nothing_was_merged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # "every other task merged" would claim a merge where there is none: no task is on the branch.
    project = make_feature(tmp_path, [TaskSpec(T1, approve_at=0), TaskSpec(T2, approve_at=0), TaskSpec(T3, [T1])])
    result = build_in_process(project, monkeypatch, options=FeatureOptions(max_turns=1, stop_on_failure=False))
    assert (result.status, result.exit_code, merged_tasks(project.root)) == ("incomplete", 1, [])
    assert result.reason.endswith(f"; no task merged into {FEATURE_BRANCH}"), result.reason
