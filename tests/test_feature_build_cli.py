"""``guardkit-state feature-build FEAT-X`` as a user runs it: progress, the result, ``--json``, a plan
given by its path, and the options that apply to one task only."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from .feature_support import FeatureProject, TaskSpec, cli_argv, make_feature, run_cli

T1, T2, T3 = "TASK-FB-001", "TASK-FB-002", "TASK-FB-003"


def _project(tmp_path: Path) -> FeatureProject:
    return make_feature(tmp_path, [TaskSpec(T1, approve_at=2), TaskSpec(T2), TaskSpec(T3, [T1, T2])], None)


def test_progress_is_prefixed_by_task_and_the_result_lists_every_task(tmp_path: Path) -> None:
    project = _project(tmp_path)
    run = run_cli(project, "--max-parallel", "2")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0] == "FEAT-FB: completed — every wave merged into autobuild/FEAT-FB"
    rows = [line.split() for line in run.stdout.splitlines()[1:4]]
    assert [(r[0], r[2], r[3], r[4], r[5], r[6]) for r in rows] == [
        (T1, "1", "completed", "approved", "2", "turn(s)"), (T2, "1", "completed", "approved", "1", "turn(s)"),
        (T3, "2", "completed", "approved", "1", "turn(s)")]
    err = run.stderr.splitlines()
    assert err[0].startswith("feature FEAT-FB: 3 task(s) in 2 wave(s), up to 2 at a time")
    assert "wave 1/2: TASK-FB-001, TASK-FB-002" in err and "wave 2/2: TASK-FB-003" in err
    assert f"[{T1}] coach: feedback — 0/1 criteria verified · 1 rejected" in err
    assert f"[{T1}] approved after 2 turn(s): approved by the Coach in turn 2" in err
    merged = [line for line in err if line.startswith("merged ")]
    assert [line.split()[1] for line in merged] == [f"autobuild/{t}" for t in (T1, T2, T3)]
    # A note every loop makes about the shared checkout is shown once.
    notes = [line for line in err if "uncommitted changes" in line]
    assert len(notes) <= 1


def test_json_and_a_plan_given_by_its_path(tmp_path: Path) -> None:
    project = _project(tmp_path)
    argv = cli_argv(project, "--json")
    argv[argv.index("FEAT-FB")] = ".guardkit/features/FEAT-FB.yaml"
    proc = subprocess.run(argv, cwd=project.root, capture_output=True, text=True, timeout=120, check=False,
                          env=_env(project))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert (data["feature_id"], data["status"], data["exit_code"]) == ("FEAT-FB", "completed", 0)
    assert data["waves"] == [[T1, T2], [T3]]
    assert [(t["task_id"], t["turns"], t["decisions"]) for t in data["tasks"]] == [
        (T1, 2, ["feedback", "approve"]), (T2, 1, ["approve"]), (T3, 1, ["approve"])]
    assert all(t["merge_commit"] for t in data["tasks"])
    assert proc.stderr == ""  # --json: no progress lines


def _env(project: FeatureProject) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARDKIT_", "FEATURE_"))}
    return {**env, **project.env(), "NO_COLOR": "1"}


def test_task_only_options_and_a_second_fresh_start_are_usage_errors(tmp_path: Path) -> None:
    project = _project(tmp_path)
    run = run_cli(project, "--no-worktree")
    assert run.returncode == 2 and "--no-worktree applies to one task's loop" in run.stderr
    assert run_cli(project, "--resume").returncode == 2
    assert run_cli(project).returncode == 0
    again = run_cli(project)
    assert again.returncode == 2 and "already started" in again.stderr and "--resume" in again.stderr


def test_a_plan_the_run_cannot_write_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    project = _project(tmp_path)
    project.plan_path.chmod(0o444)  # as a copy from a read-only checkout leaves it
    run = run_cli(project)
    assert run.returncode == 2 and "read-only" in run.stderr and project.plan_path.name in run.stderr
    branches = subprocess.run(["git", "branch", "--list", "autobuild/*"], cwd=project.root, capture_output=True,
                              text=True, check=True).stdout
    assert branches == "" and not (project.root / ".guardkit" / "worktrees").exists()
    project.plan_path.chmod(0o644)
    assert run_cli(project).returncode == 0


def test_no_stop_on_failure_ends_completed_without_the_failed_and_skipped_tasks(tmp_path: Path) -> None:
    t1, t2, t3 = "TASK-FB-001", "TASK-FB-002", "TASK-FB-003"
    project = make_feature(tmp_path, [TaskSpec(t1, approve_at=0), TaskSpec(t2), TaskSpec(t3, [t1])])
    run = run_cli(project, "--max-turns", "1", "--no-stop-on-failure")
    assert run.returncode == 1, run.stdout + run.stderr  # not 0: the failed task's work is not on the branch
    assert f"FEAT-FB: completed without {t1}, {t3} — {t1} ended without approval (max_turns_exceeded)" in run.stdout
    assert f"note: {t3} skipped: it needs {t1}, which ended without approval" in run.stderr
    assert f"  {t3}  wave 2  skipped     dependency_failed   0 turn(s)" in run.stdout
    status = subprocess.run(cli_argv(project)[:3] + ["status", "--repo", str(project.root)], capture_output=True,
                            text=True, check=False)
    assert "1/3 task(s) done" in status.stdout and "1 skipped (a task they need failed)" in status.stdout
    show = subprocess.run(cli_argv(project)[:3] + ["show", "FEAT-FB", "--repo", str(project.root)],
                          capture_output=True, text=True, check=False)
    assert f"{t3}  skipped      0 turn(s)  0/1 verified · skipped: it needs {t1}, which ended without approval" \
        in show.stdout
    # Without the flag (the default, as GuardKit's) the failure stops the feature before wave 2.
    again = make_feature(tmp_path, [TaskSpec(t1, approve_at=0), TaskSpec(t2), TaskSpec(t3, [t1])], name="again")
    stopped = run_cli(again, "--max-turns", "1")
    assert stopped.returncode == 1 and "FEAT-FB: stopped — " in stopped.stdout
    assert f"  {t3}  wave 2  pending" in stopped.stdout
