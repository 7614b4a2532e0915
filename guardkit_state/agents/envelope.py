"""One envelope for every agent: what a coding CLI's output says, read where its preset says it is.

Result text, structured output, cost in USD (None where the agent does not report it), tokens in
and out, session id, error flag, subtype and error text, model. ``is_error: true`` with exit 0 (a
quota or authentication failure reported as a result) is an error all the same. Pure functions:
output text in, :class:`AgentEnvelope` out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from guardkit_state.agents.presets import AgentPreset

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

    def run_record(self, agent: str, duration: float | None = None) -> dict[str, Any]:
        """The run as a turn state keeps it (``agent_runs``)."""
        return {"agent": agent, "model": self.model, "session_id": self.session_id, "cost_usd": self.cost_usd,
                "tokens_in": self.tokens_in, "tokens_out": self.tokens_out,
                **({"duration_seconds": round(duration, 3)} if duration is not None else {}),
                **({"subtype": self.subtype} if self.subtype else {})}


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


def _json_lines(text: str) -> list[Any]:
    events = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    return events


def _last_object(text: str) -> dict[str, Any] | None:
    """The JSON object the output is (or, after log lines, the last line that is one)."""
    stripped = text.strip()
    try:
        data = json.loads(stripped)
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
    return AgentEnvelope(
        result=result if isinstance(result, str) else ("" if result is None else json.dumps(result)),
        structured=structured if isinstance(structured, dict) else None,
        cost_usd=_number(values.get("cost_usd")),
        tokens_in=_integer(values.get("tokens_in")),
        tokens_out=_integer(values.get("tokens_out")),
        session_id=str(values["session_id"]) if values.get("session_id") else None,
        # Claude's ``error_max_turns``, ``error_during_execution`` ... are errors whatever the flag says.
        is_error=values.get("is_error") is True or error_text is not None or (subtype or "").startswith("error"),
        subtype=subtype,
        error=error_text,
        model=str(values["model"]) if values.get("model") else None,
    )


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


def _integer(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def report_in_text(text: str) -> dict[str, Any] | None:
    """The report an agent put in its answer: the last fenced JSON object, else the answer if it is one."""
    for block in reversed(_FENCED_JSON.findall(text)):
        try:
            data = json.loads(block)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return _last_object(text)


__all__ = ["AgentEnvelope", "lookup", "read_envelope", "report_in_text"]
