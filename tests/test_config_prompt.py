"""The Coach prompt (GuardKit's format) and the Player's role section."""

from __future__ import annotations

import shutil
from pathlib import Path

from guardkit_state.config import (
    ResolvedConfig,
    default_config,
    load_config,
    render_coach_prompt,
    render_player_role_section,
)
from guardkit_state.config.roles import RoleConstraints
from guardkit_state.model import Criterion, TurnState, turn_state_id

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "entity-overrides.yaml.example"
CRITERIA = [Criterion("AC-001", "User can log in"), Criterion("AC-002", "User can log out"),
            Criterion("AC-003", "Sessions time out after 30 minutes")]


def previous_turn(**changes: object) -> TurnState:
    values: dict[str, object] = {
        "id": turn_state_id("FEAT-AUTH", "TASK-AUTH-001", 2), "feature_id": "FEAT-AUTH",
        "task_id": "TASK-AUTH-001", "turn_number": 2, "mode": "continuing_work",
        "player_summary": "Player implemented authentication middleware.",
        "player_decision": "implemented", "coach_decision": "feedback",
        "coach_feedback": "missing session timeout handling",
        "acceptance_criteria_status": {"AC-001": "verified", "AC-002": "pending", "AC-003": "pending"},
    }
    values.update(changes)
    return TurnState(**values)  # type: ignore[arg-type]


def prompt(config: ResolvedConfig, *, previous: TurnState | None = None, turn: int = 3,
           task_type: str | None = "feature", complexity: object = 5) -> str:
    return render_coach_prompt(config, task_id="TASK-AUTH-001", title="Add login", task_type=task_type,
                               complexity=complexity, criteria=CRITERIA, previous_turn=previous, turn=turn)


SEED_ROLE = (
    "## Your Role: Coach\n"
    "You MUST: Validate against acceptance criteria | Run quality gates | Provide actionable feedback | "
    "Track AC status\n"
    "You MUST NOT: Write implementation code | Modify implementation directly | Make implementation decisions | "
    "Change AC mid-task\n"
    "ESCALATE when: Test failures persist after 3 attempts | Architecture violations detected | "
    "AC cannot be met as written"
)

SEED_GATES = """\
## Quality Gates for This Task
Task type: feature | Complexity: 5
Architecture review: required (threshold: 60)
Coverage: required (threshold: 80%)
Tests: required, must pass
DO NOT adjust these thresholds during this session."""

SEED_PREVIOUS = """\
## Previous Turn Context (Turn 2 of 3)
Player implemented authentication middleware.
AC status: {AC-001: verified, AC-002: pending, AC-003: pending}
Blockers: None
Coach decision: REVISE — missing session timeout handling"""


def test_coach_prompt_has_seed_sections_in_order() -> None:
    text = prompt(default_config(), previous=previous_turn())
    sections = text.rstrip("\n").split("\n\n")
    assert sections[0] == "# Coach validation: TASK-AUTH-001 — Add login (turn 3)"
    assert sections[1] == SEED_ROLE
    assert sections[2] == SEED_GATES
    assert sections[3] == ("## Acceptance Criteria\n- AC-001: User can log in [verified]\n"
                           "- AC-002: User can log out [pending]\n"
                           "- AC-003: Sessions time out after 30 minutes [pending]")
    assert sections[4] == SEED_PREVIOUS
    assert len(sections) == 5


def test_turn_one_has_no_previous_turn_section() -> None:
    text = prompt(default_config(), turn=1)
    assert "Previous Turn Context" not in text
    assert "- AC-001: User can log in\n" in text  # no status before anything was judged


def test_coach_prompt_works_with_no_constraints_configured() -> None:
    bare = ResolvedConfig(repo_root=None, roles={})
    text = prompt(bare, previous=previous_turn())
    assert "Your Role" not in text
    assert SEED_GATES in text and SEED_PREVIOUS in text
    empty_coach = ResolvedConfig(repo_root=None, roles={"coach": RoleConstraints("coach")})
    assert "Your Role" not in prompt(empty_coach)
    assert render_player_role_section(bare) == ""


def test_coach_prompt_carries_project_overrides(tmp_path: Path) -> None:
    (tmp_path / ".guardkit" / "config").mkdir(parents=True)
    shutil.copy(EXAMPLE, tmp_path / ".guardkit" / "config" / "entity-overrides.yaml")
    text = prompt(load_config(tmp_path))
    assert "| Track AC status | Verify OPG registration compliance | Check Moneyhub API contract alignment\n" in text
    assert "| AC cannot be met as written | Financial data handling inconsistency detected\n" in text
    assert "Coverage: required (threshold: 85%)" in text


def test_gate_section_for_other_profiles_and_fallbacks() -> None:
    docs = prompt(default_config(), task_type="documentation")
    assert ("Architecture review: not required\nCoverage: not required\nTests: not required\n"
            "DO NOT adjust these thresholds during this session.") in docs
    bug = prompt(default_config(), task_type="bugfix", complexity=8)
    assert "Task type: feature (task_type: bugfix) | Complexity: 8" in bug
    assert "Coverage: required (threshold: 85%)" in bug
    odd = prompt(default_config(), task_type="chores", complexity=0)
    assert "Task type: feature (task_type: chores) | Complexity: 5" in odd
    assert "Note: unknown task_type 'chores'" in odd and "Note: complexity 0" in odd


def test_previous_turn_with_blockers_gates_and_long_feedback() -> None:
    previous = previous_turn(
        coach_decision="rejected", blockers_found=["DB not reachable", "Missing secret"],
        coach_feedback="line one\nline two " + "x" * 600, what_to_try_next="Mock the DB",
        gate_results=[{"gate": "tests", "passed": True, "required": True},
                      {"gate": "coverage", "passed": False, "required": True},
                      {"gate": "arch_review", "passed": None, "required": True},
                      {"gate": "docs", "passed": True, "required": False}],
    )
    text = prompt(default_config(), previous=previous)
    assert "Blockers: DB not reachable; Missing secret" in text
    decision = next(line for line in text.splitlines() if line.startswith("Coach decision:"))
    assert decision.startswith("Coach decision: REJECT — line one line two xxx") and decision.endswith("…")
    assert len(decision) < 450
    assert "Quality gates: tests passed, coverage FAILED, arch_review unknown" in text
    assert "Suggested focus: Mock the DB" in text


def test_player_role_section() -> None:
    assert render_player_role_section(default_config()) == (
        "## Your Role: Player\n"
        "You MUST: Implement code | Follow implementation plans | Write tests | Report blockers with evidence\n"
        "You MUST NOT: Validate quality gates | Make architectural decisions without ADR | Modify quality profiles"
        " | Ask for human guidance mid-feature\n"
        "ASK BEFORE: Changing architecture from plan | Modifying external deps | Skipping acceptance criteria\n"
    )
