"""Read-only views of one task, as data: what ``show``, ``context`` and ``suggest-mode`` print.

Each function finds the task, reads what it needs through the public lifecycle and ledger API,
and returns a record whose ``to_dict()`` is the command's ``--json``; the commands only render.
``show`` and ``context`` read the copy the loop works on (its worktree's while one exists).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guardkit_state.errors import GuardkitStateError, InputError
from guardkit_state.inspect.agent_costs import TaskCost, task_cost
from guardkit_state.inspect.turn_reports import describe_evidence
from guardkit_state.taskfile.discovery import listing_scope
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.taskfile.locate import TaskLocation, locate_task
from guardkit_state.taskfile.resolve import find_task
from guardkit_state.turns.history import TaskHistory
from guardkit_state.turns.resume import ResumePoint, resume_point

if TYPE_CHECKING:
    from guardkit_state.config.modes import ModeAdvice
    from guardkit_state.model import Criterion, TurnEntry
    from guardkit_state.store.turn_files import TurnStore
    from guardkit_state.turns.ledger import CriteriaCounts
    from guardkit_state.turns.stall import Stall


@dataclass(frozen=True)
class CriterionRow:
    """One acceptance criterion as the recorded turns leave it."""

    id: str
    text: str
    status: str
    set_by_turn: int | None
    #: Verified only because the Coach approved the task, not by a verdict on this criterion.
    implied_by_approval: bool
    #: GuardKit's routing-law stamp on the criterion (its ``verifier:`` and ``test_ref:``), if any.
    verifier: str | None = None
    test_ref: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {"id": self.id, "text": self.text, "status": self.status, "set_by_turn": self.set_by_turn,
                "implied_by_approval": self.implied_by_approval}
        if self.verifier is not None:
            data |= {"verifier": self.verifier, "test_ref": self.test_ref}
        return data


@dataclass(frozen=True)
class TaskView:
    """A task's loop at a glance: its turns, criteria, stall and resume point."""

    location: TaskLocation
    task: TaskFile
    criteria: tuple[CriterionRow, ...]
    counts: CriteriaCounts
    stall: Stall | None
    resume: ResumePoint
    #: What the agents of the recorded turns cost (reported by the agents; None where none did).
    cost: TaskCost | None = None
    #: GuardKit's Coach evidence of the last turn that has some: (turn, its file, one-line summary).
    evidence: tuple[int, str, str] | None = None

    @property
    def verifier(self) -> dict[str, Any] | None:
        """GuardKit's routing-law stamp on the task (``verifier:``, with ``test_ref:`` and
        ``test_paths:`` when given): the home that proves it. None when the task has none."""
        home = self.task.data.get("verifier")
        if home is None:
            return None
        stamp: dict[str, Any] = {"verifier": home}
        for key in ("test_ref", "test_paths"):
            if self.task.data.get(key) is not None:
                stamp[key] = self.task.data[key]
        return stamp

    @property
    def turns(self) -> list[TurnEntry]:
        return self.task.state.turns if self.task.state else []

    @property
    def max_turns(self) -> int | None:
        return self.task.state.max_turns if self.task.state else None

    @property
    def outcome(self) -> Any:
        """The ``outcome`` the frontmatter records (as written there), or None."""
        return self.task.state.extra.get("outcome") if self.task.state else None

    @property
    def takeovers(self) -> list[Any]:
        """Takeovers of the task by another machine (``feature-build --remote``), as recorded."""
        found = self.task.state.extra.get("takeovers") if self.task.state else None
        return found if isinstance(found, list) else []

    def to_dict(self) -> dict[str, Any]:
        location = self.location
        return {
            "task_id": location.task_id,
            "title": self.task.title,
            "path": str(location.task_path),
            "in_worktree": location.in_worktree,
            # Which copy was read and why, and the other copies of the id (empty when it has one file).
            "resolved": location.resolution.to_dict() if location.resolution else None,
            "copy": location.to_dict(),
            "status": self.task.status,
            "max_turns": self.max_turns,
            "outcome": self.outcome,
            "turns": [t.to_dict() for t in self.turns],
            "takeovers": self.takeovers,
            "criteria": [c.to_dict() for c in self.criteria],
            "criteria_counts": self.counts.to_dict(),
            "stall": self.stall.reason if self.stall else None,
            "resume": self.resume.to_dict(),
            "cost": self.cost.to_dict() if self.cost is not None else None,
            "verifier": self.verifier,
            "coach_evidence": {"turn": self.evidence[0], "path": self.evidence[1], "summary": self.evidence[2]}
            if self.evidence is not None else None,
        }


def task_view(repo_root: Path | str, task_id: str) -> TaskView:
    """``task_id`` (an id or a task file's path) as ``show`` shows it (one read: see
    :func:`~guardkit_state.taskfile.discovery.listing_scope`)."""
    with listing_scope():
        return _task_view(repo_root, task_id)


def _task_view(repo_root: Path | str, task_id: str) -> TaskView:
    location = locate_task(repo_root, task_id)
    task, store = location.load()
    point = resume_point(task, store)
    # The ledger and the stall as the recorded turns tell them: turn-state files, else the turns
    # GuardKit's own loop listed in the frontmatter. Read through the TaskHistory that
    # TurnLifecycle.ledger() reads, not a TurnLifecycle itself: that refuses a hand-edited history
    # (a gap), and `show` is how the user looks at such a file.
    history = TaskHistory(task, store)
    ledger = history.ledger()
    known = {c.id: c for c in task.criteria}
    rows = tuple(CriterionRow(e.criterion_id, known[e.criterion_id].text if e.criterion_id in known else "", e.status,
                              e.set_by_turn, e.implied, *(_stamp(known.get(e.criterion_id))))
                 for e in ledger.entries)
    recorded = len(task.state.turns) if task.state else 0
    cost = task_cost(history, recorded)
    return TaskView(location, task, rows, ledger.counts(), history.stall(), point, cost,
                    _last_evidence(store, recorded))


def _stamp(criterion: Criterion | None) -> tuple[str | None, str | None]:
    return (criterion.verifier, criterion.test_ref) if criterion is not None else (None, None)


def _last_evidence(store: TurnStore, recorded: int) -> tuple[int, str, str] | None:
    """GuardKit's Coach evidence of the last recorded turn it kept some for (of any turn, when none
    of the recorded ones has), summarised; an unreadable file is said as such."""
    found = store.evidence_turns()
    turns = [turn for turn in found if turn <= recorded] or found
    if not turns:
        return None
    path = store.evidence_path(turns[-1])
    try:
        data = store.read_evidence(turns[-1])
    except GuardkitStateError as exc:
        return turns[-1], str(path), f"unreadable: {exc}"
    return turns[-1], str(path), describe_evidence(data) if data is not None else "gone since it was listed"


@dataclass(frozen=True)
class ContinuationContext:
    """The markdown a turn's Player receives in ``GUARDKIT_CONTEXT_FILE``."""

    location: TaskLocation
    turn: int
    text: str

    def to_dict(self) -> dict[str, Any]:
        resolution = self.location.resolution
        return {"task_id": self.location.task_id, "turn": self.turn, "context": self.text,
                "resolved": resolution.to_dict() if resolution else None, "copy": self.location.to_dict()}


def continuation_context(repo_root: Path | str, task_id: str, turn: int | None = None) -> ContinuationContext:
    """The context turn ``turn`` (default: the next) starts from, as the loop would write it.

    Raises:
        InputError: ``turn`` is not one of 1 .. the next turn.
    """
    from guardkit_state.config import load_config, render_player_role_section
    from guardkit_state.turns.lifecycle import TurnLifecycle

    with listing_scope():
        location = locate_task(repo_root, task_id)
        task, _ = location.load()
    lifecycle = TurnLifecycle(task, root=location.checkout)
    next_turn = lifecycle.recorded_turns + 1
    # Turn 0 is out of range too (not "the next turn"): only an absent turn means the next.
    number = next_turn if turn is None else turn
    if number < 1 or number > next_turn:
        raise InputError(f"turn {number} is out of range", task_id=task_id, expected=f"1..{next_turn}")
    # The same text the loop writes, Player role section included.
    role_section = render_player_role_section(load_config(Path(repo_root).resolve()))
    return ContinuationContext(location, number, lifecycle.context_for(number, role_section=role_section))


@dataclass(frozen=True)
class ModeSuggestion:
    """The advisory implementation mode for a task's complexity (nothing is blocked by it)."""

    task_id: str | None
    #: The complexity as written (a task may hold something that is not a number).
    complexity: object
    #: Where it came from: the task file's path, or the value given.
    source: str
    #: None when the complexity is not an estimate in 1-10.
    advice: ModeAdvice | None

    def to_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "complexity": self.complexity, "complexity_source": self.source,
                "advice": self.advice.to_dict() if self.advice else None}


def mode_suggestion(repo_root: Path | str, task_id: str | None = None, *, complexity: int | None = None,
                    source: str = "given") -> ModeSuggestion:
    """The mode for ``complexity`` when given, else for ``task_id``'s own complexity."""
    from guardkit_state.config import load_config

    if complexity is None:
        if task_id is None:
            raise InputError("a task id or a complexity is needed")
        task = TaskFile.load(find_task(Path(repo_root), task_id))
        complexity, shown, source = task.complexity, task.data.get("complexity"), str(task.path)
    else:
        shown = complexity
    return ModeSuggestion(task_id, shown, source, load_config(Path(repo_root)).suggest_mode(complexity))


__all__ = ["ContinuationContext", "CriterionRow", "ModeSuggestion", "TaskView", "continuation_context",
           "mode_suggestion", "task_view"]
