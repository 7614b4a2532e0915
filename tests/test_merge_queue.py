"""The merge queue on one machine: real git, real gate commands, real task loops with scripted agents.

Two tasks each green alone break the gate together: the queue finds the breaker by bisection, merges
the other, sends the breaker back with the gate's output under MUST ADDRESS, and merges it once its
next turn fixes it. In every case each commit on the feature branch's first-parent line passes the
gate (run at each one)."""

from __future__ import annotations

import html
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from guardkit_state.errors import GitError
from guardkit_state.features.build import FeatureOptions
from guardkit_state.features.feature_events import QueueStepped, TaskSentBack
from guardkit_state.features.gate_verdicts import GateVerdicts, candidate_key
from guardkit_state.features.merge_queue import MergeQueue, SendBack
from guardkit_state.git.merge import merge_message
from guardkit_state.inspect.feature_view import feature_view
from guardkit_state.loop.events import Event
from guardkit_state.plans.merge_queue_log import recorded_steps
from guardkit_state.plans.plan import load_plan
from guardkit_state.plans.smoke_gates import SmokeGate
from guardkit_state.report.feature import build_feature_report
from guardkit_state.report.feature_page import render_feature_report
from guardkit_state.taskfile.document import TaskFile

from .feature_support import (
    FEATURE_ID,
    FeatureProject,
    TaskSpec,
    build_in_process,
    git,
    merged_tasks,
    start_cli,
    task_rel,
)
from .queue_support import (
    T1,
    T2,
    T3,
    T4,
    assert_first_parent_green,
    gate_runs,
    gate_script,
    port,
    queue_feature,
    queue_repo,
)


def _player_turns(project: FeatureProject) -> list[tuple[str, int]]:
    return [(e["task"], e["turn"]) for e in project.invocations() if e["role"] == "player" and e["event"] == "start"]


def test_two_tasks_green_alone_and_red_together_the_breaker_is_sent_back_and_merged_after_its_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "gate.log"
    gate = gate_script(log)
    project = queue_feature(tmp_path, [TaskSpec(T1, shell=port(8080)),
                                       TaskSpec(T2, shell=port(8080, from_turn=2, then=8081))], [[T1, T2]], gate)
    events: list[Event] = []
    result = build_in_process(project, monkeypatch, events=events)
    assert result.status == "completed", result.reason
    # T1 ran once and was merged once; T2 was sent back after turn 1, fixed in turn 2, merged after it.
    assert sorted(_player_turns(project)) == [(T1, 1), (T2, 1), (T2, 2)]
    assert merged_tasks(project.root) == [T1, T2]
    # One run on the wave's candidate, one bisecting, one on T2's fixed candidate: 1 + log2(2) + 1.
    assert len(gate_runs(log)) == 3
    steps = [(s.step, s.tasks, s.gate, s.task) for s in recorded_steps(load_plan(project.plan_path))]
    assert steps == [("candidate", (T1, T2), "failed", None), ("candidate", (T1,), "passed", None),
                     ("sent_back", (T1,), "failed", T2), ("landed", (T1,), None, None),
                     ("candidate", (T2,), "passed", None), ("landed", (T2,), None, None)]
    assert [e.task_id for e in events if isinstance(e, TaskSentBack)] == [T2]
    said = [e.step.describe() for e in events if isinstance(e, QueueStepped)]
    assert said[0].startswith("wave 1 · gate run 1: candidate ") and "the wave's candidate · failed (exit 1" in said[0]
    assert "bisecting: the first 1 of 2 · passed (exit 0)" in said[1]
    assert f"{T2} sent back after turn 1: it breaks the gate merged after {T1}" in said[2]
    # Turn 2's context carried the gate's command, exit code and output under MUST ADDRESS.
    context = (project.task_worktree(T2) / ".guardkit/autobuild" / T2 / ".work/context_turn_2.md").read_text()
    must = context[context.index("Last Turn Feedback (MUST ADDRESS):"):]
    assert "[must_fix/merge_gate]" in must and "exited 1 (expected 0)" in must and "uniq -d" in must
    assert f"with {T1} merged before it" in must and "port clash: port=8080 is taken twice" in must
    # T2's history keeps its approval and says it was sent back.
    state = TaskFile.load(project.task_worktree(T2) / task_rel(T2)).state
    assert state is not None and [(t.turn, t.decision) for t in state.turns] == [(1, "approve"), (2, "approve")]
    (entry,) = state.extra["sent_back"]
    assert (entry["after_turn"], entry["exit_code"], entry["merged_before"]) == (1, 1, [T1])
    assert assert_first_parent_green(project.root, gate, tmp_path / "check") >= 3
    _shown_by_show_log_and_report(project)


def _shown_by_show_log_and_report(project: FeatureProject) -> None:
    """``show``, ``log`` and ``report`` of the feature tell each candidate, its gate result, what was sent back."""
    view = feature_view(project.root, FEATURE_ID)
    assert [s.step for s in view.queue_steps] == ["candidate", "candidate", "sent_back", "landed", "candidate",
                                                  "landed"]
    sent = f"{T2} sent back after turn 1: it breaks the gate merged after {T1}, failed (exit 1, expected 0)"
    for command in ("show", "log"):
        out = _cli(project, command, FEATURE_ID)
        assert "merge queue" in out and sent in out, out
        assert "the wave's candidate · failed (exit 1, expected 0)" in out
        assert "bisecting: the first 1 of 2 · passed (exit 0)" in out
    shown = json.loads(_cli(project, "show", FEATURE_ID, "--json"))
    assert [s["step"] for s in shown["merge_queue"]][:3] == ["candidate", "candidate", "sent_back"]
    page = render_feature_report(build_feature_report(project.root, FEATURE_ID, generated_at="-"))
    assert "merge queue" in page and html.escape(sent, quote=False) in page
    assert "port clash: port=8080 is taken twice" in page  # the failing candidate's output


def _cli(project: FeatureProject, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "guardkit_state", *args, "--repo", str(project.root)],
                          capture_output=True, text=True, check=False, env={**os.environ, "NO_COLOR": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_breaker_never_fixed_ends_failed_with_the_gates_output_and_the_feature_stops_before_the_next_wave(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "gate.log"
    gate = gate_script(log)
    project = queue_feature(tmp_path, [TaskSpec(T1, shell=port(8080)), TaskSpec(T2, shell=port(8080)),
                                       TaskSpec(T3, [T1, T2])], [[T1, T2], [T3]], gate)
    result = build_in_process(project, monkeypatch, options=FeatureOptions(max_turns=2))
    assert (result.status, result.exit_code) == ("stopped", 1)
    outcome = result.task(T2)
    assert (outcome.status, outcome.outcome, outcome.turns) == ("failed", "max_turns_exceeded", 2)
    assert "breaks the feature's gate (exited 1 (expected 0))" in outcome.reason
    assert "port clash: port=8080 is taken twice" in outcome.reason
    assert result.reason.startswith(f"{T2} ended without approval (max_turns_exceeded): approved in turn 2")
    assert result.reason.endswith("the feature stops before wave 2")
    # T1 merged once and never re-run; T2 ran its two turns; wave 2 never started.
    assert sorted(_player_turns(project)) == [(T1, 1), (T2, 1), (T2, 2)]
    assert merged_tasks(project.root) == [T1]
    plan = load_plan(project.plan_path)
    assert (plan.status, plan.task(T2).status, plan.task(T3).status) == ("failed", "failed", "pending")
    assert plan.task(T2).final_decision == "max_turns_exceeded"
    sent = [s for s in recorded_steps(plan) if s.step == "sent_back"]
    assert [(s.task, s.after_turn, s.final) for s in sent] == [(T2, 1, False), (T2, 2, True)]
    # Its second approval ran on T1's landing, known to pass: one run found it (no run on the wave's start).
    assert len(gate_runs(log)) == 3
    assert assert_first_parent_green(project.root, gate, tmp_path / "check") >= 2


def test_a_gate_that_times_out_on_the_candidate_sends_the_breaker_back_and_leaves_no_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "gate.log"
    # Two tasks on one port make the gate hang (its own pid written first): the timeout ends it.
    gate = (f"git rev-parse HEAD >> {log}\n"
            'if [ -n "$(cat src/*.conf 2>/dev/null | sort | uniq -d)" ]; then echo "waiting on a port held twice"; '
            f"sleep 300 & echo $! > {tmp_path / 'sleeper.pid'}; wait; fi\necho ports ok")
    project = queue_feature(tmp_path, [TaskSpec(T1, shell=port(8080)),
                                       TaskSpec(T2, shell=port(8080, from_turn=2, then=8081))], [[T1, T2]], gate,
                            timeout=1)
    result = build_in_process(project, monkeypatch)
    assert result.status == "completed", result.reason
    assert merged_tasks(project.root) == [T1, T2]
    steps = recorded_steps(load_plan(project.plan_path))
    assert [(s.step, s.gate) for s in steps if s.step in ("candidate", "sent_back")] == [
        ("candidate", "timed_out"), ("candidate", "passed"), ("sent_back", "timed_out"), ("candidate", "passed")]
    context = (project.task_worktree(T2) / ".guardkit/autobuild" / T2 / ".work/context_turn_2.md").read_text()
    assert "timed out after 1 s" in context and "waiting on a port held twice" in context
    sleeper = int((tmp_path / "sleeper.pid").read_text())
    assert not Path(f"/proc/{sleeper}").exists() or Path(f"/proc/{sleeper}/stat").read_text().split()[2] == "Z"
    assert assert_first_parent_green(project.root, gate.replace("sleep 300", "exit 1; sleep 300"),
                                     tmp_path / "check") >= 3


def _wait_until(condition: Callable[[], bool], proc: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + 120
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended ({proc.returncode}) before {what}: {proc.communicate()[1]}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_ctrl_c_during_a_bisection_then_resume_continues_with_the_verdicts_already_taken(tmp_path: Path) -> None:
    log, slow = tmp_path / "gate.log", tmp_path / "slow"
    # From its second run on, while `slow` exists, the gate sleeps: the test stops the run there.
    gate = gate_script(log).replace("\n", f"\nif [ -e {slow} ] && [ $(wc -l < {log}) -ge 2 ]; then sleep 60; fi\n", 1)
    tasks = [TaskSpec(T1, shell=port(8080)), TaskSpec(T2, shell=port(8081)),
             TaskSpec(T3, shell=port(8080, from_turn=2, then=8083)), TaskSpec(T4, shell=port(8082))]
    project = queue_feature(tmp_path, tasks, [[T1, T2, T3, T4]], gate)
    slow.touch()
    proc = start_cli(project)
    _wait_until(lambda: len(gate_runs(log)) == 2, proc, "the bisection's first gate run")
    time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGINT)  # what the terminal does: the run's process group
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "--resume" in err
    assert git(project.feature_worktree, "branch", "--show-current").strip() == "autobuild/FEAT-FB"
    assert merged_tasks(project.root) == []  # nothing landed: the feature branch never moved
    slow.unlink()
    resumed = start_cli(project, "--resume")
    _, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    # The wave's candidate kept its verdict (not run again); the interrupted bisection step ran again.
    assert "gate run 1: candidate" in err and "the wave's candidate · failed (exit 1, expected 0) verdict recorded " \
                                               "before the interruption" in err
    runs = gate_runs(log)
    assert len(runs) == 6  # 2 before Ctrl-C (the second cut short), then 2 bisecting, T4's candidate, T3's fix
    # 4 tasks, T3 the breaker: 1 run on the wave's candidate + log2(4) = 2 bisecting found it.
    sent = [s for s in recorded_steps(load_plan(project.plan_path)) if s.step == "sent_back"]
    assert [(s.task, s.tasks, s.runs) for s in sent] == [(T3, (T1, T2), 3)]
    assert merged_tasks(project.root) == [T1, T2, T4, T3]
    assert sorted(_player_turns(project)) == [(T1, 1), (T2, 1), (T3, 1), (T3, 2), (T4, 1)]
    assert assert_first_parent_green(project.root, gate, tmp_path / "check") >= 5


@pytest.mark.parametrize("point", ["queue.after_merge", "queue.before_gate:2", "queue.after_send_back",
                                   "queue.before_land"])
def test_a_run_killed_anywhere_in_the_queue_resumes_to_the_uninterrupted_result(tmp_path: Path, point: str) -> None:
    log = tmp_path / "gate.log"
    gate = gate_script(log)
    project = queue_feature(tmp_path, [TaskSpec(T1, shell=port(8080)),
                                       TaskSpec(T2, shell=port(8080, from_turn=2, then=8081))], [[T1, T2]], gate)
    killed = start_cli(project, crash_at=point)
    killed.communicate(timeout=120)
    assert killed.returncode == -signal.SIGKILL
    resumed = start_cli(project, "--resume")
    _, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert merged_tasks(project.root) == [T1, T2]
    assert sorted(_player_turns(project)) == [(T1, 1), (T2, 1), (T2, 2)]
    state = TaskFile.load(project.task_worktree(T2) / task_rel(T2)).state
    assert state is not None and [e["after_turn"] for e in state.extra["sent_back"]] == [1]  # written once
    assert git(project.feature_worktree, "branch", "--show-current").strip() == "autobuild/FEAT-FB"
    assert assert_first_parent_green(project.root, gate, tmp_path / "check") >= 3


@pytest.mark.parametrize(("count", "breaker"), [(1, 1), (2, 1), (2, 2), (3, 2), (4, 3), (5, 1), (5, 5), (8, 6)])
def test_bisection_finds_the_breaker_in_one_run_plus_log2_of_the_wave(tmp_path: Path, count: int,
                                                                      breaker: int) -> None:
    # Task `breaker` fails the gate merged after task 1 (task 1 itself fails it alone: it breaks the start).
    log = tmp_path / "gate.log"
    gate_command = (f"git rev-parse HEAD >> {log}\n"
                    f"if [ -e src/1.part ] && [ -e src/{breaker}.part ]; then echo clash; exit 1; fi")
    repo, tasks = queue_repo(tmp_path, count)
    sent: list[SendBack] = []
    queue = MergeQueue(repo, "autobuild/FEAT-Q", 1, SmokeGate(None, gate_command, timeout=30),
                       GateVerdicts(repo, "FEAT-Q"),
                       message=lambda task: merge_message("FEAT-Q", task.task_id, branch=f"autobuild/{task.task_id}",
                                                          target="autobuild/FEAT-Q", wave=1),
                       send_back=lambda breaking: bool(sent.append(breaking)))
    landing = queue.land(tasks)
    others = [t.task_id for t in tasks if t.task_id != tasks[breaker - 1].task_id]
    assert [s.task.task_id for s in sent] == [tasks[breaker - 1].task_id]
    assert list(landing.merged) == others and landing.halted is None
    # 1 on the wave's candidate + ceil(log2 n) bisecting (+1 on the start when the breaker is first),
    # then one on the rest after it when there is a rest.
    found = 1 + math.ceil(math.log2(count)) + (breaker == 1)
    assert sent[0].runs <= found
    assert len(gate_runs(log)) == sent[0].runs + (breaker < count)
    assert git(repo.root, "branch", "--show-current").strip() == "autobuild/FEAT-Q"
    assert assert_first_parent_green(repo.root, gate_command, tmp_path / "check", branch="autobuild/FEAT-Q") == count


def test_the_queue_halts_when_the_wave_start_fails_the_gate_too_and_nothing_moves(tmp_path: Path) -> None:
    repo, tasks = queue_repo(tmp_path, 2)
    start = git(repo.root, "rev-parse", "HEAD").strip()
    queue = MergeQueue(repo, "autobuild/FEAT-Q", 1, SmokeGate(None, "echo broken; exit 3", timeout=30),
                       GateVerdicts(repo, "FEAT-Q"), message=lambda task: f"Merge {task.task_id}\n",
                       send_back=lambda breaking: pytest.fail("nothing is to blame"))
    landing = queue.land(tasks)
    assert landing.halted is not None and landing.halted.exit_code == 3 and landing.merged == {}
    assert [s.step for s in landing.steps] == ["candidate", "candidate", "candidate", "halted"]
    assert git(repo.root, "rev-parse", "autobuild/FEAT-Q").strip() == start
    # A halt is for the user to fix: no verdict of it is trusted again.
    assert GateVerdicts(repo, "FEAT-Q").verdict(candidate_key(SmokeGate(None, "echo broken; exit 3"), start, [])) \
        is None


def test_a_commit_pushed_to_the_feature_branch_while_the_gate_runs_is_never_dropped(tmp_path: Path) -> None:
    # A person's commit lands on the feature branch while the wave's candidate (built on the tip before
    # it) is in the gate: the queue must not move the branch from that commit to a candidate without it.
    pushed = tmp_path / "pushed"
    gate_command = (f"if [ ! -e {pushed} ]; then "
                    "c=$(git commit-tree -p refs/heads/autobuild/FEAT-Q -m person "
                    "'refs/heads/autobuild/FEAT-Q^{tree}'); "
                    f"git update-ref refs/heads/autobuild/FEAT-Q $c && echo $c > {pushed}; fi")
    repo, tasks = queue_repo(tmp_path, 2)
    queue = MergeQueue(repo, "autobuild/FEAT-Q", 1, SmokeGate(None, gate_command, timeout=30),
                       GateVerdicts(repo, "FEAT-Q"), message=lambda task: f"Merge {task.task_id}\n",
                       send_back=lambda breaking: pytest.fail("nothing breaks the gate"))
    with pytest.raises(GitError, match="the feature branch autobuild/FEAT-Q moved while the merge queue ran"):
        queue.land(tasks)
    person = pushed.read_text().strip()
    assert git(repo.root, "rev-parse", "autobuild/FEAT-Q").strip() == person  # the person's commit stands
    assert git(repo.root, "branch", "--show-current").strip() == "autobuild/FEAT-Q"
    # Run again (as --resume does), the queue builds its candidate on the person's commit and lands it.
    landing = MergeQueue(repo, "autobuild/FEAT-Q", 1, SmokeGate(None, gate_command, timeout=30),
                         GateVerdicts(repo, "FEAT-Q"), message=lambda task: f"Merge {task.task_id}\n",
                         send_back=lambda breaking: pytest.fail("nothing breaks the gate")).land(tasks)
    assert list(landing.merged) == [T.task_id for T in tasks]
    assert subprocess.run(["git", "merge-base", "--is-ancestor", person, "autobuild/FEAT-Q"], cwd=repo.root,
                          check=False).returncode == 0


@pytest.mark.parametrize("after", ["all", "1"])
def test_a_file_the_gate_writes_never_blocks_a_later_merge(tmp_path: Path, after: str) -> None:
    # The gate leaves a file git does not ignore (a build output, a report) in the merger's worktree; a
    # later wave's task adds a file of that name: its merge must not be refused over the gate's leftover.
    gate_command = "[ -e src/2.part ] || echo from-the-gate > src/2.part"
    repo, tasks = queue_repo(tmp_path, 2)
    for wave, task in ((1, tasks[0]), (2, tasks[1])):
        gate = SmokeGate(frozenset({1}) if after == "1" else None, gate_command, timeout=30)
        landing = MergeQueue(repo, "autobuild/FEAT-Q", wave, gate, GateVerdicts(repo, "FEAT-Q"),
                             message=lambda task: f"Merge {task.task_id}\n",
                             send_back=lambda breaking: pytest.fail("nothing breaks the gate")).land([task])
        assert list(landing.merged) == [task.task_id] and not landing.blocked, landing.blocked
    assert git(repo.root, "show", "autobuild/FEAT-Q:src/2.part") == "part 2\n"
    assert git(repo.root, "status", "--porcelain") == ""
