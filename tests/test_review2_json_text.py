"""Review: canonical_json must accept what json.dumps(indent=2) accepts, nesting included."""

from __future__ import annotations

import json
from typing import Any

from guardkit_state.store.jsonio import dump_json


def _nested(depth: int) -> Any:
    data: Any = "leaf"
    for _ in range(depth):
        data = [data]
    return {"extra": data}


def test_deep_nesting_json_dumps_accepts_is_written_alike() -> None:
    data = _nested(600)  # json.dumps(indent=2) uses one frame per level; canonical_json two
    expected = json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    assert dump_json(data) == expected


def test_a_report_nested_deeper_than_any_read_accepts_is_refused_before_it_is_written(tmp_path: Any) -> None:
    # dump_record checked storability and the schema but not the nesting depth every read enforces
    # (MAX_DEPTH), so it wrote a file no read accepts. Now it is refused by its JSON path, and
    # nothing is written.
    import pytest

    from guardkit_state.errors import SchemaError
    from guardkit_state.store.jsonio import MAX_DEPTH, load_json
    from guardkit_state.store.turn_files import TurnStore

    from .helpers import player_report

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
