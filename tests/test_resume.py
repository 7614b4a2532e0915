"""Resume rolls forward: an interruption at each point of the lifecycle, then resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from guardkit_state.errors import GuardkitStateError
from guardkit_state.model import TurnMode
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.turns.lifecycle import TurnLifecycle, record_turn
from guardkit_state.turns.resume import resume_point

from .helpers import coach_decision, make_task_repo, player_report

TASK = "TASK-AUTH-001"
PLAN = [
    (player_report(1), coach_decision(1, "feedback", feedback="refresh missing", verdicts={"AC-001": "verified"})),
    (player_report(2), coach_decision(2, "reject", feedback="expiry not validated", verdicts={"AC-002": "rejected"})),
    (player_report(3), coach_decision(3, "approve")),
]


def _history(root: Path) -> list[tuple[int, str, dict[str, str]]]:
    lifecycle = TurnLifecycle.open(root, TASK)
    out = []
    for entry in lifecycle.task.state.turns:
        state = lifecycle.store.read_turn_state(entry.turn)
        out.append((entry.turn, entry.decision, state.acceptance_criteria_status))
    return out


def _point(root: Path):
    lifecycle = TurnLifecycle.open(root, TASK)
    return resume_point(lifecycle.task, lifecycle.store)


@pytest.fixture
def reference(tmp_path: Path) -> list:
    root = tmp_path / "reference"
    make_task_repo(root)
    for player, coach in PLAN:
        record_turn(root, TASK, player, coach)
    return _history(root)


@pytest.mark.parametrize("stop_after", ["begin", "player", "coach", "turn_state", "append"])
def test_resume_after_interruption_matches_uninterrupted_history(tmp_path: Path, reference: list,
                                                                 stop_after: str) -> None:
    root = tmp_path / "run"
    make_task_repo(root)
    record_turn(root, TASK, *PLAN[0])

    # Turn 2 is interrupted at `stop_after` (the process "dies": the lifecycle object is dropped).
    lifecycle = TurnLifecycle.open(root, TASK)
    lifecycle.begin_turn()
    if stop_after in ("player", "coach", "turn_state", "append"):
        lifecycle.record_player(PLAN[1][0])
    if stop_after in ("coach", "turn_state", "append"):
        lifecycle.record_coach(PLAN[1][1])
    if stop_after == "turn_state":
        # the turn state was written but the frontmatter append (the commit point) never happened
        lifecycle.store.path("turn_state", 2).write_text('{"id": "TURN-X", "task_id": "TASK-AUTH-001"}')
    if stop_after == "append":
        lifecycle.complete_turn()
    del lifecycle

    point = _point(root)
    expected = {"begin": ("run_turn", 2, []), "player": ("rerun_coach", 2, ["player_turn_2.json"]),
                "coach": ("complete_from_reports", 2, ["player_turn_2.json", "coach_turn_2.json"]),
                "turn_state": ("complete_from_reports", 2, ["player_turn_2.json", "coach_turn_2.json"]),
                "append": ("run_turn", 3, [])}[stop_after]
    assert (point.action, point.next_turn, point.reusable) == expected
    assert point.recorded_turns == expected[1] - 1

    # Resume: roll forward from the files, calling only the agents that are still needed.
    agent_calls: list[str] = []
    resumed = TurnLifecycle.open(root, TASK)
    with resumed.locked():
        resumed.begin_turn(TurnMode.RECOVERING_STATE if point.action != "run_turn" else None)
        if point.action in ("run_turn", "rerun_turn", "start"):
            agent_calls.append("player")
            resumed.record_player(PLAN[point.next_turn - 1][0])
        if point.action in ("run_turn", "rerun_turn", "start", "rerun_coach"):
            agent_calls.append("coach")
            resumed.record_coach(PLAN[point.next_turn - 1][1])
        resumed.complete_turn()
    for player, coach in PLAN[point.next_turn:]:
        record_turn(root, TASK, player, coach)

    assert _history(root) == reference
    assert {"begin": ["player", "coach"], "player": ["coach"], "coach": [], "turn_state": [],
            "append": ["player", "coach"]}[stop_after] == agent_calls


def test_resume_point_of_a_finished_loop(tmp_path: Path) -> None:
    make_task_repo(tmp_path)
    for player, coach in PLAN:
        record_turn(tmp_path, TASK, player, coach)
    point = _point(tmp_path)
    assert (point.action, point.outcome, point.recorded_turns) == ("finished", "approved", 3)


def test_resume_point_with_no_state_starts_fresh(tmp_path: Path) -> None:
    make_task_repo(tmp_path)
    point = _point(tmp_path)
    assert (point.action, point.next_turn, point.mode) == ("start", 1, TurnMode.FRESH_START)


def test_resume_point_ignores_an_invalid_interrupted_report(tmp_path: Path) -> None:
    make_task_repo(tmp_path)
    directory = tmp_path / ".guardkit" / "autobuild" / TASK
    directory.mkdir(parents=True)
    (directory / "player_turn_1.json").write_text('{"task_id": "TASK-AUTH-001", "turn": 1, "tests_run": "yes"')
    point = _point(tmp_path)
    assert point.action == "rerun_turn" and point.mode is TurnMode.RECOVERING_STATE
    assert "player_turn_1.json is not usable" in point.notes[0]


@pytest.mark.corpus
def test_real_guardkit_files_resume_at_len_turns_plus_one(corpus_dir: Path, tmp_path: Path) -> None:
    from guardkit_state.store.turn_files import TurnStore

    checked = 0
    for path in sorted((corpus_dir / "tasks").rglob("*.md")):
        try:
            task = TaskFile.load(path)
        except GuardkitStateError:  # a refusal names its file; any other exception is a crash and fails
            continue
        if task.state is None or task.state_key != "autobuild_state":
            continue
        point = resume_point(task, TurnStore(tmp_path / "empty", task.task_id or "TASK-X"))
        turns = task.state.turns
        assert point.next_turn == len(turns) + 1, path
        assert point.last_feedback == (turns[-1].feedback if turns else None), path
        checked += 1
    assert checked >= 100
