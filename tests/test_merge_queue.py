"""The merge queue on one machine: real git, real gate commands, real task loops with scripted agents.

Two tasks each green alone break the gate together: the queue finds the breaker by bisection, merges
the other, sends the breaker back with the gate's output under MUST ADDRESS, and merges it once its
next turn fixes it. In every case each commit on the feature branch's first-parent line passes the
gate (run at each one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from guardkit_state.features.build import FeatureOptions, build_feature
from guardkit_state.features.feature_events import FeatureEvent, QueueStepped, TaskSentBack
from guardkit_state.plans.merge_queue_log import recorded_steps
from guardkit_state.plans.plan import load_plan
from guardkit_state.taskfile.document import TaskFile

from .feature_support import FEATURE_ID, FeatureProject, TaskSpec, merged_tasks, task_rel
from .queue_support import T1, T2, assert_first_parent_green, gate_runs, gate_script, port, queue_feature


def _run(project: FeatureProject, monkeypatch: pytest.MonkeyPatch, *, options: FeatureOptions | None = None,
         events: list[FeatureEvent] | None = None) -> Any:
    for name, value in project.env().items():
        monkeypatch.setenv(name, value)
    sink = events.append if events is not None else None
    return build_feature(project.root, FEATURE_ID, *project.agents(), options or FeatureOptions(), on_event=sink)


def _player_turns(project: FeatureProject) -> list[tuple[str, int]]:
    return [(e["task"], e["turn"]) for e in project.invocations() if e["role"] == "player" and e["event"] == "start"]


def test_two_tasks_green_alone_and_red_together_the_breaker_is_sent_back_and_merged_after_its_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "gate.log"
    gate = gate_script(log)
    project = queue_feature(tmp_path, [TaskSpec(T1, shell=port(8080)),
                                       TaskSpec(T2, shell=port(8080, from_turn=2, then=8081))], [[T1, T2]], gate)
    events: list[FeatureEvent] = []
    result = _run(project, monkeypatch, events=events)
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
    assert "[must_fix/merge_gate]" in must and "exited 1 (expected 0)" in must and f"merged before it: {T1}" not in must
    assert f"with {T1} merged before it" in must and "uniq -d" in must and "port clash: port=8080 is taken twice" in must
    # T2's history keeps its approval and says it was sent back.
    state = TaskFile.load(project.task_worktree(T2) / task_rel(T2)).state
    assert state is not None and [(t.turn, t.decision) for t in state.turns] == [(1, "approve"), (2, "approve")]
    (entry,) = state.extra["sent_back"]
    assert (entry["after_turn"], entry["exit_code"], entry["merged_before"]) == (1, 1, [T1])
    assert assert_first_parent_green(project.root, gate, tmp_path / "check") >= 3
