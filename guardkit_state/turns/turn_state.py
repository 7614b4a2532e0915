"""Assembling a turn's state from its two reports and the criteria ledger (pure functions).

``turn_state_turn_N.json`` is the one place a turn is described in full: what the Player did, what
the Coach decided, the cumulative criteria status, measurements and gates, and the signature the
stall detector compares. Nothing here reads or writes a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from guardkit_state.config import gates_verdict
from guardkit_state.model import CoachDecision, GateResult, PlayerReport, TurnMode, TurnState, turn_state_id
from guardkit_state.turns.ledger import CriteriaLedger
from guardkit_state.turns.promises import SOURCE_KEY, source_name
from guardkit_state.turns.stall import TurnSignal, feedback_signature
from guardkit_state.turns.verdicts import VERDICT_WORDS_KEY


@dataclass(frozen=True)
class TurnRun:
    """What the loop knows of a turn beyond its two reports, travelling as one value from the loop to
    the turn state and the frontmatter: an agent's failure (``error``, by ``failed_role``), the runs
    it measured (role -> run, for a role whose report carries none), and where the turn ran (the
    loop's own worktree, relative to the main checkout, and the branch it started from)."""

    error: str | None = None
    failed_role: str | None = None
    agent_runs: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    worktree_path: str | None = None
    base_branch: str | None = None


@dataclass(frozen=True)
class TurnInputs:
    """Everything a finished turn is judged from (gathered from memory or the files by the lifecycle)."""

    task_id: str
    feature_id: str | None
    number: int
    mode: TurnMode
    started_at: str
    max_turns: int
    player: PlayerReport | None
    coach: CoachDecision | None
    ledger_before: CriteriaLedger
    #: The stall detector's signals of the turns before this one (a window's worth at most).
    history: list[TurnSignal]
    run: TurnRun = field(default_factory=TurnRun)
    gate_results: list[GateResult] = field(default_factory=list)
    promises_source: int | None = None

    @property
    def error(self) -> str | None:
        return self.run.error


_COACH_TO_STATE = {"approve": "approved", "feedback": "feedback", "reject": "rejected", "error": "error"}


def _player_decision(player: PlayerReport | None) -> str:
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


def gate_inputs(measured: dict[str, Any]) -> dict[str, Any]:
    """Measurements outside their range are treated as unknown rather than failing the turn."""
    out = dict(measured)
    for name in ("coverage", "arch_score"):
        if out[name] is not None and not 0 <= out[name] <= 100:
            out[name] = None
    for name in ("tests_passed", "tests_failed"):
        if out[name] is not None and out[name] < 0:
            out[name] = None
    return out


def _measured(gate: GateResult) -> str:
    # A gate fails on a measure nobody reported too: say so, not "None".
    return "not reported" if gate.actual is None else str(gate.actual)


def apply_gate_verdict(coach: CoachDecision | None, gates: list[GateResult]) -> CoachDecision | None:
    """A Coach approval does not stand against a failed required gate (thresholds are not negotiable)."""
    if coach is None or coach.decision != "approve" or gates_verdict(gates) is not False:
        return coach
    failed = [g for g in gates if g.required and g.passed is False]
    text = "; ".join(f"quality gate {g.gate} failed: {_measured(g)} vs threshold {g.threshold} ({g.source})"
                     for g in failed)
    line = "approval overturned by " + "; ".join(
        f"quality gate {g.gate} ({_measured(g)} vs threshold {g.threshold})" for g in failed)
    return replace(coach, decision="feedback", feedback=text, extra={**coach.extra, GATE_OVERRIDE_KEY: line})


def apply_criteria_verdict(coach: CoachDecision | None, ledger_before: CriteriaLedger,
                           turn: int) -> CoachDecision | None:
    """A Coach approval that rejects a criterion in the same report is not an approval: it is recorded
    as feedback naming the criteria, so the Player's next turn is told what to meet (docs/agents.md).
    The Coach's report keeps what it said; a verdict on an id the task does not have counts for nothing."""
    if coach is None or coach.decision != "approve":
        return coach
    after = ledger_before.apply_coach(turn, replace(coach, decision="feedback")).statuses()
    said = {c.criterion_id for c in coach.criteria_verification if c.result == "rejected"}
    rejected = [cid for cid, status in after.items() if status == "rejected" and cid in said]
    if not rejected:
        return coach
    names = ", ".join(rejected)
    text = (f"the Coach answered approve while rejecting {names}: not an approval; {names} must be met and "
            "verified first")
    return replace(coach, decision="feedback", feedback=text)


def assemble_turn_state(inputs: TurnInputs, ledger: CriteriaLedger, completed_at: str) -> TurnState:
    """Build the full TurnState from the turn's inputs and the ledger after it (pure).

    ``inputs.promises_source`` is the earlier turn whose Player report's promises stand for this
    turn's; a Player that left them out is recorded as such even when no earlier report has any (the
    next turn looks no further back than this one). ``inputs.run`` says what the loop knows beyond the
    reports: an agent that failed (then the Coach's report counts for nothing), the runs it measured.
    """
    player, error, run = inputs.player, inputs.error, inputs.run
    coach = None if error else inputs.coach
    measured = turn_measurements(player, coach)
    coach_decision = "error" if error or coach is None else _COACH_TO_STATE[coach.decision]
    feedback = error if error else (coach.feedback_text if coach else None)
    seconds = (datetime.fromisoformat(completed_at) - datetime.fromisoformat(inputs.started_at)).total_seconds()
    extra: dict[str, Any] = {}
    if (player is not None and not player.completion_promises) or inputs.promises_source is not None:
        extra[SOURCE_KEY] = source_name(inputs.promises_source)
    return TurnState(
        id=turn_state_id(inputs.feature_id, inputs.task_id, inputs.number),
        feature_id=inputs.feature_id,
        task_id=inputs.task_id,
        turn_number=inputs.number,
        mode=inputs.mode.value,
        player_summary=player.headline if player else "",
        player_decision=_player_decision(player),  # type: ignore[arg-type]
        coach_decision=coach_decision,  # type: ignore[arg-type]
        coach_feedback=feedback,
        blockers_found=_blockers(player, coach),
        progress_summary=_progress(ledger, inputs.ledger_before),
        acceptance_criteria_status=ledger.statuses(),
        criteria_provenance=ledger.provenance(),
        files_modified=_files(player),
        tests_passed=measured["tests_passed"],
        tests_failed=measured["tests_failed"],
        coverage=measured["coverage"],
        arch_score=measured["arch_score"],
        started_at=inputs.started_at,
        completed_at=completed_at,
        duration_seconds=max(0.0, round(seconds, 3)),
        lessons_from_turn=(list(player.lessons) if player else []) + (list(coach.lessons) if coach else []),
        what_to_try_next=_what_next(coach, coach_decision, ledger, error),
        feedback_signature=feedback_signature(feedback) if coach_decision != "approved" else None,
        verified_count=ledger.verified_count,
        gate_results=[g.to_dict() for g in inputs.gate_results],
        error=error,
        coach_issues=_issues(coach),
        criteria_notes={c.criterion_id: c.notes for c in coach.criteria_verification if c.notes.strip()}
        if coach else {},
        agent_runs=_agent_runs(player, coach, run.agent_runs),
        failed_role=run.failed_role if error else None,
        verdict_words=[dict(w) for w in coach.extra.get(VERDICT_WORDS_KEY) or [] if isinstance(w, dict)]
        if coach else [],
        gate_override=coach.extra.get(GATE_OVERRIDE_KEY) if coach else None,
        extra=extra,
    )


#: The key of a report's own run (agent, model, session, cost, tokens, duration), set by the loop.
AGENT_RUN_KEY = "agent_run"
#: The key of the Coach report's approval overturned by a quality gate (its one-line reason).
GATE_OVERRIDE_KEY = "gate_override"
_ISSUE_KEYS = ("description", "suggestion", "severity", "category", "location", "file", "line")


def _issues(coach: CoachDecision | None) -> list[dict[str, Any]]:
    """The Coach's issues as the next turn needs them: a description (never empty) and its details."""
    issues: list[dict[str, Any]] = []
    for item in coach.issues if coach else []:
        if not isinstance(item, dict):
            continue
        kept = {k: item[k] for k in _ISSUE_KEYS if item.get(k) not in (None, "")}
        description = kept.get("description") or item.get("message") or item.get("title")
        if not description:
            continue
        kept["description"] = str(description)
        issues.append(kept)
    return issues


def _agent_runs(player: PlayerReport | None, coach: CoachDecision | None,
                measured: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    runs: dict[str, dict[str, Any]] = {}
    for role, report in (("player", player), ("coach", coach)):
        run = report.extra.get(AGENT_RUN_KEY) if report is not None else None
        if isinstance(run, dict):
            runs[role] = dict(run)
    for role, run in measured.items():
        runs.setdefault(role, dict(run))
    return runs


def _blockers(player: PlayerReport | None, coach: CoachDecision | None) -> list[str]:
    """The Player's blockers, then the issues the Coach filed as blockers."""
    blockers = list(player.blockers) if player else []
    if coach:
        blockers += [str(i.get("description")) for i in coach.issues
                     if i.get("category") == "blocker" or i.get("severity") == "blocker"]
    return blockers


def _progress(ledger: CriteriaLedger, ledger_before: CriteriaLedger) -> str:
    """``3/8 criteria verified (+AC-002 -AC-005)``."""
    delta = ledger.delta(ledger_before)
    progress = f"{ledger.verified_count}/{len(ledger.entries)} criteria verified"
    if delta:
        progress += f" ({' '.join(delta)})"
    return progress


def _what_next(coach: CoachDecision | None, coach_decision: str, ledger: CriteriaLedger,
               error: str | None) -> str | None:
    """The Coach's advice, else (unless approved) recovering from the error or the open criteria."""
    what_next = coach.what_to_try_next if coach else None
    if what_next is None and coach_decision not in ("approved",):
        open_items = [e.criterion_id for e in ledger.entries if e.status != "verified"]
        if error:
            what_next = f"Recover from the failure: {error}"
        elif open_items:
            what_next = "Address " + ", ".join(open_items[:5]) + (" and more" if len(open_items) > 5 else "")
    return what_next


def _files(player: PlayerReport | None) -> list[str]:
    """The files the Player created, then those it modified, each once."""
    return list(dict.fromkeys([*player.files_created, *player.files_modified])) if player else []


__all__ = ["AGENT_RUN_KEY", "GATE_OVERRIDE_KEY", "TurnInputs", "TurnRun", "apply_gate_verdict",
           "assemble_turn_state", "gate_inputs", "turn_measurements"]
