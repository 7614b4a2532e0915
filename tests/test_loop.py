"""The loop through its Python API, with in-process agents, real files and real git."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest

from guardkit_state.agents.protocol import CallableAgent, CommandAgent, TurnRequest
from guardkit_state.errors import ConfigError, LockedError, ResumeError
from guardkit_state.git.checkouts import shared_lock_path
from guardkit_state.loop.run import LoopOptions, run_task_loop
from guardkit_state.model import Outcome
from guardkit_state.store.locks import exclusive_lock
from guardkit_state.taskfile.document import TaskFile

from .conftest import run_git
from .helpers import make_task_repo

TASK = "TASK-AUTH-001"


def _repo(git_repo: Path) -> Path:
    make_task_repo(git_repo)
    run_git(git_repo, "add", "tasks")
    run_git(git_repo, "commit", "-q", "-m", "add task")
    return git_repo


def scripted_player(request: TurnRequest) -> dict[str, Any]:
    """Implements one more criterion per turn; records what its context told it."""
    context = request.context_file.read_text()
    (request.workdir / f"impl_turn_{request.turn}.py").write_text(f"TURN = {request.turn}\n")
    return {"summary": f"turn {request.turn} work", "tests_run": True, "tests_passed": True,
            "implementation_notes": context[:2000], "files_created": [f"impl_turn_{request.turn}.py"]}


def coach_verifying(upto_turn: int) -> CallableAgent:
    def coach(request: TurnRequest) -> dict[str, Any]:
        n = request.turn
        ids = [f"AC-00{i}" for i in range(1, min(n, 3) + 1)]
        approve = n >= upto_turn
        return {"decision": "approve" if approve else "feedback",
                "criteria_verification": [{"criterion_id": i, "result": "verified", "notes": ""} for i in ids],
                "feedback": None if approve else f"Still missing AC-00{n + 1}",
                "issues": [], "rationale": "ok" if approve else "more to do",
                "validation_results": {"tests_passed_count": 3 * n, "tests_failed_count": 0, "coverage": 90.0}}
    return CallableAgent(coach)


def test_run_task_loop_approves_in_a_worktree_with_one_commit_per_turn(git_repo: Path) -> None:
    root = _repo(git_repo)
    status_before = run_git(root, "status", "--porcelain")
    result = run_task_loop(root, TASK, CallableAgent(scripted_player), coach_verifying(3))
    assert result.outcome is Outcome.APPROVED and result.exit_code == 0
    assert [t.entry.decision for t in result.turns] == ["feedback", "feedback", "approve"]
    worktree = root / ".guardkit/worktrees" / TASK
    assert result.checkout == worktree
    trailers = run_git(worktree, "log", "--format=%(trailers:key=Turn,valueonly)", "-3").split()
    assert trailers == ["3", "2", "1"]
    assert run_git(root, "status", "--porcelain") == status_before
    # Turn 2's Player found turn 1's feedback and criteria in its context file (docs/lifecycle.md).
    player2 = json.loads((worktree / ".guardkit/autobuild" / TASK / "player_turn_2.json").read_text())
    assert "Still missing AC-002" in player2["implementation_notes"]
    assert "✓ AC-001: Login returns JWT: verified" in player2["implementation_notes"]
    task = TaskFile.load(worktree / "tasks/backlog/TASK-AUTH-001-jwt-auth.md")
    assert task.status == "in_review"
    assert task.state.worktree_path == f".guardkit/worktrees/{TASK}"
    log = (root / ".guardkit/logs/autobuild.log").read_text()
    assert "turn 2 of TASK-AUTH-001 recorded: feedback" in log


def test_run_task_loop_max_turns(git_repo: Path) -> None:
    root = _repo(git_repo)
    result = run_task_loop(root, TASK, CallableAgent(scripted_player), coach_verifying(99),
                           LoopOptions(max_turns=2))
    assert result.outcome is Outcome.MAX_TURNS_EXCEEDED and result.exit_code == 1
    assert len(result.turns) == 2
    assert "within 2 turns" in result.reason


def test_agent_failure_is_an_error_turn_not_a_crash(git_repo: Path) -> None:
    root = _repo(git_repo)
    result = run_task_loop(root, TASK, CommandAgent("echo boom >&2; exit 3"), coach_verifying(1),
                           LoopOptions(max_turns=1, use_worktree=False))
    turn = result.turns[0]
    assert turn.entry.decision == "error"
    assert turn.turn_state.error == "Player exited with status 3: boom"
    assert result.outcome is Outcome.MAX_TURNS_EXCEEDED


def test_fresh_start_over_recorded_turns_is_refused(git_repo: Path) -> None:
    root = _repo(git_repo)
    run_task_loop(root, TASK, CallableAgent(scripted_player), coach_verifying(99), LoopOptions(max_turns=1))
    with pytest.raises(ResumeError, match="--resume"):
        run_task_loop(root, TASK, CallableAgent(scripted_player), coach_verifying(99), LoopOptions(max_turns=3))
    result = run_task_loop(root, TASK, CallableAgent(scripted_player), coach_verifying(2),
                           LoopOptions(max_turns=3, resume=True))
    assert result.outcome is Outcome.APPROVED
    assert [t.turn_state.turn_number for t in result.turns] == [2]


def test_resume_without_state_says_how_to_start(git_repo: Path) -> None:
    root = _repo(git_repo)
    with pytest.raises(ResumeError, match="start it with 'guardkit-state feature-build TASK-AUTH-001"):
        run_task_loop(root, TASK, CallableAgent(scripted_player), coach_verifying(1), LoopOptions(resume=True))


def test_second_loop_of_the_same_task_fails_fast(git_repo: Path) -> None:
    root = _repo(git_repo)
    with exclusive_lock(shared_lock_path(root, TASK)):
        with pytest.raises(LockedError):
            run_task_loop(root, TASK, CallableAgent(scripted_player), coach_verifying(1),
                          LoopOptions(use_worktree=False))


def test_malformed_config_refuses_to_start(git_repo: Path) -> None:
    root = _repo(git_repo)
    config = root / ".guardkit/config/quality-gates.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("profiles: [unclosed\n")
    with pytest.raises(ConfigError) as info:
        run_task_loop(root, TASK, CallableAgent(scripted_player), coach_verifying(1))
    assert info.value.path == config
    assert not (root / ".guardkit/worktrees").exists()


def test_gate_thresholds_from_config_change_the_verdict(git_repo: Path) -> None:
    root = _repo(git_repo)
    def low_coverage_coach(request: TurnRequest) -> dict[str, Any]:
        return {"decision": "approve", "criteria_verification": [], "issues": [], "rationale": "fine",
                "validation_results": {"tests_passed_count": 5, "tests_failed_count": 0, "coverage": 70.0}}
    result = run_task_loop(root, TASK, CallableAgent(scripted_player), CallableAgent(low_coverage_coach),
                           LoopOptions(max_turns=1, use_worktree=False))
    assert result.turns[0].entry.decision == "feedback"  # built-in feature/5 profile needs 80% coverage
    gates = {g["gate"]: g for g in result.turns[0].turn_state.gate_results}
    assert gates["coverage"]["passed"] is False
    assert "coverage" in result.turns[0].turn_state.coach_feedback


def test_editing_quality_gates_yaml_changes_the_loop_verdict(git_repo: Path) -> None:
    from importlib.resources import files

    root = _repo(git_repo)
    default = files("guardkit_state.config").joinpath("quality-gates.default.yaml").read_text()
    lowered = default.replace(
        "arch_review_threshold: 60\n      coverage_required: true\n      coverage_threshold: 0.80",
        "arch_review_threshold: 60\n      coverage_required: true\n      coverage_threshold: 0.65",
    )
    assert lowered != default
    config = root / ".guardkit/config/quality-gates.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(lowered)

    def coach(request: TurnRequest) -> dict[str, Any]:
        return {"decision": "approve", "criteria_verification": [], "issues": [], "rationale": "fine",
                "validation_results": {"tests_passed_count": 5, "tests_failed_count": 0, "coverage": 70.0}}
    result = run_task_loop(root, TASK, CallableAgent(scripted_player), CallableAgent(coach),
                           LoopOptions(max_turns=1, use_worktree=False))
    turn = result.turns[0]
    gates = {g["gate"]: g for g in turn.turn_state.gate_results}
    assert gates["coverage"]["passed"] is True
    assert gates["coverage"]["source"] == ".guardkit/config/quality-gates.yaml"
    assert turn.entry.decision == "approve" and result.outcome is Outcome.APPROVED


def _counting_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``git`` first on PATH that logs each call (one line) and runs the real one: the log counts
    the git processes the loop spawns, for real."""
    real = shutil.which("git")
    assert real is not None
    log = tmp_path / "git-calls.log"
    wrapper = tmp_path / "bin" / "git"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\necho "$1" >> {shlex.quote(str(log))}\nexec {shlex.quote(real)} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    return log


def _git_calls(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


#: At most the git processes of one loop run in a fresh worktree, one turn approved (its start, the
#: worktree made, the turn, its commit), and of each further turn. A feature's workers run many
#: such loops on 2 cores: each process is CPU time (issue #41's scaling). Lower them when a change
#: spares a call; a rise needs a reason. (Before issue #41's cut: 37 and 23.)
ONE_TURN_RUN_GIT_CALLS = 28
FURTHER_TURN_GIT_CALLS = 16


def test_a_loop_turn_spawns_no_more_git_processes_than_pinned(git_repo: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = _repo(git_repo), tmp_path / "second"
    shutil.copytree(one, two, symlinks=True)
    log = _counting_git(tmp_path, monkeypatch)
    assert run_task_loop(one, TASK, CallableAgent(scripted_player), coach_verifying(1)).outcome is Outcome.APPROVED
    single = _git_calls(log)
    log.unlink()
    result = run_task_loop(two, TASK, CallableAgent(scripted_player), coach_verifying(2))
    assert result.outcome is Outcome.APPROVED and len(result.turns) == 2
    further = _git_calls(log) - single
    assert single <= ONE_TURN_RUN_GIT_CALLS and further <= FURTHER_TURN_GIT_CALLS, (single, further)
