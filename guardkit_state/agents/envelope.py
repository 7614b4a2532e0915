"""One envelope for every agent: what a coding CLI's output says, read where its preset says it is.

Result text, structured output, cost in USD (None where the agent does not report it), tokens in
and out, session id, error flag, subtype and error text, model. ``is_error: true`` with exit 0 (a
quota or authentication failure reported as a result) is an error all the same. Pure functions:
output text in, :class:`AgentEnvelope` out.

What an agent prints is bounded before use: JSON nested deeper than the store's limit is refused
(a :class:`~guardkit_state.errors.ParseError`, which the agent's run turns into its error turn)
instead of exhausting Python's recursion; a cost or token count that is not a finite number of at
least zero (``Infinity``, ``1e400``, ``-3``) is unknown, and the envelope's ``notes`` say so.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from guardkit_state.agents.presets import AgentPreset
from guardkit_state.store.jsonio import check_depth

_FENCED_JSON = re.compile(r"```(?:json)?\s*\n(\{.*?\})\s*\n```", re.S)


@dataclass(frozen=True)
class AgentEnvelope:
    """What one agent run reported about itself."""

    result: str = ""
    structured: dict[str, Any] | None = None
    cost_usd: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    session_id: str | None = None
    is_error: bool = False
    subtype: str | None = None
    error: str | None = None
    model: str | None = None
    #: What was read differently from what the agent printed (a cost that is no finite amount).
    notes: tuple[str, ...] = ()

    def run_record(self, agent: str, duration: float | None = None) -> dict[str, Any]:
        """The run as a turn state keeps it (``agent_runs``)."""
        return {"agent": agent, "model": self.model, "session_id": self.session_id, "cost_usd": self.cost_usd,
                "tokens_in": self.tokens_in, "tokens_out": self.tokens_out,
                **({"duration_seconds": round(duration, 3)} if duration is not None else {}),
                **({"subtype": self.subtype} if self.subtype else {}),
                **({"notes": list(self.notes)} if self.notes else {})}


def lookup(data: Any, path: str) -> Any:
    """``data`` at a dotted ``path``; ``*`` takes an object's first value, or its first key at the end."""
    parts = path.split(".")
    for i, part in enumerate(parts):
        if not isinstance(data, Mapping):
            return None
        if part == "*":
            if not data:
                return None
            key = next(iter(data))
            if i == len(parts) - 1:
                return key
            data = data[key]
        else:
            data = data.get(part)
    return data


def _matches(event: Mapping[str, Any], match: Mapping[str, Any]) -> bool:
    return all(lookup(event, path) == value for path, value in match.items())


def _from_events(events: Sequence[Any], specs: Any) -> Any:
    """The last value a spec list finds in ``events`` (or the sum of all, with ``sum: true``)."""
    found: Any = None
    for event in events:
        if not isinstance(event, Mapping):
            continue
        for spec in specs if isinstance(specs, list) else [specs]:
            if not isinstance(spec, Mapping) or not _matches(event, spec.get("match") or {}):
                continue
            value = lookup(event, str(spec.get("path", "")))
            if value is None:
                continue
            if spec.get("sum") and isinstance(value, (int, float)) and not isinstance(value, bool):
                found = (found or 0) + value
            else:
                found = value
            break
    return found


def _loads(text: str) -> Any:
    """``json.loads`` with the store's depth limit first (a ParseError past it: never a RecursionError)."""
    check_depth(text)
    return json.loads(text)


def _json_lines(text: str) -> list[Any]:
    events = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                events.append(_loads(line))
            except ValueError:
                continue
    return events


def _last_object(text: str) -> dict[str, Any] | None:
    """The JSON object the output is (or, after log lines, the last line that is one)."""
    stripped = text.strip()
    try:
        data = _loads(stripped) if stripped.startswith(("{", "[")) else None
        if data is not None:
            return data if isinstance(data, dict) else None
    except ValueError:
        pass
    objects = [e for e in _json_lines(text) if isinstance(e, dict)]
    return objects[-1] if objects else None


def read_envelope(preset: AgentPreset, stdout: str, *, log_text: str = "") -> AgentEnvelope | None:
    """The envelope of one run of ``preset``, or None when its output is not what the preset reads."""
    values: dict[str, Any] = {}
    if preset.output == "json":
        data = _last_object(stdout)
        if data is None:
            return None
        values = {name: lookup(data, path) for name, path in preset.fields.items() if isinstance(path, str)}
    elif preset.output == "jsonl":
        events = _json_lines(stdout)
        if not events:
            return None
        values = {name: _from_events(events, specs) for name, specs in preset.fields.items()}
    else:
        values = {"result": stdout}
    if preset.log_fields and log_text:
        events = _json_lines(log_text)
        for name, specs in preset.log_fields.items():
            values.setdefault(name, None)
            found = _from_events(events, specs)
            if found is not None:
                values[name] = found
    error = values.get("error")
    error_text = error if isinstance(error, str) else (json.dumps(error) if error not in (None, False, "") else None)
    structured = values.get("structured")
    result = values.get("result")
    subtype = str(values["subtype"]) if values.get("subtype") else None
    notes: list[str] = []
    return AgentEnvelope(
        result=result if isinstance(result, str) else ("" if result is None else json.dumps(result)),
        structured=structured if isinstance(structured, dict) else None,
        cost_usd=_number(values.get("cost_usd"), "cost", notes),
        tokens_in=_integer(values.get("tokens_in"), "tokens in", notes),
        tokens_out=_integer(values.get("tokens_out"), "tokens out", notes),
        session_id=str(values["session_id"]) if values.get("session_id") else None,
        # Claude's ``error_max_turns``, ``error_during_execution`` ... are errors whatever the flag says.
        is_error=values.get("is_error") is True or error_text is not None or (subtype or "").startswith("error"),
        subtype=subtype,
        error=error_text,
        model=str(values["model"]) if values.get("model") else None,
        notes=tuple(notes),
    )


#: The largest token count taken as one (2**53: what a JSON reader of another language keeps exactly).
MAX_TOKENS = 2**53


def _number(value: Any, what: str, notes: list[str]) -> float | None:
    """A cost in USD: a finite number of at least 0; anything else reported is unknown, said in ``notes``."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value) if not isinstance(value, int) or abs(value) < 2**1023 else math.inf
        if math.isfinite(number) and number >= 0:
            return number
    notes.append(f"its {what} was reported as {_shown(value)}, not a finite amount of at least 0: counted as unknown")
    return None


def _integer(value: Any, what: str, notes: list[str]) -> int | None:
    """A token count: a whole number from 0 to :data:`MAX_TOKENS`; anything else reported is unknown."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS:
        return value
    notes.append(f"its {what} were reported as {_shown(value)}, not a count from 0 to 2**53: counted as unknown")
    return None


def _shown(value: Any) -> str:
    """A reported value in a note: short, one line (a float's repr says ``inf`` for ``1e400``)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return "a number of over 30 digits"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def report_in_text(text: str) -> dict[str, Any] | None:
    """The report an agent put in its answer: the last fenced JSON object, else the answer if it is one."""
    for block in reversed(_FENCED_JSON.findall(text)):
        try:
            data = _loads(block)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return _last_object(text)


__all__ = ["AgentEnvelope", "lookup", "read_envelope", "report_in_text"]
