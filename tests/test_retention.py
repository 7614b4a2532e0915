"""Retention: at most N turns per feature / project; oldest of completed features first."""

from __future__ import annotations

from pathlib import Path

import pytest

from guardkit_state.index.retention import TurnRef, completed_features, select_pruned, task_statuses


def turns(feature: str | None, task: str, count: int, *, last: str = "feedback", start: int = 0) -> list[TurnRef]:
    return [TurnRef(f"TURN-{feature}-{task}-T{n}", feature, task, n, f"2026-01-01T00:{start + n:02d}:00",
                    last if n == count else "feedback") for n in range(1, count + 1)]


@pytest.fixture
def three_features() -> list[TurnRef]:
    # DONE: completed (last turn approved), 6 turns.  OLD: completed earlier, 4 turns.
    # RUN: in progress (last turn feedback), 7 turns: never pruned.
    return (turns("FEAT-DONE", "TASK-D-1", 6, last="approved", start=20)
            + turns("FEAT-OLD", "TASK-O-1", 4, last="approved", start=0)
            + turns("FEAT-RUN", "TASK-R-1", 7, start=10))


def test_per_feature_cap_drops_oldest_turns_of_completed_features(three_features: list[TurnRef]) -> None:
    dropped = select_pruned(three_features, per_feature=5, per_project=100)
    assert dropped == ["TURN-FEAT-DONE-TASK-D-1-T1"]  # RUN has 7 > 5 but is in progress


def test_project_cap_takes_oldest_completed_first(three_features: list[TurnRef]) -> None:
    dropped = select_pruned(three_features, per_feature=5, per_project=12)
    # 17 turns; DONE-T1 by the feature cap, then the 4 oldest completed turns (all of OLD).
    assert dropped == [f"TURN-FEAT-OLD-TASK-O-1-T{n}" for n in range(1, 5)] + ["TURN-FEAT-DONE-TASK-D-1-T1"]
    assert len(three_features) - len(dropped) == 12


def test_in_progress_features_survive_even_over_the_cap(three_features: list[TurnRef]) -> None:
    dropped = select_pruned(three_features, per_feature=1, per_project=1)
    assert not [k for k in dropped if "FEAT-RUN" in k]
    assert len(dropped) == 10  # every completed turn goes; the 7 in-progress ones stay


def test_task_status_overrides_last_decision(three_features: list[TurnRef]) -> None:
    # The task file moved back to in_progress: DONE is no longer completed.
    assert select_pruned(three_features, task_status={"TASK-D-1": "in_progress"}, per_feature=5,
                         per_project=100) == []
    # A task filed as completed counts as done even when its last turn was not approved.
    assert "FEAT-RUN" in completed_features(three_features, {"TASK-R-1": "completed"})


def test_feature_is_completed_only_when_every_task_is_done() -> None:
    refs = turns("FEAT-M", "TASK-M-1", 2, last="approved") + turns("FEAT-M", "TASK-M-2", 2)
    assert completed_features(refs, {}) == set()
    assert completed_features(refs, {"TASK-M-2": "in_review"}) == {"FEAT-M"}


def test_defaults_are_50_per_feature_and_200_per_project() -> None:
    refs = turns("FEAT-A", "TASK-A-1", 60, last="approved")
    assert select_pruned(refs) == [f"TURN-FEAT-A-TASK-A-1-T{n}" for n in range(1, 11)]
    many = [t for i in range(5) for t in turns(f"FEAT-{i}", f"TASK-{i}-1", 45, last="approved", start=0)]
    assert len(many) - len(select_pruned(many)) == 200


def test_task_statuses_match_ids_exactly(tmp_path: Path) -> None:
    for rel in ("completed/TASK-ABC-10-extra.md", "in_progress/FEAT-X/TASK-ABC-1-login.md", "backlog/TASK-Z-2.md"):
        (tmp_path / "tasks" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "tasks" / rel).write_text("---\nid: x\n---\n")
    statuses = task_statuses(tmp_path)
    assert statuses["TASK-ABC-1"] == "in_progress"
    assert statuses["TASK-ABC-10"] == "completed"
    assert statuses["TASK-Z-2"] == "backlog"
