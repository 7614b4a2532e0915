"""A stale editor save that drops recorded turn entries never loses a turn."""

from __future__ import annotations

from pathlib import Path

import pytest

from guardkit_state.errors import TurnError
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.turns.lifecycle import TurnLifecycle, record_turn

from .helpers import coach_decision, make_task_repo, player_report

TASK = "TASK-AUTH-001"


def _turn(lifecycle: TurnLifecycle, n: int) -> None:
    lifecycle.begin_turn()
    lifecycle.record_player(player_report(n))
    lifecycle.record_coach(coach_decision(n, "feedback", feedback=f"more work {n}"))
    lifecycle.complete_turn()


def _turns(path: Path) -> list[int]:
    return [t.turn for t in TaskFile.load(path).state.turns]


def test_a_dropped_entry_is_put_back_by_the_next_turn_of_the_same_loop(tmp_path: Path) -> None:
    path = make_task_repo(tmp_path)
    lifecycle = TurnLifecycle.open(tmp_path, TASK, max_turns=10)
    with lifecycle.locked():
        _turn(lifecycle, 1)
        stale = path.read_bytes()  # an editor opened the file after turn 1 ...
        _turn(lifecycle, 2)
        edited = stale.replace(b"## Notes\n", b"## Notes\n\nEdited by hand.\n")
        path.write_bytes(edited)  # ... and saved its copy over turn 2's entry
        assert _turns(path) == [1]
        _turn(lifecycle, 3)
    assert _turns(path) == [1, 2, 3]
    assert "Edited by hand." in path.read_text()  # and the edit is kept


def test_record_rolls_forward_a_turn_whose_entry_was_dropped(tmp_path: Path) -> None:
    path = make_task_repo(tmp_path)
    record_turn(tmp_path, TASK, player_report(1), coach_decision(1, "feedback", feedback="a"))
    stale = path.read_bytes()
    record_turn(tmp_path, TASK, player_report(2), coach_decision(2, "feedback", feedback="b"))
    path.write_bytes(stale)  # turn 2's entry is gone; its three files are still on disk
    record = record_turn(tmp_path, TASK, player_report(3), coach_decision(3, "feedback", feedback="c"))
    assert record.turn_state.turn_number == 3
    task = TaskFile.load(path)
    assert [(t.turn, t.feedback) for t in task.state.turns] == [(1, "a"), (2, "b"), (3, "c")]
    assert task.state.turns[1].mode == "recovering_state"


def test_a_gap_is_never_written(tmp_path: Path) -> None:
    path = make_task_repo(tmp_path)
    lifecycle = TurnLifecycle.open(tmp_path, TASK, max_turns=10)
    with lifecycle.locked():
        _turn(lifecycle, 1)
        before_any = path.read_bytes()
        _turn(lifecycle, 2)
        _turn(lifecycle, 3)
        _turn(lifecycle, 4)
        original = make_task_repo(tmp_path).read_bytes()  # the file as it was before turn 1
        path.write_bytes(original)
        lifecycle.begin_turn()
        lifecycle.record_player(player_report(5))
        lifecycle.record_coach(coach_decision(5, "feedback", feedback="e"))
        with pytest.raises(TurnError, match="entries were dropped by another writer"):
            lifecycle.complete_turn()
    assert path.read_bytes() == original
    assert before_any != original
