"""``validate_record`` returns the canonical dict in the built-in JSON types, whatever mapping,
enum or subclass the caller handed in (it used to: such data was copied by a JSON round trip).
"""

from __future__ import annotations

import enum
from collections import OrderedDict, defaultdict
from typing import Any

import yaml

from guardkit_state.store.schemas import validate_record, validate_with_warnings


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
