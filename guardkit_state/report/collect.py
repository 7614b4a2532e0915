"""One task's loop into a :class:`TaskReport`: the turns :mod:`guardkit_state.inspect.task_turns`
reads from the files, made into the page's columns and criteria matrix."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from guardkit_state.errors import InputError
from guardkit_state.inspect.task_turns import task_turns
from guardkit_state.model import TurnEntry
from guardkit_state.report import matrix
from guardkit_state.report.columns import seconds_between, turn_view
from guardkit_state.report.task_report import TaskReport, TurnColumn

_FEATURE_ID = re.compile(r"^FEAT-[A-Za-z0-9][A-Za-z0-9._-]*$")


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
    read = task_turns(repo, task, running_turn=running_turn)
    state = read.task.state
    views = [turn_view(t.entry, t.files, commit=t.commit, delta=t.delta) for t in read.turns]
    _from_guardkit_history(views, [t.entry for t in read.turns], state.last_updated if state is not None else None)
    outcome = state.extra.get("outcome") if state is not None else None
    return TaskReport(
        task_id=read.location.task_id, title=read.task.title or "", status=read.task.status or "—",
        path=shown_path(read.location.task_path, Path(repo)),
        max_turns=state.max_turns if state is not None else None,
        outcome=None if outcome is None else str(outcome), turns=views,
        criteria=matrix.rows(read.task.criteria, [t.ledger for t in read.turns]),
        counts=read.counts, next_step=read.next_step, notes=read.notes,
        generated_at=generated_at or datetime.now().astimezone().isoformat(timespec="seconds"), stall=read.stall,
    )


def _from_guardkit_history(views: list[TurnColumn], entries: list[TurnEntry], last_updated: object) -> None:
    """Fill what a turn known only from its frontmatter entry (GuardKit's own history) still tells.

    GuardKit stamps each entry when the turn starts: a turn lasted until the next one started (the
    last one until the block's ``last_updated``). Its mode is GuardKit's own default: ``fresh_start``
    for turn 1, ``continuing_work`` after (what the stall window and the context read too).
    """
    starts = [entry.timestamp for entry in entries] + [last_updated]
    for index, view in enumerate(views):
        if view.source != "frontmatter":
            continue
        if view.mode == "—":
            view.mode = "fresh_start" if view.number == 1 else "continuing_work"
        if view.duration_seconds is None:
            view.duration_seconds = seconds_between(starts[index], starts[index + 1])


def shown_path(path: Path, repo: Path) -> str:
    """A file (the task file, the plan) relative to the repository (a page attached to a pull request
    names no home folder)."""
    try:
        return str(path.resolve().relative_to(repo.resolve()))
    except (ValueError, OSError):
        return str(path)
