"""What completing a turn decides, before anything is written: its state, entry, outcome and update.

``TurnLifecycle.complete_turn`` gathers the inputs (the two reports, the ledger before the turn,
the stall window, the promise source) and writes the results; everything in between is here, as
functions of those inputs: the turn state, the stall verdict and outcome, the frontmatter entry,
and the :class:`StateUpdate` that appends it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guardkit_state.model import (
    AutobuildState,
    CoachDecision,
    GateResult,
    Outcome,
    PlayerReport,
    TurnEntry,
    TurnMode,
    TurnState,
)
from guardkit_state.taskfile.splice import SpliceResult, StateUpdate
from guardkit_state.turns.ledger import CriteriaLedger, ignored_ids_note
from guardkit_state.turns.stall import Stall, TurnSignal, detect_stall, gate_signature
from guardkit_state.turns.turn_state import assemble_turn_state

log = logging.getLogger("guardkit_state.turns.completion")

#: How many recently recorded turn entries a write re-asserts (restored if a stale save dropped them).
RESTORABLE_TURNS = 2
#: ``extra`` key of a turn state's warnings: what was recorded differently from what the reports said.
WARNINGS_KEY = "warnings"


@dataclass
class TurnRecord:
    """What ``complete_turn`` did."""

    turn_state: TurnState
    entry: TurnEntry
    ledger: CriteriaLedger
    ledger_before: CriteriaLedger
    outcome: Outcome | None
    stall: Stall | None
    splice: SpliceResult
    written: list[Path] = field(default_factory=list)
    promises_recovered_from: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "turn": self.turn_state.turn_number,
            "decision": self.entry.decision,
            "outcome": self.outcome.value if self.outcome else None,
            "stall": self.stall.reason if self.stall else None,
            "criteria": self.ledger.statuses(),
            "criteria_delta": self.ledger.delta(self.ledger_before),
            "verified": self.ledger.verified_count,
            # Verified by the Coach, implied by an approval, rejected, pending: told apart.
            "criteria_counts": self.ledger.counts().to_dict(),
            "frontmatter_write": self.splice.method,
            "frontmatter_note": self.splice.reason,
            "promises_recovered_from": self.promises_recovered_from,
            "warnings": list(self.turn_state.extra.get(WARNINGS_KEY) or []),
            "written": [str(p) for p in self.written],
            "turn_state": self.turn_state.to_dict(),
        }


@dataclass(frozen=True)
class TurnInputs:
    """Everything a finished turn is judged from (gathered from memory or the files by the lifecycle)."""

    task_id: str
    feature_id: str | None
    number: int
    mode: TurnMode
    started_at: str
    max_turns: int
    player: PlayerReport | None
    coach: CoachDecision | None
    ledger_before: CriteriaLedger
    #: The stall detector's signals of the turns before this one (a window's worth at most).
    history: list[TurnSignal]
    error: str | None = None
    gate_results: list[GateResult] = field(default_factory=list)
    promises_source: int | None = None
    #: With ``error``: the role whose agent failed.
    failed_role: str | None = None
    #: Agent runs the loop measured (role -> run), for a role whose report does not carry its own.
    agent_runs: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class FinishedTurn:
    """A turn as it will be recorded: its state, the ledger after it, its stall and outcome, its entry."""

    state: TurnState
    ledger: CriteriaLedger
    stall: Stall | None
    outcome: Outcome | None
    entry: TurnEntry


def finish_turn(inputs: TurnInputs, completed_at: str) -> FinishedTurn:
    """Judge a turn from its inputs (pure): the ledger, the turn state, a stall, the outcome, the entry."""
    player, coach, error, number = inputs.player, inputs.coach, inputs.error, inputs.number
    ledger_before = inputs.ledger_before
    ledger = ledger_before.apply_coach(number, coach) if coach is not None and error is None else ledger_before
    state = assemble_turn_state(
        task_id=inputs.task_id, feature_id=inputs.feature_id, turn=number, mode=inputs.mode,
        player=player, coach=None if error else coach, ledger=ledger, ledger_before=ledger_before,
        started_at=inputs.started_at, completed_at=completed_at, error=error, gate_results=inputs.gate_results,
        promises_source=inputs.promises_source,
        lacks_promises=player is not None and not player.completion_promises,
        failed_role=inputs.failed_role, agent_runs=inputs.agent_runs,
    )
    stall = detect_stall([*inputs.history, TurnSignal(number, state.feedback_signature, state.verified_count,
                                                      gate_signature(state.gate_results))])
    outcome = _outcome(state, stall, number, inputs.max_turns)
    if stall is not None:
        state.extra["stall"] = stall.reason
    if coach is not None and error is None:
        _note_ignored_criteria(state, ledger_before, coach)
    entry = TurnEntry(
        turn=number, decision="error" if error or coach is None else coach.decision,
        feedback=error if error else state.coach_feedback, timestamp=completed_at,
        player_summary=_summary_line(state.player_summary), player_success=player is not None,
        coach_success=coach is not None and not error, mode=inputs.mode.value,
    )
    return FinishedTurn(state, ledger, stall, outcome, entry)


def _note_ignored_criteria(state: TurnState, ledger_before: CriteriaLedger, coach: CoachDecision) -> None:
    """Warn, in the turn state and the log, of Coach verdicts on ids the task does not have (the
    ledger passed over them; the Coach's report file keeps them as written)."""
    ignored = ledger_before.ignored_ids(coach)
    if not ignored:
        return
    note = ignored_ids_note(state.task_id, ignored, (e.criterion_id for e in ledger_before.entries))
    log.warning("%s turn %d: %s", state.task_id, state.turn_number, note)
    state.extra.setdefault(WARNINGS_KEY, []).append(note)


@dataclass(frozen=True)
class Placement:
    """Where the turn goes in the task file, and the values a loop adds to its state block."""

    state_key: str
    state: AutobuildState | None
    max_turns: int
    started_at: str
    worktree_path: str | None = None
    base_branch: str | None = None


def state_update(finished: FinishedTurn, where: Placement) -> StateUpdate:
    """The frontmatter change that records ``finished``: its entry appended, scalars and status set."""
    state, entry, outcome = where.state, finished.entry, finished.outcome
    scalars: dict[str, Any] = {"current_turn": entry.turn, "last_updated": entry.timestamp}
    if state is None or state.max_turns != where.max_turns:
        scalars["max_turns"] = where.max_turns
    if where.worktree_path is not None:
        scalars["worktree_path"] = where.worktree_path
    if where.base_branch is not None:
        scalars["base_branch"] = where.base_branch
    if state is None or not state.started_at:
        scalars["started_at"] = where.started_at
    if outcome is not None:
        scalars["outcome"] = outcome.value
    elif state is not None and state.extra.get("outcome"):
        scalars["outcome"] = None
    return StateUpdate(
        key=where.state_key,
        block_scalars=scalars,
        criteria=finished.ledger.statuses() or None,
        # The last turns this process knows are recorded ride along: TaskFile.apply drops those
        # the file lists, and puts back any a stale editor save dropped since they were written.
        append_turns=[*(t.to_dict() for t in (state.turns[-RESTORABLE_TURNS:] if state else [])),
                      entry.to_dict()],
        top_level={"status": outcome.task_status if outcome else "in_progress"},
    )


def _outcome(state: TurnState, stall: Stall | None, number: int, max_turns: int) -> Outcome | None:
    if state.coach_decision == "approved":
        return Outcome.APPROVED
    if stall is not None:
        return Outcome.UNRECOVERABLE_STALL
    if number >= max_turns:
        return Outcome.MAX_TURNS_EXCEEDED
    return None


def _summary_line(text: str, limit: int = 200) -> str:
    """The Player's summary as the frontmatter entry keeps it: one line, at most ``limit`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


__all__ = ["RESTORABLE_TURNS", "WARNINGS_KEY", "FinishedTurn", "Placement", "TurnInputs", "TurnRecord", "finish_turn",
           "state_update"]
