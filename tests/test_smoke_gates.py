"""GuardKit's smoke gates: parsed with GuardKit's semantics, run in the feature worktree after the
waves they name, halting the feature (worktree kept) on a mismatch; shown by ``show`` and ``report``."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from guardkit_state.errors import FeaturePlanError
from guardkit_state.features.build import FeatureOptions, build_feature
from guardkit_state.inspect.feature_view import feature_view
from guardkit_state.plans.plan import load_plan, parse_plan
from guardkit_state.plans.smoke_gates import SmokeGate, judge, read_smoke_gate, recorded_runs, run_smoke_gate
from guardkit_state.report.feature import build_feature_report
from guardkit_state.report.feature_page import render_feature_report

from .feature_support import FEATURE_ID, FeatureProject, TaskSpec, git, make_feature

T1, T2 = "TASK-FB-001", "TASK-FB-002"


def _plan(gate: str) -> str:
    return f"id: FEAT-S\ntasks:\n- id: TASK-S-1\n  dependencies: []\nsmoke_gates:\n{gate}"


@pytest.mark.parametrize(("after", "waves"), [("2", {2}), ("[3, 4]", {3, 4}), ("all", None)])
def test_after_wave_is_a_number_a_list_or_all(after: str, waves: set[int] | None) -> None:
    gate = read_smoke_gate(parse_plan(_plan(f"  after_wave: {after}\n  command: pytest -q\n")))
    assert gate is not None and gate.after_waves == (frozenset(waves) if waves else None)
    assert (gate.expected_exit, gate.timeout, gate.exit5_is_hard_fail) == (0, 120.0, False)
    assert gate.applies_after(3) == (waves is None or 3 in waves)


@pytest.mark.parametrize(("gate", "pointer"), [
    ("  after_wave: first\n  command: x\n", "$.smoke_gates.after_wave"),
    ("  after_wave: 1\n", "$.smoke_gates.command"),
    ("  after_wave: 1\n  command: x\n  timeout: -1\n", "$.smoke_gates.timeout"),
    ("  after_wave: 1\n  command: x\n  expected_exit: zero\n", "$.smoke_gates.expected_exit")])
def test_a_gate_that_cannot_run_is_a_typed_error(gate: str, pointer: str) -> None:
    with pytest.raises(FeaturePlanError) as info:
        read_smoke_gate(parse_plan(_plan(gate)))
    assert info.value.pointer == pointer


@pytest.mark.parametrize(("code", "hard", "verdict"), [
    (0, False, "passed"), (1, False, "failed"), (5, False, "warning"), (5, True, "failed"), (None, False, "timed_out")])
def test_pytest_exit_5_is_a_warning_unless_it_is_a_hard_fail(code: int | None, hard: bool, verdict: str) -> None:
    assert judge(SmokeGate(None, "pytest", exit5_is_hard_fail=hard), code) == verdict


def test_a_gate_runs_in_its_directory_and_a_timeout_kills_its_process_group(tmp_path: Path) -> None:
    (tmp_path / "here.txt").write_text("x")
    run = run_smoke_gate(SmokeGate(None, "set -e\ntest -f here.txt\necho ok"), tmp_path, 1)
    assert (run.outcome, run.exit_code, run.output) == ("passed", 0, "ok\n")
    slow = run_smoke_gate(SmokeGate(None, "sleep 30 & echo $! > pid; wait", timeout=0.5), tmp_path, 2)
    assert (slow.outcome, slow.exit_code) == ("timed_out", None)
    pid = int((tmp_path / "pid").read_text())
    # A killed process is runnable until the signal takes effect (a loaded machine may take a moment):
    # gone or a zombie within a bound, never still sleeping its 30 s.
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and "Z" not in _state(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists() or "Z" in _state(pid)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


def _with_gate(tmp_path: Path, gate: str) -> FeatureProject:
    project = make_feature(tmp_path, [TaskSpec(T1), TaskSpec(T2, [T1])], [[T1], [T2]])
    with project.plan_path.open("a", encoding="utf-8") as plan:
        plan.write(f"smoke_gates:\n{gate}")
    git(project.root, "commit", "-qam", "smoke gate")
    return project


def _build(project: FeatureProject, monkeypatch: pytest.MonkeyPatch, **options: bool) -> object:
    for name, value in project.env().items():
        monkeypatch.setenv(name, value)
    return build_feature(project.root, FEATURE_ID, *project.agents(), FeatureOptions(**options))  # type: ignore[arg-type]


def test_a_failing_gate_halts_the_feature_after_its_wave_and_keeps_the_worktree(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # After wave 1 the gate looks for wave 2's file: it is not there yet, so the feature stops.
    project = _with_gate(tmp_path, f"  after_wave: 1\n  command: 'test -f {Path('tasks') / 'x' / 'nope'}'\n"
                                   "  expected_exit: 0\n  timeout: 30\n")
    result = _build(project, monkeypatch)
    assert result.status == "stopped" and result.exit_code == 1  # type: ignore[attr-defined]
    assert "smoke gate after wave 1: failed (exit 1, expected 0)" in result.reason  # type: ignore[attr-defined]
    assert project.feature_worktree.is_dir()
    plan = load_plan(project.plan_path)
    assert plan.status == "failed" and plan.task(T2).status == "pending"  # wave 2 never ran
    (run,) = recorded_runs(plan)
    assert (run.wave, run.outcome, run.exit_code) == (1, "failed", 1)
    view = feature_view(project.root, FEATURE_ID)
    assert [r.outcome for r in view.smoke_runs] == ["failed"] and view.smoke_gate is not None
    page = render_feature_report(build_feature_report(project.root, FEATURE_ID, generated_at="-"))
    assert "smoke gate after wave 1: failed (exit 1, expected 0)" in page

    # Fixed (the gate now passes): --resume runs the gate again, then wave 2.
    project.plan_path.write_text(project.plan_path.read_text().replace("test -f", "test -d"), encoding="utf-8")
    (project.feature_worktree / "tasks" / "x" / "nope").mkdir(parents=True)
    result = _build(project, monkeypatch, resume=True)
    assert result.status == "completed", result.reason  # type: ignore[attr-defined]
    assert [(r.wave, r.outcome) for r in recorded_runs(load_plan(project.plan_path))] == [(1, "passed")]


def test_a_gate_after_every_wave_passes_and_exit_5_only_warns(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    project = _with_gate(tmp_path, "  after_wave: all\n  command: |\n    git rev-parse --is-inside-work-tree\n"
                                   "    exit 5\n  exit5_is_hard_fail: false\n")
    result = _build(project, monkeypatch)
    assert result.status == "completed", result.reason  # type: ignore[attr-defined]
    runs = recorded_runs(load_plan(project.plan_path))
    assert [(r.wave, r.outcome, r.exit_code) for r in runs] == [(1, "warning", 5), (2, "warning", 5)]
    assert all(r.output.startswith("true") for r in runs)  # run inside the feature worktree
