"""Read one task's loop from its files into a :class:`TaskReport` (the I/O edge of the report).

Only the files are read: the task file's frontmatter, the per-turn JSON reports when they exist,
and the turn commits when the repository is a git repository. No index is needed. A report file
that cannot be read is named in the report's notes and passed over; the frontmatter entry of its
turn still tells the turn.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from guardkit_state.errors import GuardkitStateError, InputError
from guardkit_state.inspect.review import turn_log
from guardkit_state.model import TurnEntry
from guardkit_state.report import matrix
from guardkit_state.report.columns import TurnFiles, turn_view
from guardkit_state.report.task_report import TaskReport, TurnColumn
from guardkit_state.store.turn_files import TurnStore
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.taskfile.locate import locate_task
from guardkit_state.turns.history import TaskHistory
from guardkit_state.turns.resume import resume_point

_FEATURE_ID = re.compile(r"^FEAT-[A-Za-z0-9][A-Za-z0-9._-]*$")
_Record = TypeVar("_Record")


def build_task_report(repo: Path | str, task: str, *, running_turn: int | None = None,
                      generated_at: str | None = None) -> TaskReport:
    """The report of ``task`` (an id or a task file's path) in ``repo``, read from its files.

    ``running_turn``: a loop is running that turn now (the page says so instead of the next step).

    Raises:
        InputError: ``task`` names a feature (its report is
            :func:`~guardkit_state.report.feature.build_feature_report`'s).
        TaskNotFoundError, AmbiguousTaskError, ParseError...: the task file cannot be read.
    """
    if _FEATURE_ID.match(task):
        raise InputError(f"{task} is a feature: its report is build_feature_report's "
                         f"('guardkit-state report {task}')", expected="a task id such as TASK-AUTH-001")
    location = locate_task(Path(repo), task)
    task_file, store = location.load()
    note = location.resolution.note if location.resolution is not None else None
    notes: list[str] = [note] if note else []
    state = task_file.state
    entries = list(state.turns) if state is not None else []
    if running_turn is not None and any(entry.turn >= running_turn for entry in entries):
        running_turn = None  # the files are ahead of the event that said it started: it is recorded
    turns = [(entry, _turn_files(store, entry.turn, notes)) for entry in entries]
    history = TaskHistory(task_file, store)
    final = matrix.final_ledger(history)
    turn_ledgers = matrix.ledgers(history, turns, final)
    rows = matrix.rows(task_file.criteria, turn_ledgers)
    deltas = matrix.deltas(task_file.criteria, turn_ledgers)
    commits = _commits(Path(repo), location.task_id, notes)
    views = [turn_view(entry, found, commit=commits.get(entry.turn), delta=delta)
             for (entry, found), delta in zip(turns, deltas, strict=True)]
    _from_guardkit_history(views, entries, state.last_updated if state is not None else None)
    stall = history.stall()
    frontmatter_only = [t.number for t in views if t.source == "frontmatter"]
    if frontmatter_only:
        notes.append(_frontmatter_note(frontmatter_only))
    outcome = state.extra.get("outcome") if state is not None else None
    return TaskReport(
        task_id=location.task_id, title=task_file.title or "", status=task_file.status or "—",
        path=_shown_path(location.task_path, Path(repo)),
        max_turns=state.max_turns if state is not None else None,
        outcome=None if outcome is None else str(outcome), turns=views, criteria=rows,
        counts=final.counts(), next_step=_next_step(task_file, store, running_turn, notes),
        notes=notes, generated_at=generated_at or datetime.now().astimezone().isoformat(timespec="seconds"),
        stall=stall.reason if stall is not None else None,
    )


def _from_guardkit_history(views: list[TurnColumn], entries: list[TurnEntry], last_updated: object) -> None:
    """Fill what a turn known only from its frontmatter entry (GuardKit's own history) still tells.

    GuardKit stamps each entry when the turn starts: a turn lasted until the next one started (the
    last one until the block's ``last_updated``). Its mode is GuardKit's own default: ``fresh_start``
    for turn 1, ``continuing_work`` after (what the stall window and the context read too).
    """
    starts = [_when(entry.timestamp) for entry in entries] + [_when(last_updated)]
    for index, view in enumerate(views):
        if view.source != "frontmatter":
            continue
        if view.mode == "—":
            view.mode = "fresh_start" if view.number == 1 else "continuing_work"
        begin, end = starts[index], starts[index + 1]
        if view.duration_seconds is None and begin is not None and end is not None \
                and (begin.tzinfo is None) == (end.tzinfo is None) and end > begin:
            view.duration_seconds = (end - begin).total_seconds()


def _when(value: object) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None


def _turn_files(store: TurnStore, number: int, notes: list[str]) -> TurnFiles:
    """The reports of turn ``number`` that are on disk and valid; an invalid one is noted."""
    return TurnFiles(player=_read(store, "player_turn", number, store.read_player, notes),
                     coach=_read(store, "coach_turn", number, store.read_coach, notes),
                     state=_read(store, "turn_state", number, store.read_turn_state, notes))


def _read(store: TurnStore, kind: str, number: int, reader: Callable[[int], _Record | None],
          notes: list[str]) -> _Record | None:
    """``reader(number)``, or ``None`` (and a note naming the file) when the file cannot be read."""
    try:
        return reader(number)
    except GuardkitStateError as exc:
        notes.append(f"{store.path(kind, number).name} could not be read, so it is left out: {exc}")
    except OSError as exc:
        notes.append(f"{store.path(kind, number).name} could not be read: {exc}")
    return None


def _commits(repo: Path, task_id: str, notes: list[str]) -> dict[int, str]:
    """Turn number -> commit sha, from the turn commits (none outside git, or when git fails)."""
    try:
        entries = turn_log(repo, task_id)
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
    listed = _ranges(numbers)
    return (f"turn(s) {listed}: no per-turn reports on disk; shown from the task file's frontmatter (decision, "
            "feedback, summary): their criteria cells show only what an approval implies and, after the last "
            "turn, the frontmatter's criteria statuses")


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


def _shown_path(path: Path, repo: Path) -> str:
    """The task file relative to the repository (a page attached to a pull request names no home folder)."""
    try:
        return str(path.resolve().relative_to(repo.resolve()))
    except (ValueError, OSError):
        return str(path)
