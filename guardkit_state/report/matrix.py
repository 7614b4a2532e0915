"""The criteria matrix: the cumulative ledger after each turn, as cells.

After the last turn the ledger is the one ``guardkit-state show`` reports, read the same way
(:meth:`TaskHistory.ledger`), so the matrix's last column and ``show`` never disagree. After each
earlier turn it comes from the best evidence that turn's files hold, in this order:

1. its ``turn_state_turn_N.json`` provenance (the cumulative ledger the loop recorded after it);
2. its ``coach_turn_N.json`` verdicts, applied to the ledger after the turn before, as the loop
   applies them;
3. its turn state's bare status map (files written by tools that keep no provenance);
4. its frontmatter entry alone (GuardKit's own history): an approval implies every pending criterion.

The frontmatter's ``criteria`` map is not evidence for an earlier turn: it holds the statuses after
the last turn only, which :meth:`TaskHistory.ledger` already takes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from guardkit_state.errors import GuardkitStateError
from guardkit_state.model import Criterion, LedgerEntry, TurnEntry
from guardkit_state.report.columns import TurnFiles
from guardkit_state.report.task_report import Cell, CellStatus, MatrixRow
from guardkit_state.turns.history import TaskHistory, coach_decision_of
from guardkit_state.turns.ledger import CriteriaLedger


def final_ledger(history: TaskHistory) -> CriteriaLedger:
    """The ledger after the last recorded turn, as ``show`` reports it.

    When the last turn-state file cannot be read (the report names it in its notes already), the
    frontmatter alone tells the statuses, as the status counts do.
    """
    try:
        return history.ledger()
    except GuardkitStateError:
        return TaskHistory(history.task, None).ledger()


def ledgers(history: TaskHistory, turns: Sequence[tuple[TurnEntry, TurnFiles]],
            final: CriteriaLedger) -> list[CriteriaLedger]:
    """The cumulative ledger after each of ``turns`` (in order); ``final`` after the last one."""
    ledger = CriteriaLedger.start(history.task.criteria)
    out: list[CriteriaLedger] = []
    for index, (entry, found) in enumerate(turns):
        ledger = final if index == len(turns) - 1 else _after(history.task.criteria, ledger, entry, found)
        out.append(ledger)
    return out


def _after(criteria: Sequence[Criterion], before: CriteriaLedger, entry: TurnEntry,
           found: TurnFiles) -> CriteriaLedger:
    """The ledger after an earlier turn, from the best evidence its files hold."""
    state = found.state
    if state is not None and state.criteria_provenance:
        return CriteriaLedger.start(criteria, state.criteria_provenance)
    if found.coach is not None:
        return before.apply_coach(entry.turn, found.coach)
    ledger = before
    if state is not None and state.acceptance_criteria_status:
        ledger = _carry(criteria, ledger, state.acceptance_criteria_status)
    if coach_decision_of(entry) == "approved":
        ledger = ledger.imply_approval(entry.turn)
    return ledger


def _carry(criteria: Sequence[Criterion], ledger: CriteriaLedger, statuses: Mapping[str, str]) -> CriteriaLedger:
    """``ledger`` moved to ``statuses``, keeping the provenance of every status that did not change."""
    carried: dict[str, dict[str, Any]] = {}
    for cid, status in statuses.items():
        entry = ledger.get(cid)
        carried[cid] = entry.to_dict() if entry is not None and entry.status == status else {"status": status}
    return CriteriaLedger.start(criteria, carried)


def cell_status(entry: LedgerEntry | None) -> CellStatus:
    """A ledger entry's cell: ``implied`` tells an approval's verification from an itemised one."""
    if entry is None:
        return "pending"
    if entry.status == "verified":
        return "implied" if entry.implied else "verified"
    return "rejected" if entry.status == "rejected" else "pending"


def rows(criteria: Sequence[Criterion], turn_ledgers: Sequence[CriteriaLedger]) -> list[MatrixRow]:
    """One row per criterion (the task's order, then ids only the Coach named), one cell per turn."""
    texts = {c.id: c.text for c in criteria}
    order: list[str] = list(texts)
    for ledger in turn_ledgers:
        order += [e.criterion_id for e in ledger.entries if e.criterion_id not in order]
    out: list[MatrixRow] = []
    for cid in order:
        cells: list[Cell] = []
        previous: CellStatus = "pending"
        for ledger in turn_ledgers:
            cells.append(_cell(ledger.get(cid), previous))
            previous = cells[-1].status
        out.append(MatrixRow(cid, texts.get(cid, ""), tuple(cells)))
    return out


def _cell(entry: LedgerEntry | None, previous: CellStatus) -> Cell:
    """The cell of ``entry``, after a turn whose cell was ``previous``."""
    status = cell_status(entry)
    by = entry.set_by_turn if entry is not None else None
    return Cell(status=status,
                # A hand-written provenance may hold anything there: only a turn number is shown.
                set_by_turn=by if isinstance(by, int) and not isinstance(by, bool) else None,
                notes=(entry.notes or "") if entry is not None else "",
                changed=status != previous,
                regression=previous in ("verified", "implied") and status not in ("verified", "implied"))


def deltas(criteria: Sequence[Criterion], turn_ledgers: Sequence[CriteriaLedger]) -> list[list[str]]:
    """For each turn, ``+AC-001`` for a criterion that went green in it, ``-AC-002`` for one that fell
    back: :meth:`CriteriaLedger.delta`, the words ``feature-build`` prints after each turn."""
    before = CriteriaLedger.start(criteria)
    out: list[list[str]] = []
    for ledger in turn_ledgers:
        out.append(ledger.delta(before))
        before = ledger
    return out
