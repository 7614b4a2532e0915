"""GuardKit's current report folders: its Coach's verdicts and evidence in
``.guardkit/autobuild-private/TASK-ID/`` are read before ``.guardkit/autobuild/`` (as GuardKit reads
them), and ``coach_evidence_turn_N.json`` is shown where it exists (``show``, the MCP
``turn_reports`` answer, the report page)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from guardkit_state.inspect.task_view import task_view
from guardkit_state.inspect.turn_reports import describe_evidence, turn_reports
from guardkit_state.report.collect import build_task_report
from guardkit_state.report.page import render_report
from guardkit_state.store.turn_files import TurnStore

from .guardkit_fixtures import cli, task_text

TASK = "TASK-PRV-001"
BODY = "# Private\n\n## Acceptance Criteria\n\n- [ ] AC-1: Parser accepts input\n- [ ] AC-2: Errors are named\n"

#: GuardKit's evidence bundle, shaped as the corpus's (gates, tests, honesty, requirements ...).
EVIDENCE: dict[str, Any] = {
    "honesty": {"verified": False, "discrepancies": [{"claim": "x"}, {"claim": "y"}], "honesty_score": 1.0},
    "gathering_status": "complete", "gathering_error": None,
    "quality_gates": {"tests_passed": True, "coverage_met": False, "coverage_required": True,
                      "all_gates_passed": False},
    "independent_tests": {"tests_passed": False, "signal_absent": True},
    "requirements": {"criteria_total": 2, "criteria_met": 1, "all_criteria_met": False},
}


def _coach(rationale: str, result: str) -> dict[str, Any]:
    return {"task_id": TASK, "turn": 1, "decision": "feedback", "rationale": rationale,
            "criteria_verification": [{"criterion_id": "AC-1", "result": result, "notes": rationale}],
            "issues": [{"severity": "must_fix", "description": rationale}]}


def _repo(root: Path) -> Path:
    path = root / "tasks" / "in_progress" / f"{TASK}-private.md"
    path.parent.mkdir(parents=True)
    path.write_text(task_text(TASK, BODY, turns=[{"turn": 1, "decision": "feedback", "feedback": "fix AC-1"}]),
                    encoding="utf-8")
    public = root / ".guardkit" / "autobuild" / TASK
    private = root / ".guardkit" / "autobuild-private" / TASK
    public.mkdir(parents=True)
    private.mkdir(parents=True)
    # GuardKit moved its Coach's verdict out of the worktree: the copy left in autobuild/ is older.
    (public / "coach_turn_1.json").write_text(json.dumps(_coach("stale public verdict", "rejected")))
    (private / "coach_turn_1.json").write_text(json.dumps(_coach("the private verdict", "verified")))
    (private / "coach_evidence_turn_1.json").write_text(json.dumps(EVIDENCE))
    return root


def test_a_report_in_the_private_folder_is_read_first(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    store = TurnStore(root / ".guardkit" / "autobuild" / TASK, TASK)
    assert store.source("coach_turn", 1) == root / ".guardkit" / "autobuild-private" / TASK / "coach_turn_1.json"
    assert store.source("player_turn", 1) == store.path("player_turn", 1)  # not there: where we write it
    read = turn_reports(root, TASK, 1)
    assert read.coach is not None and read.coach["rationale"] == "the private verdict"
    report = build_task_report(root, TASK, generated_at="-")
    assert report.turns[0].rationale == "the private verdict"


def test_a_report_only_in_the_public_folder_is_still_read(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    (root / ".guardkit" / "autobuild-private" / TASK / "coach_turn_1.json").unlink()
    assert turn_reports(root, TASK, 1).coach["rationale"] == "stale public verdict"  # type: ignore[index]


def test_coach_evidence_is_summarised_where_it_exists(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    summary = describe_evidence(EVIDENCE)
    assert summary == ("gates failed (coverage) · criteria 1/2 met · independent tests: no signal · "
                       "honesty 1.00 (2 discrepancies)")
    view = task_view(root, TASK)
    assert view.evidence is not None and view.evidence[0] == 1 and view.evidence[2] == summary
    assert view.to_dict()["coach_evidence"]["summary"] == summary
    shown = cli(root, "show", TASK)
    assert f"coach evidence (turn 1): {summary}" in shown.stdout, shown.stderr
    answered = turn_reports(root, TASK, 1).to_dict()
    assert answered["coach_evidence"] == EVIDENCE and answered["coach_evidence_summary"] == summary
    report = build_task_report(root, TASK, generated_at="-")
    assert report.turns[0].evidence == summary
    assert "Coach evidence (GuardKit)" in render_report(report)


def test_a_task_without_evidence_shows_none(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    (root / ".guardkit" / "autobuild-private" / TASK / "coach_evidence_turn_1.json").unlink()
    assert task_view(root, TASK).evidence is None
    assert "coach evidence" not in cli(root, "show", TASK).stdout
    assert build_task_report(root, TASK, generated_at="-").turns[0].evidence is None


def test_an_unreadable_evidence_file_is_named_not_fatal(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    (root / ".guardkit" / "autobuild-private" / TASK / "coach_evidence_turn_1.json").write_text("{not json")
    view = task_view(root, TASK)
    assert view.evidence is not None and view.evidence[2].startswith("unreadable: ")
    report = build_task_report(root, TASK, generated_at="-")
    assert any("coach_evidence_turn_1.json could not be read" in note for note in report.notes)
