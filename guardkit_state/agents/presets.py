"""Agent presets as data: the built-in ``presets.yaml`` and a project's ``.guardkit/config/agents.yaml``.

A preset says how one coding CLI runs headless (its argv, how the prompt is passed, each role's
permissions) and where each field of the agent envelope is in its output. A project adds a preset,
or overrides keys of a built-in one, without code. ``--player NAME`` picks a preset when ``NAME``
is one; a value with arguments or a path stays a shell command (:func:`is_preset_name`).
"""

from __future__ import annotations

import importlib.resources
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guardkit_state.errors import ConfigError, GuardkitStateError
from guardkit_state.store.fsio import decode_utf8, read_bytes_capped
from guardkit_state.taskfile.strict_yaml import parse_yaml

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


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} must be a list of strings", expected="a YAML list such as [claude, -p]")
    return tuple(value)


def preset_from_dict(name: str, data: Mapping[str, Any], *, source: str) -> AgentPreset:
    """An :class:`AgentPreset` from its YAML mapping; :class:`ConfigError` naming the key otherwise."""
    where = f"{source}: {name}"
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}", path=source if source != "built-in"
                          else None, pointer=f"$.{name}.{unknown[0]}", expected=", ".join(sorted(_KEYS)))
    command = _strings(data.get("command"), f"{where}.command")
    if not command:
        raise ConfigError(f"{where}.command is empty", expected="the agent's argv")
    output = data.get("output", "text")
    if output not in OUTPUTS:
        raise ConfigError(f"{where}.output is {output!r}", expected=" | ".join(OUTPUTS))
    stdin = data.get("stdin")
    if stdin not in (None, "prompt"):
        raise ConfigError(f"{where}.stdin is {stdin!r}", expected="prompt, or no key")
    for key in ("fields",):
        if not isinstance(data.get(key, {}), dict):
            raise ConfigError(f"{where}.{key} must be a mapping", expected="envelope field: where it is")
    log = data.get("log") or {}
    if not isinstance(log, dict) or not isinstance(log.get("fields", {}), dict):
        raise ConfigError(f"{where}.log must be a mapping with fields", expected="log: {fields: {...}}")
    return AgentPreset(
        name=name, command=command, output=output, description=str(data.get("description") or ""),
        binary=data.get("binary") if isinstance(data.get("binary"), str) else None,
        role_args={role: _strings(data.get(role, []), f"{where}.{role}") for role in ROLES},
        schema_args=_strings(data.get("schema_args", []), f"{where}.schema_args"),
        continue_args=_strings(data.get("continue_args", []), f"{where}.continue_args"),
        stdin_prompt=stdin == "prompt", fields=dict(data.get("fields") or {}), log_fields=dict(log.get("fields") or {}),
        version=_strings(data.get("version", []), f"{where}.version"), source=source)


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


def builtin_presets() -> dict[str, AgentPreset]:
    """The presets shipped with guardkit-state (claude, codex, gemini, aider)."""
    text = importlib.resources.files("guardkit_state.agents").joinpath("presets.yaml").read_text(encoding="utf-8")
    return {name: preset_from_dict(name, data, source="built-in") for name, data in _read_yaml(text, None).items()}


def load_presets(repo_root: Path | None) -> dict[str, AgentPreset]:
    """The built-in presets with the project's ``agents.yaml`` over them (key by key, per preset)."""
    builtin_text = importlib.resources.files("guardkit_state.agents").joinpath("presets.yaml").read_text(
        encoding="utf-8")
    merged = _read_yaml(builtin_text, None)
    sources = dict.fromkeys(merged, "built-in")
    if repo_root is not None:
        path = Path(repo_root) / AGENTS_FILE
        if path.is_file():
            user = _read_yaml(decode_utf8(read_bytes_capped(path), path), str(path))
            for name, data in user.items():
                merged[name] = {**merged.get(name, {}), **data}
                sources[name] = AGENTS_FILE
    return {name: preset_from_dict(name, data, source=sources[name]) for name, data in merged.items()}


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


def preset_status(preset: AgentPreset, *, timeout: float = 10.0) -> PresetStatus:
    """Where the preset's program is on PATH and what version it says it is (None when unknown)."""
    found = shutil.which(preset.program)
    version: str | None = None
    if found is not None and preset.version:
        try:
            done = subprocess.run([found, *preset.version[1:]], capture_output=True, text=True, timeout=timeout,
                                  check=False, stdin=subprocess.DEVNULL)
            lines = (done.stdout.strip() or done.stderr.strip()).splitlines()
            version = lines[0].strip() if lines and done.returncode == 0 else None
        except (OSError, subprocess.SubprocessError):
            version = None
    return PresetStatus(preset.name, preset.description, preset.program, found, version, preset.source)


__all__ = ["AGENTS_FILE", "AgentPreset", "PresetStatus", "builtin_presets", "is_preset_name", "load_presets",
           "preset_from_dict", "preset_status"]
