"""Quality gate profiles: the seeded table, lookup by type and complexity, and the gate check."""

from __future__ import annotations

import logging

import pytest

from guardkit_state.config import (
    BUILTIN_GATE_PROFILES,
    check_gates,
    default_config,
    gates_verdict,
    normalise_complexity,
    select_profile,
)
from guardkit_state.config.gates import with_override
from guardkit_state.model import GateResult

# The built-in table (docs/index.md), verbatim: type, complexity, arch review (threshold or None), coverage, tests.
SEED_TABLE = [
    ("scaffolding", (1, 10), None, None, False),
    ("feature", (1, 3), 50, 0.70, True),
    ("feature", (4, 6), 60, 0.80, True),
    ("feature", (7, 10), 70, 0.85, True),
    ("testing", (1, 10), None, 0.90, True),
    ("documentation", (1, 10), None, None, False),
]


def _as_row(profile):  # type: ignore[no-untyped-def]
    return (
        profile.task_type,
        profile.complexity_range,
        profile.arch_review_threshold if profile.arch_review_required else None,
        profile.coverage_threshold if profile.coverage_required else None,
        profile.tests_required,
    )


def test_builtin_profiles_equal_seed_table() -> None:
    assert [_as_row(p) for p in BUILTIN_GATE_PROFILES] == SEED_TABLE
    assert all(p.tests_must_pass == p.tests_required for p in BUILTIN_GATE_PROFILES)
    assert all(p.source_of(name) == "built-in" for p in BUILTIN_GATE_PROFILES for name in p.sources)
    assert [p.entity_id for p in BUILTIN_GATE_PROFILES][:3] == [
        "QG-scaffolding-1-10", "QG-feature-1-3", "QG-feature-4-6",
    ]


def test_default_config_uses_builtin_profiles() -> None:
    assert default_config().gate_profiles == BUILTIN_GATE_PROFILES


@pytest.mark.parametrize(
    ("task_type", "complexity", "expected_range", "arch", "coverage"),
    [
        ("feature", 5, (4, 6), 60, 0.80),
        ("feature", 1, (1, 3), 50, 0.70),
        ("feature", 3, (1, 3), 50, 0.70),
        ("feature", 4, (4, 6), 60, 0.80),
        ("feature", 6, (4, 6), 60, 0.80),
        ("feature", 7, (7, 10), 70, 0.85),
        ("feature", 10, (7, 10), 70, 0.85),
        ("testing", 8, (1, 10), 0, 0.90),
        ("scaffolding", 2, (1, 10), 0, 0.0),
    ],
)
def test_gate_profile_matches_complexity_range(
    task_type: str, complexity: int, expected_range: tuple[int, int], arch: int, coverage: float
) -> None:
    profile = default_config().gate_profile(task_type, complexity)
    assert profile.task_type == task_type
    assert profile.complexity_range == expected_range
    assert profile.arch_review_threshold == arch
    assert profile.coverage_threshold == coverage


@pytest.mark.parametrize("alias", ["fix", "bugfix", "bug", "implementation", "enhancement", "Feature", " FEATURE "])
def test_task_type_aliases_use_feature_profile_without_warning(alias: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="guardkit_state"):
        lookup = default_config().lookup_gate_profile(alias, 5)
    assert lookup.task_type == "feature"
    assert lookup.profile.complexity_range == (4, 6)
    assert lookup.warnings == ()
    assert caplog.records == []


def test_unknown_task_type_falls_back_to_feature_with_logged_and_returned_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="guardkit_state"):
        lookup = default_config().lookup_gate_profile("operator_handoff", 8)
    assert lookup.task_type == "feature"
    assert lookup.requested_task_type == "operator_handoff"
    assert lookup.profile.complexity_range == (7, 10)
    assert len(lookup.warnings) == 1 and "unknown task_type 'operator_handoff'" in lookup.warnings[0]
    assert [r.getMessage() for r in caplog.records] == list(lookup.warnings)


@pytest.mark.parametrize(
    ("raw", "value", "warned"),
    [(5, 5, False), (1, 1, False), (10, 10, False), (0, 5, True), (None, 5, True), ("5/10", 5, False),
     (11, 10, True), (-3, 5, True), ("high", 5, True), (True, 5, True), (7.0, 7, False)],
)
def test_normalise_complexity(raw: object, value: int, warned: bool) -> None:
    got, warning = normalise_complexity(raw)
    assert got == value
    assert (warning is not None) == warned


def test_missing_complexity_uses_five_and_says_so() -> None:
    lookup = default_config().lookup_gate_profile("feature", None)
    assert lookup.complexity == 5
    assert lookup.profile.complexity_range == (4, 6)
    assert any("using 5" in w for w in lookup.warnings)


def test_select_profile_without_matching_profile_raises_lookup_error() -> None:
    only_docs = [p for p in BUILTIN_GATE_PROFILES if p.task_type == "documentation"]
    with pytest.raises(LookupError):
        select_profile(only_docs, "feature", 5)


def _by_gate(results: list[GateResult]) -> dict[str, GateResult]:
    assert [r.gate for r in results] == ["tests", "coverage", "arch_review"]
    return {r.gate: r for r in results}


def test_check_gates_all_pass_for_feature_5() -> None:
    profile = default_config().gate_profile("feature", 5)
    results = _by_gate(check_gates(profile, tests_run=True, tests_passed=12, tests_failed=0,
                                   coverage=80.0, arch_score=60))
    assert {g: r.passed for g, r in results.items()} == {"tests": True, "coverage": True, "arch_review": True}
    assert results["coverage"].threshold == 80.0
    assert results["arch_review"].threshold == 60
    assert results["tests"].threshold == 0
    assert all(r.source == "built-in" and r.required for r in results.values())
    assert gates_verdict(results.values()) is True


def test_check_gates_reports_failures_with_actual_and_threshold() -> None:
    profile = default_config().gate_profile("feature", 8)
    results = _by_gate(check_gates(profile, tests_run=True, tests_passed=10, tests_failed=2,
                                   coverage=84.9, arch_score=69.5))
    assert results["tests"].passed is False and results["tests"].actual == 2
    assert results["coverage"].passed is False
    assert (results["coverage"].actual, results["coverage"].threshold) == (84.9, 85.0)
    assert results["arch_review"].passed is False and results["arch_review"].threshold == 70
    assert gates_verdict(results.values()) is False


def test_missing_measurements_are_unknown_not_passed() -> None:
    profile = default_config().gate_profile("feature", 5)
    results = _by_gate(check_gates(profile))
    assert {g: r.passed for g, r in results.items()} == {"tests": None, "coverage": None, "arch_review": None}
    assert gates_verdict(results.values()) is None
    partial = check_gates(profile, tests_run=True, tests_passed=3, tests_failed=0, coverage=90.0)
    assert gates_verdict(partial) is None  # arch score still unknown


def test_tests_not_run_or_zero_tests_fail_when_required() -> None:
    profile = default_config().gate_profile("testing", 5)
    assert _by_gate(check_gates(profile, tests_run=False))["tests"].passed is False
    assert _by_gate(check_gates(profile, tests_passed=0, tests_failed=0))["tests"].passed is False
    assert _by_gate(check_gates(profile, tests_run=True, tests_passed=True))["tests"].passed is True
    assert _by_gate(check_gates(profile, tests_run=True, tests_passed=False))["tests"].passed is False


def test_gates_not_required_cannot_fail_and_are_marked() -> None:
    profile = default_config().gate_profile("documentation", 5)
    results = check_gates(profile, tests_run=False, coverage=0.0, arch_score=0)
    assert [(r.passed, r.required, r.threshold) for r in results] == [(True, False, None)] * 3
    assert gates_verdict(results) is True
    testing = _by_gate(check_gates(default_config().gate_profile("testing", 5), tests_run=True,
                                   tests_passed=4, tests_failed=0, coverage=91.0))
    assert testing["arch_review"].required is False
    assert testing["coverage"].passed is True and testing["coverage"].threshold == 90.0


def test_tests_required_but_not_must_pass_only_needs_a_run() -> None:
    profile = with_override(default_config().gate_profile("feature", 5), {"tests_must_pass": False}, "override: x")
    results = _by_gate(check_gates(profile, tests_run=True, tests_passed=3, tests_failed=2))
    assert results["tests"].passed is True
    assert results["tests"].threshold is None
    assert results["tests"].source == "override: x"


def test_gate_result_source_follows_the_threshold_field() -> None:
    profile = with_override(default_config().gate_profile("feature", 5), {"coverage_threshold": 0.9}, "override: f")
    results = _by_gate(check_gates(profile, coverage=85.0, arch_score=90, tests_run=True, tests_failed=0,
                                   tests_passed=1))
    assert (results["coverage"].passed, results["coverage"].source) == (False, "override: f")
    assert results["arch_review"].source == "built-in"
    assert results["coverage"].to_dict() == {"gate": "coverage", "passed": False, "actual": 85.0,
                                             "threshold": 90.0, "source": "override: f", "required": True}


@pytest.mark.parametrize(
    "kwargs", [{"coverage": 150.0}, {"coverage": -1.0}, {"arch_score": 101}, {"tests_failed": -1}]
)
def test_check_gates_refuses_impossible_measurements(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        check_gates(default_config().gate_profile("feature", 5), **kwargs)  # type: ignore[arg-type]
