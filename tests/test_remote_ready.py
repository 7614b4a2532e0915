"""The rule a ``feature-build --remote`` worker and the MCP ``claim_next_task`` decide by: which
wave's turn has come and which of its tasks can be claimed."""

from __future__ import annotations

from guardkit_state.features.progress import TaskState
from guardkit_state.remote.claim_record import Claim
from guardkit_state.remote.ready import wave_turn

WAVES = [("T-1", "T-2", "T-3"), ("T-4",)]


def claim(task: str) -> Claim:
    return Claim("FEAT-X", task, "0" * 40, "w", "n", 0.0, 0)


def states(**phases: str) -> dict[str, TaskState]:
    return {task: TaskState(task, phases.get(task.replace("-", "_"), "new")) for wave in WAVES  # type: ignore[arg-type]
            for task in wave}


def test_the_first_wave_not_wholly_merged_is_the_one_whose_turn_has_come() -> None:
    done = states(T_1="merged", T_2="closed", T_3="merged")
    turn = wave_turn(WAVES, done.__getitem__)
    assert turn is not None and turn.number == 2 and turn.tasks == ("T-4",)
    assert wave_turn(WAVES, states(T_1="merged", T_2="merged", T_3="merged", T_4="merged").__getitem__) is None


def test_a_wave_all_approved_is_merged_not_claimed() -> None:
    turn = wave_turn(WAVES, states(T_1="approved", T_2="merged", T_3="approved").__getitem__)
    assert turn is not None and turn.number == 1 and turn.mergeable
    turn = wave_turn(WAVES, states(T_1="approved", T_2="merged").__getitem__)
    assert turn is not None and not turn.mergeable


def test_claimable_tasks_have_to_run_and_hold_no_live_claim_in_plan_order() -> None:
    turn = wave_turn(WAVES, states(T_1="approved", T_2="resume", T_3="new").__getitem__)
    assert turn is not None
    assert turn.claimable({}, stale=lambda c: False) == ["T-2", "T-3"]
    held = {"T-2": claim("T-2")}
    assert turn.claimable(held, stale=lambda c: False) == ["T-3"]
    assert turn.claimable(held, stale=lambda c: c.task == "T-2") == ["T-2", "T-3"]  # a stale claim is taken over
    failed = wave_turn(WAVES, states(T_1="failed").__getitem__)
    assert failed is not None and [s.task_id for s in failed.failed] == ["T-1"]
