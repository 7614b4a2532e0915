"""The turn lifecycle: begin, record the Player, record the Coach, complete (DESIGN.md section 3).

``complete_turn`` turns two reports into a recorded turn: it updates the criteria ledger, checks for
a stall, writes ``turn_state_turn_N.json``, and appends the turn to the task's frontmatter — the
commit point. Everything it needs from earlier turns is read back from the files, so a new process
(``--resume``, ``guardkit-state record``) behaves exactly like the one that was interrupted.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .artifacts import TurnStore, artifacts_dir
from .context import render_continuation_context
from .criteria import CriteriaLedger
from .config import GateProfile, check_gates, gates_verdict
from .errors import InputError, TurnError
from .splice import SpliceResult, StateUpdate
from .fsio import crash_point, exclusive_lock, validate_task_id
from .model import (
    CoachDecision,
    GateResult,
    Outcome,
    PlayerReport,
    TurnEntry,
    TurnMode,
    TurnState,
    turn_state_id,
)
from .stall import NO_CHANGE_WINDOW, Stall, TurnSignal, detect_stall, feedback_signature
from .resume import resume_point
from .taskfile import TaskFile, find_task

log = logging.getLogger("guardkit_state.turns")

DEFAULT_MAX_TURNS = 5
#: How many recently recorded turn entries a write re-asserts (restored if a stale save dropped them).
RESTORABLE_TURNS = 2
_COACH_TO_STATE = {"approve": "approved", "feedback": "feedback", "reject": "rejected", "error": "error"}


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def shared_lock_path(checkout_root: Path, task_id: str) -> Path:
    """The task's lock file, shared by the main checkout and all its worktrees.

    Inside git it lives in the common git directory (one per repository, whatever the worktree);
    without git, next to the task's artifacts.
    """
    root = Path(checkout_root).resolve()
    for candidate in (root, *root.parents):
        dot_git = candidate / ".git"
        if dot_git.is_dir():
            return dot_git / "guardkit-state" / "locks" / f"{task_id}.lock"
        if dot_git.is_file():
            text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
            if text.startswith("gitdir:"):
                gitdir = (candidate / text.split(":", 1)[1].strip()).resolve()
                common = gitdir
                commondir_file = gitdir / "commondir"
                if commondir_file.is_file():
                    common = (gitdir / commondir_file.read_text().strip()).resolve()
                return common / "guardkit-state" / "locks" / f"{task_id}.lock"
    return artifacts_dir(root, task_id) / ".lock"


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
        self.task = task
        self.root = Path(root)
        self.task_id = task.task_id
        self.store = TurnStore(artifacts_dir(self.root, self.task_id), self.task_id)
        state_max = task.state.max_turns if task.state else None
        self.max_turns = max_turns or state_max or DEFAULT_MAX_TURNS
        self._active: ActiveTurn | None = None

    @classmethod
    def open(cls, root: Path, task_id: str, *, max_turns: int | None = None) -> TurnLifecycle:
        """Find ``task_id``'s file under ``root/tasks`` and open its lifecycle."""
        validate_task_id(task_id)
        return cls(TaskFile.load(find_task(root, task_id)), root=root, max_turns=max_turns)

    # -- reading ---------------------------------------------------------------------------
    @property
    def recorded_turns(self) -> int:
        return len(self.task.state.turns) if self.task.state else 0

    def previous_turn_state(self, turn: int | None = None) -> TurnState | None:
        """The turn state of ``turn - 1`` (default: the last recorded turn)."""
        number = (turn or self.recorded_turns + 1) - 1
        return self.store.read_turn_state(number) if number >= 1 else None

    def ledger(self) -> CriteriaLedger:
        """The cumulative ledger after the last recorded turn."""
        return self._ledger_before(self.recorded_turns + 1)

    def _ledger_before(self, turn: int) -> CriteriaLedger:
        previous = self.previous_turn_state(turn)
        if previous is not None and previous.criteria_provenance:
            return CriteriaLedger.start(self.task.criteria, previous.criteria_provenance)
        # Turns recorded by another tool carry only the frontmatter map: statuses without provenance.
        frontmatter = self.task.state.criteria if self.task.state else {}
        carried = {cid: {"status": status} for cid, status in frontmatter.items()}
        return CriteriaLedger.start(self.task.criteria, carried)

    def stall_history(self, upto: int) -> list[TurnSignal]:
        """Signals of the turns before ``upto``, rebuilt from the turn-state files."""
        signals: list[TurnSignal] = []
        for number in range(max(1, upto - NO_CHANGE_WINDOW + 1), upto):
            state = self.store.read_turn_state(number) if self.store.exists("turn_state", number) else None
            if state is None:
                signals = []  # a gap breaks the window
                continue
            signals.append(TurnSignal(number, state.feedback_signature, state.verified_count))
        return signals

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
        """Hold the task's lock (one writer per task, across worktrees)."""
        with exclusive_lock(shared_lock_path(self.root, self.task_id), wait=wait, holder=self.task_id):
            self.task = self.task.refreshed()
            yield self

    def completable_turn(self) -> int | None:
        """The next, unrecorded turn if both its reports are on disk and valid, else ``None``.

        That is a turn interrupted between the Coach's report and the frontmatter append (or one
        whose entry a stale editor save dropped): it is completed from its files, never re-run.
        """
        point = resume_point(self.task, self.store)
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
            _with_ids(report, self.task_id, active.number, kind="player_turn"))
        active.player = self._write_report("player_turn", player, "player report")
        return player

    def record_coach(self, decision: CoachDecision | dict[str, Any]) -> CoachDecision:
        """Validate and write the Coach's decision for the active turn."""
        active = self._require_active()
        coach = decision if isinstance(decision, CoachDecision) else CoachDecision.from_dict(
            _with_ids(decision, self.task_id, active.number, kind="coach_turn"))
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
            gate_results = check_gates(gate_profile, **_gate_inputs(turn_measurements(player, coach)))
            coach = _apply_gate_verdict(coach, gate_results)
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
        written = [self.store.write("turn_state", number, state.to_dict(), recorded_turns=self.recorded_turns)]

        entry = TurnEntry(
            turn=number, decision="error" if error or coach is None else coach.decision,
            feedback=state.coach_feedback if not error else error, timestamp=completed_at,
            player_summary=_one_line(state.player_summary), player_success=player is not None,
            coach_success=coach is not None and not error, mode=active.mode.value,
        )
        crash_point("turn.before_frontmatter")  # turn state written, turn not yet committed
        splice = self.task.apply(self._state_update(entry, ledger, outcome, worktree_path, base_branch, active))
        written.append(self.task.path)
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


def _with_ids(data: dict[str, Any], task_id: str, turn: int, *, path: Path | None = None,
              kind: str | None = None) -> dict[str, Any]:
    """Validate an agent's raw report and fill in ids it may leave out (errors name ``path``)."""
    from .errors import SchemaError
    from .schemas import validate_record  # local: record shape validation lives in schemas

    if not isinstance(data, dict):
        raise SchemaError(f"a report must be a JSON object, not {type(data).__name__}", path=path, pointer="$",
                          task_id=task_id, turn=turn, expected="a JSON object")
    kind = kind or ("coach_turn" if "decision" in data or "verdict" in data else "player_turn")
    filled = {"task_id": task_id, "turn": turn, **data}
    return validate_record(kind, filled, path=path)


def _started_at(active: ActiveTurn, store: TurnStore, number: int) -> str:
    """When the turn began; for a turn completed on resume, the Player report's write time."""
    if active.player is not None or not store.exists("player_turn", number):
        return active.started_at
    mtime = store.path("player_turn", number).stat().st_mtime
    return datetime.fromtimestamp(mtime, timezone.utc).isoformat(timespec="seconds")


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


def _player_decision(player: PlayerReport | None, error: str | None) -> str:
    if player is None:
        return "failed"
    explicit = player.extra.get("player_decision") or player.extra.get("decision")
    if explicit in ("implemented", "failed", "blocked"):
        return str(explicit)
    if player.blockers:
        return "blocked"
    if player.extra.get("success") is False:
        return "failed"
    return "implemented"


def _first_number(*values: Any) -> Any:
    return next((v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)), None)


def turn_measurements(player: PlayerReport | None, coach: CoachDecision | None) -> dict[str, Any]:
    """Tests, coverage and arch score of a turn: the Coach's figures first (it verifies), then the Player's."""
    results = coach.validation_results if coach else {}
    return {
        "tests_run": player.tests_run if player else None,
        "tests_passed": _first_number(results.get("tests_passed_count"), player.tests_passed_count if player else None),
        "tests_failed": _first_number(results.get("tests_failed_count"), player.tests_failed_count if player else None),
        "coverage": _first_number(results.get("coverage"), player.coverage if player else None),
        "arch_score": _first_number(results.get("arch_score")),
    }


def _gate_inputs(measured: dict[str, Any]) -> dict[str, Any]:
    """Measurements outside their range are treated as unknown rather than failing the turn."""
    out = dict(measured)
    for name in ("coverage", "arch_score"):
        if out[name] is not None and not 0 <= out[name] <= 100:
            out[name] = None
    for name in ("tests_passed", "tests_failed"):
        if out[name] is not None and out[name] < 0:
            out[name] = None
    return out


def _apply_gate_verdict(coach: CoachDecision | None, gates: list[GateResult]) -> CoachDecision | None:
    """A Coach approval does not stand against a failed required gate (seed 002: thresholds are fixed)."""
    if coach is None or coach.decision != "approve" or gates_verdict(gates) is not False:
        return coach
    failed = [g for g in gates if g.required and g.passed is False]
    text = "; ".join(f"quality gate {g.gate} failed: {g.actual} vs threshold {g.threshold} ({g.source})"
                     for g in failed)
    return replace(coach, decision="feedback", feedback=text, extra={**coach.extra, "gate_override": True})


def assemble_turn_state(
    *,
    task_id: str,
    feature_id: str | None,
    turn: int,
    mode: TurnMode,
    player: PlayerReport | None,
    coach: CoachDecision | None,
    ledger: CriteriaLedger,
    ledger_before: CriteriaLedger,
    started_at: str,
    completed_at: str,
    error: str | None = None,
    gate_results: Sequence[GateResult] = (),
    promises_source: int | None = None,
) -> TurnState:
    """Build the full TurnState of seeds 000/001 from the reports and the ledger (pure)."""
    measured = turn_measurements(player, coach)
    coach_decision = "error" if error or coach is None else _COACH_TO_STATE[coach.decision]
    feedback = error if error else (coach.feedback_text if coach else None)
    blockers = list(player.blockers) if player else []
    if coach:
        blockers += [str(i.get("description")) for i in coach.issues
                     if i.get("category") == "blocker" or i.get("severity") == "blocker"]
    delta = ledger.delta(ledger_before)
    total = len(ledger.entries)
    progress = f"{ledger.verified_count}/{total} criteria verified"
    if delta:
        progress += f" ({' '.join(delta)})"
    what_next = coach.what_to_try_next if coach else None
    if what_next is None and coach_decision not in ("approved",):
        open_items = [e.criterion_id for e in ledger.entries if e.status != "verified"]
        if error:
            what_next = f"Recover from the failure: {error}"
        elif open_items:
            what_next = "Address " + ", ".join(open_items[:5]) + (" and more" if len(open_items) > 5 else "")
    files: list[str] = []
    if player:
        for name in [*player.files_created, *player.files_modified]:
            if name not in files:
                files.append(name)
    seconds = (datetime.fromisoformat(completed_at) - datetime.fromisoformat(started_at)).total_seconds()
    lessons = (list(player.lessons) if player else []) + (list(coach.lessons) if coach else [])
    extra: dict[str, Any] = {}
    if promises_source is not None:
        extra["completion_promises_source"] = f"player_turn_{promises_source}.json"
    return TurnState(
        id=turn_state_id(feature_id, task_id, turn),
        feature_id=feature_id,
        task_id=task_id,
        turn_number=turn,
        mode=mode.value,
        player_summary=player.headline if player else "",
        player_decision=_player_decision(player, error),  # type: ignore[arg-type]
        coach_decision=coach_decision,  # type: ignore[arg-type]
        coach_feedback=feedback,
        blockers_found=blockers,
        progress_summary=progress,
        acceptance_criteria_status=ledger.statuses(),
        criteria_provenance=ledger.provenance(),
        files_modified=files,
        tests_passed=measured["tests_passed"],
        tests_failed=measured["tests_failed"],
        coverage=measured["coverage"],
        arch_score=measured["arch_score"],
        started_at=started_at,
        completed_at=completed_at,
        duration_seconds=max(0.0, round(seconds, 3)),
        lessons_from_turn=lessons,
        what_to_try_next=what_next,
        feedback_signature=feedback_signature(feedback) if coach_decision != "approved" else None,
        verified_count=ledger.verified_count,
        gate_results=[g.to_dict() for g in gate_results],
        error=error,
        extra=extra,
    )


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
) -> TurnRecord:
    """Record one whole turn from two reports, for loops driven by other tools.

    Validation happens before anything is written (before the lock file is even created): a bad
    report leaves every file as it was. ``player_path``/``coach_path`` name the reports' files in
    errors.
    """
    lifecycle = TurnLifecycle.open(root, task_id, max_turns=max_turns)

    def checked(number: int) -> tuple[PlayerReport, CoachDecision]:
        player_rec = player if isinstance(player, PlayerReport) else PlayerReport.from_dict(
            _with_ids(player, task_id, number, path=player_path, kind="player_turn"))
        coach_rec = coach if isinstance(coach, CoachDecision) else CoachDecision.from_dict(
            _with_ids(coach, task_id, number, path=coach_path, kind="coach_turn"))
        lifecycle._check_ids(player_rec.task_id, player_rec.turn, number, "player report", player_path)
        lifecycle._check_ids(coach_rec.task_id, coach_rec.turn, number, "coach decision", coach_path)
        return player_rec, coach_rec

    # Refuse bad input before touching the disk. Reports that name the turn after one already
    # complete on disk but not listed (a dropped entry) roll that turn forward first; otherwise
    # they are for the next turn, replacing the files of an attempt that failed before its commit
    # point (an orchestrator retrying the same `record`).
    checked(lifecycle.recorded_turns + 1 + _follows_completable(lifecycle, player))
    with lifecycle.locked():
        if _follows_completable(lifecycle, player):
            lifecycle.roll_forward()
        number = lifecycle.recorded_turns + 1
        player_rec, coach_rec = checked(number)
        lifecycle.begin_turn(mode)
        lifecycle.record_player(player_rec)
        lifecycle.record_coach(coach_rec)
        return lifecycle.complete_turn()


def _follows_completable(lifecycle: TurnLifecycle, player: dict[str, Any] | PlayerReport) -> bool:
    """True when ``player`` explicitly names the turn after a completable (unlisted) turn."""
    pending = lifecycle.completable_turn()
    turn = player.turn if isinstance(player, PlayerReport) else player.get("turn") if isinstance(player, dict) else None
    return pending is not None and turn == pending + 1


__all__ = ["ActiveTurn", "TurnLifecycle", "TurnRecord", "assemble_turn_state",
           "record_turn", "shared_lock_path"]
