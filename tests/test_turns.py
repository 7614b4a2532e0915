"""The turn lifecycle through the public API, on real files."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from guardkit_state.errors import InputError, SchemaError, TurnAlreadyRecordedError
from guardkit_state.model import Outcome
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.turns.lifecycle import TurnLifecycle, record_turn

from .helpers import coach_decision, make_task_repo, player_report

STATE_DIR = Path(".guardkit/autobuild/TASK-AUTH-001")


def _three_turn_history(root: Path) -> list:
    make_task_repo(root)
    records = []
    records.append(record_turn(root, "TASK-AUTH-001", player_report(1, promises=[("AC-001", "complete")]),
                               coach_decision(1, "feedback", feedback="Missing token refresh mechanism",
                                              verdicts={"AC-001": "verified", "AC-002": "rejected",
                                                        "AC-003": "verified"},
                                              what_to_try_next="Implement token refresh endpoint")))
    records.append(record_turn(root, "TASK-AUTH-001", player_report(2, summary="Added token refresh endpoint",
                                                                    blockers=["Unclear refresh window size"]),
                               coach_decision(2, "reject", feedback="Token refresh doesn't validate expiry",
                                              verdicts={"AC-002": "rejected"})))
    records.append(record_turn(root, "TASK-AUTH-001", player_report(3, summary="Fixed refresh expiry validation"),
                               coach_decision(3, "approve", verdicts={"AC-002": "verified"})))
    return records


def test_record_turn_three_turn_history_populates_every_field(tmp_path: Path) -> None:
    records = _three_turn_history(tmp_path)
    assert [r.entry.decision for r in records] == ["feedback", "reject", "approve"]
    assert [r.turn_state.coach_decision for r in records] == ["feedback", "rejected", "approved"]
    assert records[-1].outcome is Outcome.APPROVED

    lifecycle = TurnLifecycle.open(tmp_path, "TASK-AUTH-001")
    states = [lifecycle.store.read_turn_state(n) for n in (1, 2, 3)]
    first, second, third = states
    assert first.id == "TURN-FEAT-AUTH-TASK-AUTH-001-T1"
    assert first.mode == "fresh_start" and second.mode == "continuing_work"
    assert first.player_summary == "Implemented JWT login endpoint"
    assert first.player_decision == "implemented" and second.player_decision == "blocked"
    assert first.coach_feedback == "Missing token refresh mechanism"
    assert first.acceptance_criteria_status == {"AC-001": "verified", "AC-002": "rejected", "AC-003": "verified"}
    assert first.what_to_try_next == "Implement token refresh endpoint"
    assert second.what_to_try_next == "Address AC-002"
    assert second.blockers_found == ["Unclear refresh window size"]
    assert first.files_modified == ["tests/test_turn1.py", "src/auth/login.py"]
    assert (first.tests_passed, first.tests_failed, first.coverage, first.arch_score) == (9, 0, 80.0, 82)
    assert first.lessons_from_turn == ["lesson from turn 1"]
    assert first.started_at and first.completed_at and first.duration_seconds is not None
    assert third.acceptance_criteria_status == {"AC-001": "verified", "AC-002": "verified", "AC-003": "verified"}
    assert third.criteria_provenance["AC-002"]["set_by_turn"] == 3
    assert third.criteria_provenance["AC-001"]["set_by_turn"] == 1
    for state in states:
        assert state.player_summary != "Implementation attempt"
        assert state.acceptance_criteria_status

    task = TaskFile.load(lifecycle.task.path)
    assert [t.turn for t in task.state.turns] == [1, 2, 3]
    assert task.state.criteria == {"AC-001": "verified", "AC-002": "verified", "AC-003": "verified"}
    assert task.status == "in_review"
    assert task.state.current_turn == 3


def test_record_turn_keeps_user_bytes_outside_the_block(tmp_path: Path) -> None:
    path = make_task_repo(tmp_path)
    before = path.read_text()
    record_turn(tmp_path, "TASK-AUTH-001", player_report(1), coach_decision(1, "feedback", feedback="Add tests"))
    after = path.read_text()
    assert "created_at: 2026-01-29T00:00:00Z   # unquoted date, must survive" in after
    assert "tags: [auth, jwt]" in after
    assert after.endswith(before.split("---\n", 2)[2])  # body byte-identical
    removed = [line for line in before.splitlines() if line not in after.splitlines()]
    assert removed == ["status: backlog"]


def test_seed_003_omitted_promises_do_not_stall_and_criteria_stay_verified(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_task_repo(tmp_path)
    all_met = [("AC-001", "complete"), ("AC-002", "complete"), ("AC-003", "complete")]
    same = "Docstrings missing on 3 public functions (see line 42)"
    record_turn(tmp_path, "TASK-AUTH-001", player_report(1, promises=all_met),
                coach_decision(1, "feedback", feedback=same,
                               verdicts={"AC-001": "verified", "AC-002": "verified", "AC-003": "verified"}))
    caplog.set_level(logging.INFO, logger="guardkit_state")
    outcomes = []
    for turn in (2, 3, 4):
        rec = record_turn(tmp_path, "TASK-AUTH-001", player_report(turn), coach_decision(turn, "feedback",
                          feedback=same.replace("42", str(40 + turn))), max_turns=10)
        outcomes.append(rec.outcome)
        assert rec.ledger.verified_count == 3
        assert rec.promises_recovered_from == 1
    assert outcomes == [None, None, None]
    assert "No completion_promises in current turn — recovered from player_turn_1.json" in caplog.messages


def test_genuine_stall_detected_at_turn_3(tmp_path: Path) -> None:
    make_task_repo(tmp_path)
    outcomes = []
    for turn in (1, 2, 3):
        rec = record_turn(tmp_path, "TASK-AUTH-001", player_report(turn),
                          coach_decision(turn, "feedback", feedback=f"Tests fail: 4 of {10 + turn} tests failed"),
                          max_turns=10)
        outcomes.append(rec.outcome)
    assert outcomes == [None, None, Outcome.UNRECOVERABLE_STALL]
    task = TaskFile.load(next((tmp_path / "tasks").rglob("*.md")))
    assert task.status == "blocked"


def test_explicit_rejection_demotes_and_names_the_turn(tmp_path: Path) -> None:
    make_task_repo(tmp_path)
    record_turn(tmp_path, "TASK-AUTH-001", player_report(1),
                coach_decision(1, "feedback", feedback="refresh missing", verdicts={"AC-001": "verified"}))
    record_turn(tmp_path, "TASK-AUTH-001", player_report(2),
                coach_decision(2, "feedback", feedback="refresh still missing"))
    rec = record_turn(tmp_path, "TASK-AUTH-001", player_report(3),
                      coach_decision(3, "feedback", feedback="login broke", verdicts={"AC-001": "rejected"}))
    entry = rec.ledger.get("AC-001")
    assert (entry.status, entry.set_by_turn) == ("rejected", 3)
    assert rec.ledger.delta(rec.ledger_before) == ["-AC-001"]
    assert rec.turn_state.criteria_provenance["AC-001"]["set_by_turn"] == 3


def test_recorded_turn_files_are_immutable(tmp_path: Path) -> None:
    make_task_repo(tmp_path)
    record_turn(tmp_path, "TASK-AUTH-001", player_report(1), coach_decision(1, "approve"))
    lifecycle = TurnLifecycle.open(tmp_path, "TASK-AUTH-001")
    with pytest.raises(TurnAlreadyRecordedError) as info:
        lifecycle.store.write("player_turn", 1, player_report(1), recorded_turns=lifecycle.recorded_turns)
    assert info.value.turn == 1


def test_invalid_report_writes_nothing(tmp_path: Path) -> None:
    path = make_task_repo(tmp_path)
    before = path.read_bytes()
    bad = coach_decision(1, "maybe")
    with pytest.raises(SchemaError) as info:
        record_turn(tmp_path, "TASK-AUTH-001", player_report(1), bad)
    assert "decision" in (info.value.pointer or "")
    assert path.read_bytes() == before
    assert not (tmp_path / STATE_DIR).exists() or not any((tmp_path / STATE_DIR).glob("*.json"))


def test_report_for_the_wrong_turn_is_refused(tmp_path: Path) -> None:
    make_task_repo(tmp_path)
    with pytest.raises(InputError) as info:
        record_turn(tmp_path, "TASK-AUTH-001", player_report(2), coach_decision(2, "approve"))
    assert info.value.pointer == "$.turn"


def test_continuation_context_for_turn_2_of_the_jwt_example(tmp_path: Path) -> None:
    make_task_repo(tmp_path)
    record_turn(tmp_path, "TASK-AUTH-001",
                player_report(1, summary="Implemented JWT-based authentication with login endpoint",
                              lessons=["JWT library handles encoding well"]),
                coach_decision(1, "feedback", feedback="Missing token refresh mechanism",
                               verdicts={"AC-001": "verified", "AC-003": "verified"},
                               what_to_try_next="Implement token refresh endpoint"))
    context = TurnLifecycle.open(tmp_path, "TASK-AUTH-001").context_for(2)
    assert context == (
        "## Previous Turn Summary (Turn 1)\n"
        "**What was attempted**: Implemented JWT-based authentication with login endpoint\n"
        "**Player decision**: implemented\n"
        "**Coach decision**: feedback\n"
        "\n"
        "**Coach feedback**: Missing token refresh mechanism\n"
        "\n"
        "**Lessons learned**: JWT library handles encoding well\n"
        "**Suggested focus for this turn**: Implement token refresh endpoint\n"
        "\n"
        "**Acceptance Criteria Status**:\n"
        "  ✓ AC-001: Login returns JWT: verified\n"
        "  ○ AC-002: Token refresh works: pending\n"
        "  ✓ AC-003: Invalid tokens rejected: verified\n"
        "\n"
        "Last Turn Feedback (MUST ADDRESS):\n"
        "Specifically:\n"
        "- [must_fix/correctness] Missing token refresh mechanism\n"
    )


def test_context_after_rejection_says_must_address(tmp_path: Path) -> None:
    make_task_repo(tmp_path)
    record_turn(tmp_path, "TASK-AUTH-001", player_report(1),
                coach_decision(1, "reject", feedback="Missing error handling and validation logic"))
    context = TurnLifecycle.open(tmp_path, "TASK-AUTH-001").context_for(2)
    assert "**Coach decision**: REJECTED" in context
    assert context.rstrip().endswith("Last Turn Feedback (MUST ADDRESS):\nSpecifically:\n"
                                     "- [must_fix/correctness] Missing error handling and validation logic")


def test_turn_state_files_validate_and_are_canonical_json(tmp_path: Path) -> None:
    _three_turn_history(tmp_path)
    data = json.loads((tmp_path / STATE_DIR / "turn_state_turn_2.json").read_text())
    assert data["schema_version"] == 1
    assert data["id"] == "TURN-FEAT-AUTH-TASK-AUTH-001-T2"
    assert data["feedback_signature"]


def test_an_approval_rejecting_a_criterion_is_feedback_naming_it(tmp_path: Path) -> None:
    make_task_repo(tmp_path)
    rec = record_turn(tmp_path, "TASK-AUTH-001", player_report(1), coach_decision(
        1, "approve", verdicts={"AC-001": "verified", "AC-002": "rejected"}))
    assert (rec.entry.decision, rec.outcome, rec.turn_state.coach_decision) == ("feedback", None, "feedback")
    assert rec.turn_state.coach_feedback == ("the Coach answered approve while rejecting AC-002: not an approval; "
                                             "AC-002 must be met and verified first")
    statuses = rec.ledger.statuses()
    assert (statuses["AC-002"], statuses["AC-003"]) == ("rejected", "pending")  # nothing implied by it
    # The Coach's report is kept as it was written.
    assert json.loads((tmp_path / STATE_DIR / "coach_turn_1.json").read_text())["decision"] == "approve"


def test_an_approval_silent_on_an_earlier_rejection_implies_that_criterion(tmp_path: Path) -> None:
    # An approved task never counts a criterion rejected: the approving Coach passed over it.
    make_task_repo(tmp_path)
    record_turn(tmp_path, "TASK-AUTH-001", player_report(1), coach_decision(
        1, "feedback", feedback="AC-002 fails", verdicts={"AC-001": "verified", "AC-002": "rejected"}))
    rec = record_turn(tmp_path, "TASK-AUTH-001", player_report(2), coach_decision(
        2, "approve", verdicts={"AC-003": "verified"}))
    assert rec.outcome is not None and rec.outcome.value == "approved"
    counts = rec.ledger.counts()
    assert (counts.verified, counts.implied_by_approval, counts.rejected) == (2, 1, 0)
    said = rec.ledger.provenance()["AC-002"]
    assert (said["status"], said["set_by_turn"], said["implied_by_approval"]) == ("verified", 2, True)
