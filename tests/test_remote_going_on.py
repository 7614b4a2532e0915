"""``feature-build FEAT --remote --no-stop-on-failure``: workers pass a failed task over, skip what
needs it, and run the rest; they end not done (exit 1), naming what the feature branch is without."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.feature_support import FEATURE_BRANCH, FEATURE_ID, FeatureProject, TaskSpec, agent_command, git, make_feature
from tests.remote_support import clone, make_bare

T1, T2, T3, T4 = (f"TASK-FB-00{n}" for n in range(1, 5))


def _worker(project: FeatureProject, checkout: Path, *extra: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARDKIT_", "FEATURE_"))}
    env.update(project.env(), NO_COLOR="1")
    argv = [sys.executable, "-m", "guardkit_state", "feature-build", FEATURE_ID, "--repo", str(checkout),
            "--player", agent_command("player.py"), "--coach", agent_command("coach.py"), "--remote", "origin",
            "--poll", "0.1", "--max-turns", "1", *extra]
    return subprocess.Popen(argv, cwd=checkout, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _merged(bare: Path) -> list[str]:
    out = git(bare, "log", "--first-parent", "--merges", "--reverse",
              "--format=%(trailers:key=Guardkit-Task,valueonly)%x1e", FEATURE_BRANCH)
    return [item.strip() for item in out.split("\x1e") if item.strip()]


def test_two_workers_skip_a_failed_tasks_dependents_and_merge_the_others(tmp_path: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1, approve_at=0), TaskSpec(T2), TaskSpec(T3, [T1]),
                                      TaskSpec(T4, [T2])])
    bare = make_bare(tmp_path, project.root)
    machines = [clone(bare.as_uri(), tmp_path / f"machine-{n}") for n in (1, 2)]
    procs = [_worker(project, machine, "--no-stop-on-failure", "--json") for machine in machines]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 1, out + err  # not 0: T1's work is not on the feature branch
        results.append(json.loads(out))
    reason = (f"{T1}: the Coach did not approve within 1 turns; {T3} skipped: it needs {T1}, which ended without "
              f"approval; every other task merged into {FEATURE_BRANCH}")
    assert [(r["done"], r["without"], r["reason"]) for r in results] == [(False, [T1, T3], reason)] * 2
    assert _merged(bare) == [T2, T4]
    assert not git(bare, "branch", "--list", f"autobuild/{T3}").strip()  # never claimed, never run
    plan = yaml.safe_load(git(bare, "show", f"{FEATURE_BRANCH}:.guardkit/features/{FEATURE_ID}.yaml"))
    assert plan["status"] == "failed" and plan["execution"]["tasks_completed"] == 2
    assert git(bare, "for-each-ref", "refs/guardkit/claims/") == ""
    # Said as one machine says it; show --remote names the task skipped.
    again = _worker(project, machines[0], "--no-stop-on-failure")
    out, err = again.communicate(timeout=600)
    assert again.returncode == 1 and f"FEAT-FB: completed without {T1}, {T3} — {reason}" in out, out + err
    shown = subprocess.run([sys.executable, "-m", "guardkit_state", "show", FEATURE_ID, "--remote", "origin"],
                           cwd=machines[1], capture_output=True, text=True, check=False)
    assert f"wave 2  {T3}      skipped  turns 0  (dependency_failed)" in shown.stdout, shown.stdout + shown.stderr


def test_workers_stop_at_a_failed_task_by_default(tmp_path: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1, approve_at=0), TaskSpec(T2), TaskSpec(T3, [T1]),
                                      TaskSpec(T4, [T2])])
    bare = make_bare(tmp_path, project.root)
    machine = clone(bare.as_uri(), tmp_path / "machine-1")
    out, err = _worker(project, machine, "--json").communicate(timeout=600)
    result = json.loads(out)
    assert result["reason"] == f"{T1}: the Coach did not approve within 1 turns", out + err
    assert not git(bare, "branch", "--list", f"autobuild/{T4}").strip()


def test_claim_next_task_goes_on_past_a_failure_the_plan_says_does_not_stop(tmp_path: Path) -> None:
    from guardkit_state.remote.ready import claim_next_task

    project = make_feature(tmp_path, [TaskSpec(T1, approve_at=0), TaskSpec(T2), TaskSpec(T3, [T1]),
                                      TaskSpec(T4, [T2])])
    plan = project.root / ".guardkit" / "features" / f"{FEATURE_ID}.yaml"
    plan.write_text(plan.read_text() + "stop_on_failure: false\n")
    git(project.root, "commit", "-qam", "plan: go on past a failure")
    bare = make_bare(tmp_path, project.root)
    machine = clone(bare.as_uri(), tmp_path / "machine-1")
    out, err = _worker(project, machine, "--stop-on-failure", "--json").communicate(timeout=600)
    assert json.loads(out)["reason"] == f"{T1}: the Coach did not approve within 1 turns", out + err
    assert _merged(bare) == []  # the flag stopped wave 1 before its merge
    # An agent claiming through the MCP tool goes by the plan: wave 1 is merged without T1.
    answer = claim_next_task(machine, FEATURE_ID, "origin")
    assert (answer.status, answer.wave) == ("nothing_ready", 1)
    assert answer.reason.startswith("wave 1: every task is approved"), answer.reason


def _recorded(plan: dict[str, object]) -> dict[str, object]:
    """What a plan records of a run, without its times and commit ids (they differ between runs)."""
    tasks = plan["tasks"]
    execution = plan["execution"]
    assert isinstance(tasks, list) and isinstance(execution, dict)
    return {"status": plan["status"], "completed_at": bool(execution.get("completed_at")),
            "execution": {key: execution.get(key) for key in ("current_wave", "completed_waves", "tasks_completed",
                                                              "tasks_failed", "total_turns")},
            "tasks": {task["id"]: {"status": task["status"], "turns_completed": task.get("turns_completed"),
                                   "result": task.get("result"), "merge_commit": bool(task.get("merge_commit")),
                                   "started_at": bool(task.get("started_at")),
                                   "completed_at": bool(task.get("completed_at"))} for task in tasks}}


def test_workers_write_waves_with_nothing_to_merge_into_the_plan_as_a_local_run(tmp_path: Path) -> None:
    # Wave 1: T1 fails (nothing merged); wave 2: T2 merged; wave 3, the last: T3 skipped (it needs T1).
    specs = [TaskSpec(T1, approve_at=0), TaskSpec(T2), TaskSpec(T3, [T1])]
    groups = [[T1], [T2], [T3]]
    project = make_feature(tmp_path, specs, groups)
    bare = make_bare(tmp_path, project.root)
    machines = [clone(bare.as_uri(), tmp_path / f"machine-{n}") for n in (1, 2)]
    procs = [_worker(project, machine, "--no-stop-on-failure", "--json") for machine in machines]
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 1 and json.loads(out)["without"] == [T1, T3], out + err
    remote = yaml.safe_load(git(bare, "show", f"{FEATURE_BRANCH}:.guardkit/features/{FEATURE_ID}.yaml"))
    # The same feature run on one machine: its plan records the same.
    local = make_feature(tmp_path, specs, groups, name="local")
    local_run = subprocess.run(
        [sys.executable, "-m", "guardkit_state", "feature-build", FEATURE_ID, "--repo", str(local.root),
         "--player", agent_command("player.py"), "--coach", agent_command("coach.py"), "--max-turns", "1",
         "--no-stop-on-failure"], cwd=local.root, env={**os.environ, **local.env(), "NO_COLOR": "1"},
        capture_output=True, text=True, check=False)
    assert local_run.returncode == 1, local_run.stdout + local_run.stderr
    recorded = _recorded(remote)
    assert recorded == _recorded(yaml.safe_load(local.plan_path.read_text()))
    assert recorded["status"] == "failed"
    # Each wave written once, by one worker (waves 1 and 3 had nothing to merge).
    subjects = git(bare, "log", "--format=%s", FEATURE_BRANCH).splitlines()
    assert sorted(s for s in subjects if " progress after wave " in s) == [
        f"guardkit: {FEATURE_ID} progress after wave {n} in its plan" for n in (1, 2, 3)]
    shown = subprocess.run([sys.executable, "-m", "guardkit_state", "show", FEATURE_ID, "--remote", "origin"],
                           cwd=machines[1], capture_output=True, text=True, check=False)
    assert f"wave 3  {T3}      skipped  turns 0  (dependency_failed)" in shown.stdout, shown.stdout + shown.stderr


def test_a_worker_with_every_task_failed_or_skipped_says_nothing_was_merged(tmp_path: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1, approve_at=0), TaskSpec(T2, approve_at=0), TaskSpec(T3, [T1])])
    bare = make_bare(tmp_path, project.root)
    machine = clone(bare.as_uri(), tmp_path / "machine-1")
    proc = _worker(project, machine, "--no-stop-on-failure", "--json")
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 1, out + err
    assert json.loads(out)["reason"].endswith(f"; no task merged into {FEATURE_BRANCH}"), out
    assert _merged(bare) == []


def test_a_failure_that_runs_again_no_longer_holds_back_its_dependents(tmp_path: Path) -> None:
    # A worker keeps looking while a person releases a quarantined task (or resumes it with more
    # turns): the task it read as failed runs again. It stayed failed in the worker's books, so its
    # dependents were claimed by nobody and the end named it among what the feature is without.
    from guardkit_state.features.progress import TaskState
    from guardkit_state.plans.plan import find_plan, load_plan
    from guardkit_state.remote.going_on import GoingOn

    project = make_feature(tmp_path, [TaskSpec(T1), TaskSpec(T2, [T1])])
    going_on = GoingOn(load_plan(find_plan(project.root, FEATURE_ID)), False)
    assert going_on.state(TaskState(T1, "failed", 1, reason="agent crashed")).phase == "closed"
    assert going_on.state(TaskState(T2, "new")).phase == "closed"  # skipped: it needs T1
    assert going_on.state(TaskState(T1, "resume", 1, resume=True)).phase == "resume"  # released
    assert going_on.state(TaskState(T2, "new")).phase == "new"
    assert going_on.without(FEATURE_BRANCH)[0] == []
