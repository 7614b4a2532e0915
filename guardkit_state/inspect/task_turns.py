"""One task's recorded turns, turn by turn, as its files tell them: what the HTML report draws.

Only the files are read: the task file's frontmatter, the per-turn JSON reports that exist, and
the turn commits when git answers. No index is needed. A report file that cannot be read is named
in ``notes`` and passed over; the frontmatter entry of its turn still tells the turn.

After the last turn the ledger is the one ``show`` reports (:meth:`TaskHistory.ledger`), so the
report's last column and ``show`` never disagree. After each earlier turn it comes from the best
evidence that turn's files hold, in this order:

1. its ``turn_state_turn_N.json`` provenance (the cumulative ledger the loop recorded after it);
2. its ``coach_turn_N.json`` verdicts, applied to the ledger after the turn before, as the loop
   applies them;
3. its turn state's bare status map (files written by tools that keep no provenance);
4. its frontmatter entry alone (GuardKit's own history): an approval implies every pending criterion.

The frontmatter's ``criteria`` map is not evidence for an earlier turn: it holds the statuses after
the last turn only, which :meth:`TaskHistory.ledger` already takes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from guardkit_state.errors import GuardkitStateError
from guardkit_state.inspect.review import read_turn_log
from guardkit_state.model import CoachDecision, Criterion, PlayerReport, TurnEntry, TurnState
from guardkit_state.store.turn_files import EVIDENCE_PATTERN, TurnStore
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.taskfile.locate import TaskLocation, locate_task
from guardkit_state.turns.history import TaskHistory, coach_decision_of
from guardkit_state.turns.ledger import CriteriaCounts, CriteriaLedger
from guardkit_state.turns.resume import resume_point

_Record = TypeVar("_Record")


@dataclass(frozen=True)
class TurnFiles:
    """The validated reports of one turn (``None`` for each that is not on disk)."""

    player: PlayerReport | None = None
    coach: CoachDecision | None = None
    state: TurnState | None = None
    #: GuardKit's ``coach_evidence_turn_N.json`` as written (not a record of ours: no schema).
    evidence: dict[str, Any] | None = None

    @property
    def any(self) -> bool:
        return self.player is not None or self.coach is not None or self.state is not None


@dataclass(frozen=True)
class RecordedTurn:
    """One recorded turn: its frontmatter entry, its reports, the ledger after it."""

    entry: TurnEntry
    files: TurnFiles
    ledger: CriteriaLedger
    #: ``+AC-001`` for a criterion that went green in this turn, ``-AC-002`` for one that fell back
    #: (:meth:`CriteriaLedger.delta`, the words ``feature-build`` prints after each turn).
    delta: list[str]
    commit: str | None = None


@dataclass(frozen=True)
class TaskTurns:
    """A task's turns as the report shows them, with what could not be read said in ``notes``."""

    location: TaskLocation
    task: TaskFile
    turns: list[RecordedTurn]
    #: The criteria after the last turn, counted as ``show`` counts them.
    counts: CriteriaCounts
    stall: str | None
    next_step: str
    notes: list[str]


def task_turns(repo: Path | str, task: str, *, running_turn: int | None = None) -> TaskTurns:
    """``task`` (an id or a task file's path) in ``repo``, turn by turn.

    ``running_turn``: a loop is running that turn now (the next step says so).

    Raises:
        TaskNotFoundError, AmbiguousTaskError, ParseError...: the task file cannot be read.
    """
    location = locate_task(Path(repo), task)
    task_file, store = location.load()
    note = location.resolution.note if location.resolution is not None else None
    notes: list[str] = [note] if note else []
    entries = list(task_file.state.turns) if task_file.state is not None else []
    if running_turn is not None and any(entry.turn >= running_turn for entry in entries):
        running_turn = None  # the files are ahead of the event that said it started: it is recorded
    history = TaskHistory(task_file, store)
    try:
        final = history.ledger()
    except GuardkitStateError:  # its last turn-state file is unreadable (noted below): the frontmatter tells
        final = TaskHistory(task_file, None).ledger()
    found = [_turn_files(store, entry.turn, notes) for entry in entries]
    commits = _commits(Path(repo), location.task_id, notes)
    before = CriteriaLedger.start(task_file.criteria)
    turns: list[RecordedTurn] = []
    for index, (entry, files) in enumerate(zip(entries, found, strict=True)):
        ledger = final if index == len(entries) - 1 else _after(task_file.criteria, before, entry, files)
        turns.append(RecordedTurn(entry, files, ledger, ledger.delta(before), commits.get(entry.turn)))
        before = ledger
    stall = history.stall()
    frontmatter_only = [t.entry.turn for t in turns if not t.files.any]
    if frontmatter_only:
        notes.append(_frontmatter_note(frontmatter_only))
    return TaskTurns(location, task_file, turns, final.counts(), stall.reason if stall is not None else None,
                     _next_step(task_file, store, running_turn, notes), notes)


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


def _turn_files(store: TurnStore, number: int, notes: list[str]) -> TurnFiles:
    """The reports of turn ``number`` that are on disk and valid; an invalid one is noted."""
    return TurnFiles(player=_read(store, "player_turn", number, store.read_player, notes),
                     coach=_read(store, "coach_turn", number, store.read_coach, notes),
                     state=_read(store, "turn_state", number, store.read_turn_state, notes),
                     evidence=_read(store, "coach_evidence", number, store.read_evidence, notes))


def _read(store: TurnStore, kind: str, number: int, reader: Callable[[int], _Record | None],
          notes: list[str]) -> _Record | None:
    """``reader(number)``, or ``None`` (and a note naming the file) when the file cannot be read."""
    try:
        return reader(number)
    except GuardkitStateError as exc:
        notes.append(f"{_name(store, kind, number)} could not be read, so it is left out: {exc}")
    except OSError as exc:
        notes.append(f"{_name(store, kind, number)} could not be read: {exc}")
    return None


def _name(store: TurnStore, kind: str, number: int) -> str:
    if kind == "coach_evidence":
        return EVIDENCE_PATTERN.format(n=number)
    return store.path(kind, number).name


def _commits(repo: Path, task_id: str, notes: list[str]) -> dict[int, str]:
    """Turn number -> commit sha, from the turn commits (none outside git, or when git fails)."""
    try:
        entries = read_turn_log(repo, task_id).entries
    except (GuardkitStateError, OSError) as exc:
        notes.append(f"turn commits not shown: {exc}")
        return {}
    return {e.turn: e.sha for e in entries if e.sha}


def _next_step(task_file: TaskFile, store: TurnStore, running_turn: int | None, notes: list[str]) -> str:
    if running_turn is not None:
        return f"turn {running_turn} is running; this page is rewritten after every turn"
    try:
        return resume_point(task_file, store).describe()
    except GuardkitStateError as exc:
        notes.append(f"next step unknown: {exc}")
        return ""


def _frontmatter_note(numbers: list[int]) -> str:
    return (f"turn(s) {_ranges(numbers)}: no per-turn reports on disk; shown from the task file's frontmatter "
            "(decision, feedback, summary): their criteria cells show only what an approval implies and, after "
            "the last turn, the frontmatter's criteria statuses")


def _ranges(numbers: list[int]) -> str:
    """``1-3, 5``."""
    parts: list[str] = []
    start = prev = numbers[0]
    for n in numbers[1:] + [-1]:
        if n == prev + 1:
            prev = n
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = n
    return ", ".join(parts)


__all__ = ["RecordedTurn", "TaskTurns", "TurnFiles", "task_turns"]
