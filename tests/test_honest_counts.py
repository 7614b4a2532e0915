"""Honest counts: criteria a Coach verified, criteria an approval only implied, and unknown ones.

A GuardKit-approved task showed "0/7 criteria verified"; a bare approval through ``record`` showed
"14/14 verified" although no criterion was itemised. ``show``, ``status`` and ``--json`` tell the
three apart.
"""

from __future__ import annotations

import json
from pathlib import Path

from guardkit_state.model import CoachDecision, Criterion, CriterionVerification
from guardkit_state.turns.ledger import CriteriaLedger

from .guardkit_fixtures import LABELLED_BODY, cli, cli_json, feedback_turns, make_repo, task_text
from .helpers import coach_decision, player_report

TASK = "TASK-GK-003"
REL = f"tasks/in_progress/{TASK}-counts.md"
CRITERIA = [Criterion("AC-1", "a"), Criterion("AC-2", "b"), Criterion("AC-3", "c")]


def status_row(root: Path) -> dict[str, object]:
    rows = cli_json(root, "status", "--no-cache")
    return next(row for row in rows if row["task_id"] == TASK)


def record(root: Path, tmp_path: Path, turn: int, decision: str, verdicts: dict[str, str]) -> None:
    player, coach = tmp_path / f"p{turn}.json", tmp_path / f"c{turn}.json"
    player.write_text(json.dumps(player_report(turn, task_id=TASK)))
    feedback = None if decision == "approve" else "more to do"
    coach.write_text(json.dumps(coach_decision(turn, decision, task_id=TASK, verdicts=verdicts, feedback=feedback)))
    run = cli(root, "record", TASK, "--player", str(player), "--coach", str(coach))
    assert run.returncode == 0, run.stderr


def test_bare_approval_through_record_is_implied_not_verified(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: task_text(TASK, LABELLED_BODY, turns=[])})
    record(root, tmp_path, 1, "approve", {})
    data = cli_json(root, "show", TASK)
    assert data["criteria_counts"] == {"verified": 0, "implied_by_approval": 5, "rejected": 0, "pending": 0,
                                       "total": 5}
    assert all(c["implied_by_approval"] for c in data["criteria"])
    out = cli(root, "show", TASK).stdout
    assert "criteria 0/5 verified · 5 implied by approval" in out
    assert "AC-2: Formatter renders the shortest form: implied by approval (turn 1)" in out
    row = status_row(root)
    assert (row["verified"], row["implied_by_approval"], row["pending"], row["total"]) == (0, 5, 0, 5)
    assert "0/5 verified · 5 implied by approval" in cli(root, "status", "--no-cache").stdout


def test_itemised_and_implied_are_told_apart(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: task_text(TASK, LABELLED_BODY, turns=[])})
    record(root, tmp_path, 1, "feedback", {"AC-1": "verified", "AC-2": "rejected"})
    record(root, tmp_path, 2, "approve", {"AC-2": "verified", "AC-3": "verified"})
    data = cli_json(root, "show", TASK)
    assert data["criteria_counts"] == {"verified": 3, "implied_by_approval": 2, "rejected": 0, "pending": 0,
                                       "total": 5}
    assert "criteria 3/5 verified · 2 implied by approval" in cli(root, "show", TASK).stdout
    row = status_row(root)
    assert (row["verified"], row["implied_by_approval"]) == (3, 2)


def test_guardkit_approved_task_without_itemised_criteria(tmp_path: Path) -> None:
    text = task_text(TASK, LABELLED_BODY, turns=feedback_turns(3, last="approve"), status="in_review")
    root = make_repo(tmp_path / "repo", {REL: text})
    data = cli_json(root, "show", TASK)
    assert data["criteria_counts"]["verified"] == 0
    assert data["criteria_counts"]["implied_by_approval"] == 5
    assert "criteria 0/5 verified · 5 implied by approval" in cli(root, "show", TASK).stdout
    row = status_row(root)
    assert (row["verified"], row["implied_by_approval"], row["total"]) == (0, 5, 5)


def test_guardkit_task_in_progress_has_pending_criteria(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: task_text(TASK, LABELLED_BODY, turns=feedback_turns(2))})
    data = cli_json(root, "show", TASK)
    assert data["criteria_counts"] == {"verified": 0, "implied_by_approval": 0, "rejected": 0, "pending": 5,
                                       "total": 5}
    row = status_row(root)
    assert (row["verified"], row["pending"], row["total"]) == (0, 5, 5)


def test_ledger_reads_implied_from_files_written_before_the_flag() -> None:
    old = {"AC-1": {"status": "verified", "set_by_turn": 2, "notes": "approved by the Coach"},
           "AC-2": {"status": "verified", "set_by_turn": 1, "notes": "checked"}}
    counts = CriteriaLedger.start(CRITERIA, old).counts()
    assert (counts.verified, counts.implied_by_approval, counts.pending) == (1, 1, 1)


def test_an_itemised_verdict_after_an_approval_is_no_longer_implied() -> None:
    ledger = CriteriaLedger.start(CRITERIA).imply_approval(1)
    coach = CoachDecision("T", 2, "approve", criteria_verification=[CriterionVerification("AC-2", "verified")])
    after = ledger.apply_coach(2, coach)
    assert after.counts().verified == 1 and after.counts().implied_by_approval == 2
    assert after.provenance()["AC-1"]["implied_by_approval"] is True
    assert "implied_by_approval" not in after.provenance()["AC-2"]
