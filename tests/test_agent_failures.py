"""Whose failure a turn is, when failing again is pointless, a Coach that writes, a gate that overrules."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from guardkit_state.loop.agent_turn import failure_kind

from .guardkit_fixtures import LABELLED_BODY, cli, cli_json, make_repo, task_text

TASK = "TASK-GK-079"
REL = f"tasks/in_progress/{TASK}-fails.md"

PLAYER = """\
import json, os, sys
from pathlib import Path
if sys.argv[1:] == ["auth"]:
    sys.stderr.write("Error: Invalid API key · Please run /login\\n")
    sys.exit(1)
if sys.argv[1:] != ["idle"]:
    Path("work.txt").write_text("work\\n")
Path(os.environ["GUARDKIT_REPORT_FILE"]).write_text(json.dumps({
    "files_modified": [], "files_created": ["work.txt"], "tests_written": [], "tests_run": True,
    "tests_passed": True, "implementation_notes": "x", "concerns": [], "requirements_addressed": [],
    "requirements_remaining": []}))
"""

COACH = """\
import json, os, sys
from pathlib import Path
if sys.argv[1] == "writes":
    Path("work.txt").write_text("the coach's own version\\n")
if sys.argv[1] == "edits-records":  # the Player's recorded report, inside .guardkit/
    player = Path(os.environ["GUARDKIT_PLAYER_REPORT_FILE"])
    player.write_text(player.read_text().replace('"tests_passed": true', '"tests_passed": false'))
if sys.argv[1] == "commits":  # leaves the status as clean as it found it
    import subprocess
    Path("coach.txt").write_text("the coach's own file\\n")
    subprocess.run(["git", "add", "coach.txt"], check=True)
    subprocess.run(["git", "-c", "user.name=c", "-c", "user.email=c@e", "commit", "-qm", "coach"], check=True)
ids = [c["id"] for c in json.loads(Path(os.environ["GUARDKIT_CRITERIA_FILE"]).read_text())["criteria"]]
verdict = "rejected" if sys.argv[1] == "approves-rejecting" else "verified"
Path(os.environ["GUARDKIT_REPORT_FILE"]).write_text(json.dumps({
    "decision": "approve", "issues": [], "rationale": "all good",
    "criteria_verification": [{"criterion_id": c, "result": verdict, "notes": ""} for c in ids],
    "validation_results": {"tests_passed_count": 5, "tests_failed_count": 0,
                           "coverage": float(sys.argv[2]) if len(sys.argv) > 2 else 95.0}}))
"""


def _build(tmp_path: Path, player_arg: str, *coach_args: str) -> tuple[Path, str]:
    root = make_repo(tmp_path / "repo", {REL: task_text(TASK, LABELLED_BODY)})
    (tmp_path / "p.py").write_text(PLAYER)
    (tmp_path / "c.py").write_text(COACH)
    run = cli(root, "feature-build", TASK, "--player", shlex.join([sys.executable, str(tmp_path / "p.py"), player_arg]),
              "--coach", shlex.join([sys.executable, str(tmp_path / "c.py"), *coach_args]), "--max-turns", "5")
    assert "Traceback" not in run.stderr
    return root, run.stderr + run.stdout


def test_the_same_player_failure_twice_stops_the_loop_naming_the_player(tmp_path: Path) -> None:
    root, said = _build(tmp_path, "auth", "reads")
    assert "player: error — Player exited with status 1: Error: Invalid API key · Please run /login" in said
    assert "coach: error" not in said
    assert f"{TASK}: agent_failed — the Player failed twice in a row (authentication)" in said
    shown = cli_json(root, "show", TASK)
    assert len(shown["turns"]) == 2  # not five turns burnt


def test_a_coach_that_changes_the_worktree_makes_the_turn_its_error(tmp_path: Path) -> None:
    root, said = _build(tmp_path, "works", "writes")
    assert "coach: error — Coach changed the worktree, which it must only read: work.txt" in said
    store = root / ".guardkit" / "worktrees" / TASK / ".guardkit" / "autobuild" / TASK
    state = json.loads((store / "turn_state_turn_1.json").read_text())
    assert (state["coach_decision"], state["failed_role"]) == ("error", "coach")


def test_a_coach_that_commits_its_change_makes_the_turn_its_error(tmp_path: Path) -> None:
    root, said = _build(tmp_path, "idle", "commits")
    assert "coach: error — Coach moved the branch, which it must only read: HEAD was " in said
    assert f"{TASK}: approved" not in said
    store = root / ".guardkit" / "worktrees" / TASK / ".guardkit" / "autobuild" / TASK
    state = json.loads((store / "turn_state_turn_1.json").read_text())
    assert (state["coach_decision"], state["failed_role"]) == ("error", "coach")


def test_a_coach_that_edits_the_loops_records_makes_the_turn_its_error(tmp_path: Path) -> None:
    _, said = _build(tmp_path, "works", "edits-records")
    assert (f"coach: error — Coach changed the loop's records, which it must only read: {TASK}/player_turn_1.json"
            in said)
    assert f"{TASK}: approved" not in said


def test_a_gate_that_overturns_an_approval_says_so_in_one_line(tmp_path: Path) -> None:
    _, said = _build(tmp_path, "works", "reads", "12.5")
    lines = [ln for ln in said.splitlines() if "gate:" in ln]
    assert lines, said  # one line a turn, each saying the approval did not stand
    assert all("gate: approval overturned by quality gate coverage (12.5 vs threshold" in ln for ln in lines)
    assert "coach: feedback" in said and "feedback: quality gate" not in said


@pytest.mark.parametrize(("reason", "kind"), [
    ("Player exited with status 127: claude: command not found", "missing binary"),
    ("Coach reported an error (exit 0): Invalid API key · Please run /login", "authentication"),
    ("Player reported an error: You've hit your usage limit", "quota"),
    ("Player reported an error: 429 Resource exhausted", "quota"),
    ("Player exited with status 1: test failed", None),
    ("Coach timed out after 30s (--turn-timeout)", None),
    ("Player could not be started: Argument list too long", "cannot start"),
    # Each CLI's own words (the fakes print them) ...
    ("Player (codex) reported an error (exit 1): unexpected status 401 Unauthorized: Missing bearer", "authentication"),
    ("Coach (aider) exited with status 1: litellm.AuthenticationError: Incorrect API key provided", "authentication"),
    ("Coach (aider) exited with status 1: litellm.RateLimitError: You exceeded your current quota", "quota"),
    ("Player (gemini) reported an error (ApiError) (exit 1): Quota exceeded for quota metric", "quota"),
    ("Player: error: 429 Too Many Requests: Rate limit reached for requests", "quota"),
    # ... but not a task's own tests about limits and logins, which the next turn can fix.
    ("Player exited with status 1: FAILED tests/test_rate_limiter.py::test_burst - assert 429 == 200", None),
    ("Player exited with status 1: FAILED tests/test_login.py::test_unauthorized_gets_401 - assert 200 == 401",
     None),
    ("Player exited with status 1: FAILED test_quota.py::test_authentication_flow", None),
    ("Player could not be started: embedded null byte", "cannot start"),
])
def test_failure_kinds(reason: str, kind: str | None) -> None:
    assert failure_kind(reason) == kind


@pytest.mark.parametrize(("path", "cache"), [
    ("src/__pycache__/mod.cpython-311.pyc", True), (".pytest_cache/v/cache/nodeids", True), (".coverage", True),
    (".coverage.host.123", True), ("pkg/.mypy_cache/x.json", True), ("src/mod.py", False),
    ("cache_utils.py", False), ("docs/coverage.md", False),
])
def test_what_tests_leave_behind_is_not_a_coach_change(path: str, cache: bool) -> None:
    from guardkit_state.loop.worktree_watch import is_cache

    assert is_cache(path) is cache


COACH_RUNS_TESTS = """\
import json, os, subprocess, sys
from pathlib import Path
Path("__pycache__").mkdir(exist_ok=True)
Path("__pycache__/work.cpython-311.pyc").write_bytes(b"compiled")
Path(".coverage").write_text("data")
ids = [c["id"] for c in json.loads(Path(os.environ["GUARDKIT_CRITERIA_FILE"]).read_text())["criteria"]]
Path(os.environ["GUARDKIT_REPORT_FILE"]).write_text(json.dumps({
    "decision": "approve", "issues": [], "rationale": "tests pass",
    "criteria_verification": [{"criterion_id": c, "result": "verified", "notes": ""} for c in ids],
    "validation_results": {"tests_passed_count": 5, "tests_failed_count": 0, "coverage": 95.0}}))
"""


def test_a_coach_that_runs_the_tests_is_still_read_only(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: task_text(TASK, LABELLED_BODY)})
    (tmp_path / "p.py").write_text(PLAYER)
    (tmp_path / "c.py").write_text(COACH_RUNS_TESTS)
    run = cli(root, "feature-build", TASK, "--player", shlex.join([sys.executable, str(tmp_path / "p.py"), "works"]),
              "--coach", shlex.join([sys.executable, str(tmp_path / "c.py")]), "--max-turns", "2")
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize(("actual", "shown"), [(None, "not reported"), (61.0, "61.0"), (0, "0")])
def test_an_overturned_approval_says_what_was_measured(actual: float | None, shown: str) -> None:
    from guardkit_state.model import CoachDecision, GateResult
    from guardkit_state.turns.turn_state import GATE_OVERRIDE_KEY, apply_gate_verdict

    coach = CoachDecision(task_id=TASK, turn=1, decision="approve")
    out = apply_gate_verdict(coach, [GateResult("coverage", False, actual, 80.0)])
    assert out is not None and out.decision == "feedback"
    assert out.extra[GATE_OVERRIDE_KEY] == f"approval overturned by quality gate coverage ({shown} vs threshold 80.0)"
    assert out.feedback == f"quality gate coverage failed: {shown} vs threshold 80.0 (built-in)"


def test_a_coach_approving_while_rejecting_every_criterion_is_no_approval(tmp_path: Path) -> None:
    root, said = _build(tmp_path, "works", "approves-rejecting")
    assert f"{TASK}: approved" not in said
    assert "coach: feedback — 0/5 criteria verified · 5 rejected" in said
    assert "feedback: the Coach answered approve while rejecting AC-1, AC-2, AC-3, AC-ANTISTUB-1, AC-005" in said
    shown = cli_json(root, "show", TASK)
    assert shown["outcome"] != "approved" and all(t["decision"] == "feedback" for t in shown["turns"])
