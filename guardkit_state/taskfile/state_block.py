"""The ``autobuild_state`` block of a task's frontmatter: its turn entries, read strictly.

The block is written by hand as often as by tools, so every value is checked as it is read and a
bad one is named by its key (``autobuild_state.turns[1].turn``); numbers quoted by an editor
(``turn: '1'``) are those numbers. :mod:`guardkit_state.model` re-exports these records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The state block's key: GuardKit's, and the older loop's legacy name (read and written back as is).
#: Here, not in :mod:`.frontmatter` (which re-exports them), so that finding files needs no YAML.
STATE_KEY = "autobuild_state"
LEGACY_STATE_KEY = "feature_build"
STATE_KEYS = (STATE_KEY, LEGACY_STATE_KEY)

#: The statuses a criterion can have in the frontmatter's ``criteria`` map.
CRITERION_STATES = ("verified", "rejected", "pending")


def _pop_known(data: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in names}


def whole_number(value: Any) -> int | None:
    """``value`` as an int when it is one: an int (never a bool), or a string of ASCII digits.

    Hand-edited frontmatter quotes numbers (``turn: '1'``); that is still turn 1 everywhere.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.isascii() and text.isdigit():
            return int(text)
    return None


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):  # as the YAML says it, not Python's repr
        return f"a boolean ({'true' if value else 'false'})"
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _count(data: dict[str, Any], name: str, where: str, *, minimum: int) -> int | None:
    """The whole number under ``name`` (None when absent); ``ValueError`` naming ``where`` otherwise."""
    value = data.get(name)
    if value is None:
        return None
    number = whole_number(value)
    if number is None or number < minimum:
        wanted = "a positive whole number" if minimum == 1 else f"a whole number of {minimum} or more"
        raise ValueError(f"{where}.{name} is {_kind(value)}; expected {wanted}")
    return number


def _text(data: dict[str, Any], name: str, where: str) -> str | None:
    """The scalar under ``name`` as text (None when absent); a list or mapping is a ``ValueError``."""
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        raise ValueError(f"{where}.{name} is {_kind(value)}; expected text")
    return str(value)


def _mapping_or_empty(value: Any, where: str, expected: str) -> dict[str, Any]:
    """A mapping, or ``{}`` for an absent/empty value; ``ValueError`` naming ``where`` otherwise."""
    if isinstance(value, dict):
        return value
    if not value:  # None, [], '' — nothing recorded yet, whatever the empty value's type
        return {}
    raise ValueError(f"{where} is {_kind(value)}; expected {expected}")


@dataclass
class TurnEntry:
    """One item of ``autobuild_state.turns`` in the task frontmatter: a readable summary."""

    turn: int
    decision: str
    feedback: str | None = None
    timestamp: str | None = None
    player_summary: str | None = None
    player_success: bool | None = None
    coach_success: bool | None = None
    mode: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _KNOWN = ("turn", "decision", "feedback", "timestamp", "player_summary", "player_success",
              "coach_success", "mode")

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, where: str = "turn entry") -> TurnEntry:
        """Raises ``ValueError`` naming ``where`` (``autobuild_state.turns[2]``) for a bad shape."""
        if not isinstance(data, dict):
            raise ValueError(f"{where} is {_kind(data)}; expected a mapping (turn: N, decision: ...)")
        if data.get("turn") is None:
            raise ValueError(f"{where} has no turn number; expected 'turn: N'")
        turn = _count(data, "turn", where, minimum=1)
        return cls(
            turn=int(turn or 0),
            decision=_text(data, "decision" if "decision" in data else "coach_decision", where) or "feedback",
            feedback=_text(data, "feedback", where),
            timestamp=_text(data, "timestamp", where),
            player_summary=_text(data, "player_summary", where),
            player_success=data.get("player_success"),
            coach_success=data.get("coach_success"),
            mode=_text(data, "mode", where),
            extra=_pop_known(data, (*cls._KNOWN, "coach_decision")),
        )

    def to_dict(self) -> dict[str, Any]:
        """Key order follows GuardKit's own entries, then ours, so files stay familiar."""
        out: dict[str, Any] = {"turn": self.turn}
        if self.mode is not None:
            out["mode"] = self.mode
        out["decision"] = self.decision
        out["feedback"] = self.feedback
        out["timestamp"] = self.timestamp
        out["player_summary"] = self.player_summary
        out["player_success"] = self.player_success
        out["coach_success"] = self.coach_success
        out.update(self.extra)
        return out


@dataclass
class AutobuildState:
    """The ``autobuild_state`` (or legacy ``feature_build``) block of a task's frontmatter."""

    key: str = STATE_KEY
    current_turn: int = 0
    max_turns: int | None = None
    worktree_path: str | None = None
    base_branch: str | None = None
    started_at: str | None = None
    last_updated: str | None = None
    criteria: dict[str, str] = field(default_factory=dict)
    turns: list[TurnEntry] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    _KNOWN = ("current_turn", "max_turns", "worktree_path", "base_branch", "started_at", "last_updated",
              "criteria", "turns")

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, *, key: str = STATE_KEY) -> AutobuildState:
        """The state block, every value checked: ``ValueError`` naming the key (``autobuild_state.turns[1].turn``).

        Numbers written as digit strings (``turn: '1'``) are those numbers (:func:`whole_number`);
        ``data`` itself is left exactly as parsed.
        """
        data = _mapping_or_empty(data, key, "a mapping (current_turn, turns, ...)")
        criteria = _mapping_or_empty(data.get("criteria"), f"{key}.criteria",
                                     "a mapping of criterion id to status (AC-001: verified)")
        for cid, status in criteria.items():
            if status not in CRITERION_STATES:
                raise ValueError(f"{key}.criteria.{cid} is {_kind(status)}; expected "
                                 f"{', '.join(CRITERION_STATES[:-1])} or {CRITERION_STATES[-1]}")
        return cls(
            key=key,
            current_turn=_count(data, "current_turn", key, minimum=0) or 0,
            max_turns=_count(data, "max_turns", key, minimum=1),
            worktree_path=_text(data, "worktree_path", key),
            base_branch=_text(data, "base_branch", key),
            started_at=_text(data, "started_at", key),
            last_updated=_text(data, "last_updated", key),
            criteria={str(k): str(v) for k, v in criteria.items()},
            turns=_turn_entries(data, key),
            extra=_pop_known(data, cls._KNOWN),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"current_turn": self.current_turn, "max_turns": self.max_turns,
                               "worktree_path": self.worktree_path, "base_branch": self.base_branch,
                               "started_at": self.started_at, "last_updated": self.last_updated}
        out.update(self.extra)
        if self.criteria:
            out["criteria"] = dict(self.criteria)
        out["turns"] = [t.to_dict() for t in self.turns]
        return out

    @property
    def next_turn(self) -> int:
        """GuardKit's own resume rule: the turn after the last recorded one."""
        return len(self.turns) + 1

    @property
    def last_feedback(self) -> str | None:
        return self.turns[-1].feedback if self.turns else None


def _turn_entries(data: dict[str, Any], key: str) -> list[TurnEntry]:
    raw = data.get("turns")
    if isinstance(raw, dict) and not raw:
        raw = None  # `turns: {}`: an empty collection, whatever its brackets
    if raw is not None and not isinstance(raw, list):
        raise ValueError(f"{key}.turns is {_kind(raw)}; expected a list of entries (- turn: 1 ...)")
    return [TurnEntry.from_dict(item, where=f"{key}.turns[{index}]") for index, item in enumerate(raw or [])]


def turn_sequence_problem(numbers: list[int], where: str) -> str | None:
    """What is wrong with a history's turn numbers (they must be 1, 2, ... n), or ``None``.

    ``where`` (the file's name) goes into the sentence: ``turns jump from 1 to 3 in X.md; ...``.
    """
    previous = 0
    for number in numbers:
        if number <= previous:
            if numbers.count(number) > 1:
                return f"turn {number} is listed twice in {where}"
            return f"turns go back from {previous} to {number} in {where}"
        if number != previous + 1:
            missing = f"turn {previous + 1} is" if number == previous + 2 else f"turns {previous + 1}-{number - 1} are"
            return f"turns jump from {previous} to {number} in {where}; {missing} missing"
        previous = number
    return None


__all__ = ["AutobuildState", "TurnEntry", "turn_sequence_problem", "whole_number"]
