"""The merge queue through a bare remote: two worker processes, each in a clone; the one holding the
merge claim runs the queue. Real git, real gate commands; every commit on the remote feature
branch's first-parent line passes the gate (run at each one)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import yaml

from tests.feature_support import FEATURE_BRANCH, FeatureProject, TaskSpec
from tests.queue_support import T1, T2, T3, T4, assert_first_parent_green, gate_runs, gate_script, port, queue_feature
from tests.remote_support import clone, make_bare
from tests.test_remote_feature import cli, merged_order, tree, worker


def _two_workers(tmp_path: Path, project: FeatureProject, *extra: str) -> tuple[Path, list[Path],
                                                                                list[subprocess.Popen[str]]]:
    bare = make_bare(tmp_path, project.root)
    machines = [clone(bare.as_uri(), tmp_path / f"machine-{n}") for n in (1, 2)]
    return bare, machines, [worker(project, machine, *extra) for machine in machines]


def _ended(procs: Sequence[subprocess.Popen[str]]) -> list[tuple[int, str]]:
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        done.append((proc.returncode, out + err))
    return done


def _player_turns(project: FeatureProject) -> list[tuple[str, int]]:
    return sorted((e["task"], e["turn"]) for e in project.invocations()
                  if e["role"] == "player" and e["event"] == "start")


def _plan_on_remote(bare: Path) -> dict[str, object]:
    text = tree(bare, FEATURE_BRANCH, ".guardkit/features")[".guardkit/features/FEAT-FB.yaml"]
    loaded = yaml.safe_load(text)
    assert isinstance(loaded, dict)
    return loaded


def _checked(bare: Path, gate: str, tmp_path: Path) -> int:
    """Every first-parent commit of the remote's feature branch through the gate, in a clone of it."""
    check = clone(bare.as_uri(), tmp_path / "check")
    return assert_first_parent_green(check, gate, tmp_path / "at", branch=f"origin/{FEATURE_BRANCH}")


def test_two_workers_send_the_breaker_back_and_merge_it_after_its_fix(tmp_path: Path) -> None:
    log = tmp_path / "gate.log"
    gate = gate_script(log)
    project = queue_feature(tmp_path, [TaskSpec(T1, shell=port(8080)),
                                       TaskSpec(T2, shell=port(8080, from_turn=2, then=8081))], [[T1, T2]], gate)
    bare, machines, procs = _two_workers(tmp_path, project)
    ended = _ended(procs)
    assert all(code == 0 for code, _ in ended), ended
    assert merged_order(bare) == [T1, T2]
    # T1 ran once, merged once; T2 was sent back, ran turn 2 (on either machine), merged after it.
    assert _player_turns(project) == [(T1, 1), (T2, 1), (T2, 2)]
    assert len(gate_runs(log)) == 3
    said = "\n".join(text for _, text in ended)
    assert f"{T2} sent back after turn 1: it breaks the gate merged after {T1}" in said
    execution = _plan_on_remote(bare)["execution"]
    assert isinstance(execution, dict)
    steps = [(s["step"], s.get("task")) for s in execution["merge_queue"]]
    assert steps == [("candidate", None), ("candidate", None), ("sent_back", T2), ("landed", None),
                     ("candidate", None), ("landed", None)]
    assert execution["completed_waves"] == [1]
    assert git_ls_claims(bare) == ""
    # show --remote tells the queue's steps as the plan on the remote's feature branch records them.
    shown = cli(machines[0], "show", "FEAT-FB", "--remote", "origin")
    assert "merge queue:" in shown and f"{T2} sent back after turn 1: it breaks the gate merged after {T1}" in shown
    assert _checked(bare, gate, tmp_path) >= 4  # the start, T1's merge and progress, T2's merge and progress


def git_ls_claims(bare: Path) -> str:
    return subprocess.run(["git", "for-each-ref", "refs/guardkit/claims/"], cwd=bare, capture_output=True,
                          text=True, check=True).stdout


def test_two_workers_stop_on_a_breaker_never_fixed_with_its_gate_output(tmp_path: Path) -> None:
    log = tmp_path / "gate.log"
    gate = gate_script(log)
    project = queue_feature(tmp_path, [TaskSpec(T1, shell=port(8080)), TaskSpec(T2, shell=port(8080)),
                                       TaskSpec(T3, [T1, T2])], [[T1, T2], [T3]], gate)
    bare, machines, procs = _two_workers(tmp_path, project, "--max-turns", "2")
    ended = _ended(procs)
    assert all(code == 1 for code, _ in ended), ended
    said = "\n".join(text for _, text in ended)
    assert "it has no turn left of 2" in said and "port clash: port=8080 is taken twice" in said
    assert merged_order(bare) == [T1]
    # Its last turn is an approval, sent back with no turn left: failed, not "approved".
    shown = json.loads(cli(machines[0], "show", "FEAT-FB", "--remote", "origin", "--json"))
    assert [(t["task_id"], t["state"], t["outcome"]) for t in shown["tasks"]] == [
        (T1, "merged", "approved"), (T2, "failed", "max_turns_exceeded"), (T3, "waiting", None)]
    assert _player_turns(project) == [(T1, 1), (T2, 1), (T2, 2)]  # T3 never ran
    assert _checked(bare, gate, tmp_path) >= 2


def test_two_workers_send_back_a_breaker_whose_gate_times_out(tmp_path: Path) -> None:
    log = tmp_path / "gate.log"
    gate = (f"git rev-parse HEAD >> {log}\n"
            'if [ -n "$(cat src/*.conf 2>/dev/null | sort | uniq -d)" ]; then echo "a port held twice"; sleep 300; fi\n'
            "echo ports ok")
    project = queue_feature(tmp_path, [TaskSpec(T1, shell=port(8080)),
                                       TaskSpec(T2, shell=port(8080, from_turn=2, then=8081))], [[T1, T2]], gate,
                            timeout=1)
    bare, _, procs = _two_workers(tmp_path, project)
    ended = _ended(procs)
    assert all(code == 0 for code, _ in ended), ended
    assert merged_order(bare) == [T1, T2]
    said = "\n".join(text for _, text in ended)
    assert "the wave's candidate · timed_out" in said and f"{T2} sent back after turn 1" in said
    assert _checked(bare, gate.replace("sleep 300", "exit 1"), tmp_path) >= 4


def test_ctrl_c_on_both_workers_during_a_bisection_then_the_same_command_finishes_the_queue(tmp_path: Path) -> None:
    log, slow = tmp_path / "gate.log", tmp_path / "slow"
    gate = gate_script(log).replace("\n", f"\nif [ -e {slow} ] && [ $(wc -l < {log}) -ge 2 ]; then sleep 60; fi\n", 1)
    tasks = [TaskSpec(T1, shell=port(8080)), TaskSpec(T2, shell=port(8081)),
             TaskSpec(T3, shell=port(8080, from_turn=2, then=8083)), TaskSpec(T4, shell=port(8082))]
    project = queue_feature(tmp_path, tasks, [[T1, T2, T3, T4]], gate)
    slow.touch()
    bare, machines, procs = _two_workers(tmp_path, project)
    deadline = time.monotonic() + 300
    while len(gate_runs(log)) < 2:
        assert all(proc.poll() is None for proc in procs), _ended(procs)
        assert time.monotonic() < deadline, "the bisection never started"
        time.sleep(0.05)
    time.sleep(0.3)
    for proc in procs:
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C on both machines
    stopped = _ended(procs)
    assert all(code == 130 for code, _ in stopped), stopped
    assert merged_order(bare) == []  # nothing landed: the remote's feature branch never moved
    assert git_ls_claims(bare) == ""  # the merge claim released
    slow.unlink()
    ended = _ended([worker(project, machine) for machine in machines])
    assert all(code == 0 for code, _ in ended), ended
    assert merged_order(bare) == [T1, T2, T4, T3]
    assert _player_turns(project) == [(T1, 1), (T2, 1), (T3, 1), (T3, 2), (T4, 1)]
    sent = [s for s in _plan_on_remote(bare)["execution"]["merge_queue"]  # type: ignore[index]
            if s["step"] == "sent_back"]
    assert [(s["task"], s["breaks_with"]) for s in sent] == [(T3, [T1, T2])]
    assert _checked(bare, gate, tmp_path) >= 6


def test_a_lone_breaker_sent_back_through_the_remote_leaves_its_steps_in_the_plan_and_is_numbered_on(
        tmp_path: Path) -> None:
    # One task alone breaks the gate in turn 1 (its port is the start's own); fixed in turn 2.
    log = tmp_path / "gate.log"
    gate = gate_script(log)
    project = queue_feature(tmp_path, [TaskSpec(T1, shell=port(8080, from_turn=2, then=8081))], [[T1]], gate)
    (project.root / "src" / "start.conf").write_text("port=8080\n")
    subprocess.run(["git", "add", "."], cwd=project.root, check=True)
    subprocess.run(["git", "commit", "-qm", "the start's port"], cwd=project.root, check=True)
    bare, _, procs = _two_workers(tmp_path, project)
    ended = _ended(procs)
    assert all(code == 0 for code, _ in ended), ended
    steps = _plan_on_remote(bare)["execution"]["merge_queue"]  # type: ignore[index]
    # The start ran the gate (the breaker is the wave's first task), then the fix's candidate: run 3.
    assert [(s["step"], s.get("run"), s.get("why")) for s in steps] == [
        ("candidate", 1, "the wave's candidate"), ("candidate", 2, "the feature branch before these merges"),
        ("sent_back", None, None), ("candidate", 3, "the new approvals of tasks sent back"), ("landed", None, None)]
    assert merged_order(bare) == [T1]
    assert _checked(bare, gate, tmp_path) >= 3
