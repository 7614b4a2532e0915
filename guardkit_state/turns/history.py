"""A recorded turn as the files know it: its ``turn_state_turn_N.json``, else its frontmatter entry.

GuardKit's own loop records each turn in the task's frontmatter (``autobuild_state.turns``, or the
legacy ``feature_build`` block) with its decision, feedback and player summary, and its per-turn
JSON reports often live only on the machine that ran it (``.guardkit/autobuild/`` is git-ignored).
Those entries are history all the same: the next turn's context, the stall detector and search read
them, as a :class:`TurnState` built from the entry, marked ``source: frontmatter``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guardkit_state.errors import GuardkitStateError
from guardkit_state.model import TurnEntry, TurnState, turn_state_id
from guardkit_state.store.turn_files import TurnStore, artifacts_dir
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.turns.ledger import CriteriaCounts, CriteriaLedger
from guardkit_state.turns.stall import (
    NO_CHANGE_WINDOW,
    Stall,
    TurnSignal,
    detect_stall,
    feedback_signature,
    gate_signature,
)

log = logging.getLogger("guardkit_state.turns.history")

#: ``extra["source"]`` of a turn state built from a frontmatter entry (there is no file behind it).
FRONTMATTER_SOURCE = "frontmatter"

_COACH_DECISIONS: dict[str, Any] = {
    "approve": "approved", "approved": "approved", "reject": "rejected", "rejected": "rejected",
    "feedback": "feedback", "error": "error",
}


def coach_decision_of(entry: TurnEntry) -> Any:
    """The turn-state decision (``approved``/``feedback``/``rejected``/``error``) of an entry's."""
    return _COACH_DECISIONS.get(str(entry.decision).strip().lower(), "feedback")


def entry_turn_state(entry: TurnEntry, *, task_id: str, feature_id: str | None,
                     verified_count: int | None) -> TurnState:
    """The turn state a frontmatter entry tells: decision, feedback, summary, when; no criteria.

    ``verified_count`` is the cumulative count the detector may assume for the turn (``None``:
    unknown, stored as 0 with ``verified_count_known: false``).
    """
    mode = entry.mode or ("fresh_start" if entry.turn == 1 else "continuing_work")
    state = TurnState(
        id=turn_state_id(feature_id, task_id, entry.turn), feature_id=feature_id, task_id=task_id,
        turn_number=entry.turn, mode=mode, player_summary=entry.player_summary or "",
        player_decision="failed" if entry.player_success is False else "implemented",
        coach_decision=coach_decision_of(entry), coach_feedback=entry.feedback or None,
        completed_at=entry.timestamp, feedback_signature=feedback_signature(entry.feedback),
        verified_count=verified_count or 0,
    )
    state.extra["source"] = FRONTMATTER_SOURCE
    if verified_count is None:
        state.extra["verified_count_known"] = False
    return state


def turn_signal(state: TurnState) -> TurnSignal:
    """What the stall detector needs from a turn state (a frontmatter one may not know its count)."""
    known = state.extra.get("verified_count_known", True) is not False
    return TurnSignal(state.turn_number, state.feedback_signature, state.verified_count if known else None,
                      gate_signature(state.gate_results))


@dataclass(frozen=True)
class TaskHistory:
    """A task's recorded turns, read from its files: turn-state files, else frontmatter entries.

    Reads only what is asked for: a turn, or the few turns of the stall window, never every
    earlier report (a task may have hundreds of turns).
    """

    task: TaskFile
    #: The task's turn files; ``None`` to read the frontmatter alone.
    store: TurnStore | None
    #: Turns already read through this view (the ledger and the stall window share the last one).
    _read: dict[int, TurnState | None] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def recorded_turns(self) -> int:
        return len(self.task.state.turns) if self.task.state else 0

    def turn_state(self, number: int) -> TurnState | None:
        """Turn ``number`` as the files know it: its turn-state file, else its frontmatter entry.

        Read once per view: asked again, the same object is returned.
        """
        if number not in self._read:
            self._read[number] = self._turn_state(number)
        return self._read[number]

    def _turn_state(self, number: int) -> TurnState | None:
        if number < 1:
            return None
        record = self.store.read("turn_state", number) if self.store is not None else None
        if record is not None:
            return TurnState.from_dict(record)
        turns = self.task.state.turns if self.task.state else []
        # Entries are normally numbered 1..n (a hand-edited gap is refused before any write).
        entry = turns[number - 1] if number <= len(turns) else None
        if entry is None or entry.turn != number:
            entry = next((t for t in turns if t.turn == number), None)
        if entry is None:
            return None
        # The count a frontmatter-only turn may assume: 0 while nothing was ever verified, else
        # unknown (the frontmatter map holds only the latest statuses, not each turn's).
        statuses = self.task.state.criteria.values() if self.task.state else ()
        return entry_turn_state(entry, task_id=self.task.task_id, feature_id=self.task.feature_id,
                                verified_count=None if "verified" in statuses else 0)

    def ledger_before(self, turn: int) -> CriteriaLedger:
        """The cumulative criteria ledger as turn ``turn`` starts."""
        previous = self.turn_state(turn - 1)
        if previous is not None and previous.criteria_provenance:
            return CriteriaLedger.start(self.task.criteria, previous.criteria_provenance)
        # Turns recorded by another tool carry only the frontmatter map: statuses without provenance.
        frontmatter = self.task.state.criteria if self.task.state else {}
        carried = {cid: {"status": status} for cid, status in frontmatter.items()}
        ledger = CriteriaLedger.start(self.task.criteria, carried)
        if previous is not None and previous.coach_decision == "approved":
            # An approval without itemised verdicts: what it says of each criterion is implied.
            ledger = ledger.imply_approval(previous.turn_number)
        return ledger

    def ledger(self) -> CriteriaLedger:
        """The cumulative ledger after the last recorded turn."""
        return self.ledger_before(self.recorded_turns + 1)

    def stall_history(self, upto: int) -> list[TurnSignal]:
        """Signals of the turns before ``upto`` (at most a window's worth)."""
        signals: list[TurnSignal] = []
        for number in range(max(1, upto - NO_CHANGE_WINDOW + 1), upto):
            state = self.turn_state(number)
            if state is None:
                signals = []  # a gap breaks the window
            else:
                signals.append(turn_signal(state))
        return signals

    def stall(self) -> Stall | None:
        """The stall the recorded turns show, if any."""
        last = self.turn_state(self.recorded_turns)
        if last is None:
            return None
        return detect_stall([*self.stall_history(last.turn_number), turn_signal(last)])


def criteria_counts(task: TaskFile, checkout: Path) -> CriteriaCounts:
    """The task's criteria counts as ``show`` tells them (``checkout``: where its turn files live).

    A turn-state file that cannot be read is passed over: the frontmatter still tells the statuses.
    """
    try:
        return TaskHistory(task, TurnStore(artifacts_dir(checkout, task.task_id), task.task_id)).ledger().counts()
    except GuardkitStateError as exc:
        log.info("criteria of %s counted from the frontmatter only: %s", task.task_id, exc)
        return TaskHistory(task, None).ledger().counts()


__all__ = ["FRONTMATTER_SOURCE", "TaskHistory", "coach_decision_of", "criteria_counts", "entry_turn_state",
           "turn_signal"]
