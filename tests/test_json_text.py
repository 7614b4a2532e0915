"""The canonical JSON writer is ``json.dumps(indent=2, ensure_ascii=False, allow_nan=False)``, byte for byte."""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardkit_state.store.json_text import canonical_json
from guardkit_state.store.jsonio import dump_json


def stdlib(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)


class Text(str):
    pass


class Number(int):
    def __repr__(self) -> str:  # json.dumps ignores an override: so must we
        return "overridden"


class Real(float):
    def __repr__(self) -> str:
        return "overridden"


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=-10**40, max_value=10**40),
    st.floats(),  # NaN and infinities included: both writers must refuse them alike
    st.text(), st.text(alphabet=st.characters(codec=None)),  # lone surrogates, controls, quotes, backslashes
    st.builds(Text, st.text()), st.builds(Number, st.integers()), st.builds(Real, st.floats(allow_nan=False)),
)
keys = st.one_of(st.text(), st.integers(), st.floats(), st.booleans(), st.none(), st.builds(Text, st.text()))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.lists(inner, max_size=5).map(tuple),
                            st.dictionaries(keys, inner, max_size=5),
                            st.dictionaries(st.text(), inner, max_size=5).map(OrderedDict)),
    max_leaves=30,
)


def outcome(write: Any, data: Any) -> tuple[str, str]:
    try:
        return "text", write(data)
    except (TypeError, ValueError) as exc:
        return "refused", type(exc).__name__


@settings(max_examples=400)
@given(values)
def test_same_text_or_same_refusal_as_json_dumps(data: Any) -> None:
    assert outcome(canonical_json, data) == outcome(stdlib, data)


@pytest.mark.parametrize("data", [
    {"set": {1, 2}}, [object()], {(1, 2): "tuple key"}, {"bytes": b"x"}, float("nan"), [float("-inf")],
    {"nested": [{"deep": float("inf")}]}, {float("nan"): 1},
])
def test_what_json_cannot_hold_is_refused_alike(data: Any) -> None:
    assert outcome(canonical_json, data)[0] == "refused"
    assert outcome(canonical_json, data) == outcome(stdlib, data)


def test_a_container_that_holds_itself_is_refused_like_json_dumps() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    mapping: dict[str, Any] = {}
    mapping["self"] = [mapping]
    for data in (loop, mapping):
        assert outcome(canonical_json, data) == ("refused", "ValueError") == outcome(stdlib, data)
    shared = [1, 2]
    twice = {"a": shared, "b": shared}  # reached twice, but not inside itself: fine
    assert canonical_json(twice) == stdlib(twice)


def test_dump_json_is_the_canonical_text_with_a_final_newline() -> None:
    report = {"task_id": "TASK-1", "turn": 2, "notes": "é \u2028 \x00 \"q\" \\", "files": [], "gates": {},
              "criteria": [{"id": "AC-001", "ok": True, "score": 0.5}]}
    assert dump_json(report) == stdlib(report) + "\n"
