"""One recorded turn's reports, as data: the Player's report, the Coach's decision and the turn state.

Read from the copy ``show`` reads (the loop's worktree while one exists), each file through the
turn store, so a report is validated as every other reader validates it. A turn GuardKit's own
loop recorded only in the frontmatter has no report files: its turn state is the one the ledger
reads from its entry, and ``turn_state_source`` says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guardkit_state.errors import InputError
from guardkit_state.taskfile.locate import TaskLocation, locate_task
from guardkit_state.turns.history import TaskHistory


@dataclass(frozen=True)
class TurnReports:
    """What one recorded turn left in the files."""

    location: TaskLocation
    turn: int
    #: ``player_turn_N.json`` as validated, or None (a turn listed only in the frontmatter).
    player: dict[str, Any] | None
    #: ``coach_turn_N.json`` as validated, or None.
    coach: dict[str, Any] | None
    #: The turn state: its file, else the one its frontmatter entry gives.
    turn_state: dict[str, Any] | None
    #: ``"file"`` (turn_state_turn_N.json), ``"frontmatter"`` (its entry alone) or None.
    turn_state_source: str | None

    def to_dict(self) -> dict[str, Any]:
        resolution = self.location.resolution
        return {"task_id": self.location.task_id, "turn": self.turn, "player": self.player, "coach": self.coach,
                "turn_state": self.turn_state, "turn_state_source": self.turn_state_source,
                "resolved": resolution.to_dict() if resolution else None, "copy": self.location.to_dict()}


def turn_reports(repo_root: Path | str, task_id: str, turn: int | None = None) -> TurnReports:
    """The reports of recorded turn ``turn`` of ``task_id`` (default: the last recorded turn).

    Raises:
        InputError: ``turn`` is not a recorded turn (1 .. the number recorded), or none is recorded.
        SchemaError, ParseError: a report file is not a valid record (named with its path).
    """
    location = locate_task(repo_root, task_id)
    task, store = location.load()
    recorded = len(task.state.turns) if task.state else 0
    number = recorded if turn is None else turn
    if recorded == 0:
        raise InputError(f"{location.task_id} has no recorded turn yet", task_id=location.task_id,
                         fix="'record' or a loop records one")
    if not 1 <= number <= recorded:
        raise InputError(f"turn {number} is not recorded", task_id=location.task_id, expected=f"1..{recorded}")
    state: dict[str, Any] | None = store.read("turn_state", number)
    source: str | None = "file"
    if state is None:
        derived = TaskHistory(task, None).turn_state(number)
        state, source = (derived.to_dict(), "frontmatter") if derived is not None else (None, None)
    return TurnReports(location, number, store.read("player_turn", number), store.read("coach_turn", number),
                       state, source)


__all__ = ["TurnReports", "turn_reports"]
