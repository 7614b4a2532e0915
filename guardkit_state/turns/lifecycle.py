"""The turn lifecycle: begin, record the Player, record the Coach, complete (see ``docs/lifecycle.md``).

``complete_turn`` turns two reports into a recorded turn: it updates the criteria ledger, checks for
a stall, writes ``turn_state_turn_N.json``, and appends the turn to the task's frontmatter — the
commit point. Everything it needs from earlier turns is read back from the files, so a new process
(``--resume``, ``guardkit-state record``) behaves exactly like the one that was interrupted.
What a finished turn is made of is decided in :mod:`guardkit_state.turns.completion`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from guardkit_state.config import GateProfile, check_gates
from guardkit_state.errors import AlreadyRecordedError, GuardkitStateError, TurnError
from guardkit_state.git.checkouts import shared_lock_path
from guardkit_state.model import CoachDecision, GateResult, Outcome, PlayerReport, TurnMode, TurnState
from guardkit_state.store.fsio import crash_point, remove_stale_temp_files
from guardkit_state.store.home import check_state_home
from guardkit_state.store.locks import exclusive_lock
from guardkit_state.store.safe_paths import resolve_inside, validate_task_id
from guardkit_state.store.turn_files import TurnStore, artifacts_dir
from guardkit_state.taskfile.document import TaskFile, read_task_settled
from guardkit_state.taskfile.frontmatter import STATE_KEY
from guardkit_state.taskfile.resolve import find_task
from guardkit_state.taskfile.splice import SpliceResult, StateUpdate
from guardkit_state.turns.checks import (
    check_may_continue,
    check_report_criteria,
    check_report_ids,
    check_task_writable,
    check_turn_history,
    checked_max_turns,
)
from guardkit_state.turns.clock import utc_now
from guardkit_state.turns.completion import TurnRecord, finish_turn, state_update
from guardkit_state.turns.intake import CheckedReport, IncomingTurn, check_report, named_turn, require_valid
from guardkit_state.turns.promises import promises_source
from guardkit_state.turns.turn_state import (
    TurnInputs,
    TurnRun,
    apply_criteria_verdict,
    apply_gate_verdict,
    gate_inputs,
    turn_measurements,
)
from guardkit_state.turns.view import TurnView
from guardkit_state.yamltext.yaml_writer import RESETTLE_PAUSES

log = logging.getLogger("guardkit_state.turns.lifecycle")

R = TypeVar("R", PlayerReport, CoachDecision)


@dataclass
class ActiveTurn:
    number: int
    mode: TurnMode
    started_at: str
    player: PlayerReport | None = None
    coach: CoachDecision | None = None


class TurnLifecycle(TurnView):
    """The memory of one task's loop, in one checkout (the main one or a worktree): its turns as the
    files tell them (:class:`TurnView`), and the writing of new ones."""

    def __init__(self, task: TaskFile, *, root: Path, max_turns: int | None = None) -> None:
        super().__init__(task, root=root, max_turns=max_turns)
        self._active: ActiveTurn | None = None
        #: The completable turn, and the task view it was computed on (see :func:`_completable`).
        self._completable: tuple[TaskFile, int | None] | None = None

    @classmethod
    def open(cls, root: Path, task_id: str, *, max_turns: int | None = None) -> TurnLifecycle:
        """Find ``task_id``'s file under ``root/tasks`` and open its lifecycle (the file read once:
        :meth:`locked` makes sure of it before anything is written)."""
        validate_task_id(task_id)
        return cls(TaskFile.load(find_task(root, task_id)), root=root, max_turns=checked_max_turns(max_turns))

    # -- writing ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def locked(self) -> Iterator[TurnLifecycle]:
        """Hold the task's lock (one writer per task, across worktrees).

        Under it the view of the task file is confirmed — settled, never half-saved, else read
        again (:meth:`TaskFile.confirmed`) — and temp files a killed writer left in the store are removed.
        """
        with exclusive_lock(shared_lock_path(self.root, self.task_id), holder=self.task_id):
            # The view held is kept when the file is unchanged a settle pause after it was read (and
            # does not look half-saved): an editor saving it in place at that read would have changed it.
            self.task = self.task.confirmed(self.store)
            self._completable = None  # the turn files are looked at again, as they are now
            removed = remove_stale_temp_files(self.store.directory)
            # A killed write of the task file leaves its temp beside the file, or beside a link's target.
            for folder in dict.fromkeys((self.task.path.parent, self.task.path.resolve().parent)):
                removed += remove_stale_temp_files(folder)
            if removed:
                log.info("removed %d temp file(s) an interrupted write left in %s", len(removed), self.store.directory)
            yield self

    def complete_from_files(self, number: int) -> TurnRecord:
        """Complete turn ``number`` (a :meth:`completable_turn`) from its files: no agent is called."""
        log.info("turn %d of %s has both reports but is not recorded: completing it from its files",
                 number, self.task_id)
        self.begin_turn(TurnMode.RECOVERING_STATE)
        return self.complete_turn()

    def begin_turn(self, mode: TurnMode | str | None = None) -> ActiveTurn:
        """Start the next turn; ``mode`` defaults to fresh_start for turn 1, else continuing_work."""
        number = self.recorded_turns + 1
        if self.store.exists("turn_state", number + 1) or self.store.exists("player_turn", number + 1):
            # Files of a later turn exist: this view of the task file is older than the store
            # (read mid-save, or entries dropped by a stale copy). Never overwrite a turn's files.
            raise TurnError(f"{self.task.path.name} lists {number - 1} turn(s) but turn {number + 1} has files; "
                            "nothing was written", path=self.task.path, task_id=self.task_id, turn=number,
                            fix="try again once the file is saved (an editor or another writer was saving it?)")
        if mode is None:
            mode = TurnMode.FRESH_START if number == 1 else TurnMode.CONTINUING_WORK
        self._active = ActiveTurn(number, TurnMode(mode), utc_now())
        log.info("turn %d of %s started (mode %s)", number, self.task_id, self._active.mode.value)
        return self._active

    def _require_active(self) -> ActiveTurn:
        if self._active is None:
            raise TurnError("no turn in progress: call begin_turn() first", task_id=self.task_id)
        return self._active

    def record_player(self, report: PlayerReport | dict[str, Any]) -> PlayerReport:
        """Validate and write the Player's report for the active turn."""
        checked = self._checked("player_turn", PlayerReport, report, "player report")
        self._require_active().player = self._write_report(checked)
        return checked.record

    def record_coach(self, decision: CoachDecision | dict[str, Any]) -> CoachDecision:
        """Validate and write the Coach's decision for the active turn."""
        checked = self._checked("coach_turn", CoachDecision, decision, "coach decision")
        self._require_active().coach = self._write_report(checked)
        return checked.record

    def _checked(self, kind: str, cls: type[R], report: R | dict[str, Any], what: str) -> CheckedReport[R]:
        number = self._require_active().number
        checked = check_report(kind, cls, report, self.task_id, number)
        check_report_ids(checked.record, self.task_id, number, what)  # a record's before its schema, as always
        # As `record` does: a verdict or promise on a criterion the task does not have is refused.
        check_report_criteria(self.task, checked.record)
        return require_valid(checked, path=self.store.path(kind, number))

    def _write_report(self, report: CheckedReport[R]) -> R:
        """Write a report checked where it came in (the store does not check it again)."""
        self.store.write(report.kind, self._require_active().number, report.data, recorded_turns=self.recorded_turns,
                         checked=True, canonical=report.canonical)
        return report.record

    def complete_turn(self, run: TurnRun | None = None, *, gate_profile: GateProfile | None = None) -> TurnRecord:
        """Assemble the turn state, write it, and append the turn to the frontmatter.

        Reports not recorded in this process are read back from the files (resume). ``run`` is what
        the loop knows beyond them (:class:`~guardkit_state.turns.turn_state.TurnRun`): with its
        ``error`` the turn is recorded with decision ``error`` (an agent failed) and the reason. With
        ``gate_profile`` the turn's measurements are judged against its thresholds; a Coach approval
        with a failed required gate is recorded as feedback naming the gate.
        """
        active = self._require_active()
        inputs = self._turn_inputs(active, run or TurnRun(), gate_profile)
        finished = finish_turn(inputs, utc_now())
        update = state_update(finished, inputs, self.task.state_key or STATE_KEY, self.task.state)
        splice = self._write_turn(finished.state, update)
        number, entry, ledger, outcome = active.number, finished.entry, finished.ledger, finished.outcome
        self._active = None
        log.info("turn %d of %s recorded: %s (%d/%d criteria verified)%s", number, self.task_id, entry.decision,
                 ledger.verified_count, len(ledger.entries), f", outcome {outcome.value}" if outcome else "")
        if splice.method == "rerender":
            log.warning("frontmatter block of %s re-rendered: %s", self.task.path, splice.reason)
        return TurnRecord(finished.state, entry, ledger, inputs.ledger_before, outcome, finished.stall, splice,
                          self._written(inputs), inputs.promises_source)

    def _turn_inputs(self, active: ActiveTurn, run: TurnRun, gate_profile: GateProfile | None) -> TurnInputs:
        """The active turn's reports (from memory, else its files), gates, ledger, stall window, promises."""
        number, error = active.number, run.error
        player = active.player or self.store.read_player(number)
        coach = active.coach or self.store.read_coach(number)
        if error is None and (player is None or coach is None):
            missing = "player report" if player is None else "coach decision"
            raise TurnError(f"turn {number} has no {missing}", task_id=self.task_id, turn=number,
                            expected="both reports, or an error reason")
        history = self.history  # one view: the ledger and the stall window read the last turn once
        ledger_before = history.ledger_before(number)
        if error is None:
            coach = apply_criteria_verdict(coach, ledger_before, number)
        gate_results: list[GateResult] = []
        if gate_profile is not None and error is None:
            gate_results = check_gates(gate_profile, **gate_inputs(turn_measurements(player, coach)))
            coach = apply_gate_verdict(coach, gate_results)
        source = promises_source(self.store, number) if player is not None and not player.completion_promises \
            else None
        return TurnInputs(
            task_id=self.task_id, feature_id=self.task.feature_id, number=number, mode=active.mode,
            started_at=_started_at(active, self.store, number), max_turns=self.max_turns, player=player,
            coach=coach, ledger_before=ledger_before, history=history.stall_history(number),
            run=run, gate_results=gate_results, promises_source=source)

    def _written(self, inputs: TurnInputs) -> list[Path]:
        """The files the turn wrote or took over: the reports on disk, its turn state, the task file."""
        number = inputs.number
        written = [self.store.path("turn_state", number), self.task.path]
        # Looked at, not assumed: an agent run between the reports' writes may have moved one.
        if inputs.player is not None and self.store.exists("player_turn", number):
            written.insert(0, self.store.path("player_turn", number))
        if inputs.coach is not None and self.store.exists("coach_turn", number):
            written.insert(1 if inputs.player is not None else 0, self.store.path("coach_turn", number))
        return written

    def _write_turn(self, state: TurnState, update: StateUpdate) -> SpliceResult:
        """Write the turn state, then append the turn to the task file (the commit point).

        Never one without the other: the turn state is written only once the task file can be,
        and removed again if appending fails. The agents' reports stay (a resume completes the
        turn from them).
        """
        number = state.turn_number
        check_task_writable(self.task)
        # Built here from checked reports, but from numbers the agents chose (a coverage of 150):
        # what the store would refuse to read back is refused before it is written (the store checks it).
        self.store.write("turn_state", number, state.to_dict(), recorded_turns=self.recorded_turns, canonical=True)
        crash_point("turn.before_frontmatter")  # turn state written, turn not yet committed
        try:
            return self.task.apply(update)
        except Exception:
            _discard_unlisted(self, number, ("turn_state",))
            raise

    def mark_outcome(self, outcome: Outcome, *, reason: str | None = None) -> SpliceResult:
        """Record how the loop ended without a new turn (e.g. max turns reached before starting one)."""
        scalars: dict[str, Any] = {"outcome": outcome.value, "last_updated": utc_now()}
        if reason:
            scalars["outcome_reason"] = reason
        return self.task.apply(StateUpdate(key=self.task.state_key or STATE_KEY, block_scalars=scalars,
                                           criteria=None, append_turns=[], top_level={"status": outcome.task_status}))


def _discard_unlisted(lifecycle: TurnLifecycle, number: int, kinds: tuple[str, ...]) -> None:
    """Remove turn ``number``'s files of ``kinds`` unless the task file on disk lists that turn.

    Called when writing the turn failed; a task file that cannot be read keeps them (when in
    doubt, nothing is deleted). The file is read settled: an editor saving it in place at that
    instant shows a file that lists no turn, and the turn's reports must not go for that.
    """
    try:
        state = read_task_settled(lifecycle.task.path, lifecycle.store).state
    except GuardkitStateError:
        return
    if state is not None and any(entry.turn == number for entry in state.turns):
        return
    for kind in kinds:
        with contextlib.suppress(FileNotFoundError):
            lifecycle.store.path(kind, number).unlink()


def _started_at(active: ActiveTurn, store: TurnStore, number: int) -> str:
    """When the turn began; for a turn completed on resume, the Player report's write time."""
    if active.player is not None or not store.exists("player_turn", number):
        return active.started_at
    mtime = store.path("player_turn", number).stat().st_mtime
    return datetime.fromtimestamp(mtime, UTC).isoformat(timespec="seconds")


def record_turn(
    root: Path,
    task_id: str,
    player: dict[str, Any] | PlayerReport,
    coach: dict[str, Any] | CoachDecision,
    *,
    mode: TurnMode | str | None = None,
    max_turns: int | None = None,
    player_path: Path | None = None,
    coach_path: Path | None = None,
    reopen: bool = False,
) -> TurnRecord:
    """Record one whole turn from two reports, for loops driven by other tools.

    One read path: settle, check, lock, check again. The task file is read once, never half-saved
    (an editor saving it in place is waited out), so the next turn's number never comes from a
    half-written file; everything that can be refused is checked before anything is written (before
    the lock file is even created: a bad report leaves every file as it was), and checked again
    under the lock on the file as it is then (unchanged a settle pause after the read, or read
    again). A refusal made before the lock stands only once the file, read settled, is the file it
    was made on. ``player_path``/``coach_path`` name the reports' files in errors. A task whose
    status is terminal or whose loop was approved takes a turn only with ``reopen``; a turn beyond
    the budget only with a ``max_turns`` that allows it (:class:`InputError` otherwise, nothing
    written).

    Raises:
        AlreadyRecordedError: the reports name a turn already recorded; ``identical`` tells a
            retry of the very same ``record`` (nothing to do) from different reports.
    """
    check_state_home(Path(root))  # the turn files go under .guardkit: never out of the repository
    validate_task_id(task_id)
    store = TurnStore(artifacts_dir(Path(root), task_id), task_id)
    # The settle pause is waited out under the lock, while the checks run: the view is confirmed there.
    task = read_task_settled(find_task(root, task_id), store, confirm=False)
    lifecycle = TurnLifecycle(task, root=root, max_turns=checked_max_turns(max_turns))
    resolve_inside(Path(root), lifecycle.store.directory)  # nor through .guardkit/autobuild[/TASK] symlinked out
    incoming = IncomingTurn(lifecycle.task_id, player, coach, player_path, coach_path)
    _check_settled(lifecycle, incoming, reopen=reopen, max_turns=max_turns)
    with lifecycle.locked():
        player_rec, coach_rec = _check(lifecycle, incoming, reopen=reopen, max_turns=max_turns)
        pending = _completable(lifecycle) if _follows_completable(lifecycle, incoming) else None
        if pending is not None:
            lifecycle.complete_from_files(pending)
        active = lifecycle.begin_turn(mode)
        number = active.number
        try:
            active.player, active.coach = lifecycle._write_report(player_rec), lifecycle._write_report(coach_rec)
            return lifecycle.complete_turn()
        except BaseException:
            # A record is all or nothing: reports of a turn its task file does not list go again.
            _discard_unlisted(lifecycle, number, ("player_turn", "coach_turn", "turn_state"))
            raise


def _check_settled(lifecycle: TurnLifecycle, incoming: IncomingTurn, *, reopen: bool, max_turns: int | None) -> None:
    """:func:`_check` before the lock; a refusal stands only on the file read again, settled: an editor
    saving it in place may have been caught half-way (before blaming the reports or the task)."""
    try:
        _check(lifecycle, incoming, reopen=reopen, max_turns=max_turns)
    except GuardkitStateError:
        time.sleep(RESETTLE_PAUSES[0])
        again = read_task_settled(lifecycle.task.path, lifecycle.store)
        if again.text == lifecycle.task.text:
            raise
        lifecycle.task = again
        _check(lifecycle, incoming, reopen=reopen, max_turns=max_turns)


def _check(lifecycle: TurnLifecycle, incoming: IncomingTurn, *, reopen: bool,
           max_turns: int | None) -> tuple[CheckedReport[PlayerReport], CheckedReport[CoachDecision]]:
    """What :func:`record_turn` refuses, on the view of the task file held: a turn recorded already,
    a hand-edited history, bad or wrong reports, a closed task or one out of turns, an unwritable
    file. Made before the lock file and any of the turn's files exist, and again under the lock.

    Reports that name the turn after one complete on disk but not listed (a dropped entry) are for
    the turn after it (rolled forward first); others are for the next turn, replacing the files of
    an attempt that failed before its commit point (an orchestrator retrying the same ``record``).
    Returns the reports, checked, for the turn they are recorded as.
    """
    _refuse_recorded(lifecycle, incoming)
    check_turn_history(lifecycle.task)
    number = lifecycle.recorded_turns + 1 + _follows_completable(lifecycle, incoming)
    reports = incoming.checked(lifecycle.task, lifecycle.store, number)
    check_may_continue(lifecycle.task, number, reopen=reopen, max_turns=max_turns)
    check_task_writable(lifecycle.task)
    return reports


def _completable(lifecycle: TurnLifecycle) -> int | None:
    """The lifecycle's completable turn, computed once per view of the task file (and per lock)."""
    if lifecycle._completable is None or lifecycle._completable[0] is not lifecycle.task:
        lifecycle._completable = (lifecycle.task, lifecycle.completable_turn())
    return lifecycle._completable[1]


def _follows_completable(lifecycle: TurnLifecycle, incoming: IncomingTurn) -> bool:
    """True when the Player's report names the turn after a completable (unlisted) turn.

    Only a report naming the turn after next can follow one: for any other, the files of the
    next turn are not even looked at.
    """
    named = named_turn(incoming.player)
    if named != lifecycle.recorded_turns + 2:
        return False
    pending = _completable(lifecycle)
    return pending is not None and named == pending + 1


def _refuse_recorded(lifecycle: TurnLifecycle, incoming: IncomingTurn) -> None:
    """Raise :class:`AlreadyRecordedError` when the reports name a turn the task already lists.

    A ``record`` killed after its commit point and retried gives the very reports recorded
    then (``identical``: nothing to do); different reports for a recorded turn are refused.
    """
    named = {named_turn(incoming.player), named_turn(incoming.coach)} - {None}
    number = named.pop() if len(named) == 1 else None
    recorded = lifecycle.recorded_turns
    if number is None or not 1 <= number <= recorded:
        return
    player, coach = incoming.reports(number)
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


__all__ = ["ActiveTurn", "TurnLifecycle", "TurnRecord", "record_turn"]
