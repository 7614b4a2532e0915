"""What every agent is told, from turn 1: the task, its criteria by their own ids, the output contract,
and from turn 2 the previous Coach's issues and notes under MUST ADDRESS (shell-command agents here;
the presets read the same files). Real loop, real git, real subprocesses."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from .guardkit_fixtures import LABELLED_BODY, cli, make_repo, task_text

TASK = "TASK-GK-077"
REL = f"tasks/in_progress/{TASK}-briefed.md"
OWN = ["AC-1", "AC-2", "AC-3", "AC-ANTISTUB-1", "AC-005"]
ISSUES = 30

#: Keeps every file it is given, writes work and a report that promises nothing.
PLAYER = """\
import json, os, shutil, sys
from pathlib import Path
log, turn = Path(sys.argv[1]), int(os.environ["GUARDKIT_TURN"])
for name in ("PROMPT", "CRITERIA", "CONTEXT", "SCHEMA"):
    shutil.copy(os.environ[f"GUARDKIT_{name}_FILE"], log / f"player_{name.lower()}_{turn}")
Path(f"work_{turn}.txt").write_text(f"the work of turn {turn}\\n")
Path(os.environ["GUARDKIT_REPORT_FILE"]).write_text(json.dumps({
    "files_modified": [], "files_created": [], "tests_written": [], "tests_run": True, "tests_passed": True,
    "implementation_notes": f"turn {turn}", "concerns": [], "requirements_addressed": [],
    "requirements_remaining": []}))
"""

#: Turn 1: feedback with many issues and a note on AC-2; turn 2: approves every criterion.
COACH = """\
import json, os, shutil, sys
from pathlib import Path
log, turn, issues = Path(sys.argv[1]), int(os.environ["GUARDKIT_TURN"]), int(sys.argv[2])
ids = [c["id"] for c in json.loads(Path(os.environ["GUARDKIT_CRITERIA_FILE"]).read_text())["criteria"]]
for name in ("PROMPT", "DIFF", "SCHEMA"):
    shutil.copy(os.environ[f"GUARDKIT_{name}_FILE"], log / f"coach_{name.lower()}_{turn}")
if turn == 1:
    report = {"decision": "feedback", "rationale": "see the issues",
              "issues": [{"severity": "must_fix" if n % 2 else "should_fix", "category": "correctness",
                          "description": f"problem number {n}", "suggestion": f"fix number {n}"}
                         for n in range(issues)],
              "criteria_verification": [{"criterion_id": "AC-1", "result": "verified", "notes": "fine"},
                                        {"criterion_id": "AC-2", "result": "rejected",
                                         "notes": "formatter still renders 1h 30m 0s"}]}
else:
    report = {"decision": "approve", "issues": [], "rationale": "all met",
              "criteria_verification": [{"criterion_id": c, "result": "verified", "notes": ""} for c in ids]}
report["validation_results"] = {"tests_passed_count": 3, "tests_failed_count": 0, "coverage": 90.0}
Path(os.environ["GUARDKIT_REPORT_FILE"]).write_text(json.dumps(report))
"""


def _run_loop(tmp_path: Path) -> tuple[Path, Path]:
    root = make_repo(tmp_path / "repo", {REL: task_text(TASK, LABELLED_BODY)})
    log = tmp_path / "log"
    log.mkdir()
    (tmp_path / "player.py").write_text(PLAYER)
    (tmp_path / "coach.py").write_text(COACH)
    player = shlex.join([sys.executable, str(tmp_path / "player.py"), str(log)])
    coach = shlex.join([sys.executable, str(tmp_path / "coach.py"), str(log), str(ISSUES)])
    run = cli(root, "feature-build", TASK, "--player", player, "--coach", coach, "--max-turns", "3")
    assert run.returncode == 0, run.stdout + run.stderr
    return root, log


def test_every_agent_is_briefed_from_the_task_and_told_what_the_last_coach_found(tmp_path: Path) -> None:
    root, log = _run_loop(tmp_path)

    first = (log / "player_prompt_1").read_text()
    assert f"## Task {TASK}: Fixture {TASK}" in first
    assert "Parser accepts `1h30m`" in first and "## Implementation Notes" in first  # the body itself
    for cid in OWN:
        assert f"- {cid}: " in first
    assert "## Your Role: Player" in first and "## Quality Gates for This Task" in first
    assert f'"task_id": "{TASK}"' in first and '"turn": 1' in first
    assert '"criterion_id": "AC-ANTISTUB-1"' in first
    assert f"Criterion ids are exactly: {', '.join(OWN)}." in first
    assert "MUST ADDRESS" not in first
    criteria = json.loads((log / "player_criteria_1").read_text())
    assert [c["id"] for c in criteria["criteria"]] == OWN
    schema = json.loads((log / "player_schema_1").read_text())
    assert schema["properties"]["completion_promises"]["items"]["properties"]["criterion_id"]["enum"] == OWN

    coach = (log / "coach_prompt_1").read_text()
    assert "work_1.txt" in coach and "+the work of turn 1" in coach  # the turn's diff
    assert '"result": "verified | rejected"' in coach and '"criterion_id": "AC-005"' in coach
    assert "read-only" in coach
    assert "+the work of turn 1" in (log / "coach_diff_1").read_text()
    coach_schema = json.loads((log / "coach_schema_1").read_text())
    verdict = coach_schema["properties"]["criteria_verification"]["items"]
    assert verdict["properties"]["criterion_id"]["enum"] == OWN and verdict["additionalProperties"] is False

    second = (log / "player_prompt_2").read_text()
    must = second[second.index("Last Turn Feedback (MUST ADDRESS):"):]
    assert "- [should_fix/correctness] problem number 0 — suggestion: fix number 0" in must
    assert "problem number 24" in must and "problem number 25" not in must
    # The rest is summarised, never silently cut: how many, of which kinds, and where all of them are.
    assert "… and 5 more issue(s) (3 must_fix/correctness, 2 should_fix/correctness); all 30 are in " \
           "coach_turn_1.json" in must
    assert "- AC-2: formatter still renders 1h 30m 0s" in must
    assert "AC-1: fine" not in must  # verified: nothing to address
    assert (log / "player_context_2").read_text() in second

    store = root / ".guardkit" / "worktrees" / TASK / ".guardkit" / "autobuild" / TASK
    state = json.loads((store / "turn_state_turn_1.json").read_text())
    assert len(state["coach_issues"]) == ISSUES
    assert state["coach_issues"][3] == {"description": "problem number 3", "suggestion": "fix number 3",
                                        "severity": "must_fix", "category": "correctness"}
    assert state["criteria_notes"] == {"AC-1": "fine", "AC-2": "formatter still renders 1h 30m 0s"}
    # The Coach of turn 2 is told what its predecessor asked for.
    assert "problem number 7" in (log / "coach_prompt_2").read_text()
