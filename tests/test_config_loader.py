"""load_config: built-in fallbacks, the authoritative gates file, overrides, and malformed files."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from guardkit_state.config import (
    BUILTIN_GATE_PROFILES,
    BUILTIN_ROLE_CONSTRAINTS,
    check_gates,
    gates_verdict,
    load_config,
)
from guardkit_state.errors import ConfigError, InputError

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = REPO_ROOT / "examples" / "entity-overrides.yaml.example"

GATES_YAML = """\
# project gates: stricter features, no docs profile
profiles:
  feature:
    - complexity_range: [1, 5]
      arch_review_required: true
      arch_review_threshold: 55
      coverage_required: true
      coverage_threshold: 0.75
      tests_required: true
    - complexity_range: [6, 10]
      arch_review_required: true
      arch_review_threshold: 75
      coverage_required: true
      coverage_threshold: 0.90
      tests_required: true
  scaffolding:
    - complexity_range: [1, 10]
      arch_review_required: false
      coverage_required: false
      tests_required: false
aliases:
  infrastructure: scaffolding
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / ".guardkit" / "config").mkdir(parents=True)
    return root


def write(repo: Path, name: str, text: str) -> Path:
    path = repo / ".guardkit" / "config" / name
    path.write_text(text, encoding="utf-8")
    return path


def test_no_config_files_gives_builtin_values(tmp_path: Path) -> None:
    config = load_config(tmp_path)  # not even a .guardkit directory
    assert config.gate_profiles == BUILTIN_GATE_PROFILES
    assert config.roles == BUILTIN_ROLE_CONSTRAINTS
    assert config.gates_source == "built-in"
    assert config.files == {"quality_gates": None, "entity_overrides": None}
    profile = config.gate_profile("feature", 5)
    assert (profile.arch_review_threshold, profile.coverage_threshold) == (60, 0.80)
    assert set(profile.sources.values()) == {"built-in"}
    assert sorted(config.modes) == ["autobuild", "direct", "task_work"]


def test_empty_config_directory_gives_builtin_values(repo: Path) -> None:
    assert load_config(repo).gate_profiles == BUILTIN_GATE_PROFILES


def test_shipped_example_overrides_merge_from_a_real_file(repo: Path) -> None:
    shutil.copy(EXAMPLE, repo / ".guardkit" / "config" / "entity-overrides.yaml")
    config = load_config(repo)
    source = "override: .guardkit/config/entity-overrides.yaml"
    assert config.files["entity_overrides"] == ".guardkit/config/entity-overrides.yaml"

    profile = config.gate_profile("feature", 5)
    assert profile.coverage_threshold == 0.85
    assert profile.source_of("coverage_threshold") == source
    assert profile.source_of("arch_review_threshold") == "built-in"
    assert profile.arch_review_threshold == 60
    # only the matching profile changed
    assert config.gate_profile("feature", 2) == BUILTIN_GATE_PROFILES[1]
    assert config.gate_profile("feature", 9) == BUILTIN_GATE_PROFILES[3]

    coach = config.roles["coach"]
    builtin_coach = BUILTIN_ROLE_CONSTRAINTS["coach"]
    assert coach.texts("must_do") == builtin_coach.texts("must_do") + [
        "Verify OPG registration compliance", "Check Moneyhub API contract alignment"]
    assert coach.texts("escalate_when") == builtin_coach.texts("escalate_when") + [
        "Financial data handling inconsistency detected"]
    assert coach.texts("must_not_do") == builtin_coach.texts("must_not_do")
    assert [r.source for r in coach.must_do] == ["built-in"] * 4 + [source] * 2
    assert config.roles["player"] == BUILTIN_ROLE_CONSTRAINTS["player"]


def test_quality_gates_file_is_authoritative(repo: Path) -> None:
    write(repo, "quality-gates.yaml", GATES_YAML)
    config = load_config(repo)
    rel = ".guardkit/config/quality-gates.yaml"
    assert config.gates_source == rel
    assert [(p.task_type, p.complexity_range) for p in config.gate_profiles] == [
        ("feature", (1, 5)), ("feature", (6, 10)), ("scaffolding", (1, 10))]
    profile = config.gate_profile("feature", 5)
    assert (profile.arch_review_threshold, profile.coverage_threshold) == (55, 0.75)
    assert set(profile.sources.values()) == {rel}
    assert profile.tests_must_pass is True  # defaults to tests_required
    assert config.gate_profile("infrastructure", 3).task_type == "scaffolding"
    # built-in 'testing' is gone: the file is authoritative, so the type falls back with a warning
    lookup = config.lookup_gate_profile("testing", 5)
    assert lookup.task_type == "feature" and lookup.warnings


def test_overrides_apply_on_top_of_the_gates_file(repo: Path) -> None:
    write(repo, "quality-gates.yaml", GATES_YAML)
    write(repo, "entity-overrides.yaml", "quality_gate_configs:\n  feature:\n    overrides:\n"
          "      - arch_review_threshold: 80\n")
    config = load_config(repo)
    low, high = config.gate_profile("feature", 2), config.gate_profile("feature", 8)
    assert (low.arch_review_threshold, high.arch_review_threshold) == (80, 80)  # no range = every profile
    assert low.source_of("arch_review_threshold") == "override: .guardkit/config/entity-overrides.yaml"
    assert low.source_of("coverage_threshold") == ".guardkit/config/quality-gates.yaml"


def test_editing_quality_gates_changes_the_verdict_for_the_same_results(repo: Path) -> None:
    measurements = {"tests_run": True, "tests_passed": 40, "tests_failed": 0, "coverage": 78.0, "arch_score": 65}
    before = check_gates(load_config(repo).gate_profile("feature", 5), **measurements)
    assert gates_verdict(before) is False  # built-in 80% coverage
    write(repo, "quality-gates.yaml", GATES_YAML)  # feature 1-5: 75% coverage, arch 55
    after = check_gates(load_config(repo).gate_profile("feature", 5), **measurements)
    assert gates_verdict(after) is True
    coverage = next(r for r in after if r.gate == "coverage")
    assert (coverage.threshold, coverage.source) == (75.0, ".guardkit/config/quality-gates.yaml")
    write(repo, "quality-gates.yaml", GATES_YAML.replace("arch_review_threshold: 55", "arch_review_threshold: 70"))
    again = check_gates(load_config(repo).gate_profile("feature", 5), **measurements)
    assert [r.passed for r in again] == [True, True, False]


def test_commented_out_override_file_is_no_override(repo: Path) -> None:
    write(repo, "entity-overrides.yaml", "# nothing yet\n")
    config = load_config(repo)
    assert config.roles == BUILTIN_ROLE_CONSTRAINTS
    assert config.files["entity_overrides"] == ".guardkit/config/entity-overrides.yaml"


def test_repeated_addition_is_not_added_twice(repo: Path) -> None:
    write(repo, "entity-overrides.yaml",
          "role_constraints:\n  player:\n    must_do_additions: [Write tests, Run the linter, Run the linter]\n")
    player = load_config(repo).roles["player"]
    assert player.texts("must_do") == BUILTIN_ROLE_CONSTRAINTS["player"].texts("must_do") + ["Run the linter"]


# --- malformed files: ConfigError naming the file and the key --------------------------------------

MALFORMED = [
    ("quality-gates.yaml", "profiles:\n  feature: [unclosed\n", None, 3),
    ("quality-gates.yaml", "profiles:\n  feature: []\nprofiles: {}\n", None, 3),
    ("quality-gates.yaml", "", "$.profiles", None),
    ("quality-gates.yaml", "- just\n- a list\n", "$", 1),
    ("quality-gates.yaml", GATES_YAML.replace("coverage_threshold: 0.90", "coverage_threshold: 90"),
     "$.profiles.feature[1].coverage_threshold", 14),
    ("quality-gates.yaml", GATES_YAML.replace("      arch_review_threshold: 55\n", ""),
     "$.profiles.feature[0].arch_review_threshold", 4),
    ("quality-gates.yaml", GATES_YAML.replace("[6, 10]", "[5, 10]"), "$.profiles.feature[1].complexity_range", 10),
    ("quality-gates.yaml", GATES_YAML.replace("[6, 10]", "[7, 10]"), "$.profiles.feature[1].complexity_range", 10),
    ("quality-gates.yaml", GATES_YAML.replace("[6, 10]", "[6, 9]"), "$.profiles.feature", 3),
    ("quality-gates.yaml", GATES_YAML.replace("[6, 10]", "[10, 6]"), "$.profiles.feature[1].complexity_range", 10),
    ("quality-gates.yaml", GATES_YAML.replace("  feature:", "  feat:"), "$.profiles", 2),
    ("quality-gates.yaml", GATES_YAML.replace("infrastructure: scaffolding", "infrastructure: ops"),
     "$.aliases.infrastructure", 22),
    ("quality-gates.yaml", "schema_version: 9\n" + GATES_YAML, "$.schema_version", 1),
    ("quality-gates.yaml", "profiles: !!python/object/apply:os.system [ls]\n", None, 1),
    ("entity-overrides.yaml", "role_constraints:\n  coach:\n    must_do: [Replace everything]\n",
     "$.role_constraints.coach.must_do", 3),
    ("entity-overrides.yaml", "role_constraints:\n  reviewer:\n    must_do_additions: [x]\n",
     "$.role_constraints.reviewer", 2),
    ("entity-overrides.yaml", "quality_gate_configs:\n  feature:\n    overrides:\n"
     "      - complexity_range: [4, 7]\n        coverage_threshold: 0.9\n",
     "$.quality_gate_configs.feature.overrides[0].complexity_range", 4),
    ("entity-overrides.yaml", "quality_gate_configs:\n  chores:\n    overrides:\n      - coverage_threshold: 0.9\n",
     "$.quality_gate_configs.chores", 2),
    ("entity-overrides.yaml", "quality_gate_configs:\n  feature:\n    overrides:\n"
     "      - complexity_range: [4, 6]\n        coverage_threshold: 85\n",
     "$.quality_gate_configs.feature.overrides[0].coverage_threshold", 5),
    ("entity-overrides.yaml", "role_constraints:\n  coach:\n    must_do_additions: Verify things\n",
     "$.role_constraints.coach.must_do_additions", 3),
]


@pytest.mark.parametrize(("name", "text", "pointer", "line"), MALFORMED)
def test_malformed_config_raises_config_error_naming_file_and_key(
    repo: Path, name: str, text: str, pointer: str | None, line: int | None
) -> None:
    path = write(repo, name, text)
    with pytest.raises(ConfigError) as info:
        load_config(repo)
    error = info.value
    assert isinstance(error, InputError)
    assert error.path == path
    assert error.pointer == pointer
    assert error.line == line
    assert str(path) in str(error) and "\n" not in str(error)
    if pointer and pointer != "$":
        assert pointer in str(error)


def test_replacing_a_role_list_is_refused_with_a_hint(repo: Path) -> None:
    write(repo, "entity-overrides.yaml", "role_constraints:\n  coach:\n    must_do: [Replace everything]\n")
    with pytest.raises(ConfigError) as info:
        load_config(repo)
    assert info.value.message == "unknown key 'must_do'"
    assert info.value.expected == "'must_do_additions' (role constraint lists can only be extended)"


def test_invalid_utf8_is_a_config_error(repo: Path) -> None:
    path = repo / ".guardkit" / "config" / "quality-gates.yaml"
    path.write_bytes(b"profiles:\n  feature: \xff\n")
    with pytest.raises(ConfigError) as info:
        load_config(repo)
    assert (info.value.path, info.value.line) == (path, 2)


def test_config_symlink_leaving_the_repo_is_refused(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.yaml"
    outside.write_text(GATES_YAML)
    os.symlink(outside, repo / ".guardkit" / "config" / "quality-gates.yaml")
    with pytest.raises(ConfigError, match="outside the repository"):
        load_config(repo)


def test_unreadable_config_is_a_config_error(repo: Path) -> None:
    (repo / ".guardkit" / "config" / "entity-overrides.yaml").mkdir()  # a directory where a file should be
    with pytest.raises(ConfigError) as info:
        load_config(repo)
    assert info.value.path == repo / ".guardkit" / "config" / "entity-overrides.yaml"


def test_packaged_default_gates_file_equals_the_builtin_table(repo: Path) -> None:
    import guardkit_state.config as config_package

    shipped = Path(config_package.__file__).with_name("quality-gates.default.yaml")
    shutil.copy(shipped, repo / ".guardkit" / "config" / "quality-gates.yaml")
    config = load_config(repo)
    assert config.gates_source == ".guardkit/config/quality-gates.yaml"
    assert [p.values() for p in config.gate_profiles] == [p.values() for p in BUILTIN_GATE_PROFILES]
