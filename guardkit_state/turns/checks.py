"""The checks made before a turn is recorded: options given, the task's state, the reports' ids.

Each refuses with the option's name, or the file and JSON path, before anything is written.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from guardkit_state.errors import FrontmatterError, InputError, shorten
from guardkit_state.model import CoachDecision, PlayerReport
from guardkit_state.store.fsio import check_writable
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.turns.sent_back import pending_send_back

#: Statuses that end a task's work: a loop never changes them without ``--reopen``.
TERMINAL_STATUSES = ("completed", "cancelled", "archived")
#: The turn budget of a task that names none.
DEFAULT_MAX_TURNS = 5

_TURNS_KEY = re.compile(r"^[ \t]+turns:", re.M)


def checked_max_turns(value: object) -> int | None:
    """``value`` when it is a whole number of turns (1 or more) or None; :class:`InputError` otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        shown = f"a boolean ({'true' if value else 'false'})" if isinstance(value, bool) else repr(value)
        raise InputError(f"max_turns is {shown}; expected a positive whole number", expected="an integer of at least 1")
    return value


def checked_timeout(value: object) -> float | None:
    """``value`` when it is a finite number of seconds above 0 or None; :class:`InputError` otherwise."""
    return _amount(value, "turn_timeout", "number of seconds", "a number of seconds such as 600")


def checked_usd(value: object, *, name: str, zero: bool = False) -> float | None:
    """``value`` when it is a finite amount of USD above 0, or None; with ``zero``, an amount of 0 or
    more (None refused). :class:`InputError` otherwise."""
    return _amount(value, name, "amount of USD", "an amount such as 2.50", zero=zero)


def _amount(value: object, name: str, what: str, expected: str, *, zero: bool = False) -> float | None:
    if value is None and not zero:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0 \
            or (value == 0 and not zero):
        raise InputError(f"{name} must be a finite {what} {'0 or more' if zero else 'above 0'}, not {value!r}",
                         expected=expected)
    return float(value)


def closed_reason(task: TaskFile) -> str | None:
    """Why ``task`` takes no more turns unless reopened (``"is completed"``, ``"was approved"``), or None.

    A terminal status is the user's (or GuardKit's) decision that the work is over, and an approval
    is the Coach's: a loop that recorded over either would silently undo it.
    """
    status = (task.status or "").strip().lower()
    if status in TERMINAL_STATUSES:
        return f"is {status}"
    state = task.state
    if state is None:
        return None
    if pending_send_back(state) is not None:
        return None  # the merge queue sent the approval back: the loop goes on (turns/sent_back.py)
    if str(state.extra.get("outcome") or "") == "approved":
        return "was approved"
    # Whatever folder or status the task moved to since (in_review, design_approved ...), a last
    # turn the Coach approved ended the loop: resume reports it finished, so record must not go on.
    if state.turns and state.turns[-1].decision == "approve":
        return "was approved"
    return None


def turn_budget(task: TaskFile, max_turns: int | None = None) -> int:
    """How many turns ``task`` may have: ``max_turns`` when given, else the task's own, else the default."""
    state_max = task.state.max_turns if task.state else None
    return checked_max_turns(max_turns) or state_max or DEFAULT_MAX_TURNS


def check_may_continue(task: TaskFile, next_turn: int, *, reopen: bool = False, max_turns: int | None = None,
                       to: str = "record more turns") -> None:
    """Refuse turn ``next_turn`` of a closed task (unless ``reopen``) or one beyond its turn budget.

    Raised before anything is written, as a usage error naming the flag that allows it.
    """
    task_id = task.task_id or task.path.stem
    task.check_writable()  # a key repeated: which value to keep is the user's call, asked first
    reason = None if reopen else closed_reason(task)
    if reason is not None:
        raise InputError(f"{task_id} {reason}; pass --reopen to {to}", path=task.path, task_id=task_id)
    budget = turn_budget(task, max_turns)
    if next_turn > budget:
        raise InputError(f"{task_id} has used all {budget} of its turns (max_turns {budget}); "
                         f"pass --max-turns {next_turn} or more to {to}", path=task.path, task_id=task_id,
                         turn=next_turn)


def check_task_writable(task: TaskFile) -> None:
    """Raise what the file system would refuse when ``task``'s file is rewritten, writing nothing.

    A turn's files are written only once its task file can take the turn's entry: otherwise they
    would be orphans, a turn on disk that no task file lists. A file repeating a key is refused
    here too (:meth:`TaskFile.check_writable`).
    """
    task.check_writable()
    check_writable(task.path, len(task.text.encode("utf-8")))


def turn_sequence_problem(numbers: list[int], where: str) -> str | None:
    """What is wrong with a history's turn numbers (they must be 1, 2, ... n), or ``None``.

    ``where`` (the file's name) goes into the sentence: ``turns jump from 1 to 3 in X.md; ...``.
    """
    previous = 0
    for number in numbers:
        if number <= previous:
            if numbers.count(number) > 1:
                return f"turn {number} is listed twice in {where}"
            return f"turns go back from {previous} to {number} in {where}"
        if number != previous + 1:
            missing = f"turn {previous + 1} is" if number == previous + 2 else f"turns {previous + 1}-{number - 1} are"
            return f"turns jump from {previous} to {number} in {where}; {missing} missing"
        previous = number
    return None


def check_turn_history(task: TaskFile) -> None:
    """Refuse a task whose turn entries are not numbered 1, 2, ... n (a gap or a repeat edited in by hand).

    Resume counts the entries and the store never writes a gap, so such a history cannot be
    continued; the error says what is wrong and how to fix it, before anything is written.
    """
    if task.state is None:
        return
    problem = turn_sequence_problem([entry.turn for entry in task.state.turns], task.path.name)
    if problem is None:
        return
    match = _TURNS_KEY.search(task.text, 0, len(task.text) - len(task.body))
    raise FrontmatterError(f"{problem} — fix the file by hand or restore it from git", path=task.path,
                           line=task.text.count("\n", 0, match.start()) + 1 if match else None,
                           task_id=task.task_id, expected="turns numbered 1, 2, 3 ... with none missing")


def check_report_criteria(task: TaskFile, report: PlayerReport | CoachDecision, *, path: Path | None = None) -> None:
    """Refuse a report that judges or promises a criterion the task does not have, naming the known ids.

    A verdict on an unknown id would be recorded beside the real criterion (``AC-001`` pending next
    to ``AC-1`` verified) and the Player told to address work already done. A task whose criteria
    cannot be read from it (none parsed) accepts any id: there is nothing to check against.
    """
    if isinstance(report, CoachDecision):
        # Two different verdicts on one criterion: which one the Coach meant cannot be told, and
        # keeping the last would be a guess.
        first: dict[str, str] = {}
        for i, v in enumerate(report.criteria_verification):
            said = first.setdefault(v.criterion_id, v.result)
            if said != v.result:
                raise InputError(f"coach decision judges criterion {shorten(v.criterion_id)} twice, {said} and "
                                 f"{v.result}; nothing was written", path=path,
                                 pointer=f"$.criteria_verification[{i}].result", task_id=task.task_id,
                                 expected="one verdict per criterion")
    known = [criterion.id for criterion in task.criteria]
    if not known:
        return
    ids = set(known)
    if isinstance(report, CoachDecision):
        named = [(f"$.criteria_verification[{i}].criterion_id", v.criterion_id, path, "coach decision")
                 for i, v in enumerate(report.criteria_verification)]
    else:
        named = [(f"$.completion_promises[{i}].criterion_id", p.criterion_id, path, "player report")
                 for i, p in enumerate(report.completion_promises or [])]
    for pointer, cid, path, what in named:
        if cid not in ids:
            listed = ", ".join(known)
            raise InputError(f"{what} names criterion {shorten(cid)}, which {task.task_id} does not have "
                             f"(its criteria: {listed}); nothing was written", path=path, pointer=pointer,
                             task_id=task.task_id, expected=f"one of {shorten(listed, 150)}")


def check_report_ids(report: PlayerReport | CoachDecision, task_id: str, turn: int, what: str,
                     path: Path | None = None) -> None:
    """Refuse a report for another task or another turn than ``turn`` (errors name ``path``)."""
    if report.task_id != task_id:
        raise InputError(f"{what} is for task {report.task_id}, not {task_id}", path=path, pointer="$.task_id",
                         task_id=task_id, expected=task_id)
    if report.turn != turn:
        raise InputError(f"{what} is for turn {report.turn}, but the next turn of {task_id} is {turn}",
                         path=path, pointer="$.turn", task_id=task_id, turn=report.turn, expected=str(turn))


__all__ = ["DEFAULT_MAX_TURNS", "TERMINAL_STATUSES", "check_may_continue",
           "check_report_criteria", "check_report_ids", "check_task_writable", "check_turn_history",
           "checked_max_turns", "checked_timeout", "closed_reason", "turn_budget"]
