"""A task sent back by the merge queue (``autobuild_state.sent_back``): its approval stays in its
history but does not end its loop; the next turn's context carries the gate's verdict under MUST
ADDRESS, as a Coach's issue would be. Pure reads of a task file."""

from __future__ import annotations

from pathlib import Path

from guardkit_state.store.turn_files import TurnStore
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.turns.checks import closed_reason
from guardkit_state.turns.context import render_continuation_context
from guardkit_state.turns.resume import resume_point
from guardkit_state.turns.sent_back import kept_output, pending_send_back, send_back_lines, sent_back_after
from guardkit_state.turns.view import TurnView

ENTRY = """\
  sent_back:
  - after_turn: 1
    wave: 1
    feature_branch: autobuild/FEAT-X
    gate: pytest tests/smoke -q
    exit_code: 1
    expected_exit: 0
    outcome: failed
    candidate: 1a2b3c4d5e6f
    base: 9f8e7d6c5b4a
    merged_before: [TASK-X-001]
    output: |-
      F test_ports.py::test_unique
      1 failed in 0.1s
"""


def _task(tmp_path: Path, *, turns: str = "1", sent_back: bool = True, outcome: str | None = None) -> TaskFile:
    entries = "".join(f"  - turn: {n}\n    decision: {d}\n    timestamp: '2026-01-01T00:00:0{n}Z'\n"
                      for n, d in [(int(t), "approve" if t == turns[-1] else "feedback") for t in turns])
    extra = ENTRY if sent_back else ""
    text = (f"---\nid: TASK-X-002\ntitle: x\nstatus: in_progress\nautobuild_state:\n  current_turn: {turns[-1]}\n"
            f"  max_turns: 3\n{f'  outcome: {outcome}' + chr(10) if outcome else ''}  turns:\n{entries}{extra}"
            "---\n\n# x\n\n## Acceptance Criteria\n\n- [ ] AC-001: works\n")
    path = tmp_path / "tasks" / "TASK-X-002.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return TaskFile.load(path)


def test_an_approval_sent_back_does_not_close_the_task_and_resume_runs_the_next_turn(tmp_path: Path) -> None:
    task = _task(tmp_path)
    assert pending_send_back(task.state) is not None and closed_reason(task) is None
    point = resume_point(task, TurnStore(tmp_path / "store", "TASK-X-002"))
    assert (point.action, point.next_turn) == ("run_turn", 2)


def test_an_approval_not_sent_back_still_ends_the_loop(tmp_path: Path) -> None:
    task = _task(tmp_path, sent_back=False)
    assert pending_send_back(task.state) is None and closed_reason(task) == "was approved"
    assert resume_point(task, TurnStore(tmp_path / "store", "TASK-X-002")).action == "finished"


def test_a_send_back_answers_only_the_turn_it_names(tmp_path: Path) -> None:
    # Turn 2 approved after the send-back of turn 1: the loop ended (turn 1's entry is history).
    task = _task(tmp_path, turns="12")
    assert pending_send_back(task.state) is None and closed_reason(task) == "was approved"
    assert sent_back_after(task.state, 1) is None  # turn 1 was feedback here, not the approval it names


def test_the_next_turns_context_carries_the_gate_under_must_address_as_a_coach_issue(tmp_path: Path) -> None:
    task = _task(tmp_path)
    entry = pending_send_back(task.state)
    assert entry is not None
    lines = send_back_lines(entry)
    assert lines[0].startswith("The Coach approved turn 1, but the merge queue sent the task back")
    assert lines[2] == ("- [must_fix/merge_gate] merged into autobuild/FEAT-X with TASK-X-001 merged before it, "
                        "this task's work fails the merge gate: `pytest tests/smoke -q` exited 1 (expected 0) on "
                        "candidate 1a2b3c4d5e — suggestion: make the gate pass with the work merged before it "
                        "(autobuild/FEAT-X at 9f8e7d6c5b is merged into this task's branch: run the gate here)")
    assert lines[-2:] == ["    F test_ports.py::test_unique", "    1 failed in 0.1s"]
    context = TurnView(task, root=tmp_path).context_for(2)
    assert "Last Turn Feedback (MUST ADDRESS):\nThe Coach approved turn 1" in context
    # Without the entry, an approval has nothing to address.
    assert "MUST ADDRESS" not in render_continuation_context(None, turn=1)


def test_a_timed_out_gate_is_told_with_its_timeout() -> None:
    entry = {"after_turn": 2, "gate": "make smoke", "exit_code": None, "timeout": 30, "output": ""}
    assert "`make smoke` timed out after 30 s" in send_back_lines(entry)[2]


def test_the_output_kept_in_a_task_file_is_printable_text_and_its_tail() -> None:
    assert kept_output("\x1b[31mFAILED\x1b[0m x\r\x00\tdone\n") == "FAILED x\tdone\n"
    assert kept_output("a" * 5000).startswith("a") and len(kept_output("a" * 5000)) == 1500
