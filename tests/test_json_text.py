"""The canonical JSON writer is ``json.dumps(indent=2, ensure_ascii=False, allow_nan=False)``, byte for byte."""

from __future__ import annotations

import json
import struct
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardkit_state.store.json_text import PLAIN_JSON_VALUES, canonical_json
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


# The C fast path (orjson, when installed) must give the same text wherever it is taken: these
# cases sit on its edges (floats around its bounds, the types it writes and json.dumps does not).

float_bits = st.integers(min_value=0, max_value=2**64 - 1).map(
    lambda bits: struct.unpack("<d", bits.to_bytes(8, "little"))[0])


@settings(max_examples=600)
@given(st.lists(st.one_of(float_bits, st.floats(min_value=1e-5, max_value=1e-3),
                          st.floats(min_value=1e15, max_value=1e17), st.floats(allow_subnormal=True)),
                max_size=8))
def test_every_float_is_spelled_as_json_dumps_spells_it(numbers: list[float]) -> None:
    data = {"numbers": numbers, "first": numbers[0] if numbers else 0.0}
    assert outcome(canonical_json, data) == outcome(stdlib, data)


@pytest.mark.parametrize("number", [1e-4, 9.999999999999999e-05, 1e-5, 5e-324, -0.0, 0.0, 1e16, 9999999999999998.0,
                                    -1e16, 1.5e300, 2.5, 0.1, 1e15, 123456.789])
def test_floats_at_the_fast_paths_bounds(number: float) -> None:
    assert canonical_json([number, {"x": number}]) == stdlib([number, {"x": number}])


def _odd_values() -> list[Any]:
    import dataclasses
    import datetime
    import decimal
    import enum
    import uuid

    class Colour(enum.Enum):
        RED = 1

    class Level(enum.IntEnum):
        HIGH = 3

    class Name(enum.StrEnum):
        ADA = "ada"

    @dataclasses.dataclass
    class Point:
        x: int

    return [uuid.UUID(int=7), Colour.RED, Level.HIGH, Name.ADA, datetime.datetime(2026, 1, 2),
            datetime.date(2026, 1, 2), Point(1), decimal.Decimal("1.5"), 2**64, -(2**63) - 1, "\ud800 lone",
            Text("sub"), Number(5), Real(2.5), OrderedDict(a=1)]


@pytest.mark.parametrize("value", _odd_values(), ids=lambda value: type(value).__name__)
def test_types_orjson_writes_and_json_dumps_does_not_are_refused_alike(value: Any) -> None:
    data = {"report": [value]}
    assert outcome(canonical_json, data) == outcome(stdlib, data)


def test_nesting_past_the_fast_paths_depth_is_written_alike() -> None:
    data: Any = "leaf"
    for _ in range(300):
        data = [data]
    assert canonical_json({"deep": data}) == stdlib({"deep": data})


def test_a_container_reached_many_times_is_written_alike() -> None:
    row = list(range(1000))
    table = [row] * (PLAIN_JSON_VALUES // 1000 + 1)  # past the fast path's budget: the Python writer's
    assert canonical_json(table) == stdlib(table)
