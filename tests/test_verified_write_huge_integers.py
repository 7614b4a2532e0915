"""A value whose repr Python refuses (an integer too long for ``str``, which YAML reads from hex,
octal or binary digits) must not make the write verification, or any write of the file, fail."""

from __future__ import annotations

from pathlib import Path

from guardkit_state.plans.plan_splice import PlanUpdate
from guardkit_state.plans.plan_writer import modify_plan
from guardkit_state.taskfile.splice import StateUpdate, splice_state
from guardkit_state.yamltext.strict_yaml import parse_yaml
from guardkit_state.yamltext.verify import first_difference

#: 4000 hex digits: about 4800 decimal ones, over Python's 4300-digit limit for int <-> str.
BIG = "0x" + "f" * 4000


def test_a_huge_integer_compares_equal_to_itself() -> None:
    data = parse_yaml(f"checksum: {BIG}\n").data
    again = parse_yaml(f"checksum: {BIG}\n").data
    assert first_difference(data, again) is None
    assert first_difference(data, {"checksum": 1}) == "$.checksum"


def test_a_turn_is_recorded_in_a_task_file_holding_a_huge_integer() -> None:
    text = (f"---\nid: TASK-R3-1\nchecksum: {BIG}\nautobuild_state:\n  current_turn: 1\n  turns:\n"
            "  - turn: 1\n    decision: feedback\n---\nbody\n")
    turn = {"turn": 2, "decision": "approve", "timestamp": "2026-11-21T10:12:00+00:00"}
    result = splice_state(text, StateUpdate(block_scalars={"current_turn": 2}, append_turns=[turn]))
    assert f"checksum: {BIG}\n" in result.text
    assert "  current_turn: 2\n" in result.text and "  - turn: 2\n    decision: approve\n" in result.text


def test_a_plan_holding_a_huge_integer_is_written(tmp_path: Path) -> None:
    plan = tmp_path / "FEAT-R3.yaml"
    plan.write_text(f"id: FEAT-R3\nname: Huge\nchecksum: {BIG}\ntasks:\n- id: TASK-R3-1\n  name: One\n")
    modify_plan(plan, lambda _plan: PlanUpdate(execution={"current_wave": 1}))
    text = plan.read_text()
    assert f"checksum: {BIG}\n" in text and "current_wave: 1" in text
