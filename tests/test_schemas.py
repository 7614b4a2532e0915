"""Schemas, normalisation of legacy shapes, and record validation through the public API."""

from __future__ import annotations

import copy
import enum
import json
import re
import subprocess
import sys
import zipfile
from collections import OrderedDict, defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from guardkit_state.errors import SchemaError, SchemaVersionError
from guardkit_state.model import AutobuildState, CoachDecision, PlayerReport, TurnState
from guardkit_state.store import schemas
from guardkit_state.store.jsonio import load_json, load_record
from guardkit_state.store.schemas import (
    available_kinds,
    check_record,
    format_pointer,
    normalise,
    parse_pointer,
    validate_record,
    validate_with_warnings,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
TURN_FILE = re.compile(r"^(player_turn|coach_turn|turn_state_turn)_(\d+)\.json$")
KIND_OF_STEM = {"player_turn": "player_turn", "coach_turn": "coach_turn", "turn_state_turn": "turn_state"}


def player() -> dict[str, Any]:
    return {
        "task_id": "TASK-AUTH-001",
        "turn": 1,
        "files_modified": ["src/auth/login.py"],
        "files_created": [],
        "tests_written": ["tests/test_login.py"],
        "tests_run": True,
        "tests_passed": True,
        "implementation_notes": "Implemented the login endpoint.",
        "concerns": [],
        "requirements_addressed": ["AC-001"],
        "requirements_remaining": ["AC-002"],
        "completion_promises": [
            {"criterion_id": "AC-001", "criterion_text": "Login returns JWT", "status": "complete",
             "evidence": "test_login passes", "test_file": "tests/test_login.py",
             "implementation_files": ["src/auth/login.py"]},
        ],
    }


def coach() -> dict[str, Any]:
    return {
        "task_id": "TASK-AUTH-001",
        "turn": 1,
        "decision": "feedback",
        "issues": [{"severity": "must_fix", "description": "No refresh endpoint"}],
        "criteria_verification": [
            {"criterion_id": "AC-001", "result": "verified", "notes": "ok"},
            {"criterion_id": "AC-002", "result": "rejected", "notes": "missing"},
        ],
        "validation_results": {"tests_passed": True},
        "rationale": "One criterion left.",
    }


def turn_state() -> dict[str, Any]:
    return {
        "id": "TURN-FEAT-AUTH-TASK-AUTH-001-T1",
        "feature_id": "FEAT-AUTH",
        "task_id": "TASK-AUTH-001",
        "turn_number": 1,
        "mode": "fresh_start",
        "player_summary": "Implemented the login endpoint",
        "player_decision": "implemented",
        "coach_decision": "feedback",
        "coach_feedback": "No refresh endpoint",
        "acceptance_criteria_status": {"AC-001": "verified", "AC-002": "rejected"},
        "tests_passed": 8,
        "tests_failed": 0,
        "coverage": 75.5,
        "started_at": "2026-11-21T10:00:00+00:00",
        "completed_at": "2026-11-21T10:05:00+00:00",
    }


def autobuild_state() -> dict[str, Any]:
    return {
        "current_turn": 1,
        "max_turns": 5,
        "worktree_path": ".guardkit/worktrees/TASK-AUTH-001",
        "base_branch": "main",
        "started_at": "2026-11-21T10:00:00+00:00",
        "last_updated": "2026-11-21T10:05:00+00:00",
        "criteria": {"AC-001": "verified", "AC-002": "pending"},
        "turns": [
            {"turn": 1, "mode": "fresh_start", "decision": "feedback", "feedback": "No refresh endpoint",
             "timestamp": "2026-11-21T10:05:00+00:00", "player_summary": "Implemented login",
             "player_success": True, "coach_success": True},
        ],
    }


BUILDERS = {"player_turn": player, "coach_turn": coach, "turn_state": turn_state,
            "autobuild_state": autobuild_state}
DELETE = object()


def _set(data: dict[str, Any], parts: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    target: Any = data
    for part in parts[:-1]:
        target = target[part]
    if value is DELETE:
        del target[parts[-1]]
    else:
        target[parts[-1]] = value
    return data


# --------------------------------------------------------------------------------------------------
# The schema files


def test_available_kinds_lists_every_schema_file() -> None:
    on_disk = {p.name.removesuffix(".schema.json") for p in (REPO_ROOT / "schemas").glob("*.schema.json")}
    assert set(available_kinds()) == on_disk
    assert {"player_turn", "coach_turn", "turn_state", "autobuild_state"} <= on_disk


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_schema_files_are_valid_draft_2020_12(kind: str) -> None:
    schema = json.loads((REPO_ROOT / "schemas" / f"{kind}.schema.json").read_text(encoding="utf-8"))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert '"format":' not in json.dumps(schema)  # timestamps are plain strings (see schemas.py)
    schemas.validator(kind)  # checks the schema itself


def test_validator_is_built_once_per_kind() -> None:
    assert schemas.validator("player_turn") is schemas.validator("player_turn")


def test_autobuild_state_schema_defines_turn_entry() -> None:
    schema = schemas.load_schema("autobuild_state")
    assert schema["properties"]["turns"]["items"] == {"$ref": "#/$defs/turn_entry"}
    assert schema["$defs"]["turn_entry"]["required"] == ["turn", "decision"]


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(SchemaError, match="unknown record kind 'player'") as info:
        validate_record("player", {})
    assert "player_turn" in (info.value.expected or "")


# --------------------------------------------------------------------------------------------------
# Valid records


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_validate_record_accepts_canonical_fixture(kind: str) -> None:
    data = BUILDERS[kind]()
    assert validate_record(kind, data) == data
    check_record(kind, data)


def test_unknown_extra_fields_are_kept() -> None:
    data = player() | {"sdk_turns_used": 7, "files_authored": ["x.py"]}
    data["completion_promises"][0]["confidence"] = 0.9
    out = validate_record("player_turn", data)
    assert out["sdk_turns_used"] == 7
    assert out["completion_promises"][0]["confidence"] == 0.9


# --------------------------------------------------------------------------------------------------
# Malformed records: every one refused with the JSON path of the problem


MALFORMED: list[tuple[str, tuple[str | int, ...], Any, str, str]] = [
    # kind, path, value, expected pointer, message fragment
    ("player_turn", ("turn",), 0, "$.turn", "0 is out of range (expected a number >= 1)"),
    ("player_turn", ("turn",), -1, "$.turn", "-1 is out of range"),
    ("player_turn", ("turn",), "2", "$.turn", 'expected integer, got string "2"'),
    ("player_turn", ("turn",), 1.5, "$.turn", "expected integer, got number 1.5"),
    ("player_turn", ("turn",), True, "$.turn", "expected integer, got boolean true"),
    ("player_turn", ("turn",), DELETE, "$.turn", "missing required key"),
    ("player_turn", ("task_id",), DELETE, "$.task_id", 'missing required key (expected key "task_id")'),
    ("player_turn", ("task_id",), 42, "$.task_id", "expected string, got integer 42"),
    ("player_turn", ("task_id",), "", "$.task_id", "must not be empty"),
    ("player_turn", ("tests_run",), "yes", "$.tests_run", 'expected boolean, got string "yes"'),
    ("player_turn", ("files_modified",), "src/a.py", "$.files_modified", "expected array, got string"),
    ("player_turn", ("files_modified", 0), 7, "$.files_modified[0]", "expected string, got integer 7"),
    ("player_turn", ("completion_promises", 0, "status"), "almost", "$.completion_promises[0].status",
     '"almost" is not allowed (expected one of "complete", "partial", "incomplete")'),
    ("player_turn", ("completion_promises", 0, "criterion_id"), DELETE,
     "$.completion_promises[0].criterion_id", "missing required key"),
    ("player_turn", ("completion_promises",), {"AC-001": "complete"}, "$.completion_promises",
     "expected array, got object"),
    ("player_turn", ("coverage",), 120, "$.coverage", "120 is out of range (expected a number <= 100)"),
    ("player_turn", ("schema_version",), "1", "$.schema_version", 'expected integer, got string "1"'),
    ("coach_turn", ("decision",), "maybe", "$.decision",
     '"maybe" is not allowed (expected one of "approve", "feedback", "reject")'),
    ("coach_turn", ("decision",), DELETE, "$.decision", "missing required key"),
    ("coach_turn", ("decision",), None, "$.decision", "null is not allowed"),
    ("coach_turn", ("turn",), 0, "$.turn", "out of range"),
    ("coach_turn", ("criteria_verification", 1, "result"), 3, "$.criteria_verification[1].result",
     "3 is not allowed"),
    ("coach_turn", ("criteria_verification", 0, "criterion_id"), DELETE,
     "$.criteria_verification[0].criterion_id", "missing required key"),
    ("coach_turn", ("criteria_verification", 0, "result"), DELETE, "$.criteria_verification[0].result",
     "missing required key"),
    ("coach_turn", ("issues",), "fix it", "$.issues", "expected array, got string"),
    ("coach_turn", ("issues", 0), 5, "$.issues[0]", "expected object, got integer 5"),
    ("coach_turn", ("validation_results",), [], "$.validation_results", "expected object, got array"),
    ("turn_state", ("mode",), "sprinting", "$.mode",
     '"sprinting" is not allowed (expected one of "fresh_start", "continuing_work", "recovering_state")'),
    ("turn_state", ("turn_number",), "2", "$.turn_number", "expected integer"),
    ("turn_state", ("id",), DELETE, "$.id", "missing required key"),
    ("turn_state", ("coach_decision",), "escalate", "$.coach_decision", '"escalate" is not allowed'),
    ("turn_state", ("acceptance_criteria_status", "AC-001"), "done-ish",
     '$.acceptance_criteria_status["AC-001"]', '"done-ish" is not allowed'),
    ("turn_state", ("tests_failed",), -3, "$.tests_failed", "out of range"),
    ("autobuild_state", ("current_turn",), "one", "$.current_turn", "expected integer"),
    ("autobuild_state", ("turns", 0, "decision"), "approved", "$.turns[0].decision",
     'expected one of "approve", "feedback", "reject", "error"'),
    ("autobuild_state", ("turns", 0, "turn"), 0, "$.turns[0].turn", "out of range"),
    ("autobuild_state", ("turns", 0, "turn"), DELETE, "$.turns[0].turn", "missing required key"),
    ("autobuild_state", ("turns",), {"turn": 1}, "$.turns", "expected array, got object"),
    ("autobuild_state", ("criteria", "AC-002"), "maybe", '$.criteria["AC-002"]', '"maybe" is not allowed'),
    ("autobuild_state", ("turns", 0, "player_success"), "true", "$.turns[0].player_success",
     "expected boolean or null"),
]


@pytest.mark.parametrize(
    ("kind", "parts", "value", "pointer", "fragment"),
    MALFORMED,
    ids=[f"{k}-{format_pointer(p)}-{'DELETE' if v is DELETE else repr(v)}" for k, p, v, _, _ in MALFORMED],
)
def test_validate_record_rejects_malformed_variant(
    kind: str, parts: tuple[str | int, ...], value: Any, pointer: str, fragment: str
) -> None:
    data = _set(BUILDERS[kind](), parts, value)
    with pytest.raises(SchemaError) as info:
        validate_record(kind, data, path="state/record.json")
    error = info.value
    assert (pointer, error.message) == (error.pointer, error.message)
    assert error.pointer == pointer
    assert fragment in error.message
    assert str(error).startswith(f"state/record.json: {pointer}: ")
    assert [p for p, _ in error.problems] == [pointer]


def test_schema_error_lists_every_problem_sorted_by_pointer() -> None:
    data = coach()
    data["criteria_verification"] = [{"criterion_id": f"AC-{i}", "result": 7} for i in range(12)]
    data["turn"] = "3"
    del data["decision"]
    with pytest.raises(SchemaError) as info:
        validate_record("coach_turn", data, path="coach_turn_3.json")
    pointers = [p for p, _ in info.value.problems]
    assert pointers == [f"$.criteria_verification[{i}].result" for i in range(12)] + ["$.decision", "$.turn"]
    assert info.value.pointer == "$.criteria_verification[0].result"
    assert info.value.message.endswith("(and 13 more problems)")
    assert str(info.value).startswith("coach_turn_3.json: $.criteria_verification[0].result: 7 is not allowed")
    assert info.value.task_id == "TASK-AUTH-001"
    assert info.value.turn is None  # "3" is not a turn number


def test_schema_error_carries_task_and_turn() -> None:
    data = player() | {"tests_run": None}
    with pytest.raises(SchemaError) as info:
        validate_record("player_turn", data)
    assert (info.value.task_id, info.value.turn) == ("TASK-AUTH-001", 1)
    assert info.value.to_dict()["pointer"] == "$.tests_run"


def test_non_object_record_is_refused_at_root() -> None:
    with pytest.raises(SchemaError) as info:
        validate_record("coach_turn", ["approve"])
    assert info.value.pointer == "$"
    assert info.value.message == "expected object, got array"


# --------------------------------------------------------------------------------------------------
# schema_version


def test_newer_schema_version_is_refused_before_shape_checks() -> None:
    data = {"schema_version": 2, "task_id": "TASK-AUTH-001", "turn": 1, "entirely": "new shape"}
    with pytest.raises(SchemaVersionError) as info:
        validate_record("coach_turn", data, path="coach_turn_1.json")
    assert info.value.pointer == "$.schema_version"
    assert "schema_version 2" in str(info.value)
    assert str(info.value).startswith("coach_turn_1.json: $.schema_version: ")


@pytest.mark.parametrize("version", [None, 1])
def test_current_or_absent_schema_version_is_accepted(version: int | None) -> None:
    data = coach()
    if version is not None:
        data["schema_version"] = version
    assert validate_record("coach_turn", data)["decision"] == "feedback"


# --------------------------------------------------------------------------------------------------
# Normalisation


def test_normalise_player_aliases() -> None:
    data = player()
    data["completion_promises"] = [
        {"ac_id": "AC-001", "description": "Login returns JWT", "status": "done"},
        {"criterion_id": "AC-002", "status": "Finished"},
        {"criterion_id": "AC-003", "status": "COMPLETED"},
        {"criterion_id": "AC-004", "status": "partial"},
    ]
    out = validate_record("player_turn", data)
    promises = out["completion_promises"]
    assert promises[0] == {"criterion_id": "AC-001", "criterion_text": "Login returns JWT", "status": "complete"}
    assert [p["status"] for p in promises] == ["complete", "complete", "complete", "partial"]


def test_normalise_never_mutates_input() -> None:
    data = coach()
    data["criteria_verification"][0]["result"] = "unverified"
    data["criteria_verification"][1]["ac_id"] = data["criteria_verification"][1].pop("criterion_id")
    before = copy.deepcopy(data)
    out, warnings = normalise("coach_turn", data)
    assert data == before
    assert out["criteria_verification"][0]["result"] == "rejected"
    assert out["criteria_verification"][1]["criterion_id"] == "AC-002"
    assert warnings == ['$.criteria_verification[0].result: "unverified" read as "rejected"']


@pytest.mark.parametrize("result", ["unverified", "pending", "skipped", None])
def test_unknown_criterion_result_reads_as_rejected_with_warning(result: str | None) -> None:
    data = coach()
    data["criteria_verification"][0]["result"] = result
    record = validate_with_warnings("coach_turn", data)
    assert record.data["criteria_verification"][0]["result"] == "rejected"
    assert record.warnings == [f"$.criteria_verification[0].result: {json.dumps(result)} read as \"rejected\""]


def test_validate_record_logs_normalisation_warnings(caplog: pytest.LogCaptureFixture) -> None:
    data = coach()
    data["criteria_verification"][1]["result"] = "pending"
    validate_record("coach_turn", data, path="coach_turn_1.json")
    assert 'coach_turn_1.json: $.criteria_verification[1].result: "pending" read as "rejected"' in caplog.text


def test_verified_spelling_variants_are_not_warnings() -> None:
    data = coach()
    data["criteria_verification"][0]["result"] = "Verified"
    record = validate_with_warnings("coach_turn", data)
    assert record.data["criteria_verification"][0]["result"] == "verified"
    assert record.warnings == []


def test_v4_coach_shape_is_mapped() -> None:
    v4 = {"task_id": "TASK-AUTH-001", "turn": 2, "verdict": "reject",
          "findings": ["Token refresh is missing", {"severity": "minor", "description": "naming"}]}
    out = validate_record("coach_turn", v4)
    assert out["decision"] == "reject"
    assert out["issues"] == [{"description": "Token refresh is missing"},
                             {"severity": "minor", "description": "naming"}]
    assert "verdict" not in out and "findings" not in out
    coach_record = CoachDecision.from_dict(out)
    assert coach_record.feedback_text == "- Token refresh is missing"


def test_v4_coach_approve_verdict() -> None:
    out = validate_record("coach_turn", {"task_id": "TASK-AUTH-001", "turn": 1, "verdict": "APPROVE",
                                         "findings": []})
    assert (out["decision"], out["issues"]) == ("approve", [])


def test_conflicting_alias_is_kept_with_warning() -> None:
    data = player()
    data["completion_promises"][0]["ac_id"] = "AC-009"
    record = validate_with_warnings("player_turn", data)
    assert record.data["completion_promises"][0]["criterion_id"] == "AC-001"
    assert record.warnings == ["$.completion_promises[0].ac_id: legacy key 'ac_id' ignored: "
                               "'criterion_id' is also present"]


def test_guardkit_turn_state_values_are_normalised() -> None:
    data = turn_state() | {"id": "TURN-FEAT-HARV-1", "mode": "FRESH_START", "player_decision": "feedback",
                           "coach_decision": "approve",
                           "acceptance_criteria_status": {"AC-001: Login": "completed",
                                                          "AC-002: Refresh": "in_progress",
                                                          "AC-003: Reject": "not_started",
                                                          "AC-004: Rate": "failed"}}
    out = validate_record("turn_state", data)
    assert (out["mode"], out["player_decision"], out["coach_decision"]) == ("fresh_start", "implemented", "approved")
    assert list(out["acceptance_criteria_status"].values()) == ["verified", "pending", "pending", "rejected"]


def test_turn_state_optional_fields_get_model_defaults() -> None:
    data = {k: v for k, v in turn_state().items()
            if k not in ("feature_id", "player_summary", "coach_feedback")}
    state = TurnState.from_dict(validate_record("turn_state", data))
    assert (state.feature_id, state.player_summary, state.coach_feedback) == (None, "", None)


def test_frontmatter_coach_decision_alias() -> None:
    data = autobuild_state()
    data["turns"][0]["coach_decision"] = data["turns"][0].pop("decision")
    out = validate_record("autobuild_state", data)
    assert out["turns"][0]["decision"] == "feedback"


def test_check_record_does_not_normalise() -> None:
    data = player()
    data["completion_promises"][0]["status"] = "done"
    with pytest.raises(SchemaError) as info:
        check_record("player_turn", data, path="player_turn_1.json")
    assert info.value.pointer == "$.completion_promises[0].status"
    assert validate_record("player_turn", data)["completion_promises"][0]["status"] == "complete"


# --------------------------------------------------------------------------------------------------
# Round trip through the model


ROUND_TRIP: list[tuple[str, Any]] = [("player_turn", PlayerReport.from_dict), ("coach_turn", CoachDecision.from_dict),
              ("turn_state", TurnState.from_dict), ("autobuild_state", AutobuildState.from_dict)]


@pytest.mark.parametrize(("kind", "from_dict"), ROUND_TRIP)
def test_model_round_trip_validates(kind: str, from_dict: Any) -> None:
    canonical = validate_record(kind, BUILDERS[kind]())
    written = from_dict(canonical).to_dict()
    check_record(kind, written)
    assert validate_record(kind, written) == written


# --------------------------------------------------------------------------------------------------
# JSON paths


@pytest.mark.parametrize(
    ("parts", "pointer"),
    [((), "$"), (("turns", 0, "decision"), "$.turns[0].decision"),
     (("criteria", "AC-001"), '$.criteria["AC-001"]'), (("a b", 3), '$["a b"][3]'),
     (("quote\"d",), '$["quote\\"d"]')],
)
def test_pointer_format_and_parse_round_trip(parts: tuple[str | int, ...], pointer: str) -> None:
    assert format_pointer(parts) == pointer
    assert parse_pointer(pointer) == parts


def test_parse_pointer_refuses_garbage() -> None:
    with pytest.raises(ValueError):
        parse_pointer("turns[0]")


# --------------------------------------------------------------------------------------------------
# The real GuardKit corpus


def _corpus_turn_files(corpus_dir: Path) -> list[tuple[str, Path]]:
    found = []
    for path in sorted((corpus_dir / "autobuild").rglob("*.json")):
        match = TURN_FILE.match(path.name)
        if match:
            found.append((KIND_OF_STEM[match.group(1)], path))
    return found


@pytest.mark.corpus
def test_every_corpus_turn_file_validates_after_normalisation(corpus_dir: Path) -> None:
    files = _corpus_turn_files(corpus_dir)
    assert {kind for kind, _ in files} == {"player_turn", "coach_turn", "turn_state"}
    failures = []
    for kind, path in files:
        try:
            load_record(kind, path)
        except SchemaError as exc:
            failures.append(f"{exc} {exc.problems}")
    assert failures == []
    assert len(files) >= 30


@pytest.mark.corpus
def test_corpus_records_round_trip_through_the_model(corpus_dir: Path) -> None:
    builders: dict[str, Any] = dict(ROUND_TRIP)
    for kind, path in _corpus_turn_files(corpus_dir):
        written = builders[kind](load_record(kind, path)).to_dict()
        check_record(kind, written, path=path)
        raw = load_json(path)
        unknown = set(raw) - set(written)
        assert unknown == set(), f"{path}: fields lost in the round trip: {unknown}"


@pytest.mark.corpus
def test_corpus_unverified_results_warn(corpus_dir: Path) -> None:
    path = corpus_dir / "autobuild" / "TASK-HARV-002" / "coach_turn_5.json"
    raw = load_json(path)
    assert any(c.get("result") == "unverified" for c in raw["criteria_verification"])
    record = validate_with_warnings("coach_turn", raw, path=path)
    assert record.warnings and all(w.endswith('"unverified" read as "rejected"') for w in record.warnings)
    assert {c["result"] for c in record.data["criteria_verification"]} <= {"verified", "rejected"}


# --------------------------------------------------------------------------------------------------
# Packaging


_OFFLINE = ("No matching distribution", "Could not find a version", "connection", "Network is unreachable")


@pytest.mark.slow
def test_wheel_ships_the_schema_files_and_loads_them(tmp_path: Path) -> None:
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO_ROOT), "-w", str(tmp_path / "dist"), "--no-deps", "-q"],
        capture_output=True, text=True, check=False, cwd=tmp_path,
    )
    if build.returncode != 0 and any(word in build.stderr for word in _OFFLINE):
        pytest.skip(f"cannot fetch the build backend: {build.stderr.strip()[-200:]}")
    assert build.returncode == 0, build.stderr
    wheel = next((tmp_path / "dist").glob("guardkit_state-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"guardkit_state/schema_files/{p.name}" for p in (REPO_ROOT / "schemas").glob("*.schema.json")}
    assert expected and expected <= names
    # Installed from the wheel (not editable), the schemas load through importlib.resources.
    target = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
    probe = ("from guardkit_state.store import schemas; print(schemas.schema_dir()); "
             "print(','.join(schemas.available_kinds())); schemas.validator('coach_turn')")
    result = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(target)!r}); {probe}"],
                            capture_output=True, text=True, check=False, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    where, kinds = result.stdout.splitlines()
    assert str(target) in where and "schema_files" in where
    assert set(kinds.split(",")) == {n.rsplit("/", 1)[1].removesuffix(".schema.json") for n in expected}


# validate_record returns the built-in JSON types, whatever mapping, enum or subclass came in.


class Level(enum.IntEnum):
    THREE = 3


def _builtin_only(value: Any) -> bool:
    if type(value) is dict:
        return all(type(k) is str and _builtin_only(v) for k, v in value.items())
    if type(value) is list:
        return all(_builtin_only(v) for v in value)
    return type(value) in (str, int, float, bool, type(None))


def test_an_ordered_dict_report_validates_to_a_plain_dict() -> None:
    record = validate_record("player_turn", OrderedDict(task_id="TASK-1", turn=1))
    assert type(record) is dict
    assert _builtin_only(record)
    yaml.safe_dump(record)  # what a plain dict always allowed


def test_an_int_enum_and_nested_mappings_validate_to_builtin_values() -> None:
    data = {"task_id": "TASK-1", "turn": Level.THREE, "extra": defaultdict(list),
            "completion_promises": [OrderedDict(criterion_id="AC-1", status="done")]}
    record = validate_with_warnings("player_turn", data).data
    assert type(record["turn"]) is int
    assert type(record["extra"]) is dict
    assert type(record["completion_promises"][0]) is dict
    assert _builtin_only(record)
    assert record["completion_promises"][0]["status"] == "complete"
