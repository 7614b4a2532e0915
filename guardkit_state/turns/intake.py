"""What comes in from agents before a turn is recorded: their reports, as plain values checked once.

A report is refused with its file and JSON path before anything is written (no lock file, no
report, no turn state).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

from guardkit_state.errors import SchemaError
from guardkit_state.model import CoachDecision, PlayerReport
from guardkit_state.store import schemas
from guardkit_state.store.jsonio import check_storable
from guardkit_state.store.turn_files import TurnStore
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.turns.checks import check_report_criteria, check_report_ids
from guardkit_state.turns.verdicts import read_verdict_words

Report = dict[str, Any] | PlayerReport | CoachDecision


def with_ids(data: dict[str, Any], task_id: str, turn: int, *, path: Path | None = None,
             kind: str | None = None) -> dict[str, Any]:
    """Validate an agent's raw report and fill in ids it may leave out (errors name ``path``)."""
    if not isinstance(data, dict):
        raise SchemaError(f"a report must be a JSON object, not {type(data).__name__}", path=path, pointer="$",
                          task_id=task_id, turn=turn, expected="a JSON object")
    plain = check_storable(data, path=path)  # before anything (a lock, the other report) is written
    kind = kind or ("coach_turn" if "decision" in data or "verdict" in data else "player_turn")
    if kind == "coach_turn":  # a result outside the schema: a listed synonym (kept), else refused
        data = read_verdict_words(data, path=path, task_id=task_id, turn=turn)
    filled = {"task_id": task_id, "turn": turn, **data}
    return schemas.validate_record(kind, filled, path=path, plain=plain)


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
    if not report.checked:
        check_storable(report.data, path=path)
        schemas.check_record(report.kind, report.data, path=path)
        report = replace(report, checked=True)
    return report


def named_turn(report: Report) -> int | None:
    """The turn a report names itself (None when it leaves it to the recorder)."""
    if isinstance(report, (PlayerReport, CoachDecision)):
        return report.turn
    value = report.get("turn") if isinstance(report, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class IncomingTurn:
    """Two reports given to ``record``: each validated once, and its ids checked once per turn number
    (the number is known before the lock, and again under it on the file as read there)."""

    task_id: str
    player: dict[str, Any] | PlayerReport
    coach: dict[str, Any] | CoachDecision
    player_path: Path | None = None
    coach_path: Path | None = None
    _checked: tuple[CheckedReport[PlayerReport], CheckedReport[CoachDecision]] | None = \
        field(default=None, init=False, repr=False)
    _ids_checked: set[int] = field(default_factory=set, init=False, repr=False)

    def reports(self, number: int) -> tuple[CheckedReport[PlayerReport], CheckedReport[CoachDecision]]:
        """Both reports as checked records of turn ``number`` (ids filled in and checked, schemas checked once)."""
        if self._checked is None:
            self._checked = (check_report("player_turn", PlayerReport, self.player, self.task_id, number,
                                          path=self.player_path),
                             check_report("coach_turn", CoachDecision, self.coach, self.task_id, number,
                                          path=self.coach_path))
        player, coach = self._checked[0].numbered(number), self._checked[1].numbered(number)
        if number not in self._ids_checked:
            check_report_ids(player.record, self.task_id, number, "player report", self.player_path)
            check_report_ids(coach.record, self.task_id, number, "coach decision", self.coach_path)
            self._ids_checked.add(number)
        return player, coach

    def checked(self, task: TaskFile, store: TurnStore,
                number: int) -> tuple[CheckedReport[PlayerReport], CheckedReport[CoachDecision]]:
        """:meth:`reports`, judged against ``task``'s criteria and valid as written to ``store``."""
        player, coach = self.reports(number)
        check_report_criteria(task, player.record, path=self.player_path)
        check_report_criteria(task, coach.record, path=self.coach_path)
        return (require_valid(player, path=store.path("player_turn", number)),
                require_valid(coach, path=store.path("coach_turn", number)))


__all__ = ["CheckedReport", "IncomingTurn", "check_report", "named_turn", "require_valid", "with_ids"]
