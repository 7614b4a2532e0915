"""The merge queue's record in a plan (``execution.merge_queue``): steps written as the plan keeps them,
read back (an entry that is not one is skipped), bounded, and told in one line each."""

from __future__ import annotations

from guardkit_state.plans.merge_queue_log import KEPT, QueueStep, recorded_steps, with_steps
from guardkit_state.plans.plan import parse_plan

CANDIDATE = QueueStep(1, "candidate", "1a2b3c4d5e6f7a8b", ("TASK-A", "TASK-B"), "the wave's candidate", "failed", 1, 0,
                      0.42, 1, at="2026-01-01T00:00:00+00:00", output="port clash\n")


def _plan(steps: str = "") -> str:
    return f"id: FEAT-Q\ntasks:\n- id: TASK-A\n  dependencies: []\nexecution:\n  merge_queue:\n{steps}" if steps else \
        "id: FEAT-Q\ntasks:\n- id: TASK-A\n  dependencies: []\n"


def test_a_step_round_trips_through_the_plan_with_only_the_keys_its_kind_uses() -> None:
    sent = QueueStep(1, "sent_back", "1a2b", ("TASK-A",), gate="failed", exit_code=1, task="TASK-B", after_turn=2,
                     final=True, runs=3, at="t")
    landed = QueueStep(1, "landed", "9f8e", ("TASK-A",), runs=2, at="t")
    for step in (CANDIDATE, sent, landed):
        assert QueueStep.from_dict(step.to_dict()) == step
    assert set(landed.to_dict()) == {"wave", "step", "tasks", "candidate", "runs", "at"}
    assert sent.to_dict()["breaks_with"] == ["TASK-A"] and "output" not in sent.to_dict()


def test_steps_are_told_in_one_line_each() -> None:
    assert CANDIDATE.describe() == ("wave 1 · gate run 1: candidate 1a2b3c4d5e (TASK-A, TASK-B) · the wave's candidate "
                                    "· failed (exit 1, expected 0) in 0.4 s")
    sent = QueueStep(2, "sent_back", "1a2b", ("TASK-A",), gate="timed_out", task="TASK-B", after_turn=2, runs=3)
    assert sent.describe() == ("wave 2 · TASK-B sent back after turn 2: it breaks the gate merged after TASK-A, "
                               "timed_out; one more turn (turn 3) with the gate's output under MUST ADDRESS · found in "
                               "3 gate run(s)")


def test_entries_that_are_no_step_are_skipped_and_the_list_keeps_its_newest() -> None:
    plan = parse_plan(_plan("  - {wave: 1, step: candidate, tasks: [TASK-A], gate: passed, exit_code: 0}\n"
                            "  - not a step\n  - {wave: one, step: landed}\n  - {wave: 1, step: exploded}\n"))
    assert [(s.step, s.gate) for s in recorded_steps(plan)] == [("candidate", "passed")]
    many = with_steps(parse_plan(_plan()), [CANDIDATE] * (KEPT + 5))
    assert len(many) == KEPT
