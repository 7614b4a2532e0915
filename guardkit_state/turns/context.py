"""Continuation context: what turn N needs to know about turn N-1.

Rendered from the files (the turn-state file, else the turn's entry in the task's frontmatter),
never only from the index. After a rejection the feedback is repeated under ``Last Turn Feedback
(MUST ADDRESS):`` so the Player cannot miss it. Pure functions only.
"""

from __future__ import annotations

from collections.abc import Sequence

from guardkit_state.model import Criterion, TurnState
from guardkit_state.turns.ledger import criteria_lines


def render_continuation_context(
    previous: TurnState | None,
    *,
    turn: int,
    criteria: Sequence[Criterion] = (),
    statuses: dict[str, str] | None = None,
    role_section: str | None = None,
) -> str:
    """Markdown context for ``turn``.

    Args:
        previous: the turn state of ``turn - 1`` (``None`` for turn 1).
        turn: the turn about to start.
        criteria: the task's criteria, for their text.
        statuses: cumulative criteria status (the ledger); defaults to ``previous``'s.
        role_section: the Player's role constraints, appended when given.
    """
    lines: list[str] = []
    if previous is None:
        lines.append(f"## Turn {turn}: fresh start")
        lines.append("No previous turn: implement the task from its acceptance criteria.")
    else:
        lines.extend(_previous_turn_lines(previous))
        statuses = statuses if statuses is not None else previous.acceptance_criteria_status
        if statuses or criteria:
            lines.append("")
            lines.append("**Acceptance Criteria Status**:")
            lines.extend(criteria_lines(criteria, statuses or {}))
        if previous.coach_decision == "rejected" and previous.coach_feedback:
            lines.append("")
            lines.append("Last Turn Feedback (MUST ADDRESS):")
            lines.append(previous.coach_feedback)
    if role_section:
        lines.append("")
        lines.append(role_section.rstrip())
    return "\n".join(lines) + "\n"


def _previous_turn_lines(prev: TurnState) -> list[str]:
    decision = "REJECTED" if prev.coach_decision == "rejected" else prev.coach_decision
    lines = [
        f"## Previous Turn Summary (Turn {prev.turn_number})",
        f"**What was attempted**: {prev.player_summary or 'no summary reported'}",
        f"**Player decision**: {prev.player_decision}",
        f"**Coach decision**: {decision}",
    ]
    if prev.coach_feedback:
        lines.append("")
        lines.append(f"**Coach feedback**: {prev.coach_feedback}")
    if prev.error:
        lines.append(f"**Error**: {prev.error}")
    if prev.extra.get("source") == "frontmatter":
        lines.append("")
        lines.append("_As listed in the task file's turn history (no per-turn report on disk)._")
    extra: list[str] = []
    if prev.blockers_found:
        extra.append(f"**Blockers found**: {', '.join(prev.blockers_found)}")
    if prev.lessons_from_turn:
        extra.append(f"**Lessons learned**: {'; '.join(prev.lessons_from_turn)}")
    if prev.what_to_try_next:
        extra.append(f"**Suggested focus for this turn**: {prev.what_to_try_next}")
    if extra:
        lines.append("")
        lines.extend(extra)
    return lines
