"""The criteria matrix: the ledger after each turn (:mod:`guardkit_state.inspect.task_turns`) as cells."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from guardkit_state.model import Criterion, LedgerEntry
from guardkit_state.report.task_report import Cell, CellStatus, MatrixRow

if TYPE_CHECKING:
    from guardkit_state.turns.ledger import CriteriaLedger


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
