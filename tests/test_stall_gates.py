"""The stall detector counts a quality gate failing the same way turn after turn, however the
Coach words its feedback (GuardKit's repository: coverage 88 < 90 five turns running, no stall)."""

from __future__ import annotations

import pytest

from guardkit_state.model import TurnState
from guardkit_state.turns.history import turn_signal
from guardkit_state.turns.stall import TurnSignal, detect_stall, gate_signature

COVERAGE_FAILED = [{"gate": "coverage", "passed": False, "actual": 88.0, "threshold": 90.0, "required": True},
                   {"gate": "tests", "passed": True, "actual": 10, "threshold": 0, "required": True}]


def test_gate_signature_names_the_failed_gates_only() -> None:
    assert gate_signature(COVERAGE_FAILED) == "coverage"
    assert gate_signature([{"gate": "tests", "passed": True}]) is None
    assert gate_signature(None) is None


@pytest.mark.parametrize(("counts", "window", "stalls"), [
    ([1, 1, 1, 1, 1], 5, True), ([1, 1, 1, 1, 2], 5, False), ([0, 0, 0], 3, True), ([1, 1, 1, 1], 4, False)])
def test_the_same_gate_failing_with_no_progress_is_a_stall(counts: list[int], window: int, stalls: bool) -> None:
    # Every turn's feedback is worded differently: only the gate repeats.
    history = [TurnSignal(n + 1, f"sig-{n}", count, "coverage") for n, count in enumerate(counts)]
    stall = detect_stall(history)
    assert (stall is not None) == stalls
    if stall is not None:
        assert stall.turns == tuple(range(len(counts) - window + 1, len(counts) + 1))
        assert "the same quality gate(s) failing (coverage)" in stall.reason


def test_different_gates_or_none_are_not_a_stall() -> None:
    gates = ["coverage", "tests", "coverage", "coverage", "coverage"]
    assert detect_stall([TurnSignal(n + 1, f"s{n}", 1, g) for n, g in enumerate(gates)]) is None
    assert detect_stall([TurnSignal(n + 1, f"s{n}", 1, None) for n in range(5)]) is None


def test_the_window_read_from_turn_state_records_carries_the_failed_gates() -> None:
    """Turn-state records as the files hold them (``gate_results`` written by the loop's gate check)."""
    records = [{"id": f"TURN-X-T{n}", "feature_id": None, "task_id": "TASK-X-1", "mode": "continuing_work",
                "player_summary": "", "player_decision": "implemented", "coach_decision": "feedback",
                "coach_feedback": "", "turn_number": n, "feedback_signature": f"wording-{n}", "verified_count": 3,
                "gate_results": COVERAGE_FAILED} for n in range(1, 6)]
    signals = [turn_signal(TurnState.from_dict(r)) for r in records]
    assert [s.gates for s in signals] == ["coverage"] * 5
    stall = detect_stall(signals)
    assert stall is not None and stall.reason == (
        "the same quality gate(s) failing (coverage) 5 turns in a row with 3 criteria verified and no change "
        "(turns 1-5)")
