"""Feature plans: strict reading into typed views, finding plan files, the schema, ``validate``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guardkit_state.errors import (
    DuplicateKeyError,
    InvalidTaskIdError,
    ParseError,
    SchemaError,
    TaskNotFoundError,
    UnsafePathError,
)
from guardkit_state.plans.plan import (
    FeatureNotFoundError,
    find_plan,
    find_plans,
    load_plan,
    parse_plan,
    plan_file,
)
from guardkit_state.plans.plan_validation import validate_plan_file
from guardkit_state.plans.schema import PLAN_KIND, schema_problems
from guardkit_state.store import schemas

from .conftest import REPO_ROOT

PLAN = """\
# a comment GuardKit never writes, kept by every write
id: FEAT-T1
name: Test feature
created: 2026-07-01
status: in_progress
tasks:
- id: TASK-A
  name: first
  file_path: tasks/backlog/f/TASK-A-first.md
  dependencies: []
  status: completed
  result:
    total_turns: 2
    final_decision: approved
    error: null
  turns_completed: 2
  custom_key: {kept: true}
- id: TASK-B
  file_path: tasks/backlog/f/TASK-B.md
  dependencies:
  - TASK-A
  status: pending
  result: passed
orchestration:
  parallel_groups:
  - - TASK-A
  - - TASK-B
  recommended_parallel: 2
smoke_gates:
  after_wave: all
  command: |
    set -e
    pytest -q
execution:
  current_wave: 1
  completed_waves: [1]
  tasks_completed: 1
  tasks_failed: 0
  total_turns: 2
  worktree_path: null
  last_updated: '2026-07-01T10:00:00'
"""


def write(tmp_path: Path, text: str, name: str = "FEAT-T1.yaml") -> Path:
    path = tmp_path / ".guardkit" / "features" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- the typed views


def test_plan_reads_guardkit_keys_through_typed_views(tmp_path: Path) -> None:
    plan = load_plan(write(tmp_path, PLAN))
    assert plan.feature_id == "FEAT-T1" and plan.name == "Test feature" and plan.status == "in_progress"
    assert plan.data["created"] == "2026-07-01"  # a date stays the string it was written as
    assert plan.task_ids == ["TASK-A", "TASK-B"]
    first, second = plan.tasks
    assert (first.index, first.line, second.line) == (0, 7, 18)
    assert first.file_path == "tasks/backlog/f/TASK-A-first.md" and first.dependencies == []
    assert first.status == "completed" and first.turns_completed == 2
    assert first.final_decision == "approved" and first.error is None
    assert first.raw["custom_key"] == {"kept": True}  # unknown keys are kept as read
    assert second.dependencies == ["TASK-A"] and second.final_decision == "passed"  # a legacy word result
    assert second.turns_completed is None and second.name is None
    assert plan.parallel_groups == [["TASK-A"], ["TASK-B"]] and plan.recommended_parallel == 2
    assert plan.execution is not None
    assert plan.execution.completed_waves == [1] and plan.execution.current_wave == 1
    assert plan.execution.total_turns == 2 and plan.execution.worktree_path is None
    assert plan.execution.last_updated == "2026-07-01T10:00:00"
    assert plan.data["smoke_gates"]["command"] == "set -e\npytest -q\n"
    assert plan.task("TASK-B") is second and plan.get("TASK-C") is None


def test_unknown_task_names_the_plan_and_its_tasks(tmp_path: Path) -> None:
    plan = load_plan(write(tmp_path, PLAN))
    with pytest.raises(TaskNotFoundError, match="FEAT-T1 has no task TASK-C") as info:
        plan.task("TASK-C")
    assert "TASK-A, TASK-B" in (info.value.expected or "")


def test_plan_without_execution_or_orchestration_reads_empty_views() -> None:
    plan = parse_plan("id: FEAT-X\ntasks:\n- id: TASK-1\n")
    assert plan.execution is None and plan.parallel_groups is None and plan.recommended_parallel is None
    assert plan.tasks[0].dependencies == [] and plan.path is None


# --------------------------------------------------------------------------- bad input


def test_duplicate_key_is_refused_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, PLAN.replace("  status: pending\n", "  status: pending\n  status: completed\n"))
    with pytest.raises(DuplicateKeyError) as info:
        load_plan(path)
    assert info.value.path == path and info.value.line == 23


def test_invalid_yaml_is_a_parse_error_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "id: FEAT-T1\ntasks:\n- id: [unclosed\n")
    with pytest.raises(ParseError) as info:
        load_plan(path)
    assert info.value.path == path and info.value.line is not None


@pytest.mark.parametrize(("text", "pointer", "line"), [
    ("id: FEAT-X\ntasks: {}\n", "$.tasks", 2),
    ("id: FEAT-X\ntasks:\n- id: TASK-1\n- id: 7\n", "$.tasks[1].id", 4),
    ("id: FEAT-X\ntasks:\n- name: no id\n", "$.tasks[0].id", 3),
    ("id: FEAT-X\ntasks:\n- id: T-1\n  dependencies: T-0\n", "$.tasks[0].dependencies", 4),
    ("id: FEAT-X\ntasks: []\norchestration:\n  parallel_groups: [T-1]\n", "$.orchestration.parallel_groups[0]", 4),
    ("id: FEAT-X\ntasks: []\nexecution:\n  tasks_completed: -1\n", "$.execution.tasks_completed", 4),
    ("id: FEAT-X\ntasks: []\nexecution:\n  total_turns: '3'\n", "$.execution.total_turns", 4),
    ("- just a list\n", "$", None),
])
def test_wrong_types_are_schema_errors_with_pointer_and_line(text: str, pointer: str, line: int | None) -> None:
    with pytest.raises(SchemaError) as info:
        parse_plan(text, path="FEAT-X.yaml")
    assert info.value.pointer == pointer
    assert info.value.line == line
    assert str(info.value.path) == "FEAT-X.yaml"


def test_an_object_tag_is_refused() -> None:
    with pytest.raises(ParseError, match="tag refused"):
        parse_plan("id: !!python/object:os.system x\ntasks: []\n")


# --------------------------------------------------------------------------- finding plans


def test_find_plans_lists_feat_yaml_files_sorted(tmp_path: Path) -> None:
    write(tmp_path, PLAN, "FEAT-B.yaml")
    write(tmp_path, PLAN, "FEAT-A.yaml")
    write(tmp_path, PLAN, "notes.yaml")
    assert [p.name for p in find_plans(tmp_path)] == ["FEAT-A.yaml", "FEAT-B.yaml"]
    assert find_plans(tmp_path / "elsewhere") == []


def test_find_plan_by_id_or_path(tmp_path: Path) -> None:
    path = write(tmp_path, PLAN)
    assert find_plan(tmp_path, "FEAT-T1") == path
    assert find_plan(tmp_path, ".guardkit/features/FEAT-T1.yaml") == path
    assert find_plan(tmp_path, str(path)) == path
    assert plan_file(tmp_path, "FEAT-T1") == path


def test_find_plan_refuses_unknown_ids_bad_ids_and_escaping_paths(tmp_path: Path) -> None:
    write(tmp_path, PLAN)
    with pytest.raises(FeatureNotFoundError, match="no feature plan FEAT-T10") as info:
        find_plan(tmp_path, "FEAT-T10")  # an exact id, never a prefix
    assert "FEAT-T1" in (info.value.expected or "")
    with pytest.raises(InvalidTaskIdError):
        find_plan(tmp_path, "FEAT X")
    outside = tmp_path.parent / "FEAT-OUT.yaml"
    outside.write_text(PLAN, encoding="utf-8")
    with pytest.raises(UnsafePathError):
        find_plan(tmp_path, "../FEAT-OUT.yaml")


# --------------------------------------------------------------------------- schema and validate


def test_schema_is_a_registered_draft_2020_12_kind() -> None:
    schema = json.loads((REPO_ROOT / "schemas" / "feature_plan.schema.json").read_text(encoding="utf-8"))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert '"format":' not in json.dumps(schema)
    assert PLAN_KIND in schemas.available_kinds()
    schemas.validator(PLAN_KIND)  # checks the schema itself


def test_schema_problems_agree_between_fast_and_full_validators() -> None:
    good = parse_plan(PLAN).data
    assert schemas.is_valid_fast(PLAN_KIND, good)
    assert schema_problems(good) == []
    bad = {**good, "execution": {"current_wave": -1}}
    assert not schemas.is_valid_fast(PLAN_KIND, bad)
    assert [p.pointer for p in schema_problems(bad)] == ["$.execution.current_wave"]


def test_validate_plan_file_reports_every_schema_problem_with_lines(tmp_path: Path) -> None:
    text = PLAN.replace("  turns_completed: 2\n", "  turns_completed: -2\n").replace(
        "  total_turns: 2\n  worktree_path", "  total_turns: two\n  worktree_path")
    problems = validate_plan_file(write(tmp_path, text))
    assert [(p.pointer, p.line, p.severity) for p in problems] == [
        ("$.execution.total_turns", 39, "error"), ("$.tasks[0].turns_completed", 16, "error")]


def test_validate_plan_file_reports_wave_problems_and_id_mismatch(tmp_path: Path) -> None:
    text = PLAN.replace("  - - TASK-A\n  - - TASK-B\n", "  - - TASK-A\n    - TASK-B\n")
    problems = validate_plan_file(write(tmp_path, text.replace("id: FEAT-T1", "id: FEAT-OTHER"), "FEAT-T1.yaml"))
    assert [p.severity for p in problems] == ["error", "warning"]
    assert "contradicts the dependencies" in problems[0].message and problems[0].line == 27
    assert problems[1].pointer == "$.id" and "FEAT-OTHER" in problems[1].message


def test_validate_plan_file_never_raises_for_unreadable_files(tmp_path: Path) -> None:
    bad = write(tmp_path, "id: FEAT-T1\nid: again\ntasks: []\n")
    [problem] = validate_plan_file(bad)
    assert problem.line == 2 and "duplicate key" in problem.message
    undecodable = write(tmp_path, "", "FEAT-U.yaml")
    undecodable.write_bytes(b"id: \xff\n")
    assert validate_plan_file(undecodable)[0].message.startswith("invalid UTF-8")
    assert validate_plan_file(write(tmp_path / "ok", PLAN)) == []
