"""Stopping a feature run: Ctrl+C and SIGTERM stop every task loop cleanly (state saved, no agent left
running, exit 130 with the resume command); a killed run's loops stop on their own; resume completes."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from .feature_support import (
    FeatureProject,
    TaskSpec,
    agent_alive,
    cli_argv,
    kill_agents,
    make_feature,
    merged_tasks,
    read_state,
    session_processes,
    start_cli,
)

T1, T2, T3 = "TASK-FB-001", "TASK-FB-002", "TASK-FB-003"
WAIT = 60.0


def _wait_until(condition: Callable[[], bool], proc: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended ({proc.returncode}) before {what}: {proc.communicate()[1]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _slow_project(tmp_path: Path) -> FeatureProject:
    """Wave 1's two Players sleep long enough to be interrupted mid-turn."""
    return make_feature(tmp_path, [TaskSpec(T1, sleep=30), TaskSpec(T2, sleep=30), TaskSpec(T3, [T1, T2])],
                        [[T1, T2], [T3]])


def _both_players_running(project: FeatureProject) -> Callable[[], bool]:
    return lambda: {e["task"] for e in project.invocations() if e["event"] == "start"} == {T1, T2}


def _make_fast(project: FeatureProject) -> None:
    project.spec_file.write_text(json.dumps({t.task_id: {**t.agent_spec(), "sleep": 0} for t in project.tasks}))


def _resume_and_check(project: FeatureProject) -> None:
    proc = start_cli(project, "--resume")
    _, err = proc.communicate(timeout=WAIT)
    assert proc.returncode == 0, err
    state = read_state(project)
    assert merged_tasks(project.root) == [T1, T2, T3]
    # The interrupted turn 1 of each task was re-run, not doubled: one approving turn each.
    assert {t: s["turns"] for t, s in state.tasks.items()} == {T1: [(1, "approve")], T2: [(1, "approve")],
                                                               T3: [(1, "approve")]}
    assert state.execution["tasks_completed"] == 3 and state.plan_status == "completed"


def test_a_feature_run_started_under_nohup_outlives_a_hangup(tmp_path: Path) -> None:
    # `nohup guardkit-state feature-build FEAT &` and the SSH session drops while wave 1's Players
    # work: the hangup reaches the run's group, and the run and its task loops go on to the end.
    project = make_feature(tmp_path, [TaskSpec(T1, sleep=2), TaskSpec(T2, sleep=2), TaskSpec(T3, [T1, T2])],
                           [[T1, T2], [T3]])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARDKIT_", "FEATURE_"))}
    env.update(project.env(), NO_COLOR="1")
    proc = subprocess.Popen(["nohup", *cli_argv(project)], cwd=project.root, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    _wait_until(_both_players_running(project), proc, "both Players to start")
    os.killpg(proc.pid, signal.SIGHUP)
    _, err = proc.communicate(timeout=WAIT)
    assert proc.returncode == 0, err
    assert merged_tasks(project.root) == [T1, T2, T3]
    assert read_state(project).plan_status == "completed"


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_an_interruption_stops_every_loop_and_resume_completes(tmp_path: Path, how: str) -> None:
    project = _slow_project(tmp_path)
    proc = start_cli(project)
    try:
        _wait_until(_both_players_running(project), proc, "both Players to start")
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)  # what the terminal does: the run's process group
        else:
            proc.send_signal(signal.SIGTERM)  # the run alone: it forwards the stop to its loops
        _, err = proc.communicate(timeout=WAIT)
        assert proc.returncode == 130, err
        assert "interrupted" in err and shlex.join(["guardkit-state", *cli_argv(project)[3:], "--resume"]) in err
        assert agent_alive(project.invocations()) == []
        assert session_processes(proc.pid) == []
        plan = read_state(project)
        assert {t: plan.tasks[t]["status"] for t in (T1, T2, T3)} == {T1: "in_progress", T2: "in_progress",
                                                                      T3: "pending"}
    finally:
        kill_agents(project.invocations())
    _make_fast(project)
    _resume_and_check(project)


def test_a_killed_run_leaves_no_loop_or_agent_running(tmp_path: Path) -> None:
    """SIGKILL of the run alone: its loops notice, stop cleanly and stop their agents."""
    project = _slow_project(tmp_path)
    proc = start_cli(project)
    try:
        _wait_until(_both_players_running(project), proc, "both Players to start")
        proc.kill()
        proc.communicate(timeout=WAIT)
        deadline = time.monotonic() + WAIT
        while session_processes(proc.pid) or agent_alive(project.invocations()):
            assert time.monotonic() < deadline, "a task loop or agent outlived the killed run"
            time.sleep(0.05)
    finally:
        kill_agents(project.invocations())
    _make_fast(project)
    _resume_and_check(project)


def test_a_feature_run_whose_output_reader_went_away_finishes_its_work(tmp_path: Path) -> None:
    # `feature-build FEAT 2>&1 | head -2`: the reader closes the pipe after two lines. The next
    # progress line met the closed pipe, the loops stopped mid-turn, and the command exited 0 with
    # nothing built. What it says now goes nowhere; the feature is built, and the exit says so.
    project = make_feature(tmp_path, [TaskSpec(T1, sleep=0.3), TaskSpec(T2, sleep=0.3), TaskSpec(T3, [T1, T2])],
                           [[T1, T2], [T3]])
    # (Without PYTHONUNBUFFERED, as in a user's shell: the last lines are written as the program ends.)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARDKIT_", "FEATURE_", "PYTHONUNBUFFERED"))}
    env.update(project.env(), NO_COLOR="1")
    proc = subprocess.Popen(cli_argv(project), cwd=project.root, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()  # the reader goes away
    assert proc.wait(timeout=WAIT) == 0
    assert merged_tasks(project.root) == [T1, T2, T3]
    assert read_state(project).plan_status == "completed"
