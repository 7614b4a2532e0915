"""Continuation context: what turn N needs to know about turn N-1.

Rendered from the files (the turn-state file, else the turn's entry in the task's frontmatter),
never only from the index. After a rejection the feedback is repeated under ``Last Turn Feedback
(MUST ADDRESS):`` so the Player cannot miss it. Pure functions only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from guardkit_state.model import Criterion, TurnState
from guardkit_state.turns.ledger import criteria_lines
from guardkit_state.turns.sent_back import send_back_lines


def render_continuation_context(
    previous: TurnState | None,
    *,
    turn: int,
    criteria: Sequence[Criterion] = (),
    statuses: dict[str, str] | None = None,
    role_section: str | None = None,
    sent_back: Mapping[str, Any] | None = None,
    implied: Collection[str] = (),
) -> str:
    """Markdown context for ``turn``.

    Args:
        previous: the turn state of ``turn - 1`` (``None`` for turn 1).
        turn: the turn about to start.
        criteria: the task's criteria, for their text.
        statuses: cumulative criteria status (the ledger); defaults to ``previous``'s.
        role_section: the Player's role constraints, appended when given.
        sent_back: the merge queue's entry that sent ``previous``'s approval back
            (:mod:`guardkit_state.turns.sent_back`): its gate verdict is what this turn must address.
        implied: the criteria verified only by the Coach's approval (shown so, as ``show`` shows them).
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
            lines.extend(criteria_lines(criteria, statuses or {}, implied=implied))
        must = must_address_lines(previous)
        if sent_back is not None:
            must = [*must, *send_back_lines(sent_back)]
        if must:
            lines.append("")
            lines.append("Last Turn Feedback (MUST ADDRESS):")
            lines.extend(must)
    if role_section:
        lines.append("")
        lines.append(role_section.rstrip())
    return "\n".join(lines) + "\n"


#: Issues listed one by one under MUST ADDRESS; the rest are summarised by severity and category.
MAX_LISTED_ISSUES = 25


def must_address_lines(previous: TurnState) -> list[str]:
    """What the previous Coach found that this turn must address: feedback, issues, criterion notes.

    Empty when the previous turn was approved or an error (its reason is shown above). A long list
    of issues is listed up to :data:`MAX_LISTED_ISSUES`, then summarised by severity and category
    (never silently cut): the whole list stays in the previous turn's ``coach_turn_N.json``.
    """
    if previous.coach_decision not in ("feedback", "rejected"):
        return []
    lines: list[str] = []
    issues = previous.coach_issues
    feedback = (previous.coach_feedback or "").strip()
    if feedback and not _feedback_lists_issues(previous):  # else the issues below say it, with more
        lines.append(feedback)
    if issues:
        lines.append("Specifically:")
        for issue in issues[:MAX_LISTED_ISSUES]:
            lines.append(f"- {_issue_line(issue)}")
        rest = issues[MAX_LISTED_ISSUES:]
        if rest:
            kinds = Counter(f"{i.get('severity', 'unrated')}/{i.get('category', 'general')}" for i in rest)
            summary = ", ".join(f"{n} {kind}" for kind, n in kinds.most_common())
            lines.append(f"- … and {len(rest)} more issue(s) ({summary}); all {len(issues)} are in "
                         f"coach_turn_{previous.turn_number}.json")
    notes = [(cid, note) for cid, note in previous.criteria_notes.items()
             if previous.acceptance_criteria_status.get(cid) != "verified"]
    if notes:
        lines.append("Criteria not verified, with the Coach's notes:")
        lines.extend(f"- {cid}: {' '.join(note.split())}" for cid, note in notes)
    return lines


def _feedback_lists_issues(previous: TurnState) -> bool:
    """True when the feedback is made of the issues' own descriptions (what a Coach that writes no
    ``feedback`` is read as): the issues, listed with their details, say it already."""
    feedback = (previous.coach_feedback or "").strip()
    said = {" ".join(str(i["description"]).split()) for i in previous.coach_issues}
    told = [" ".join(line.strip().removeprefix("- ").split()) for line in feedback.splitlines() if line.strip()]
    return bool(said and told) and all(line in said for line in told)


def _issue_line(issue: dict[str, object]) -> str:
    head = " ".join(str(issue["description"]).split())
    tags = [str(issue[k]) for k in ("severity", "category") if issue.get(k)]
    where = issue.get("location") or issue.get("file")
    text = (f"[{'/'.join(tags)}] " if tags else "") + head + (f" ({where})" if where else "")
    suggestion = issue.get("suggestion")
    if suggestion:
        text += f" — suggestion: {' '.join(str(suggestion).split())}"
    return text


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
        if _feedback_lists_issues(prev) and len(prev.coach_issues) > 1:
            lines.append(f"**Coach feedback**: {len(prev.coach_issues)} issue(s), listed under MUST ADDRESS below")
        else:
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
