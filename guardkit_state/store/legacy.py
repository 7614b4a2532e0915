"""Normalisation of known legacy record shapes to the canonical shape (pure: never mutates its input).

GuardKit producers wrote aliases over the years (``ac_id``, ``description``, ``done``, the v4 Coach
``{verdict, findings}`` shape, GuardKit's own criterion statuses ...). Reading maps each known alias to
the canonical shape, with a warning for every lossy reading; anything that is not a known alias is
left for the schema to judge (:func:`guardkit_state.store.schemas.validate_record`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from guardkit_state.store.json_paths import PathParts, format_pointer

_PROMISE_STATUS = {"complete": "complete", "done": "complete", "finished": "complete",
                   "completed": "complete", "partial": "partial", "incomplete": "incomplete"}
_COACH_DECISION = {"approve": "approve", "approved": "approve", "feedback": "feedback",
                   "reject": "reject", "rejected": "reject"}
_TURN_STATE_COACH = {"approved": "approved", "approve": "approved", "feedback": "feedback",
                     "revise": "feedback", "rejected": "rejected", "reject": "rejected", "error": "error"}
# GuardKit copies the coach's decision into player_decision; the Player did implement something.
_TURN_STATE_PLAYER = {"implemented": "implemented", "failed": "failed", "blocked": "blocked",
                      "approve": "implemented", "approved": "implemented", "feedback": "implemented",
                      "reject": "implemented", "rejected": "implemented", "error": "failed"}
# The per-criterion statuses GuardKit's own turn states write, read as the ledger's three states.
_CRITERION_STATUS = {"verified": "verified", "rejected": "rejected", "pending": "pending",
                     "completed": "verified", "complete": "verified", "in_progress": "pending",
                     "not_started": "pending", "failed": "rejected"}
_TURN_MODES = ("fresh_start", "continuing_work", "recovering_state")
_PLAYER_LISTS = ("files_modified", "files_created", "tests_written", "concerns",
                 "requirements_addressed", "requirements_remaining", "lessons", "blockers")
_TURN_STATE_LISTS = ("blockers_found", "files_modified", "lessons_from_turn", "gate_results")


def _rename(obj: dict[str, Any], old: str, new: str, where: PathParts, notes: list[str]) -> None:
    """Move the legacy key ``old`` to ``new``; when both are present and differ, keep both."""
    if old not in obj:
        return
    if new not in obj:
        obj[new] = obj.pop(old)
    elif obj[new] == obj[old]:
        del obj[old]
    else:
        notes.append(f"{format_pointer(where + (old,))}: legacy key {old!r} ignored: {new!r} is also present")


def _mapped(value: Any, table: dict[str, str]) -> Any:
    """``value`` through ``table`` (case- and space-insensitive) or unchanged when not listed."""
    if isinstance(value, str):
        return table.get(value.strip().lower().replace("-", "_").replace(" ", "_"), value)
    return value


def _nulls_to_empty(obj: dict[str, Any], names: tuple[str, ...], empty: Callable[[], Any] = list) -> None:
    for name in names:
        if name in obj and obj[name] is None:
            obj[name] = empty()


def _normalise_player(data: dict[str, Any], notes: list[str]) -> None:
    _nulls_to_empty(data, _PLAYER_LISTS)
    promises = data.get("completion_promises", ())
    if promises is None:
        del data["completion_promises"]  # the model reads absent and null alike
    elif isinstance(promises, list):
        for i, promise in enumerate(promises):
            if not isinstance(promise, dict):
                continue
            where: PathParts = ("completion_promises", i)
            _rename(promise, "ac_id", "criterion_id", where, notes)
            _rename(promise, "description", "criterion_text", where, notes)
            if "status" in promise:
                promise["status"] = _mapped(promise["status"], _PROMISE_STATUS)
            if promise.get("implementation_files", ()) is None:
                promise["implementation_files"] = []


def _normalise_coach(data: dict[str, Any], notes: list[str]) -> None:
    if "verdict" in data and "decision" not in data:
        # The v4 Coach shape: {verdict: approve|reject, findings: [...]}.
        data["decision"] = data.pop("verdict")
        if "findings" in data and "issues" not in data:
            data["issues"] = data.pop("findings")
    if "decision" in data:
        data["decision"] = _mapped(data["decision"], _COACH_DECISION)
    _nulls_to_empty(data, ("issues", "criteria_verification"))
    issues = data.get("issues")
    if isinstance(issues, list):
        data["issues"] = [{"description": item} if isinstance(item, str) else item for item in issues]
    checks = data.get("criteria_verification")
    if isinstance(checks, list):
        for i, check in enumerate(checks):
            if not isinstance(check, dict):
                continue
            where: PathParts = ("criteria_verification", i)
            _rename(check, "ac_id", "criterion_id", where, notes)
            if "result" not in check:
                continue
            result = check["result"]
            mapped = _mapped(result, {"verified": "verified", "rejected": "rejected"})
            if mapped in ("verified", "rejected"):
                check["result"] = mapped
            elif result is None or isinstance(result, str):
                # Only an explicit "verified" counts; anything else must not pass as verified.
                check["result"] = "rejected"
                notes.append(f"{format_pointer(where + ('result',))}: {json.dumps(result)} read as \"rejected\"")


def _normalise_turn_state(data: dict[str, Any], notes: list[str]) -> None:
    _rename(data, "turn", "turn_number", (), notes)
    for name, default in (("feature_id", None), ("player_summary", ""), ("coach_feedback", None)):
        data.setdefault(name, default)
    if "mode" in data:
        data["mode"] = _mapped(data["mode"], {m: m for m in _TURN_MODES})
    if "player_decision" in data:
        data["player_decision"] = _mapped(data["player_decision"], _TURN_STATE_PLAYER)
    if "coach_decision" in data:
        data["coach_decision"] = _mapped(data["coach_decision"], _TURN_STATE_COACH)
    _nulls_to_empty(data, _TURN_STATE_LISTS)
    _nulls_to_empty(data, ("acceptance_criteria_status", "criteria_provenance"), dict)
    statuses = data.get("acceptance_criteria_status")
    if isinstance(statuses, dict):
        data["acceptance_criteria_status"] = {k: _mapped(v, _CRITERION_STATUS) for k, v in statuses.items()}


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


def _numbers(obj: dict[str, Any], names: tuple[str, ...]) -> None:
    """Numbers an editor quoted (``'1'``) read as those numbers; anything else is the schema's to judge."""
    for name in names:
        if isinstance(obj.get(name), str) and whole_number(obj[name]) is not None:
            obj[name] = whole_number(obj[name])


def _normalise_autobuild_state(data: dict[str, Any], notes: list[str]) -> None:
    # An empty collection is nothing recorded yet, whatever its brackets (`turns: {}`, `criteria: []`).
    for name, empty in (("turns", []), ("criteria", {})):
        if name in data and not data[name]:
            data[name] = empty
    _numbers(data, ("current_turn", "max_turns"))
    turns = data.get("turns")
    for i, entry in enumerate(turns if isinstance(turns, list) else ()):  # a non-list is the schema's to report
        if isinstance(entry, dict):
            _rename(entry, "coach_decision", "decision", ("turns", i), notes)
            _numbers(entry, ("turn",))


_NORMALISERS: dict[str, Callable[[dict[str, Any], list[str]], None]] = {
    "player_turn": _normalise_player,
    "coach_turn": _normalise_coach,
    "turn_state": _normalise_turn_state,
    "autobuild_state": _normalise_autobuild_state,
}


def normalise(kind: str, data: Any, *, owned: bool = False, plain: bool = False) -> tuple[Any, list[str]]:
    """Map known legacy shapes of a ``kind`` record to the canonical shape.

    Returns a new object (the input is never mutated, unless ``owned``) and warnings, each ``"$.path: text"``, for
    lossy readings such as a criterion ``result`` of ``"unverified"`` read as ``"rejected"``.
    Anything that is not a known alias is left for the schema to judge. ``plain``: ``data`` is plain JSON.
    """
    notes: list[str] = []  # the warnings, each "$.path: text"
    # Data the caller owns (just parsed, shared with nobody) is normalised in place; plain JSON is
    # copied by a C-speed round trip (a deepcopy costs ~10x more), which also makes subclasses plain.
    if owned:
        out = data
    elif plain:
        out = json.loads(json.dumps(data, ensure_ascii=False))
    else:
        out = copy.deepcopy(data)
    normaliser = _NORMALISERS.get(kind)
    if normaliser is not None and isinstance(out, dict):
        normaliser(out, notes)
    return out, notes


__all__ = ["normalise", "whole_number"]
