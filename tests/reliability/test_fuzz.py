"""Hypothesis fuzzing of the frontmatter reader/splicer, TaskFile and the JSON loaders.

Any input either raises a typed error (a ``GuardkitStateError`` subclass, never a raw exception)
or, when it parses, a no-op save is byte-identical and an appended turn reads back exactly with
every other frontmatter key unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guardkit_state.errors import GuardkitStateError
from guardkit_state.store.jsonio import parse_json
from guardkit_state.store.schemas import validate_record
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.taskfile.frontmatter import STATE_KEY, parse_frontmatter
from guardkit_state.taskfile.splice import StateUpdate, splice_state

from .conftest import size

EXAMPLES = size(2100, 25000)  # per property: 5 properties -> 10,500 in make test
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.data_too_large])
PATH = Path("tasks/backlog/TASK-FUZZ-001-x.md")

_words = st.text(alphabet=st.sampled_from("abcXYZ019 _-:#'\"[]{},.&*!|>%@`~\\é€\t"), max_size=24)
_keys = st.sampled_from(["id", "title", "status", "tags", "created", "notes", "a", "b", "feature_build",
                         STATE_KEY, "turns", "current_turn", "criteria"])
_line = st.one_of(
    st.builds(lambda k, v: f"{k}: {v}", _keys, _words),
    st.builds(lambda k, v: f"  {k}: {v}", _keys, _words),
    st.builds(lambda v: f"- {v}", _words),
    st.builds(lambda v: f"  - turn: {v}", st.integers(-2, 5)),
    st.sampled_from(["---", "-----", "# comment", "autobuild_state:", "  turns:", "  turns: []",
                     "  current_turn: 1", "tags: [a, b]", "x: &a [1]", "y: *a", "z: !!python/object:os.system x",
                     "", "  ", "\t", "...", "date: 2026-01-01T00:00:00Z", "id: TASK-FUZZ-001"]),
    _words,
)
_texts = st.one_of(
    st.text(max_size=300),
    st.builds(lambda fm, body, nl: ("---\n" + "\n".join(fm) + "\n---\n" + "\n".join(body)).replace("\n", nl),
              st.lists(_line, max_size=14), st.lists(_line, max_size=5), st.sampled_from(["\n", "\n", "\r\n"])),
)

#: YAML refuses control characters even inside quotes; the "valid file" strategy avoids them.
_printable = st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs")), max_size=40)
_valid_fm = st.builds(
    lambda title, tags, extra, with_state, turns: (
        "---\nid: TASK-FUZZ-001\n"
        f"title: {json.dumps(title, ensure_ascii=False)}   # keep me\n"
        f"tags: [{', '.join(tags)}]\n"
        + "".join(f"{k}: {json.dumps(v, ensure_ascii=False)}\n" for k, v in extra.items())
        + (f"autobuild_state:\n  current_turn: {turns}\n  turns:\n"
           + "".join(f"  - turn: {n}\n    decision: feedback\n" for n in range(1, turns + 1))
           if with_state else "")
        + "---\n\n## Acceptance Criteria\n\n- [ ] One\n-----\n"),
    _printable, st.lists(st.sampled_from(["a", "b1", "x-y"]), max_size=3),
    st.dictionaries(st.sampled_from(["status", "notes", "owner", "priority"]),
                    st.one_of(_printable, st.integers(), st.booleans(), st.none()), max_size=3),
    st.booleans(), st.integers(0, 4),
)

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


def _entry(n: int, feedback: str) -> dict[str, Any]:
    return {"turn": n, "mode": "continuing_work", "decision": "feedback", "feedback": feedback,
            "timestamp": "2026-11-21T10:00:00+00:00", "player_summary": "x", "player_success": True,
            "coach_success": True}


def _typed_or_value(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except GuardkitStateError:
        return None


@pytest.mark.slow
def test_fuzz_frontmatter_any_text(record_figures: Callable[[dict[str, Any]], None]) -> None:
    seen = {"n": 0, "parsed": 0}

    @FUZZ
    @given(_texts)
    def prop(text: str) -> None:
        seen["n"] += 1
        try:
            task = TaskFile.from_bytes(text.encode("utf-8"), PATH)
        except GuardkitStateError:
            _typed_or_value(lambda: parse_frontmatter(text, path=PATH))
            return
        seen["parsed"] += 1
        assert splice_state(task.text, StateUpdate(), path=PATH).text == text  # no-op: byte-identical
        n = len(task.state.turns) + 1 if task.state else 1
        try:
            result = splice_state(text, StateUpdate(key=task.state_key, block_scalars={"current_turn": n},
                                                    append_turns=[_entry(n, "fuzz")]), path=PATH)
        except GuardkitStateError:
            return  # a layout the store refuses to touch, with a typed error: fine
        again = TaskFile.from_bytes(result.text.encode("utf-8"), PATH)
        assert again.state is not None and again.state.turns[-1].to_dict()["turn"] == n
        assert {k: v for k, v in again.data.items() if k not in (task.state_key, "status")} == \
               {k: v for k, v in task.data.items() if k not in (task.state_key, "status")}

    prop()
    record_figures({"fuzz_examples": seen["n"], "property": "frontmatter-any-text", "parsed": seen["parsed"]})


@pytest.mark.slow
def test_fuzz_splice_roundtrip_on_valid_files(record_figures: Callable[[dict[str, Any]], None]) -> None:
    seen = {"n": 0}

    @FUZZ
    @given(_valid_fm, st.text(max_size=60), st.sampled_from(["\n", "\r\n"]))
    def prop(text: str, feedback: str, newline: str) -> None:
        seen["n"] += 1
        text = text.replace("\n", newline)
        task = TaskFile.from_bytes(text.encode("utf-8"), PATH)
        assert splice_state(text, StateUpdate(), path=PATH).text == text
        n = len(task.state.turns) + 1 if task.state else 1
        entry = _entry(n, feedback)
        result = splice_state(text, StateUpdate(block_scalars={"current_turn": n}, append_turns=[entry]), path=PATH)
        again = TaskFile.from_bytes(result.text.encode("utf-8"), PATH)
        assert again.state is not None
        got = again.state.turns[-1].to_dict()
        assert {k: got.get(k) for k in entry} == entry  # the appended turn reads back exactly
        assert again.state.current_turn == n
        assert {k: v for k, v in again.data.items() if k != STATE_KEY} == \
               {k: v for k, v in task.data.items() if k != STATE_KEY}
        assert result.text.endswith(text.split("---" + newline, 2)[-1])  # body byte for byte
        assert "# keep me" in result.text

    prop()
    record_figures({"fuzz_examples": seen["n"], "property": "splice-roundtrip"})


@pytest.mark.slow
def test_fuzz_taskfile_bytes(record_figures: Callable[[dict[str, Any]], None]) -> None:
    seen = {"n": 0}

    @FUZZ
    @given(st.binary(max_size=200), _valid_fm)
    def prop(noise: bytes, valid: str) -> None:
        seen["n"] += 1
        for data in (noise, valid.encode()[: len(noise)], noise + valid.encode()):
            _typed_or_value(lambda: TaskFile.from_bytes(data, PATH))

    prop()
    record_figures({"fuzz_examples": seen["n"], "property": "taskfile-bytes"})


@pytest.mark.slow
def test_fuzz_json_text(record_figures: Callable[[dict[str, Any]], None]) -> None:
    seen = {"n": 0}
    fragments = st.lists(st.sampled_from(['{', '}', '[', ']', ',', ':', '"a"', '"turn"', '1', '-0', '1e999', 'NaN',
                                          'Infinity', 'null', 'true', '"\\ud800"', ' ', '\n', '"x"', '9' * 30]),
                         max_size=40).map("".join)

    @FUZZ
    @given(st.one_of(st.text(max_size=200), fragments, _json_values.map(json.dumps)))
    def prop(text: str) -> None:
        seen["n"] += 1
        value = _typed_or_value(lambda: parse_json(text, path="fuzz.json"))
        if value is not None and text.strip() not in ("null",):
            assert json.loads(text) == value or value != value  # strict result agrees with json

    prop()
    record_figures({"fuzz_examples": seen["n"], "property": "json-text"})


@pytest.mark.slow
def test_fuzz_schema_validation(record_figures: Callable[[dict[str, Any]], None]) -> None:
    seen = {"n": 0}
    base = {"player_turn": {"task_id": "TASK-FUZZ-001", "turn": 1},
            "coach_turn": {"task_id": "TASK-FUZZ-001", "turn": 1, "decision": "feedback"},
            "turn_state": {"task_id": "TASK-FUZZ-001", "turn_number": 1},
            "autobuild_state": {"current_turn": 0, "turns": []}}

    @FUZZ
    @given(st.sampled_from(sorted(base)), st.dictionaries(st.text(max_size=12) | st.sampled_from(
        ["turn", "decision", "criteria_verification", "completion_promises", "issues", "schema_version",
         "verdict", "files_modified", "coach_decision", "mode", "turns", "criteria", "current_turn"]),
        _json_values, max_size=5), _json_values)
    def prop(kind: str, extra: dict[str, Any], whole: Any) -> None:
        seen["n"] += 1
        for data in ({**base[kind], **extra}, whole):
            result = _typed_or_value(lambda: validate_record(kind, data, path=f"{kind}_1.json"))
            if result is not None:
                assert isinstance(result, dict)
                assert validate_record(kind, result) == result  # canonical output is a fixed point

    prop()
    record_figures({"fuzz_examples": seen["n"], "property": "schema-validation"})
