"""Agent presets as data: the built-in ``presets.yaml`` and a project's ``.guardkit/config/agents.yaml``.

A preset says how one coding CLI runs headless (its argv, how the prompt is passed, each role's
permissions) and where each field of the agent envelope is in its output. A project adds a preset,
or overrides keys of a built-in one, without code. ``--player NAME`` picks a preset when ``NAME``
is one; a value with arguments or a path stays a shell command (:func:`is_preset_name`).
"""

from __future__ import annotations

import contextlib
import importlib.resources
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guardkit_state.errors import ConfigError, GuardkitStateError
from guardkit_state.process.command import run_command
from guardkit_state.store.reads import decode_utf8, read_bytes_capped
from guardkit_state.yamltext.strict_yaml import parse_yaml

#: A project's presets, next to its other configuration.
AGENTS_FILE = ".guardkit/config/agents.yaml"
OUTPUTS = ("json", "jsonl", "text")
ROLES = ("player", "coach")
_KEYS = frozenset(("description", "binary", "command", "player", "coach", "schema_args", "continue_args", "stdin",
                   "output", "fields", "log", "version"))


@dataclass(frozen=True)
class AgentPreset:
    """One coding CLI run headless (see ``presets.yaml`` for each key's meaning)."""

    name: str
    command: tuple[str, ...]
    output: str
    description: str = ""
    binary: str | None = None
    role_args: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    schema_args: tuple[str, ...] = ()
    #: How the Player goes on with an earlier session (``{session_id}``); empty: it cannot.
    continue_args: tuple[str, ...] = ()
    stdin_prompt: bool = False
    fields: Mapping[str, Any] = field(default_factory=dict)
    log_fields: Mapping[str, Any] = field(default_factory=dict)
    version: tuple[str, ...] = ()
    source: str = "built-in"

    @property
    def program(self) -> str:
        """The executable the preset runs (its ``binary``, else its command's first word)."""
        return self.binary or self.command[0]


#: The envelope's fields a preset may say where to find (``agents/envelope.py``).
ENVELOPE_FIELDS = ("result", "structured", "cost_usd", "tokens_in", "tokens_out", "session_id", "is_error",
                   "subtype", "error", "model")


@dataclass(frozen=True)
class _Where:
    """Where a preset was written, so an error names the file, the line and the key."""

    name: str
    path: str | None = None
    lines: Mapping[tuple[str, str], int] = field(default_factory=dict)

    def error(self, key: str, message: str, expected: str) -> ConfigError:
        top = key.split(".")[0]
        line = self.lines.get((self.name, top)) or self.lines.get((self.name, ""))
        return ConfigError(message, path=self.path or "guardkit_state/agents/presets.yaml (built-in)", line=line,
                           pointer=f"$.{self.name}" + (f".{key}" if key else ""), expected=expected)


def _strings(value: Any, where: _Where, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise where.error(key, f"{key} must be a list of strings", "a YAML list such as [claude, -p]")
    return tuple(value)


def _text(value: Any, where: _Where, key: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise where.error(key, f"{key} must be a string, not {type(value).__name__}", "a string")
    return value


def _field_specs(specs: Any, where: _Where, key: str, *, events: bool) -> dict[str, Any]:
    """``fields`` (or ``log.fields``) checked: known envelope fields, each where its output can say."""
    if not isinstance(specs, dict):
        raise where.error(key, f"{key} must be a mapping", "envelope field: where it is")
    for name, spec in specs.items():
        if name not in ENVELOPE_FIELDS:
            # A misspelt field would silently never be read (a cost never counted by --max-cost).
            raise where.error(f"{key}.{name}", f"{name!r} is not an envelope field", ", ".join(ENVELOPE_FIELDS))
        rules = spec if isinstance(spec, list) else [spec]
        good = (all(isinstance(r, dict) and isinstance(r.get("path"), str) and isinstance(r.get("match", {}), dict)
                    for r in rules) if events else isinstance(spec, str))
        if not good:
            expected = ("a list of {match: {path: value}, path: ...}" if events
                        else "a dotted path such as usage.input_tokens")
            raise where.error(f"{key}.{name}", f"{name} is {spec!r}", expected)
    return dict(specs)


def preset_from_dict(name: str, data: Mapping[str, Any], *, source: str,
                     where: _Where | None = None) -> AgentPreset:
    """An :class:`AgentPreset` from its YAML mapping; :class:`ConfigError` naming the file, line and key."""
    where = where or _Where(name)
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise where.error(unknown[0], f"unknown key(s) {', '.join(unknown)}", ", ".join(sorted(_KEYS)))
    command = _strings(data.get("command"), where, "command")
    if not command:
        raise where.error("command", "command is empty", "the agent's argv")
    output = data.get("output", "text")
    if output not in OUTPUTS:
        raise where.error("output", f"output is {output!r}", " | ".join(OUTPUTS))
    stdin = data.get("stdin")
    if stdin not in (None, "prompt"):
        raise where.error("stdin", f"stdin is {stdin!r}", "prompt, or no key")
    fields = _field_specs(data.get("fields") or {}, where, "fields", events=output == "jsonl")
    log = data.get("log") or {}
    if not isinstance(log, dict) or set(log) - {"fields"}:
        raise where.error("log", "log must be a mapping with fields", "log: {fields: {...}}")
    log_fields = _field_specs(log.get("fields") or {}, where, "log.fields", events=True)
    return AgentPreset(
        name=name, command=command, output=output, description=_text(data.get("description"), where, "description")
        or "", binary=_text(data.get("binary"), where, "binary"),
        role_args={role: _strings(data.get(role, []), where, role) for role in ROLES},
        schema_args=_strings(data.get("schema_args", []), where, "schema_args"),
        continue_args=_strings(data.get("continue_args", []), where, "continue_args"),
        stdin_prompt=stdin == "prompt", fields=fields, log_fields=log_fields,
        version=_strings(data.get("version", []), where, "version"), source=source)


def _key_lines(text: str) -> dict[tuple[str, str], int]:
    """(preset, key) -> the line it is written on, for block-style YAML (flow style: the preset's line)."""
    lines: dict[tuple[str, str], int] = {}
    name: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        top = re.match(r"([^\s#][^:]*):", line)
        if top:
            name = top.group(1).strip().strip("'\"")
            lines.setdefault((name, ""), number)
            continue
        key = re.match(r"\s+([A-Za-z_]+)\s*:", line)
        if key and name is not None:
            lines.setdefault((name, key.group(1)), number)
    return lines


def _read_yaml(text: str, path: str | None) -> dict[str, Any]:
    try:
        data = parse_yaml(text, path=path).data
    except GuardkitStateError as exc:
        raise ConfigError(exc.message, path=path, line=exc.line) from exc
    if data is None:
        return {}
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ConfigError("agent presets must be a mapping of name -> preset", path=path,
                          expected="claude: {command: [...], ...}")
    return data


def load_presets(repo_root: Path | None) -> dict[str, AgentPreset]:
    """The built-in presets with the project's ``agents.yaml`` over them (key by key, per preset)."""
    builtin_text = importlib.resources.files("guardkit_state.agents").joinpath("presets.yaml").read_text(
        encoding="utf-8")
    merged = _read_yaml(builtin_text, None)
    sources = dict.fromkeys(merged, "built-in")
    wheres = {name: _Where(name) for name in merged}
    if repo_root is not None:
        path = Path(repo_root) / AGENTS_FILE
        if path.is_file():
            text = decode_utf8(read_bytes_capped(path), path)
            user = _read_yaml(text, str(path))
            lines = _key_lines(text)
            for name, data in user.items():
                merged[name] = {**merged.get(name, {}), **data}
                sources[name] = AGENTS_FILE
                wheres[name] = _Where(name, str(path), lines)
    return {name: preset_from_dict(name, data, source=sources[name], where=wheres[name])
            for name, data in merged.items()}


def preset_names(*, continuing: bool = False) -> str:
    """The built-in presets' names as help texts list them (``claude, codex, gemini, aider``);
    ``continuing``: those that can go on with an earlier session (``claude and gemini``)."""
    names = [p.name for p in load_presets(None).values() if p.continue_args or not continuing]
    return " and ".join([", ".join(names[:-1]), names[-1]]) if continuing and len(names) > 1 else ", ".join(names)


def is_preset_name(value: str, presets: Mapping[str, AgentPreset]) -> bool:
    """True when ``value`` names a preset: one word, no path. ``claude -p x`` or ``./claude`` is a command."""
    return value in presets and not any(c.isspace() or c in "/\\" for c in value)


@dataclass(frozen=True)
class PresetStatus:
    """A preset as ``guardkit-state agents`` shows it: found on PATH or not, and its version."""

    name: str
    description: str
    program: str
    path: str | None
    version: str | None
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "program": self.program,
                "found": self.path is not None, "path": self.path, "version": self.version, "source": self.source}


def preset_status(preset: AgentPreset) -> PresetStatus:
    """Where the preset's program is on PATH and what version it says it is (None when unknown)."""
    found = shutil.which(preset.program)
    version: str | None = None
    if found is not None and preset.version:
        with contextlib.suppress(OSError, ValueError):
            done = run_command([found, *preset.version[1:]], timeout=10.0, session=True)
            lines = (done.stdout.strip() or done.stderr.strip()).decode("utf-8", "replace").splitlines()
            version = lines[0].strip() if lines and done.returncode == 0 else None
    return PresetStatus(preset.name, preset.description, preset.program, found, version, preset.source)


__all__ = ["AGENTS_FILE", "AgentPreset", "PresetStatus", "is_preset_name", "load_presets",
           "preset_from_dict", "preset_names", "preset_status"]
