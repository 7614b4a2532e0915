"""Role constraints: the built-in defaults, additions that extend and never replace."""

from __future__ import annotations

import pytest

from guardkit_state.config import BUILTIN_ROLE_CONSTRAINTS, RoleConstraints, Rule, default_config
from guardkit_state.config.roles import apply_role_additions

SEED_PLAYER = {
    "must_do": ["Implement code", "Follow implementation plans", "Write tests", "Report blockers with evidence"],
    "must_not_do": ["Validate quality gates", "Make architectural decisions without ADR", "Modify quality profiles",
                    "Ask for human guidance mid-feature"],
    "ask_before": ["Changing architecture from plan", "Modifying external deps", "Skipping acceptance criteria"],
    "escalate_when": [],
}
SEED_COACH = {
    "must_do": ["Validate against acceptance criteria", "Run quality gates", "Provide actionable feedback",
                "Track AC status"],
    "must_not_do": ["Write implementation code", "Modify implementation directly", "Make implementation decisions",
                    "Change AC mid-task"],
    "ask_before": [],
    "escalate_when": ["Test failures persist after 3 attempts", "Architecture violations detected",
                      "AC cannot be met as written"],
}


@pytest.mark.parametrize(("role", "expected"), [("player", SEED_PLAYER), ("coach", SEED_COACH)])
def test_defaults_without_overrides_equal_seed(role: str, expected: dict[str, list[str]]) -> None:
    constraints = default_config().roles[role]
    assert {kind: constraints.texts(kind) for kind in expected} == expected
    assert constraints.entity_id == f"ROLE-{role}"
    assert all(rule.source == "built-in" for kind in expected for rule in getattr(constraints, kind))


def test_additions_extend_not_replace() -> None:
    merged = apply_role_additions(
        BUILTIN_ROLE_CONSTRAINTS,
        {"coach": {"must_do_additions": ["Verify OPG registration compliance"],
                   "ask_before_additions": ["Approving with a failing flaky test"]}},
        "override: f.yaml",
    )
    coach = merged["coach"]
    assert coach.texts("must_do") == SEED_COACH["must_do"] + ["Verify OPG registration compliance"]
    assert coach.ask_before == (Rule("Approving with a failing flaky test", "override: f.yaml"),)
    assert coach.texts("must_not_do") == SEED_COACH["must_not_do"]
    assert merged["player"] is BUILTIN_ROLE_CONSTRAINTS["player"]
    # the built-in table itself is untouched
    assert BUILTIN_ROLE_CONSTRAINTS["coach"].texts("must_do") == SEED_COACH["must_do"]


def test_texts_refuse_an_unknown_list_name() -> None:
    empty = RoleConstraints("coach")
    with pytest.raises(KeyError):
        empty.texts("should_do")


def test_to_dict_lists_every_rule_with_its_source() -> None:
    data = BUILTIN_ROLE_CONSTRAINTS["player"].extended("escalate_when", ["Disk full"], "override: o").to_dict()
    assert data["role"] == "player" and data["id"] == "ROLE-player"
    assert data["escalate_when"] == [{"text": "Disk full", "source": "override: o"}]
    assert data["must_do"][0] == {"text": "Implement code", "source": "built-in"}
