"""What a report shows, as plain records: built from the files by :mod:`.collect`, drawn by :mod:`.page`.

These records hold raw (unescaped) text; the page escapes every value as it draws it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from guardkit_state.turns.ledger import CriteriaCounts
from guardkit_state.turns.spend import reported_usd

#: A criteria-matrix cell: verified by an itemised Coach verdict, rejected, nothing known yet, or
#: verified only because the Coach approved the task without itemising it.
CellStatus = Literal["verified", "rejected", "pending", "implied"]


@dataclass(frozen=True)
class Cell:
    """One criterion after one turn."""

    status: CellStatus
    #: The turn that set this status (``None``: never judged).
    set_by_turn: int | None = None
    notes: str = ""
    #: The status changed in this turn (the moment a criterion went green, or fell back).
    changed: bool = False
    #: It was verified after the previous turn and is not any more.
    regression: bool = False


@dataclass(frozen=True)
class MatrixRow:
    id: str
    text: str
    #: One cell per turn, in turn order.
    cells: tuple[Cell, ...]


@dataclass(frozen=True)
class Gate:
    name: str
    passed: bool | None
    actual: object
    threshold: object
    required: bool = True


@dataclass(frozen=True)
class Issue:
    severity: str
    text: str


@dataclass
class TurnColumn:
    """One column of the timeline, and what is folded under it."""

    number: int
    mode: str
    decision: str
    #: ``implemented``, ``failed``, ``blocked``, or ``unknown`` when nothing says.
    player_outcome: str
    timestamp: str | None = None
    duration_seconds: float | None = None
    commit: str | None = None
    tests: str | None = None
    gates: list[Gate] = field(default_factory=list)
    player_summary: str = ""
    implementation_notes: str = ""
    files: list[str] = field(default_factory=list)
    feedback: str | None = None
    rationale: str = ""
    issues: list[Issue] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)
    lessons: list[str] = field(default_factory=list)
    what_to_try_next: str | None = None
    error: str | None = None
    #: Where this turn was read from: ``reports`` (its JSON files) or ``frontmatter`` (the entry only).
    source: str = "reports"
    #: Criteria whose status this turn changed: ``+AC-001`` (went green), ``-AC-002`` (fell back).
    delta: list[str] = field(default_factory=list)
    #: The turn's agent runs (role -> agent, model, session, cost, tokens, duration).
    agent_runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: GuardKit's Coach evidence of the turn, in one line (gates, criteria, tests, honesty), when kept.
    evidence: str | None = None


@dataclass
class TaskReport:
    """Everything one task's report shows."""

    task_id: str
    title: str
    status: str
    path: str
    max_turns: int | None
    outcome: str | None
    turns: list[TurnColumn]
    criteria: list[MatrixRow]
    #: The criteria after the last turn, counted as ``show`` counts them.
    counts: CriteriaCounts
    next_step: str = ""
    notes: list[str] = field(default_factory=list)
    generated_at: str = ""
    #: The stall ``show`` reports (the same detector, the same recorded turns), or None.
    stall: str | None = None

    @property
    def cost_usd(self) -> float | None:
        """What the agents reported the task's turns cost, or None when none reported a cost."""
        # (Counted as ``show``, ``status`` and --max-cost count them: never a negative, NaN or infinite figure.)
        costs = [cost for t in self.turns for run in t.agent_runs.values()
                 if (cost := reported_usd(run.get("cost_usd"))) is not None]
        return round(sum(costs), 6) if costs else None

    def summary(self) -> dict[str, Any]:
        """The report's counts, for ``--json`` and tools."""
        return {
            "cost_usd": self.cost_usd,
            "task_id": self.task_id,
            "stall": self.stall,
            "turns": len(self.turns),
            "criteria": len(self.criteria),
            "criteria_counts": self.counts.to_dict(),
            "outcome": self.outcome,
            "sources": sorted({t.source for t in self.turns}),
            "notes": list(self.notes),
        }

    def final_statuses(self) -> dict[str, CellStatus]:
        """Each criterion's cell after the last turn (``pending`` when no turn was recorded)."""
        return {row.id: row.cells[-1].status if row.cells else "pending" for row in self.criteria}
