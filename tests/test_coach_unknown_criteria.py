"""A Coach cannot inflate the criteria counts with ids the task does not have.

The task loop (``feature-build TASK``) refuses a Coach report with verdicts on made-up ids, as
``record`` does: the turn is the Coach's error naming the ids the task has. Ids already recorded
(GuardKit's own files) are never counted by ``show``, ``status`` and ``report``.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from guardkit_state.model import CoachDecision, Criterion, CriterionVerification
from guardkit_state.turns.ledger import CriteriaLedger

from .guardkit_fixtures import LABELLED_BODY, cli, cli_json, feedback_turns, make_repo, task_text

TASK = "TASK-GK-077"
REL = f"tasks/in_progress/{TASK}-inflated.md"
OWN = ["AC-1", "AC-2", "AC-3", "AC-ANTISTUB-1", "AC-005"]
#: Near misses of the task's labels (the positional form, another case, a suffix) and inventions.
MADE_UP = ["AC-001", "ac-1", "AC-2.1", *(f"AC-FAKE-{n}" for n in range(20))]

PLAYER = """\
import json, os
from pathlib import Path
Path("work.txt").write_text("done\\n")
Path(os.environ["GUARDKIT_REPORT_FILE"]).write_text(json.dumps({
    "task_id": os.environ["GUARDKIT_TASK_ID"], "turn": int(os.environ["GUARDKIT_TURN"]),
    "files_modified": [], "files_created": ["work.txt"], "tests_written": [], "tests_run": True,
    "tests_passed": True, "implementation_notes": "did it", "concerns": [], "requirements_addressed": [],
    "requirements_remaining": [], "summary": "did it"}))
"""

COACH = """\
import json, os, sys
from pathlib import Path
verdicts = json.loads(sys.argv[1])
Path(os.environ["GUARDKIT_REPORT_FILE"]).write_text(json.dumps({
    "task_id": os.environ["GUARDKIT_TASK_ID"], "turn": int(os.environ["GUARDKIT_TURN"]),
    "decision": "feedback", "feedback": "AC-2 is still open",
    "issues": [{"severity": "must_fix", "category": "correctness", "description": "AC-2 is still open"}],
    "criteria_verification": [{"criterion_id": cid, "result": result, "notes": "judged"}
                              for cid, result in verdicts],
    "validation_results": {"tests_passed_count": 1, "tests_failed_count": 0, "coverage": 90.0},
    "rationale": "AC-2 is still open"}))
"""


def _agents(tmp_path: Path, verdicts: list[tuple[str, str]]) -> tuple[str, str]:
    player, coach = tmp_path / "player.py", tmp_path / "coach.py"
    player.write_text(PLAYER)
    coach.write_text(COACH)
    return (shlex.join([sys.executable, str(player)]),
            shlex.join([sys.executable, str(coach), json.dumps(verdicts)]))


def test_made_up_ids_from_a_loop_coach_are_refused_as_record_refuses_them(tmp_path: Path) -> None:
    """`feature-build` applies `record`'s rule: a verdict on an id the task lacks is refused, not dropped."""
    root = make_repo(tmp_path / "repo", {REL: task_text(TASK, LABELLED_BODY)})
    verdicts = [("AC-1", "verified"), ("AC-ANTISTUB-1", "verified"), *((cid, "verified") for cid in MADE_UP)]
    player, coach = _agents(tmp_path, verdicts)
    run = cli(root, "feature-build", TASK, "--player", player, "--coach", coach, "--max-turns", "1")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    # The turn is the Coach's error, naming the id and the task's own ids, on one line.
    [line] = [ln for ln in run.stderr.splitlines() if "coach: error" in ln]
    assert "names criterion AC-001, which TASK-GK-077 does not have" in line
    assert "AC-1, AC-2, AC-3, AC-ANTISTUB-1, AC-005" in line

    shown = cli_json(root, "show", TASK)
    assert [c["id"] for c in shown["criteria"]] == OWN
    assert shown["criteria_counts"] == {"verified": 0, "implied_by_approval": 0, "rejected": 0, "pending": 5,
                                        "total": 5}
    store = root / ".guardkit" / "worktrees" / TASK / ".guardkit" / "autobuild" / TASK
    assert not (store / "coach_turn_1.json").exists()  # refused: nothing of the report was written
    state = json.loads((store / "turn_state_turn_1.json").read_text())
    assert state["coach_decision"] == "error" and state["failed_role"] == "coach"


def test_ids_already_recorded_for_criteria_the_task_lacks_are_not_counted(tmp_path: Path) -> None:
    # A frontmatter criteria map (GuardKit's own shape) holding ids the task does not have.
    criteria = {"AC-1": "verified", "AC-FAKE-1": "verified", "AC-FAKE-2": "verified", "AC-001": "verified"}
    text = task_text(TASK, LABELLED_BODY, turns=feedback_turns(1), criteria=criteria)
    root = make_repo(tmp_path / "repo", {REL: text})
    shown = cli_json(root, "show", TASK)
    assert shown["criteria_counts"]["total"] == 5
    assert shown["criteria_counts"]["verified"] == 1
    row = next(r for r in cli_json(root, "status", "--no-cache") if r["task_id"] == TASK)
    assert (row["verified"], row["total"]) == (1, 5)


def test_the_task_labels_in_every_form_still_count() -> None:
    criteria = [Criterion(cid, f"text of {cid}") for cid in OWN]
    coach = CoachDecision(TASK, 1, "feedback", criteria_verification=[
        CriterionVerification(cid, "verified") for cid in [*OWN, "AC-FAKE-1"]])
    ledger = CriteriaLedger.start(criteria)
    assert ledger.ignored_ids(coach) == ["AC-FAKE-1"]
    after = ledger.apply_coach(1, coach)
    assert after.statuses() == dict.fromkeys(OWN, "verified")
    assert after.counts().total == 5 and after.verified_count == 5


def test_a_task_without_criteria_still_takes_any_id() -> None:
    coach = CoachDecision(TASK, 1, "feedback", criteria_verification=[CriterionVerification("AC-001", "verified")])
    ledger = CriteriaLedger.start([])
    assert ledger.ignored_ids(coach) == []
    assert ledger.apply_coach(1, coach).statuses() == {"AC-001": "verified"}
