"""A record served from the store's memory must be the record the file holds, value for value.

orjson reads an integer beyond 64 bits as a float (it does not refuse it): a cached copy parsed by
it differed from a fresh read of the same bytes, so the store parses its copies with ``json``.
"""

from __future__ import annotations

from pathlib import Path

from guardkit_state.store.jsonio import load_record
from guardkit_state.store.turn_files import TurnStore

BIG = 2**64  # one past the largest unsigned 64-bit integer
HUGE = 123456789012345678901234567890


def test_a_cached_read_is_the_files_record_for_integers_beyond_64_bits(tmp_path: Path) -> None:
    store = TurnStore(tmp_path / "TASK-1", "TASK-1")
    report = {"task_id": "TASK-1", "turn": 1, "tests_passed_count": BIG, "metrics": {"bytes": HUGE}}
    path = store.write("player_turn", 1, report, recorded_turns=0)
    on_disk = load_record("player_turn", path)
    assert on_disk["tests_passed_count"] == BIG and type(on_disk["tests_passed_count"]) is int

    first = store.read("player_turn", 1)  # served from what write() remembered
    assert first == on_disk
    assert type(first["tests_passed_count"]) is int and type(first["metrics"]["bytes"]) is int

    fresh = TurnStore(tmp_path / "TASK-1", "TASK-1")  # a new process: a miss, then a hit
    assert fresh.read("player_turn", 1) == on_disk
    again = fresh.read("player_turn", 1)
    assert again == on_disk and type(again["metrics"]["bytes"]) is int
    peeked = fresh.peek("player_turn", 1)
    assert peeked == on_disk
