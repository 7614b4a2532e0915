"""The Coach's prompt sections (docs/lifecycle.md) and the Player's role section.

Pure functions: configuration and records in, markdown text out. The format is GuardKit's
"injected format": the role section, the gate section ending in "DO NOT adjust these thresholds
during this session.", and the previous turn's context. A role with no constraints configured
gets no role section at all ("the Coach prompt omits the role section rather than failing").
"""

from __future__ import annotations

from collections.abc import Sequence

from guardkit_state.config.gates import GateLookup, GateProfile
from guardkit_state.config.loader import ResolvedConfig
from guardkit_state.config.roles import RoleConstraints
from guardkit_state.errors import one_line
from guardkit_state.model import Criterion, TurnState

#: How each TurnState coach decision is shown (GuardKit's prompts write "REVISE" for feedback).
DECISION_WORDS = {"approved": "APPROVE", "approve": "APPROVE", "feedback": "REVISE", "rejected": "REJECT",
                  "reject": "REJECT", "error": "ERROR"}

#: Longest previous-turn feedback quoted in the prompt (the Player gets the full text elsewhere).
MAX_FEEDBACK_CHARS = 400

_LABELS = (
    ("must_do", "You MUST"),
    ("must_not_do", "You MUST NOT"),
    ("ask_before", "ASK BEFORE"),
    ("escalate_when", "ESCALATE when"),
)


def render_role_section(constraints: RoleConstraints) -> str:
    """``## Your Role: <Role>`` and one ``|``-joined line per non-empty list; ``""`` if all are empty."""
    lines = [f"## Your Role: {constraints.role.capitalize()}"]
    for kind, label in _LABELS:
        texts = [one_line(t) for t in constraints.texts(kind)]
        if texts:
            lines.append(f"{label}: {' | '.join(texts)}")
    return "\n".join(lines) if len(lines) > 1 else ""


def render_gates_section(profile: GateProfile, *, task_type: str, complexity: int,
                         warnings: Sequence[str] = (), requested_task_type: str | None = None) -> str:
    """``## Quality Gates for This Task`` with the thresholds in force and the do-not-adjust line."""
    shown = task_type
    if requested_task_type and requested_task_type.strip().lower() != task_type:
        shown = f"{task_type} (task_type: {one_line(requested_task_type)})"
    lines = ["## Quality Gates for This Task", f"Task type: {shown} | Complexity: {complexity}"]
    for gate, required, threshold in (
            ("Architecture review", profile.arch_review_required, profile.arch_review_threshold),
            ("Coverage", profile.coverage_required, _percent(profile.coverage_threshold))):
        lines.append(f"{gate}: required (threshold: {threshold})" if required else f"{gate}: not required")
    if profile.tests_required:
        lines.append("Tests: required, must pass" if profile.tests_must_pass else "Tests: required")
    else:
        lines.append("Tests: not required")
    lines.extend(f"Note: {one_line(w)}" for w in warnings)
    lines.append("DO NOT adjust these thresholds during this session.")
    return "\n".join(lines)


def render_previous_turn_section(previous: TurnState, *, turn: int) -> str:
    """``## Previous Turn Context (Turn N of M)``: what the Player did, AC status, blockers, decision."""
    lines = [f"## Previous Turn Context (Turn {previous.turn_number} of {turn})"]
    lines.append(one_line(previous.player_summary) or "No Player summary recorded.")
    status = ", ".join(f"{cid}: {state}" for cid, state in previous.acceptance_criteria_status.items())
    lines.append(f"AC status: {{{status}}}")
    blockers = [one_line(b) for b in previous.blockers_found if str(b).strip()]
    lines.append(f"Blockers: {'; '.join(blockers) if blockers else 'None'}")
    decision = DECISION_WORDS.get(previous.coach_decision, str(previous.coach_decision).upper())
    feedback = one_line(previous.coach_feedback or "")
    if len(feedback) > MAX_FEEDBACK_CHARS:
        feedback = feedback[: MAX_FEEDBACK_CHARS - 1].rstrip() + "…"
    lines.append(f"Coach decision: {decision} — {feedback}" if feedback else f"Coach decision: {decision}")
    gates = [g for g in previous.gate_results if isinstance(g, dict) and g.get("required", True)]
    if gates:
        lines.append("Quality gates: " + ", ".join(
            f"{g.get('gate')} {_verdict(g.get('passed'))}" for g in gates))
    if previous.what_to_try_next:
        lines.append(f"Suggested focus: {one_line(previous.what_to_try_next)}")
    return "\n".join(lines)


def render_coach_prompt(
    config: ResolvedConfig,
    *,
    task_id: str,
    title: str,
    task_type: str | None,
    complexity: object,
    criteria: Sequence[Criterion],
    previous_turn: TurnState | None,
    turn: int,
) -> str:
    """The Coach's prompt for ``turn`` of ``task_id``: task, role, gates, criteria, previous turn.

    Args:
        config: from :func:`load_config` (or :func:`default_config`).
        task_id, title: the task being validated.
        task_type, complexity: the task's frontmatter values; unknown types and missing
            complexity fall back (feature / 5) and the prompt says so.
        criteria: the task's acceptance criteria (``AC-001``...).
        previous_turn: the TurnState of turn ``turn - 1``; ``None`` on turn 1 (no section).
        turn: the turn being validated (1-based).
    """
    lookup: GateLookup = config.lookup_gate_profile(task_type, complexity)
    sections = [f"# Coach validation: {task_id} — {one_line(title)} (turn {turn})"]
    role = render_role_section(config.role("coach"))
    if role:
        sections.append(role)
    sections.append(render_gates_section(lookup.profile, task_type=lookup.task_type,
                                         complexity=lookup.complexity, warnings=lookup.warnings,
                                         requested_task_type=task_type))
    if criteria:
        status = previous_turn.acceptance_criteria_status if previous_turn else {}
        lines = ["## Acceptance Criteria"]
        for criterion in criteria:
            state = status.get(criterion.id)
            lines.append(f"- {criterion.id}: {one_line(criterion.text)}" + (f" [{state}]" if state else ""))
        sections.append("\n".join(lines))
    if previous_turn is not None and turn > 1:
        sections.append(render_previous_turn_section(previous_turn, turn=turn))
    return "\n\n".join(sections) + "\n"


def render_player_role_section(config: ResolvedConfig) -> str:
    """The Player's role section for its context file; ``""`` when the Player has no constraints."""
    section = render_role_section(config.role("player"))
    return section + "\n" if section else ""


def _percent(fraction: float) -> str:
    value = round(fraction * 100, 2)
    return f"{value:g}%"


def _verdict(passed: object) -> str:
    if passed is True:
        return "passed"
    return "FAILED" if passed is False else "unknown"
