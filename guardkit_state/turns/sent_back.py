"""A task the merge queue sent back: its approval stands in its history, but does not end its loop.

A feature's merge queue (:mod:`guardkit_state.features.merge_queue`) merges approved tasks onto a
candidate of the feature branch and runs the plan's gate on it. A task whose merge makes the gate
fail is *sent back*: an entry is appended to ``autobuild_state.sent_back`` in its task file, naming
the turn whose approval it answers (``after_turn``), the gate's command, exit code and the tail of
its output. While that entry answers the last recorded turn, the approval does not close the
task: its loop goes on with one more turn, whose continuation context carries the gate's verdict
under MUST ADDRESS, as a Coach's issue would be (:func:`send_back_lines`). A new turn ends it.

Recorded history only grows: the approving turn stays as it was; the entry is added beside it.
Pure functions only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from guardkit_state.model import AutobuildState

#: The key of the entries in a task's ``autobuild_state``.
SENT_BACK_KEY = "sent_back"
#: The output kept in a task file's entry (its tail): what the Player needs to see, not a log.
OUTPUT_IN_TASK = 1500
#: Lines of the output repeated in the Player's context.
OUTPUT_LINES = 40


def sent_back_entries(state: AutobuildState | None) -> list[dict[str, Any]]:
    """The task's ``sent_back`` entries, oldest first (entries that are no mapping are skipped)."""
    raw = state.extra.get(SENT_BACK_KEY) if state is not None else None
    return [entry for entry in raw if isinstance(entry, dict)] if isinstance(raw, list) else []


def pending_send_back(state: AutobuildState | None) -> Mapping[str, Any] | None:
    """The entry that sent back the task's last recorded turn, an approval; None when there is none
    (no approval last, or no entry answering it: the approval ends the loop as always)."""
    return sent_back_after(state, len(state.turns)) if state is not None and state.turns else None


def sent_back_after(state: AutobuildState | None, turn: int) -> Mapping[str, Any] | None:
    """The entry that sent back turn ``turn``'s approval (the newest), or None."""
    if state is None or not 1 <= turn <= len(state.turns) or state.turns[turn - 1].decision != "approve":
        return None
    number = state.turns[turn - 1].turn
    return next((entry for entry in reversed(sent_back_entries(state)) if entry.get("after_turn") == number), None)


def gate_words(entry: Mapping[str, Any]) -> str:
    """``exited 1 (expected 0)`` or ``timed out after 30 s``: how the gate failed, in words."""
    code, expected = entry.get("exit_code"), entry.get("expected_exit", 0)
    if code is None:
        seconds = entry.get("timeout")
        return f"timed out{f' after {seconds:g} s' if isinstance(seconds, (int, float)) else ''}"
    return f"exited {code} (expected {expected})"


def gate_issue(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The entry as a Coach's issue (``severity``, ``category``, ``description``, ``suggestion``)."""
    before = [str(t) for t in entry.get("merged_before") or []]
    command = " ".join(str(entry.get("gate") or "the gate").split())
    where = f"{entry.get('feature_branch') or 'the feature branch'}"
    with_ = f" with {', '.join(before)} merged before it" if before else ""
    candidate = str(entry.get("candidate") or "")[:10]
    description = (f"merged into {where}{with_}, this task's work fails the merge gate: `{command}` "
                   f"{gate_words(entry)}{f' on candidate {candidate}' if candidate else ''}")
    base = str(entry.get("base") or "")[:10]
    suggestion = ("make the gate pass with the work merged before it"
                  + (f" ({where} at {base} is merged into this task's branch: run the gate here)" if base else ""))
    return {"severity": "must_fix", "category": "merge_gate", "description": description, "suggestion": suggestion}


def send_back_lines(entry: Mapping[str, Any]) -> list[str]:
    """What the turn after a send-back must address: the gate as an issue, then its output's tail."""
    issue = gate_issue(entry)
    lines = [f"The Coach approved turn {entry.get('after_turn')}, but the merge queue sent the task back: "
             "its merge breaks the feature's gate.", "Specifically:",
             f"- [{issue['severity']}/{issue['category']}] {issue['description']} — suggestion: {issue['suggestion']}"]
    output = str(entry.get("output") or "").rstrip()
    if output:
        tail = output.splitlines()[-OUTPUT_LINES:]
        lines.append(f"The gate's output (last {len(tail)} line(s)):")
        lines.extend(f"    {line}" for line in tail)
    return lines


def kept_output(text: str) -> str:
    """The tail of a gate's output as a task file keeps it: printable text (ANSI colour codes and
    other control characters but tab and newline removed), at most :data:`OUTPUT_IN_TASK` characters."""
    cleaned = []
    skipping = False
    for char in text:
        if char == "\x1b":
            skipping = True
            continue
        if skipping:
            if char.isalpha():
                skipping = False
            continue
        if char in "\n\t" or (char.isprintable() and char not in "\x85\u2028\u2029"):
            cleaned.append(char)
    return "".join(cleaned)[-OUTPUT_IN_TASK:]


__all__ = ["OUTPUT_IN_TASK", "OUTPUT_LINES", "SENT_BACK_KEY", "gate_issue", "gate_words", "kept_output",
           "pending_send_back", "send_back_lines", "sent_back_after", "sent_back_entries"]
