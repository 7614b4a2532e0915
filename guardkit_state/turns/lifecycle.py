"""The turn lifecycle: begin, record the Player, record the Coach, complete (DESIGN.md section 3).

``complete_turn`` turns two reports into a recorded turn: it updates the criteria ledger, checks for
a stall, writes ``turn_state_turn_N.json``, and appends the turn to the task's frontmatter — the
commit point. Everything it needs from earlier turns is read back from the files, so a new process
(``--resume``, ``guardkit-state record``) behaves exactly like the one that was interrupted.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from guardkit_state.config import GateProfile, check_gates
from guardkit_state.errors import GuardkitStateError, InputError, ParseError, TurnError
from guardkit_state.model import (
    CoachDecision,
    GateResult,
    Outcome,
    PlayerReport,
    TurnEntry,
    TurnMode,
    TurnState,
)
from guardkit_state.store.fsio import crash_point, exclusive_lock, remove_stale_temp_files, validate_task_id
from guardkit_state.store.turn_files import TurnStore, artifacts_dir
from guardkit_state.taskfile.document import TaskFile, find_task
from guardkit_state.taskfile.splice.core import SpliceResult, StateUpdate
from guardkit_state.turns.context import render_continuation_context
from guardkit_state.turns.history import TaskHistory
from guardkit_state.turns.intake import (
    IncomingTurn,
    check_may_continue,
    check_task_writable,
    check_turn_history,
    checked_max_turns,
    looks_half_saved,
    read_task_settled,
    turn_budget,
    with_ids,
)
from guardkit_state.turns.ledger import CriteriaLedger
from guardkit_state.turns.resume import resume_point
from guardkit_state.turns.stall import Stall, TurnSignal, detect_stall
from guardkit_state.turns.turn_state import apply_gate_verdict, assemble_turn_state, gate_inputs, turn_measurements

log = logging.getLogger("guardkit_state.turns.lifecycle")

#: How many recently recorded turn entries a write re-asserts (restored if a stale save dropped them).
RESTORABLE_TURNS = 2


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def shared_lock_path(checkout_root: Path, task_id: str) -> Path:
    """The task's lock file, shared by the main checkout and all its worktrees.

    Inside git it lives in the common git directory as git reports it (one per repository,
    whatever the worktree or submodule); without git, next to the task's artifacts.
    """
    import os  # local: this function is the only user in this module

    from guardkit_state.git.repo import GitRepo  # local: keeps git out of this module's imports

    root = Path(checkout_root).resolve()
    dot_git = root / ".git"
    if dot_git.is_dir() and not any(name in os.environ for name in ("GIT_DIR", "GIT_COMMON_DIR")):
        # A main checkout's own .git directory *is* git's common dir; saying so without running
        # git keeps a recorded turn from paying for a subprocess.
        common = dot_git
    else:
        repo = GitRepo.discover(root)
        if repo is None:
            return artifacts_dir(root, task_id) / ".lock"
        common = repo.common_dir
    return common / "guardkit-state" / "locks" / f"{task_id}.lock"


@dataclass
class ActiveTurn:
    number: int
    mode: TurnMode
    started_at: str
    player: PlayerReport | None = None
    coach: CoachDecision | None = None


@dataclass
class TurnRecord:
    """What ``complete_turn`` did."""

    turn_state: TurnState
    entry: TurnEntry
    ledger: CriteriaLedger
    ledger_before: CriteriaLedger
    outcome: Outcome | None
    stall: Stall | None
    splice: SpliceResult
    written: list[Path] = field(default_factory=list)
    promises_recovered_from: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "turn": self.turn_state.turn_number,
            "decision": self.entry.decision,
            "outcome": self.outcome.value if self.outcome else None,
            "stall": self.stall.reason if self.stall else None,
            "criteria": self.ledger.statuses(),
            "criteria_delta": self.ledger.delta(self.ledger_before),
            "verified": self.ledger.verified_count,
            # Verified by the Coach, implied by an approval, rejected, pending: told apart.
            "criteria_counts": self.ledger.counts().to_dict(),
            "frontmatter_write": self.splice.method,
            "frontmatter_note": self.splice.reason,
            "promises_recovered_from": self.promises_recovered_from,
            "written": [str(p) for p in self.written],
            "turn_state": self.turn_state.to_dict(),
        }


class TurnLifecycle:
    """The memory of one task's loop, in one checkout (the main one or a worktree)."""

    def __init__(self, task: TaskFile, *, root: Path, max_turns: int | None = None) -> None:
        if task.task_id is None:
            raise InputError("task file has no id", path=task.path, expected="an 'id' key or TASK-ID file name")
        check_turn_history(task)
        self.task = task
        self.root = Path(root)
        self.task_id = task.task_id
        self.store = TurnStore(artifacts_dir(self.root, self.task_id), self.task_id)
        self.max_turns = turn_budget(task, max_turns)
        self._active: ActiveTurn | None = None

    @classmethod
    def open(cls, root: Path, task_id: str, *, max_turns: int | None = None, settled: bool = False) -> TurnLifecycle:
        """Find ``task_id``'s file under ``root/tasks`` and open its lifecycle.

        ``settled`` waits out an editor saving the file in place (truncate, then write) rather
        than reading it half-written: what a caller that numbers a turn from it needs.
        """
        validate_task_id(task_id)
        path = find_task(root, task_id)
        store = TurnStore(artifacts_dir(Path(root), task_id), task_id)
        task = read_task_settled(path, store) if settled else TaskFile.load(path)
        return cls(task, root=root, max_turns=checked_max_turns(max_turns))

    # -- reading ---------------------------------------------------------------------------
    @property
    def recorded_turns(self) -> int:
        return len(self.task.state.turns) if self.task.state else 0

    @property
    def history(self) -> TaskHistory:
        """The recorded turns as the files know them (turn-state files, else frontmatter entries)."""
        return TaskHistory(self.task, self.store)

    def previous_turn_state(self, turn: int | None = None) -> TurnState | None:
        """The turn state of ``turn - 1`` (default: the last recorded turn).

        A turn GuardKit's own loop recorded only in the frontmatter counts too: its decision,
        feedback and summary, as listed there.
        """
        return self.history.turn_state((turn or self.recorded_turns + 1) - 1)

    def ledger(self) -> CriteriaLedger:
        """The cumulative ledger after the last recorded turn."""
        return self.history.ledger()

    def _ledger_before(self, turn: int) -> CriteriaLedger:
        return self.history.ledger_before(turn)

    def stall_history(self, upto: int) -> list[TurnSignal]:
        """Signals of the turns before ``upto``, rebuilt from the files (a window's worth at most)."""
        return self.history.stall_history(upto)

    def context_for(self, turn: int | None = None, *, role_section: str | None = None) -> str:
        """The continuation context for ``turn`` (default: the next one)."""
        turn = turn or self.recorded_turns + 1
        previous = self.previous_turn_state(turn)
        statuses = self._ledger_before(turn).statuses() if previous is not None else None
        return render_continuation_context(previous, turn=turn, criteria=self.task.criteria,
                                           statuses=statuses, role_section=role_section)

    # -- writing ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def locked(self, *, wait: float = 0.0) -> Iterator[TurnLifecycle]:
        """Hold the task's lock (one writer per task, across worktrees).

        Under it the task file is read again — settled, never half-saved — and its history
        checked, and temp files a killed writer left in the store are removed.
        """
        with exclusive_lock(shared_lock_path(self.root, self.task_id), wait=wait, holder=self.task_id):
            try:
                task: TaskFile | None = self.task.refreshed()
            except ParseError:
                task = None  # perhaps caught half-way through an in-place save: read it settled
            if task is None or looks_half_saved(task, self.store):
                task = read_task_settled(self.task.path, self.store)
            self.task = task
            check_turn_history(self.task)
            removed = remove_stale_temp_files(self.store.directory)
            # A killed write of the task file leaves its temp beside the file, or beside a link's target.
            for folder in dict.fromkeys((self.task.path.parent, self.task.path.resolve().parent)):
                removed += remove_stale_temp_files(folder)
            if removed:
                log.info("removed %d temp file(s) an interrupted write left in %s", len(removed), self.store.directory)
            yield self

    def completable_turn(self) -> int | None:
        """The next, unrecorded turn if both its reports are on disk and valid, else ``None``.

        That is a turn interrupted between the Coach's report and the frontmatter append (or one
        whose entry a stale editor save dropped): it is completed from its files, never re-run.
        """
        # The files alone decide (reopen=True): whether the loop may go on is the caller's check.
        point = resume_point(self.task, self.store, reopen=True)
        return point.next_turn if point.action == "complete_from_reports" else None

    def roll_forward(self) -> TurnRecord | None:
        """Complete a :meth:`completable_turn` from its files (no agent is called); ``None`` if none."""
        number = self.completable_turn()
        if number is None:
            return None
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
                            "re-read it (was it being saved?) — nothing was written", path=self.task.path,
                            task_id=self.task_id, turn=number, expected=f"at least {number} recorded turns")
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
        active = self._require_active()
        player = report if isinstance(report, PlayerReport) else PlayerReport.from_dict(
            with_ids(report, self.task_id, active.number, kind="player_turn"))
        active.player = self._write_report("player_turn", player, "player report")
        return player

    def record_coach(self, decision: CoachDecision | dict[str, Any]) -> CoachDecision:
        """Validate and write the Coach's decision for the active turn."""
        active = self._require_active()
        coach = decision if isinstance(decision, CoachDecision) else CoachDecision.from_dict(
            with_ids(decision, self.task_id, active.number, kind="coach_turn"))
        active.coach = self._write_report("coach_turn", coach, "coach decision")
        return coach

    def _write_report(self, kind: str, report: Any, what: str) -> Any:
        number = self._require_active().number
        self._check_ids(report.task_id, report.turn, number, what)
        self.store.write(kind, number, report.to_dict(), recorded_turns=self.recorded_turns)
        return report

    def _check_ids(self, task_id: str, turn: int, expected_turn: int, what: str, path: Path | None = None) -> None:
        if task_id != self.task_id:
            raise InputError(f"{what} is for task {task_id}, not {self.task_id}", path=path, pointer="$.task_id",
                             task_id=self.task_id, expected=self.task_id)
        if turn != expected_turn:
            raise InputError(f"{what} is for turn {turn}, but the next turn of {self.task_id} is {expected_turn}",
                             path=path, pointer="$.turn", task_id=self.task_id, turn=turn,
                             expected=str(expected_turn))

    def complete_turn(
        self,
        *,
        error: str | None = None,
        gate_profile: GateProfile | None = None,
        worktree_path: str | None = None,
        base_branch: str | None = None,
    ) -> TurnRecord:
        """Assemble the turn state, write it, and append the turn to the frontmatter.

        Reports not recorded in this process are read back from the files (resume). With
        ``error`` the turn is recorded with decision ``error`` (an agent failed) and the reason.
        With ``gate_profile`` the turn's measurements are judged against its thresholds; a Coach
        approval with a failed required gate is recorded as feedback naming the gate.
        """
        active = self._require_active()
        number = active.number
        player = active.player or self.store.read_player(number)
        coach = active.coach or self.store.read_coach(number)
        if error is None and (player is None or coach is None):
            missing = "player report" if player is None else "coach decision"
            raise TurnError(f"turn {number} has no {missing}", task_id=self.task_id, turn=number,
                            expected="both reports, or an error reason")

        gate_results: list[GateResult] = []
        if gate_profile is not None and error is None:
            gate_results = check_gates(gate_profile, **gate_inputs(turn_measurements(player, coach)))
            coach = apply_gate_verdict(coach, gate_results)
        ledger_before = self._ledger_before(number)
        ledger = ledger_before.apply_coach(number, coach) if coach is not None and error is None else ledger_before
        recovered = None
        if player is not None and not player.completion_promises:
            recovered = self.store.recover_promises(number)

        completed_at = utc_now()
        state = assemble_turn_state(
            task_id=self.task_id, feature_id=self.task.feature_id, turn=number, mode=active.mode,
            player=player, coach=None if error else coach, ledger=ledger, ledger_before=ledger_before,
            started_at=_started_at(active, self.store, number), completed_at=completed_at, error=error,
            gate_results=gate_results, promises_source=recovered[0] if recovered else None,
        )
        stall = detect_stall([*self.stall_history(number),
                              TurnSignal(number, state.feedback_signature, state.verified_count)])
        outcome = _outcome(state, stall, number, self.max_turns)
        if stall is not None:
            state.extra["stall"] = stall.reason
        entry = TurnEntry(
            turn=number, decision="error" if error or coach is None else coach.decision,
            feedback=error if error else state.coach_feedback, timestamp=completed_at,
            player_summary=_one_line(state.player_summary), player_success=player is not None,
            coach_success=coach is not None and not error, mode=active.mode.value,
        )
        update = self._state_update(entry, ledger, outcome, worktree_path, base_branch, active)
        splice = self._write_turn(state, update)
        written = [self.store.path("turn_state", number), self.task.path]
        if player is not None and self.store.exists("player_turn", number):
            written.insert(0, self.store.path("player_turn", number))
        if coach is not None and self.store.exists("coach_turn", number):
            written.insert(1 if player is not None else 0, self.store.path("coach_turn", number))
        self._active = None
        log.info("turn %d of %s recorded: %s (%d/%d criteria verified)%s", number, self.task_id, entry.decision,
                 ledger.verified_count, len(ledger.entries), f", outcome {outcome.value}" if outcome else "")
        if splice.method == "rerender":
            log.warning("frontmatter block of %s re-rendered: %s", self.task.path, splice.reason)
        return TurnRecord(state, entry, ledger, ledger_before, outcome, stall, splice, written,
                          recovered[0] if recovered else None)

    def _write_turn(self, state: TurnState, update: StateUpdate) -> SpliceResult:
        """Write the turn state, then append the turn to the task file (the commit point).

        Never one without the other: the turn state is written only once the task file can be,
        and removed again if appending fails. The agents' reports stay (a resume completes the
        turn from them).
        """
        number = state.turn_number
        check_task_writable(self.task)
        self.store.write("turn_state", number, state.to_dict(), recorded_turns=self.recorded_turns)
        crash_point("turn.before_frontmatter")  # turn state written, turn not yet committed
        try:
            return self.task.apply(update)
        except Exception:
            _discard_unlisted(self, number, ("turn_state",))
            raise

    def _state_update(self, entry: TurnEntry, ledger: CriteriaLedger, outcome: Outcome | None,
                      worktree_path: str | None, base_branch: str | None, active: ActiveTurn) -> StateUpdate:
        state = self.task.state
        scalars: dict[str, Any] = {"current_turn": entry.turn, "last_updated": entry.timestamp}
        if state is None or state.max_turns != self.max_turns:
            scalars["max_turns"] = self.max_turns
        if worktree_path is not None:
            scalars["worktree_path"] = worktree_path
        if base_branch is not None:
            scalars["base_branch"] = base_branch
        if state is None or not state.started_at:
            scalars["started_at"] = active.started_at
        if outcome is not None:
            scalars["outcome"] = outcome.value
        elif state is not None and state.extra.get("outcome"):
            scalars["outcome"] = None
        status = outcome.task_status if outcome else "in_progress"
        return StateUpdate(
            key=self.task.state_key or "autobuild_state",
            block_scalars=scalars,
            criteria=ledger.statuses() or None,
            # The last turns this process knows are recorded ride along: TaskFile.apply drops those
            # the file lists, and puts back any a stale editor save dropped since they were written.
            append_turns=[*(t.to_dict() for t in (state.turns[-RESTORABLE_TURNS:] if state else [])),
                          entry.to_dict()],
            top_level={"status": status},
        )

    def mark_outcome(self, outcome: Outcome, *, reason: str | None = None) -> SpliceResult:
        """Record how the loop ended without a new turn (e.g. max turns reached before starting one)."""
        scalars: dict[str, Any] = {"outcome": outcome.value, "last_updated": utc_now()}
        if reason:
            scalars["outcome_reason"] = reason
        return self.task.apply(StateUpdate(key=self.task.state_key or "autobuild_state", block_scalars=scalars,
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


def _outcome(state: TurnState, stall: Stall | None, number: int, max_turns: int) -> Outcome | None:
    if state.coach_decision == "approved":
        return Outcome.APPROVED
    if stall is not None:
        return Outcome.UNRECOVERABLE_STALL
    if number >= max_turns:
        return Outcome.MAX_TURNS_EXCEEDED
    return None


def _one_line(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


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

    Validation happens before anything is written (before the lock file is even created): a bad
    report leaves every file as it was. ``player_path``/``coach_path`` name the reports' files in
    errors. The task file is read settled (an editor saving it in place is waited out), so the
    next turn's number never comes from a half-written file. A task whose status is terminal or
    whose loop was approved takes a turn only with ``reopen``; a turn beyond the budget only with a
    ``max_turns`` that allows it (:class:`InputError` otherwise, nothing written).

    Raises:
        AlreadyRecordedError: the reports name a turn already recorded; ``identical`` tells a
            retry of the very same ``record`` (nothing to do) from different reports.
    """
    lifecycle = TurnLifecycle.open(root, task_id, max_turns=max_turns, settled=True)
    incoming = IncomingTurn(lifecycle, player, coach, player_path, coach_path)
    # Reports that name the turn after one complete on disk but not listed (a dropped entry) roll
    # that turn forward first; otherwise they are for the next turn, replacing the files of an
    # attempt that failed before its commit point (an orchestrator retrying the same `record`).
    incoming.check_before_lock()
    check_may_continue(lifecycle.task, incoming.next_number(), reopen=reopen, max_turns=max_turns)
    check_task_writable(lifecycle.task)  # before the lock file and any of the turn's files
    with lifecycle.locked():
        incoming.refuse_recorded()
        # Again on the file as read under the lock: it may have changed since.
        check_may_continue(lifecycle.task, incoming.next_number(), reopen=reopen, max_turns=max_turns)
        if incoming.follows_completable():
            lifecycle.roll_forward()
        player_rec, coach_rec = incoming.checked(lifecycle.recorded_turns + 1)
        number = lifecycle.begin_turn(mode).number
        try:
            lifecycle.record_player(player_rec)
            lifecycle.record_coach(coach_rec)
            return lifecycle.complete_turn()
        except BaseException:
            # A record is all or nothing: reports of a turn its task file does not list go again.
            _discard_unlisted(lifecycle, number, ("player_turn", "coach_turn", "turn_state"))
            raise


__all__ = ["ActiveTurn", "TurnLifecycle", "TurnRecord", "assemble_turn_state", "check_turn_history",
           "record_turn", "shared_lock_path", "turn_measurements"]
