"""The example project and its scripted Player/Coach (examples/), driven by hand like the loop does."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from guardkit_state.yamltext.strict_yaml import parse_yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = REPO_ROOT / "examples"
AGENTS = EXAMPLES / "agents"
TASK_ID = "TASK-DEMO-001"
TASK_REL = Path("tasks/backlog/TASK-DEMO-001-parse-durations.md")

CONTEXT_AFTER_TURN_1 = """\
## Previous Turn Summary (Turn 1)
**What was attempted**: Implemented durations.py (parse and format)
**Player decision**: implemented
**Coach decision**: feedback

**Coach feedback**: AC-003 not met (acceptance tests fail):
- AC-003: 5 of 5 tests failed: test_empty_string (AssertionError: ValueError not raised)

**Acceptance Criteria Status**:
  ✓ AC-001: `parse_duration` converts a single-unit duration: verified
  ✓ AC-002: `parse_duration` adds up combined units: verified
  ✗ AC-003: `parse_duration` rejects malformed input: rejected
  ✓ AC-004: `format_duration` renders the shortest form: verified
"""


def run_git(cwd: Path, *args: str) -> str:
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"git {' '.join(args)} failed: {result.stderr}"
    return result.stdout


def _load_agent_module(name: str) -> ModuleType:
    """Import an agent script as a module (its directory must be importable for demo_common)."""
    if str(AGENTS) not in sys.path:
        sys.path.insert(0, str(AGENTS))
    spec = importlib.util.spec_from_file_location(f"example_{name}", AGENTS / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(EXAMPLES / "project", root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _env(project: Path, turn: int, role: str, *, context: str | None = None, **extra: str) -> dict[str, str]:
    state = project.parent / "state"
    state.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARDKIT_", "DEMO_PLAYER_"))}
    env.update({
        "GUARDKIT_TASK_ID": TASK_ID,
        "GUARDKIT_TURN": str(turn),
        "GUARDKIT_MODE": "fresh_start" if turn == 1 else "continuing_work",
        "GUARDKIT_TASK_FILE": str(project / TASK_REL),
        "GUARDKIT_CONTEXT_FILE": str(state / f"context_turn_{turn}.md"),
        "GUARDKIT_REPORT_FILE": str(state / f"{role}_turn_{turn}.json"),
    })
    if context is not None:
        Path(env["GUARDKIT_CONTEXT_FILE"]).write_text(context, encoding="utf-8")
    if role == "coach":
        env["GUARDKIT_PLAYER_REPORT_FILE"] = str(state / f"player_turn_{turn}.json")
        prompt = state / f"coach_prompt_turn_{turn}.md"
        prompt.write_text("# Coach prompt\n", encoding="utf-8")
        env["GUARDKIT_PROMPT_FILE"] = str(prompt)
    env.update(extra)
    return env


def _run_agent(
    project: Path, role: str, env: dict[str, str], *, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(AGENTS / f"{role}.py")], cwd=project, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def _turn(
    project: Path, turn: int, *, context: str | None = None, **player_env: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run the Player then the Coach for ``turn``; return both reports."""
    env = _env(project, turn, "player", context=context, **player_env)
    player = _run_agent(project, "player", env)
    assert player.returncode == 0, player.stderr
    coach = _run_agent(project, "coach", _env(project, turn, "coach"))
    assert coach.returncode == 0, coach.stderr
    state = project.parent / "state"
    return (json.loads((state / f"player_turn_{turn}.json").read_text()),
            json.loads((state / f"coach_turn_{turn}.json").read_text()))


def _results(coach: dict[str, Any]) -> dict[str, str]:
    return {c["criterion_id"]: c["result"] for c in coach["criteria_verification"]}


def test_task_file_frontmatter_is_a_valid_demo_task() -> None:
    text = (EXAMPLES / "project" / TASK_REL).read_text(encoding="utf-8")
    _, front, _ = text.split("---\n", 2)
    data = parse_yaml(front, path=str(TASK_REL)).data
    assert data["id"] == TASK_ID
    assert (data["status"], data["task_type"], data["complexity"], data["feature_id"]) == \
        ("backlog", "feature", 4, "FEAT-DEMO")


def test_every_criterion_maps_to_tests_that_exist(project: Path) -> None:
    common = _load_agent_module("demo_common")
    coach = _load_agent_module("coach")
    criteria = common.read_criteria(project / TASK_REL)
    assert [c[0] for c in criteria] == ["AC-001", "AC-002", "AC-003", "AC-004"]
    (project / "durations.py").write_text(_load_agent_module("player").DRAFT, encoding="utf-8")
    run = common.run_unittests(project)
    for criterion_id, _ in criteria:
        assert run.matching(coach.CHECKS[criterion_id].tests), f"{criterion_id} has no collected tests"


def test_turn_1_misses_ac_003_and_coach_rejects_only_it(project: Path) -> None:
    player, coach = _turn(project, 1)

    assert player["files_created"] == ["durations.py"]
    promises = {p["criterion_id"]: p["status"] for p in player["completion_promises"]}
    assert promises == {"AC-001": "complete", "AC-002": "complete", "AC-003": "incomplete", "AC-004": "complete"}
    assert player["requirements_remaining"] == ["AC-003"]
    assert player["tests_failed_count"] == 5

    assert coach["decision"] == "feedback"
    assert _results(coach) == {"AC-001": "verified", "AC-002": "verified", "AC-003": "rejected", "AC-004": "verified"}
    assert coach["feedback"].splitlines()[0] == "AC-003 not met (acceptance tests fail):"
    assert "ValueError not raised" in coach["feedback"]
    assert coach["validation_results"]["tests_failed_count"] == 5
    assert [i["category"] for i in coach["issues"]] == ["acceptance_criteria"]
    assert coach["prompt_received"] is True


def test_turn_2_reads_the_context_and_fixes_exactly_the_rejected_criterion(project: Path) -> None:
    _turn(project, 1)
    draft = (project / "durations.py").read_text()

    player, coach = _turn(project, 2, context=CONTEXT_AFTER_TURN_1)

    assert player["files_modified"] == ["durations.py"] and player["files_created"] == []
    assert "AC-003" in player["summary"] and "AC-003" in player["implementation_notes"]
    assert all(p["status"] == "complete" for p in player["completion_promises"])
    fixed = (project / "durations.py").read_text()
    assert "_WHOLE.fullmatch" in fixed and "_WHOLE" not in draft
    # Only parse_duration changed: format_duration is byte-identical to the draft's.
    assert fixed.split("def format_duration", 1)[1] == draft.split("def format_duration", 1)[1]

    assert coach["decision"] == "approve"
    assert set(_results(coach).values()) == {"verified"}
    assert coach["validation_results"] == {"tests_passed_count": 15, "tests_failed_count": 0,
                                           "tests_run_count": 15,
                                           "command": "python -m unittest discover -s tests -t ."}
    assert "feedback" not in coach


def test_turn_2_without_context_does_not_fix_anything(project: Path) -> None:
    _turn(project, 1)
    player, coach = _turn(project, 2)
    assert player["files_modified"] == []
    assert coach["decision"] == "feedback" and _results(coach)["AC-003"] == "rejected"


def test_never_fix_mode_ignores_the_feedback(project: Path) -> None:
    _turn(project, 1)
    player, coach = _turn(project, 2, context=CONTEXT_AFTER_TURN_1, DEMO_PLAYER_MODE="never-fix")
    assert player["files_modified"] == []
    assert any("never-fix" in c for c in player["concerns"])
    assert coach["decision"] == "feedback"


def test_recovered_turn_with_fix_already_applied_is_idempotent(project: Path) -> None:
    _turn(project, 1)
    _turn(project, 2, context=CONTEXT_AFTER_TURN_1)
    before = (project / "durations.py").read_text()
    player, coach = _turn(project, 3, context=CONTEXT_AFTER_TURN_1, GUARDKIT_MODE="recovering_state")
    assert (project / "durations.py").read_text() == before
    assert player["files_modified"] == [] and "already in place" in player["implementation_notes"]
    assert coach["decision"] == "approve"


@pytest.mark.parametrize("context, expected", [
    (CONTEXT_AFTER_TURN_1, ["AC-003"]),
    ("## Previous Turn Summary (Turn 4)\n**Coach decision**: REJECTED\n\n**Coach feedback**: x\n\n"
     "**Acceptance Criteria Status**:\n  ✓ AC-001: a: verified\n  ○ AC-002: b: pending\n\n"
     "Last Turn Feedback (MUST ADDRESS):\nAC-004 regressed: format_duration(0) returned ''\n", ["AC-004"]),
    ("## Turn 1: fresh start\nNo previous turn: implement the task from its acceptance criteria.\n", []),
    ("", []),
])
def test_parse_context_finds_rejected_criteria(context: str, expected: list[str]) -> None:
    ctx = _load_agent_module("player").parse_context(context)
    assert ctx.rejected == expected


def test_parse_context_prefers_the_must_address_block() -> None:
    text = ("## Previous Turn Summary (Turn 2)\n**Coach feedback**: short\n\n"
            "Last Turn Feedback (MUST ADDRESS):\nAC-003 still failing.\nRaise ValueError.\n")
    ctx = _load_agent_module("player").parse_context(text)
    assert ctx.previous_turn == 2
    assert ctx.feedback == "AC-003 still failing.\nRaise ValueError."


def test_coach_rejects_everything_when_the_module_does_not_import(project: Path) -> None:
    (project / "durations.py").write_text("def parse_duration(:\n", encoding="utf-8")
    state = project.parent / "state"
    state.mkdir()
    (state / "player_turn_1.json").write_text(json.dumps({
        "task_id": TASK_ID, "turn": 1,
        "completion_promises": [{"criterion_id": "AC-001", "status": "complete"}]}))
    result = _run_agent(project, "coach", _env(project, 1, "coach"))
    assert result.returncode == 0, result.stderr
    coach = json.loads((state / "coach_turn_1.json").read_text())
    assert coach["decision"] == "feedback"
    assert set(_results(coach).values()) == {"rejected"}
    assert "SyntaxError" in coach["criteria_verification"][0]["notes"]
    assert {"severity": "should_fix", "category": "completion_promise",
            "description": "the Player promised AC-001 complete, but its tests fail"} in coach["issues"]


def test_coach_notes_an_invalid_player_report(project: Path) -> None:
    _turn(project, 1)
    state = project.parent / "state"
    (state / "player_turn_1.json").write_text("not json", encoding="utf-8")
    assert _run_agent(project, "coach", _env(project, 1, "coach")).returncode == 0
    coach = json.loads((state / "coach_turn_1.json").read_text())
    assert any(i["category"] == "player_report" for i in coach["issues"])


def test_agents_exit_2_without_the_protocol_environment(project: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GUARDKIT_")}
    for role in ("player", "coach"):
        result = _run_agent(project, role, env)
        assert result.returncode == 2
        assert "GUARDKIT_" in result.stderr


def test_crash_mode_exits_3_without_a_report(project: Path) -> None:
    env = _env(project, 1, "player", DEMO_PLAYER_MODE="crash")
    assert _run_agent(project, "player", env).returncode == 3
    assert not Path(env["GUARDKIT_REPORT_FILE"]).exists()


def test_invalid_json_mode_writes_garbage(project: Path) -> None:
    env = _env(project, 1, "player", DEMO_PLAYER_MODE="invalid-json")
    assert _run_agent(project, "player", env).returncode == 0
    with pytest.raises(json.JSONDecodeError):
        json.loads(Path(env["GUARDKIT_REPORT_FILE"]).read_text())


def _wait_for(predicate: Any, proc: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + 60
    while not predicate():
        assert proc.poll() is None, f"player exited early while waiting for {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_hang_mode_never_writes_a_report(project: Path) -> None:
    env = _env(project, 1, "player", DEMO_PLAYER_MODE="hang")
    proc = subprocess.Popen([sys.executable, str(AGENTS / "player.py")], cwd=project, env=env,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        assert "simulated hang" in proc.stderr.readline()
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
    assert not Path(env["GUARDKIT_REPORT_FILE"]).exists()


def test_sleep_hook_lets_a_turn_be_interrupted_after_the_edit(project: Path) -> None:
    """What the demo does: SIGINT the Player once it has edited code, before its report exists."""
    _turn(project, 1)
    env = _env(project, 2, "player", context=CONTEXT_AFTER_TURN_1,
               DEMO_PLAYER_SLEEP="600", DEMO_PLAYER_SLEEP_TURN="2")
    proc = subprocess.Popen([sys.executable, str(AGENTS / "player.py")], cwd=project, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: "_WHOLE.fullmatch" in (project / "durations.py").read_text(), proc, "the fix")
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert "interrupted" in stderr
    assert not Path(env["GUARDKIT_REPORT_FILE"]).exists()


def test_sleep_hook_only_in_its_turn(project: Path) -> None:
    player, _ = _turn(project, 1, DEMO_PLAYER_SLEEP="600", DEMO_PLAYER_SLEEP_TURN="2")
    assert player["turn"] == 1  # returned at once: the sleep applies to turn 2 only


def test_example_project_commits_cleanly_and_ignores_bytecode(project: Path) -> None:
    run_git(project, "init", "-q", "-b", "main")
    run_git(project, "add", "-A")
    run_git(project, "commit", "-q", "-m", "initial")
    _turn(project, 1)
    status = run_git(project, "status", "--porcelain")
    assert status.strip() == "?? durations.py"


def test_agent_reports_are_valid_records(project: Path) -> None:
    """Every report the scripted agents write passes the product's own schemas."""
    from guardkit_state.store import schemas

    for turn, context in ((1, None), (2, CONTEXT_AFTER_TURN_1)):
        player, coach = _turn(project, turn, context=context)
        assert schemas.validate_with_warnings("player_turn", player).warnings == []
        assert schemas.validate_with_warnings("coach_turn", coach).warnings == []


def test_examples_show_presets_and_their_example_file_loads(tmp_path: Path) -> None:
    """No wrapper to write: the examples name presets, and the example agents.yaml is a valid one."""
    from guardkit_state.agents import load_presets

    text = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    assert "--player claude --coach codex" in text
    assert "Minimal Player" not in text and "Minimal Coach" not in text
    config = tmp_path / ".guardkit" / "config"
    config.mkdir(parents=True)
    (config / "agents.yaml").write_text((EXAMPLES / "agents.yaml.example").read_text(encoding="utf-8"))
    presets = load_presets(tmp_path)
    assert presets["mine"].fields["cost_usd"] == "usage.cost"
    assert presets["codex"].role_args["coach"][-1] == "o4-mini"


def test_recovered_turn_reports_the_uncommitted_edit_of_its_interrupted_attempt(project: Path) -> None:
    run_git(project, "init", "-q", "-b", "main")
    _turn(project, 1)
    run_git(project, "add", "-A")
    run_git(project, "commit", "-q", "-m", "turn 1")
    env = _env(project, 2, "player", context=CONTEXT_AFTER_TURN_1, DEMO_PLAYER_MODE="invalid-json")
    assert _run_agent(project, "player", env).returncode == 0  # the attempt edits, then fails to report
    player, coach = _turn(project, 2, context=CONTEXT_AFTER_TURN_1, GUARDKIT_MODE="recovering_state")
    assert player["files_modified"] == ["durations.py"]
    assert "interrupted attempt of this turn already made the fix" in player["implementation_notes"]
    assert coach["decision"] == "approve"


def _registered_commands() -> set[str]:
    from guardkit_state.cli import app

    return set(app.COMMAND_MODULES)


def test_run_demo_end_to_end(tmp_path: Path) -> None:
    """`make demo` for real: interrupted in turn 2 (exit 130), resumed, approved in turn 2."""
    missing = {"feature-build", "show", "log", "diff"} - _registered_commands()
    assert not missing, f"the demo needs these commands: {', '.join(sorted(missing))}"  # a product gap fails
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARDKIT_", "DEMO_PLAYER_"))}
    env["NO_COLOR"] = "1"
    result = subprocess.run([sys.executable, str(EXAMPLES / "run_demo.py"), "--workdir", str(tmp_path)],
                            env=env, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "exit code 130 (interrupted)" in result.stdout
    assert "exit code 0 (approved)" in result.stdout

    project = tmp_path / "durations"
    branch = f"autobuild/{TASK_ID}"
    subjects = run_git(project, "log", "--format=%s", f"main..{branch}").splitlines()
    assert subjects == [f"autobuild({TASK_ID}): turn 2 approve", f"autobuild({TASK_ID}): turn 1 feedback"]
    assert run_git(project, "show", "--name-only", "--format=", branch).split().count("durations.py") == 1
    notes = json.loads(run_git(project, "show", f"{branch}:.guardkit/autobuild/{TASK_ID}/player_turn_2.json"))
    assert "AC-003" in notes["implementation_notes"] and notes["summary"].startswith("Fixed AC-003")
    task = run_git(project, "show", f"{branch}:{TASK_REL.as_posix()}")
    assert "decision: approve" in task and "status: in_review" in task
