"""Strict JSON reading and canonical writing, on real files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from guardkit_state.errors import FileTooLargeError, GuardkitStateError, ParseError, SchemaError
from guardkit_state.store.jsonio import MAX_DEPTH, check_storable, dump_json, dump_record, load_json, load_record
from guardkit_state.store.turn_files import TurnStore

from .helpers import player_report


def _write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    path = tmp_path / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


REFUSALS = [
    # name, bytes, line, message fragment
    ("dup.json", '{\n  "a": 1,\n  "b": {\n    "x": 1,\n    "x": 2\n  }\n}\n', 5,
     'duplicate key "x" (column 5; first defined on line 4)'),
    ("dup_top.json", '{"turn": 1,\n"turn": 2}', 2, 'duplicate key "turn"'),
    ("nan.json", '{\n  "coverage": NaN\n}', 2, "NaN is not valid JSON (column 15)"),
    ("inf.json", '{"a": "NaN in a string is fine",\n "b": [1, -Infinity]}', 2, "-Infinity is not valid JSON"),
    ("pinf.json", '[Infinity]', 1, "Infinity is not valid JSON"),
    ("deep.json", "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), 1, f"nested deeper than {MAX_DEPTH} levels"),
    ("very_deep.json", '{"a":\n' + "[" * 100_000 + "]" * 100_000 + "}", 2, "nested deeper than"),
    ("syntax.json", '{\n  "a": 1,\n}\n', 3, "Expecting property name enclosed in double quotes (column 1)"),
    ("empty.json", "", 1, "Expecting value"),
    ("truncated.json", '{"a": [1, 2', 1, "Expecting"),
]


@pytest.mark.parametrize(("name", "text", "line", "fragment"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_load_json_refuses_with_file_and_line(tmp_path: Path, name: str, text: str, line: int, fragment: str) -> None:
    path = _write(tmp_path, name, text)
    with pytest.raises(ParseError) as info:
        load_json(path)
    assert info.value.path == path
    assert info.value.line == line
    assert fragment in info.value.message
    assert str(info.value).startswith(f"{path}:{line}: ")


def test_brackets_inside_strings_do_not_count_as_nesting(tmp_path: Path) -> None:
    text = json.dumps({"notes": "[" * 500 + '{"x": "\\"[[["}'})
    assert load_json(_write(tmp_path, "strings.json", text))["notes"].startswith("[[[")


def test_nesting_at_the_limit_is_accepted(tmp_path: Path) -> None:
    path = _write(tmp_path, "limit.json", "[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert load_json(path) is not None


def test_bad_utf8_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "latin1.json", b'{\n  "notes": "caf\xe9"\n}\n')
    with pytest.raises(ParseError) as info:
        load_json(path)
    assert (info.value.path, info.value.line) == (path, 2)
    assert "invalid UTF-8 byte 0xe9" in str(info.value)


def test_over_the_size_cap_is_refused_before_parsing(tmp_path: Path) -> None:
    path = _write(tmp_path, "big.json", '{"a": "' + "x" * 2000 + '"}')
    with pytest.raises(FileTooLargeError) as info:
        load_json(path, limit=1000)
    assert info.value.path == path
    assert "over the 1000-byte limit" in str(info.value)


def test_integer_over_python_digit_limit_is_a_parse_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "digits.json", '{"n": ' + "9" * 5000 + "}")
    with pytest.raises(ParseError, match="invalid JSON value") as info:
        load_json(path)
    assert info.value.path == path


def test_missing_file_is_a_guardkit_error(tmp_path: Path) -> None:
    with pytest.raises(GuardkitStateError, match="no such file"):
        load_json(tmp_path / "absent.json")


def test_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    assert load_json(_write(tmp_path, "bom.json", b'\xef\xbb\xbf{"a": 1}')) == {"a": 1}


def test_valid_json_round_trips_exactly(tmp_path: Path) -> None:
    data = {"task_id": "TASK-Ü-1", "turn": 1, "nested": {"list": [1, 2.5, None, True, "é ✓"]}, "empty": {}}
    text = dump_json(data)
    assert text.endswith("}\n") and "é ✓" in text and '\n  "turn": 1,' in text
    assert load_json(_write(tmp_path, "ok.json", text)) == data


@pytest.mark.parametrize("value", [float("nan"), float("inf"), {1, 2}, object()])
def test_dump_json_refuses_what_json_cannot_hold(value: object) -> None:
    with pytest.raises(SchemaError, match="cannot be written as JSON"):
        dump_json({"value": value})


def test_load_record_names_file_and_json_path(tmp_path: Path) -> None:
    path = _write(tmp_path, "coach_turn_1.json", json.dumps({"task_id": "TASK-A-1", "turn": 1, "decision": "ok"}))
    with pytest.raises(SchemaError) as info:
        load_record("coach_turn", path)
    assert str(info.value).startswith(f"{path}: $.decision: \"ok\" is not allowed")


def test_load_record_returns_normalised_record(tmp_path: Path) -> None:
    raw = {"task_id": "TASK-A-1", "turn": 2, "verdict": "approve", "findings": []}
    path = _write(tmp_path, "coach_turn_2.json", json.dumps(raw))
    assert load_record("coach_turn", path)["decision"] == "approve"


def test_dump_record_checks_before_writing() -> None:
    with pytest.raises(SchemaError) as info:
        dump_record("player_turn", {"task_id": "TASK-A-1", "turn": 0})
    assert info.value.pointer == "$.turn"
    assert json.loads(dump_record("player_turn", {"task_id": "TASK-A-1", "turn": 1}))["turn"] == 1


# Data an agent's report may hold once parsed or built in Python: JSON's types, tuples, int keys,
# text with lone surrogates, NaN and infinities, and nesting up to past the limit.
_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                    st.text(alphabet=st.sampled_from(["a", "é", "\ud800", "\U0001f600", " "]), max_size=4))
_KEYS = st.one_of(st.text(alphabet=st.sampled_from(["k", "é", "\udfff"]), max_size=3), st.integers(0, 3))
_DATA = st.recursive(_LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner),
                                                      st.dictionaries(_KEYS, inner, max_size=3)), max_leaves=12)


def _depth(value: object) -> int:
    """Levels of containers: a container at depth MAX_DEPTH (counting from 0) is over the limit."""
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, (list, tuple)):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _plain(value: object) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) for k in value) and all(_plain(v) for v in value.values())
    if isinstance(value, tuple):
        return False
    return all(_plain(v) for v in value) if isinstance(value, list) else True


@settings(max_examples=1500, deadline=None)
@given(_DATA, st.integers(0, MAX_DEPTH + 1))
@example(None, MAX_DEPTH)
@example(None, MAX_DEPTH + 1)
@example({}, MAX_DEPTH - 1)
@example({}, MAX_DEPTH)
@example({"k": "\ud800"}, 0)
@example({"\udfff": 1}, 0)
@example(("a",), 0)
@example({1: 2}, 0)
@example([float("nan")], 0)
def test_check_storable_refuses_exactly_what_strict_json_cannot_hold(data: object, wrap: int) -> None:
    for _ in range(wrap):  # push the data towards (and past) the nesting limit
        data = [data]
    try:
        json.dumps(data, ensure_ascii=False, allow_nan=False).encode("utf-8")
        writable = _depth(data) <= MAX_DEPTH
    except (ValueError, UnicodeEncodeError):
        writable = False
    if writable:
        assert check_storable(data) is _plain(data)
    else:
        with pytest.raises(SchemaError):
            check_storable(data)


def test_a_report_holding_itself_twice_is_refused_not_walked_forever(tmp_path: Path) -> None:
    # Each level of [a, a] doubles: a walk level by level without a budget never ended. Run in a
    # child process so that a regression fails this test (by its timeout) instead of hanging the suite.
    import subprocess
    import sys

    script = (
        "from guardkit_state.store.jsonio import check_storable\n"
        "from guardkit_state.errors import SchemaError\n"
        "twice = []\ntwice += [twice, twice]\n"
        "try:\n    check_storable({'notes': twice})\n"
        "except SchemaError as exc:\n    print('refused', exc.pointer[:8])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.stdout.splitlines() == ["refused $.notes["], done.stderr


def test_a_report_nested_deeper_than_any_read_accepts_is_refused_before_it_is_written(tmp_path: Path) -> None:
    # dump_record checked storability and the schema but not the nesting depth every read enforces
    # (MAX_DEPTH), so it wrote a file no read accepts. Now it is refused by its JSON path, and
    # nothing is written.
    def report_with(depth: int) -> dict[str, Any]:
        deep: Any = "leaf"
        for _ in range(depth):
            deep = {"d": deep}
        return {**player_report(1, task_id="TASK-AUTH-001"), "extra_producer_field": deep}

    store = TurnStore(tmp_path / ".guardkit" / "autobuild" / "TASK-AUTH-001", "TASK-AUTH-001")
    store.directory.mkdir(parents=True)
    with pytest.raises(SchemaError, match=f"deeper than {MAX_DEPTH}") as refused:
        store.write("player_turn", 1, report_with(MAX_DEPTH), recorded_turns=0)
    assert refused.value.pointer is not None and refused.value.pointer.startswith("$.extra_producer_field.d.d")
    assert list(store.directory.iterdir()) == []
    # One level less (the report object itself is a level) is written and read back.
    written = store.write("player_turn", 1, report_with(MAX_DEPTH - 1), recorded_turns=0)
    assert load_json(written)["extra_producer_field"]["d"]
    assert TurnStore(store.directory, "TASK-AUTH-001").read("player_turn", 1) is not None


def test_top_level_reads_the_envelope_of_json_too_deep_to_parse() -> None:
    from guardkit_state.store.jsonio import top_level

    line = ('{"jsonrpc": "2.0", "id": 7, "s": "[[{", "params": {"arguments": ' + "[" * 100_000 + '"x"'
            + "]" * 100_000 + "}}")
    assert top_level(line) == {"jsonrpc": "2.0", "id": 7, "s": "[[{", "params": None}
    assert top_level("[1, [2, [3]], 4]") == [1, None, 4]
    with pytest.raises(ParseError):
        top_level('{"a": [[[')
