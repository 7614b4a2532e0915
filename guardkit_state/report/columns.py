"""One turn's column: its frontmatter entry and whichever of its three reports are on disk."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from guardkit_state.inspect.task_turns import TurnFiles
from guardkit_state.inspect.turn_reports import describe_evidence
from guardkit_state.model import CoachDecision, PlayerReport, TurnEntry, TurnState
from guardkit_state.report.task_report import Gate, Issue, TurnColumn

_DECISIONS = {"approve": "approve", "approved": "approve", "feedback": "feedback", "reject": "reject",
              "rejected": "reject", "error": "error"}
_PLAYER_OUTCOMES = ("implemented", "failed", "blocked")


def turn_view(entry: TurnEntry, files: TurnFiles, *, commit: str | None = None,
              delta: list[str] | None = None) -> TurnColumn:
    """The column of one turn: the frontmatter ``entry`` completed by its ``files``."""
    player, coach, state = files.player, files.coach, files.state
    view = TurnColumn(
        number=entry.turn,
        mode=_first(entry.mode, state.mode if state is not None else None) or "—",
        decision=_DECISIONS.get(str(entry.decision).strip().lower(), str(entry.decision)),
        player_outcome=_player_outcome(entry, state),
        timestamp=_first(entry.timestamp, state.completed_at if state is not None else None),
        duration_seconds=_duration(state),
        commit=commit,
        tests=_tests(player, state),
        gates=_gates(state),
        player_summary=_first(entry.player_summary, state.player_summary if state is not None else None,
                              player.headline if player is not None else None) or "",
        implementation_notes=player.implementation_notes if player is not None else "",
        files=_files(player, state),
        feedback=_first(entry.feedback, state.coach_feedback if state is not None else None,
                        coach.feedback_text if coach is not None else None),
        rationale=coach.rationale if coach is not None else "",
        issues=_issues(coach),
        blockers=_texts(state.blockers_found if state is not None else None,
                        player.blockers if player is not None else None),
        lessons=_texts(state.lessons_from_turn if state is not None else None,
                       [*(player.lessons if player is not None else []),
                        *(coach.lessons if coach is not None else [])]),
        what_to_try_next=_first(state.what_to_try_next if state is not None else None,
                                coach.what_to_try_next if coach is not None else None),
        error=_first(state.error if state is not None else None),
        source="reports" if files.any else "frontmatter",
        delta=list(delta or []),
        agent_runs=dict(state.agent_runs) if state is not None else {},
        evidence=describe_evidence(files.evidence) if files.evidence is not None else None,
    )
    if view.rationale and view.rationale == view.feedback:
        view.rationale = ""
    return view


def _first(*values: object) -> str | None:
    """The first value that is non-empty text."""
    for value in values:
        if value is not None and str(value).strip():
            return str(value)
    return None


def _player_outcome(entry: TurnEntry, state: TurnState | None) -> str:
    if state is not None and state.player_decision in _PLAYER_OUTCOMES:
        return state.player_decision
    if entry.player_success is True:
        return "implemented"
    if entry.player_success is False:
        return "failed"
    return "unknown"


def _duration(state: TurnState | None) -> float | None:
    if state is None:
        return None
    if isinstance(state.duration_seconds, (int, float)) and not isinstance(state.duration_seconds, bool):
        return float(state.duration_seconds)
    return seconds_between(state.started_at, state.completed_at)


def seconds_between(start: object, end: object) -> float | None:
    """The seconds from ``start`` to ``end`` (ISO times, as written); None unless both are times of one
    kind (with or without a zone) and ``end`` is later."""
    try:
        seconds = (datetime.fromisoformat(str(end)) - datetime.fromisoformat(str(start))).total_seconds()
    except (TypeError, ValueError):
        return None
    return seconds if seconds > 0 else None


def _tests(player: PlayerReport | None, state: TurnState | None) -> str | None:
    passed = state.tests_passed if state is not None else None
    failed = state.tests_failed if state is not None else None
    if passed is None and failed is None and player is not None:
        passed, failed = player.tests_passed_count, player.tests_failed_count
        if passed is None and failed is None and player.tests_run:
            return "passed" if player.tests_passed else "failed"
    if passed is None and failed is None:
        return None
    return f"{passed if passed is not None else '?'} passed, {failed if failed is not None else '?'} failed"


def _gates(state: TurnState | None) -> list[Gate]:
    if state is None:
        return []
    gates: list[Gate] = []
    for item in state.gate_results or []:
        if not isinstance(item, dict):
            continue
        passed = item.get("passed")
        gates.append(Gate(name=str(item.get("gate") or "?"), passed=passed if isinstance(passed, bool) else None,
                          actual=item.get("actual"), threshold=item.get("threshold"),
                          required=item.get("required") is not False))
    return gates


def _files(player: PlayerReport | None, state: TurnState | None) -> list[str]:
    if state is not None and state.files_modified:
        return [str(f) for f in state.files_modified]
    if player is not None:
        return [str(f) for f in [*player.files_created, *player.files_modified]]
    return []


def _issues(coach: CoachDecision | None) -> list[Issue]:
    if coach is None:
        return []
    out: list[Issue] = []
    for item in coach.issues:
        if isinstance(item, dict):
            text = item.get("description") or item.get("message") or item.get("title") or item
            out.append(Issue(severity=str(item.get("severity") or "issue"), text=str(text)))
        else:
            out.append(Issue(severity="issue", text=str(item)))
    return out


def _texts(*lists: Sequence[object] | None) -> list[str]:
    """The first non-empty list of ``lists``, as text."""
    for values in lists:
        if values:
            return [str(v) for v in values]
    return []
