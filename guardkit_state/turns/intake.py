"""What comes in from outside before a turn is recorded: agents' reports, options, the task's history.

Everything here is checked before anything is written (no lock file, no report, no turn state):
a report is refused with its file and JSON path, an option with its name, a task file whose turn
numbers were edited into a gap with the file and what to do about it.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from guardkit_state.errors import (
    AlreadyRecordedError,
    FrontmatterError,
    GuardkitStateError,
    InputError,
    ParseError,
    SchemaError,
    shorten,
)
from guardkit_state.model import CoachDecision, PlayerReport, turn_sequence_problem
from guardkit_state.store.fsio import check_writable
from guardkit_state.store.jsonio import check_storable
from guardkit_state.store.turn_files import TurnStore
from guardkit_state.taskfile.document import TaskFile, read_settled
from guardkit_state.turns.verdicts import read_verdict_words

if TYPE_CHECKING:
    from guardkit_state.turns.lifecycle import TurnLifecycle

Report = dict[str, Any] | PlayerReport | CoachDecision

#: Statuses that end a task's work: a loop never changes them without ``--reopen``.
TERMINAL_STATUSES = ("completed", "cancelled", "archived")
#: The turn budget of a task that names none.
DEFAULT_MAX_TURNS = 5

_TURNS_KEY = re.compile(r"^[ \t]+turns:", re.M)
#: Pauses before reading again a task file that looks half-saved: growing, so that an editor
#: descheduled in the middle of an in-place save on a busy machine is waited out as well.
RESETTLE_PAUSES = (0.005, 0.02, 0.05, 0.1, 0.2, 0.4)


def looks_half_saved(task: TaskFile, store: TurnStore) -> bool:
    """True when ``task`` lists fewer turns than ``store`` holds turn states for.

    A file caught mid-way through an in-place save (empty, or cut short) looks like that; so does
    one whose last entry a stale save really dropped (its turn is then rolled forward).
    """
    recorded = len(task.state.turns) if task.state else 0
    return store.exists("turn_state", recorded + 1)


def read_task_settled(path: Path, store: TurnStore) -> TaskFile:
    """The task file once it no longer looks half-saved, or once every pause has passed.

    A partial file must never number a turn (nor be refused as a broken task file): it is read
    again after each of :data:`RESETTLE_PAUSES` (under a second in all). A file that stays
    unparsable, or stays behind the store throughout, is what it is: the parse error is raised,
    the view returned (a turn a stale save really dropped is then rolled forward).
    """
    error: ParseError | None = None
    task: TaskFile | None = None
    for pause in (0.0, *RESETTLE_PAUSES):
        time.sleep(pause)
        raw = read_settled(path)
        try:
            task = TaskFile.from_bytes(raw, path)
        except ParseError as exc:
            error, task = exc, None
            continue
        # Only a file that stays behind the store through every pause is taken as it is: on a busy
        # machine an editor can sit between its truncate and its write for tens of milliseconds.
        if not looks_half_saved(task, store):
            return task
    if task is None:
        assert error is not None
        raise error
    return task


def with_ids(data: dict[str, Any], task_id: str, turn: int, *, path: Path | None = None,
             kind: str | None = None) -> dict[str, Any]:
    """Validate an agent's raw report and fill in ids it may leave out (errors name ``path``)."""
    from guardkit_state.store.schemas import validate_record  # local: record shape validation lives in schemas

    if not isinstance(data, dict):
        raise SchemaError(f"a report must be a JSON object, not {type(data).__name__}", path=path, pointer="$",
                          task_id=task_id, turn=turn, expected="a JSON object")
    plain = check_storable(data, path=path)  # before anything (a lock, the other report) is written
    kind = kind or ("coach_turn" if "decision" in data or "verdict" in data else "player_turn")
    if kind == "coach_turn":  # a result outside the schema: a listed synonym (kept), else refused
        data = read_verdict_words(data, path=path, task_id=task_id, turn=turn)
    filled = {"task_id": task_id, "turn": turn, **data}
    return validate_record(kind, filled, path=path, plain=plain)


R = TypeVar("R", PlayerReport, CoachDecision)


@dataclass(frozen=True)
class CheckedReport(Generic[R]):
    """A report as it came in, turned into its record: checked against its schema once, here.

    ``data`` is what the store writes (``record.to_dict()``), never validated again. A report given
    as a dict is validated on the way in, and its record's dict is what reading the file back
    gives (``canonical``). A record given as such is trusted only once :func:`require_valid` has
    checked it (``checked``): it is checked last, as writing it used to.
    """

    kind: str
    record: R
    data: dict[str, Any]
    canonical: bool
    checked: bool
    #: Whether the report named its own turn (else it is numbered by the recorder).
    named: bool = True

    def numbered(self, turn: int) -> CheckedReport[R]:
        """The same report for turn ``turn`` when it left its number out (nothing is validated again)."""
        if self.named or self.record.turn == turn:
            return self
        return replace(self, record=replace(self.record, turn=turn), data={**self.data, "turn": turn})


def check_report(kind: str, cls: type[R], report: R | dict[str, Any], task_id: str, turn: int, *,
                 path: Path | None = None) -> CheckedReport[R]:
    """``report`` (a dict from an agent, or a record) as a :class:`CheckedReport` of turn ``turn``.

    A dict is validated here (ids filled in, legacy shapes normalised, schema checked; errors name
    ``path``). A record is taken as it is: see :func:`require_valid`.
    """
    if isinstance(report, cls):
        return CheckedReport(kind, report, report.to_dict(), canonical=False, checked=False)
    named = isinstance(report, dict) and "turn" in report
    record = cls.from_dict(with_ids(report, task_id, turn, path=path, kind=kind))  # type: ignore[arg-type]
    return CheckedReport(kind, record, record.to_dict(), canonical=True, checked=True, named=named)


def require_valid(report: CheckedReport[R], *, path: Path | None = None) -> CheckedReport[R]:
    """``report`` once its dict is known to be a valid record (a record built by the caller is checked
    here, as writing it would: errors name ``path``, the file it is written to)."""
    from guardkit_state.store.schemas import check_record  # local: record shape validation lives in schemas

    if not report.checked:
        check_storable(report.data, path=path)
        check_record(report.kind, report.data, path=path)
        report = replace(report, checked=True)
    return report


def checked_max_turns(value: object, *, name: str = "max_turns") -> int | None:
    """``value`` when it is a whole number of turns (1 or more) or None; :class:`InputError` otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        shown = f"a boolean ({'true' if value else 'false'})" if isinstance(value, bool) else repr(value)
        raise InputError(f"{name} is {shown}; expected a positive whole number", expected="an integer of at least 1")
    return value


def checked_timeout(value: object, *, name: str = "turn_timeout") -> float | None:
    """``value`` when it is a finite number of seconds above 0 or None; :class:`InputError` otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InputError(f"{name} must be a finite number of seconds above 0, not {value!r}",
                         expected="a number of seconds such as 600")
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


def check_criterion_ids(task: TaskFile, player: PlayerReport, coach: CoachDecision, *,
                        player_path: Path | None = None, coach_path: Path | None = None) -> None:
    """Refuse reports that judge or promise a criterion the task does not have, naming the known ids.

    A verdict on an unknown id would be recorded beside the real criterion (``AC-001`` pending next
    to ``AC-1`` verified) and the Player told to address work already done. A task whose criteria
    cannot be read from it (none parsed) accepts any id: there is nothing to check against.
    """
    check_report_criteria(task, player, path=player_path)
    check_report_criteria(task, coach, path=coach_path)


def check_report_criteria(task: TaskFile, report: PlayerReport | CoachDecision, *, path: Path | None = None) -> None:
    """:func:`check_criterion_ids` for one report (the task loop records them one at a time)."""
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


def named_turn(report: Report) -> int | None:
    """The turn a report names itself (None when it leaves it to the recorder)."""
    if isinstance(report, (PlayerReport, CoachDecision)):
        return report.turn
    value = report.get("turn") if isinstance(report, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class IncomingTurn:
    """Two reports given to ``record``, checked against a task's lifecycle.

    Each report is validated once, whatever number of times the checks below run (before the
    lock, and again under it on the file as read there).
    """

    lifecycle: TurnLifecycle
    player: dict[str, Any] | PlayerReport
    coach: dict[str, Any] | CoachDecision
    player_path: Path | None = None
    coach_path: Path | None = None
    _checked: tuple[CheckedReport[PlayerReport], CheckedReport[CoachDecision]] | None = \
        field(default=None, init=False, repr=False)
    #: The completable turn, and the task view it was computed on (recomputed when the view changes).
    _completable: tuple[TaskFile, int | None] | None = field(default=None, init=False, repr=False)

    def reports(self, number: int) -> tuple[CheckedReport[PlayerReport], CheckedReport[CoachDecision]]:
        """Both reports as checked records of turn ``number`` (ids filled in, schemas checked once)."""
        if self._checked is None:
            task_id = self.lifecycle.task_id
            self._checked = (check_report("player_turn", PlayerReport, self.player, task_id, number,
                                          path=self.player_path),
                             check_report("coach_turn", CoachDecision, self.coach, task_id, number,
                                          path=self.coach_path))
        player, coach = self._checked
        return player.numbered(number), coach.numbered(number)

    def validated(self, number: int) -> tuple[PlayerReport, CoachDecision]:
        """Both reports as records of turn ``number`` (ids filled in, schemas checked)."""
        player, coach = self.reports(number)
        return player.record, coach.record

    def checked(self, number: int) -> tuple[CheckedReport[PlayerReport], CheckedReport[CoachDecision]]:
        """:meth:`reports`, and both reports really are for this task and turn ``number``."""
        player, coach = self.reports(number)
        self.lifecycle._check_ids(player.record.task_id, player.record.turn, number, "player report",
                                  self.player_path)
        self.lifecycle._check_ids(coach.record.task_id, coach.record.turn, number, "coach decision",
                                  self.coach_path)
        check_criterion_ids(self.lifecycle.task, player.record, coach.record, player_path=self.player_path,
                            coach_path=self.coach_path)
        store = self.lifecycle.store
        return (require_valid(player, path=store.path("player_turn", number)),
                require_valid(coach, path=store.path("coach_turn", number)))

    def forget_files(self) -> None:
        """Look at the turn files again next time (they may have changed: the lock was just taken)."""
        self._completable = None

    def completable_turn(self) -> int | None:
        """The lifecycle's completable turn, computed once per view of the task file."""
        task = self.lifecycle.task
        if self._completable is None or self._completable[0] is not task:
            self._completable = (task, self.lifecycle.completable_turn())
        return self._completable[1]

    def follows_completable(self) -> bool:
        """True when the Player's report names the turn after a completable (unlisted) turn.

        Only a report naming the turn after next can follow one: for any other, the files of the
        next turn are not even looked at.
        """
        if named_turn(self.player) != self.lifecycle.recorded_turns + 2:
            return False
        pending = self.completable_turn()
        return pending is not None and named_turn(self.player) == pending + 1

    def next_number(self) -> int:
        return self.lifecycle.recorded_turns + 1 + self.follows_completable()

    def check_before_lock(self) -> None:
        """Everything that can be refused without the lock: recorded already, bad or wrong reports."""
        self.refuse_recorded()
        try:
            self.checked(self.next_number())
        except InputError as exc:
            if exc.pointer != "$.turn":
                raise
            # The report names another turn than the file's count. Before blaming the report, read
            # the file once more, settled: an editor saving it in place may have been caught half-way.
            time.sleep(RESETTLE_PAUSES[0])
            self.lifecycle.task = read_task_settled(self.lifecycle.task.path, self.lifecycle.store)
            check_turn_history(self.lifecycle.task)
            self.refuse_recorded()
            self.checked(self.next_number())

    def refuse_recorded(self) -> None:
        """Raise :class:`AlreadyRecordedError` when the reports name a turn the task already lists.

        A ``record`` killed after its commit point and retried gives the very reports recorded
        then (``identical``: nothing to do); different reports for a recorded turn are refused.
        """
        named = {named_turn(self.player), named_turn(self.coach)} - {None}
        number = named.pop() if len(named) == 1 else None
        recorded = self.lifecycle.recorded_turns
        if number is None or not 1 <= number <= recorded:
            return
        player, coach = self.reports(number)
        lifecycle = self.lifecycle
        lifecycle._check_ids(player.record.task_id, player.record.turn, number, "player report", self.player_path)
        lifecycle._check_ids(coach.record.task_id, coach.record.turn, number, "coach decision", self.coach_path)
        store, task_id = lifecycle.store, lifecycle.task_id
        given = {"player_turn": player.data, "coach_turn": coach.data}
        differ = [kind for kind, data in given.items() if _stored(store, kind, number) != data]
        if not differ:
            raise AlreadyRecordedError(f"turn {number} of {task_id} was already recorded with these reports; "
                                       "nothing to do", identical=True, path=store.path("player_turn", number),
                                       task_id=task_id, turn=number)
        names = " and ".join(store.path(kind, number).name for kind in differ)
        raise AlreadyRecordedError(
            f"turn {number} of {task_id} is already recorded, and these reports differ from its {names}; "
            "nothing was written", identical=False, path=lifecycle.task.path, task_id=task_id, turn=number,
            expected=f"reports for turn {recorded + 1}, or the exact reports of turn {number} (a retry)")


def _stored(store: TurnStore, kind: str, number: int) -> dict[str, Any] | None:
    """The canonical dict of a recorded report (None when it is missing or no longer readable)."""
    try:
        report = store.read_player(number) if kind == "player_turn" else store.read_coach(number)
    except GuardkitStateError:
        return None
    return None if report is None else report.to_dict()


__all__ = ["DEFAULT_MAX_TURNS", "TERMINAL_STATUSES", "CheckedReport", "IncomingTurn", "check_may_continue",
           "check_report", "check_report_criteria", "check_task_writable", "check_turn_history",
           "checked_max_turns", "checked_timeout",
           "closed_reason", "looks_half_saved", "named_turn", "read_task_settled", "require_valid", "turn_budget",
           "with_ids"]
