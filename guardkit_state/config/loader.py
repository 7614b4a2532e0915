"""``load_config(repo_root)``: the one entry point the loop uses for gates, roles and modes.

Reads ``.guardkit/config/quality-gates.yaml`` (authoritative when present; built-in profiles
otherwise) and ``.guardkit/config/entity-overrides.yaml`` (optional additions and overrides), both
strictly (duplicate keys, tags and schema violations are errors), and returns a
:class:`ResolvedConfig` in which every value knows where it came from. A malformed file raises
:class:`~guardkit_state.errors.ConfigError` naming the file and the key, and the loop refuses to
start on it rather than run with gates nobody asked for.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from guardkit_state.config.gates import (
    BUILTIN_GATE_PROFILES,
    FALLBACK_TASK_TYPE,
    PROFILE_FIELDS,
    TASK_TYPE_ALIASES,
    GateLookup,
    GateProfile,
    select_profile,
)
from guardkit_state.config.modes import BUILTIN_MODES, ImplementationMode, ModeAdvice, suggest_mode
from guardkit_state.config.overrides import apply_gate_overrides
from guardkit_state.config.roles import BUILTIN_ROLE_CONSTRAINTS, RULE_KINDS, RoleConstraints, apply_role_additions
from guardkit_state.errors import ConfigError, GuardkitStateError, SchemaError
from guardkit_state.store.layout import OVERRIDES_FILE, QUALITY_GATES_FILE
from guardkit_state.store.reads import decode_utf8, read_bytes_capped
from guardkit_state.store.safe_paths import resolve_inside
from guardkit_state.store.schemas import format_pointer, parse_pointer, validate_record
from guardkit_state.yamltext.positions import node_line
from guardkit_state.yamltext.strict_yaml import ParsedYaml, parse_yaml

log = logging.getLogger("guardkit_state.config.loader")

SECTIONS = ("gates", "roles", "modes")


@dataclass(frozen=True)
class ResolvedConfig:
    """Gates, roles and modes in force for one repository, with the provenance of every value.

    Provenance (``source``) is ``"built-in"``, the repo-relative path of quality-gates.yaml, or
    ``"override: <path of entity-overrides.yaml>"``.

    Use:
        config = load_config(repo_root)
        profile = config.gate_profile(task_type, complexity)       # GateProfile
        results = check_gates(profile, tests_run=..., coverage=...)  # list[GateResult]
        coach = config.roles["coach"]                              # RoleConstraints
        advice = config.suggest_mode(complexity)                   # ModeAdvice | None
    """

    repo_root: Path | None
    gate_profiles: tuple[GateProfile, ...] = BUILTIN_GATE_PROFILES
    task_type_aliases: Mapping[str, str] = field(default_factory=lambda: dict(TASK_TYPE_ALIASES))
    roles: Mapping[str, RoleConstraints] = field(default_factory=lambda: dict(BUILTIN_ROLE_CONSTRAINTS))
    modes: Mapping[str, ImplementationMode] = field(default_factory=lambda: dict(BUILTIN_MODES))
    gates_source: str = "built-in"
    files: Mapping[str, str | None] = field(default_factory=dict)

    def lookup_gate_profile(self, task_type: str | None, complexity: object) -> GateLookup:
        """The profile for a task plus the fallbacks taken (unknown type, missing complexity)."""
        return select_profile(self.gate_profiles, task_type, complexity, aliases=self.task_type_aliases)

    def gate_profile(self, task_type: str | None, complexity: object) -> GateProfile:
        """The gate profile for ``task_type`` at ``complexity`` (fallbacks are logged as warnings)."""
        return self.lookup_gate_profile(task_type, complexity).profile

    def role(self, name: str) -> RoleConstraints:
        """The constraints of ``name`` (``player``/``coach``); empty when none are configured."""
        return self.roles.get(name, RoleConstraints(name))

    def suggest_mode(self, complexity: int | None) -> ModeAdvice | None:
        """Advisory mode for ``complexity`` (see :func:`guardkit_state.config.modes.suggest_mode`)."""
        return suggest_mode(complexity, self.modes)

    def to_dict(self, section: str | None = None) -> dict[str, Any]:
        """JSON view of one section (``gates``/``roles``/``modes``) or all, with sources."""
        out: dict[str, Any] = {"files": dict(self.files)}
        if section in (None, "gates"):
            out["gates"] = {"source": self.gates_source, "aliases": dict(self.task_type_aliases),
                            "fallback_task_type": FALLBACK_TASK_TYPE,
                            "profiles": [p.to_dict() for p in self.gate_profiles]}
        if section in (None, "roles"):
            out["roles"] = {name: role.to_dict() for name, role in self.roles.items()}
        if section in (None, "modes"):
            out["modes"] = [mode.to_dict() for mode in self.modes.values()]
        return out


def default_config() -> ResolvedConfig:
    """The built-in configuration (the defaults of docs/index.md), as used when no config file exists."""
    return ResolvedConfig(repo_root=None, files={"quality_gates": None, "entity_overrides": None})


def load_config(repo_root: Path | str) -> ResolvedConfig:
    """Resolve the configuration of the repository at ``repo_root``.

    Missing files mean built-in values; present files are read strictly and validated against
    ``schemas/quality_gates.schema.json`` and ``schemas/entity_overrides.schema.json``.

    Raises:
        ConfigError: a config file is unreadable, not valid YAML, has a duplicate key, fails its
            schema, or is inconsistent (overlapping or missing complexity ranges, no ``feature``
            profiles, an override that matches no profile). The error names the file and key.
    """
    root = Path(repo_root)
    files: dict[str, str | None] = {"quality_gates": None, "entity_overrides": None}
    profiles: tuple[GateProfile, ...] = BUILTIN_GATE_PROFILES
    aliases: dict[str, str] = dict(TASK_TYPE_ALIASES)
    gates_source = "built-in"
    roles: dict[str, RoleConstraints] = dict(BUILTIN_ROLE_CONSTRAINTS)

    gates_path = root / QUALITY_GATES_FILE
    if gates_path.exists() or gates_path.is_symlink():
        rel = QUALITY_GATES_FILE.as_posix()
        parsed = _read_yaml(root, gates_path)
        if parsed.data is None:
            raise ConfigError("file is empty", path=gates_path, pointer="$.profiles",
                              expected="a 'profiles' mapping", fix="or delete the file to use the built-in gates")
        _validate("quality_gates", parsed, gates_path)
        with _lines_from(parsed):
            profiles = _profiles_from_file(parsed.data, source=rel, path=gates_path)
            _check_aliases(profiles, gates_path, file_aliases=parsed.data.get("aliases") or {})
        aliases.update(parsed.data.get("aliases") or {})
        gates_source = rel
        files["quality_gates"] = rel
        log.info("quality gates from %s (%d profiles)", rel, len(profiles))

    overrides_path = root / OVERRIDES_FILE
    if overrides_path.exists() or overrides_path.is_symlink():
        rel = OVERRIDES_FILE.as_posix()
        parsed = _read_yaml(root, overrides_path)
        data = parsed.data if parsed.data is not None else {}  # a fully commented-out file is fine
        if data:
            _validate("entity_overrides", parsed, overrides_path)
        source = f"override: {rel}"
        roles = apply_role_additions(roles, data.get("role_constraints") or {}, source)
        with _lines_from(parsed):
            profiles = apply_gate_overrides(profiles, data.get("quality_gate_configs") or {},
                                            source=source, path=overrides_path)
        files["entity_overrides"] = rel
        log.info("entity overrides from %s", rel)

    return ResolvedConfig(repo_root=root, gate_profiles=profiles, task_type_aliases=aliases, roles=roles,
                          modes=dict(BUILTIN_MODES), gates_source=gates_source, files=files)


def _read_yaml(root: Path, path: Path) -> ParsedYaml:
    """Read and strictly parse one config file; every failure becomes a ConfigError."""
    try:
        resolve_inside(root, path)
        text = decode_utf8(read_bytes_capped(path, limit=1024 * 1024), path)
        return parse_yaml(text, path=path)
    except ConfigError:
        raise
    except GuardkitStateError as exc:
        raise ConfigError(exc.message, path=path, line=exc.line, pointer=exc.pointer,
                          expected=exc.expected, fix=exc.fix) from exc


def _validate(kind: str, parsed: ParsedYaml, path: Path) -> None:
    """Validate against ``schemas/<kind>.schema.json``; a SchemaError becomes a ConfigError with the key's line."""
    if not isinstance(parsed.data, dict):
        raise ConfigError(f"top level is a {type(parsed.data).__name__}", path=path, pointer="$",
                          line=1, expected="a mapping of keys")
    try:
        validate_record(kind, parsed.data, path=path)
    except SchemaError as exc:  # SchemaVersionError included
        message, pointer, expected = exc.message, exc.pointer, exc.expected
        unknown = _UNEXPECTED.search(message)
        if pointer and unknown:
            # Point at the unknown key itself, not at the mapping that holds it.
            keys = re.findall(r"'([^']+)'", unknown.group(0))
            key = keys[0]
            pointer = format_pointer((*parse_pointer(pointer), key))
            shown = ", ".join(repr(k) for k in keys)
            message = f"unknown key{'s' if len(keys) > 1 else ''} {shown}{message[unknown.end():]}"
            if key in RULE_KINDS:
                expected = f"'{key}_additions' (role constraint lists can only be extended)"
        raise ConfigError(message, path=path, pointer=pointer,
                          line=_line_of(parsed.node, pointer), expected=expected) from exc


#: jsonschema's additionalProperties message: "Additional properties are not allowed ('x' was unexpected)".
_UNEXPECTED = re.compile(r"Additional properties are not allowed \('([^']+)'(?:, '[^']+')* (?:was|were) unexpected\)")


def _profiles_from_file(data: Mapping[str, Any], *, source: str, path: Path) -> tuple[GateProfile, ...]:
    """Build profiles from a validated quality-gates.yaml; refuse gaps and overlaps in the ranges."""
    profiles: list[GateProfile] = []
    for task_type, items in data["profiles"].items():
        spans: list[tuple[int, int, int]] = []
        for index, item in enumerate(items):
            low, high = item["complexity_range"]
            pointer = format_pointer(("profiles", task_type, index, "complexity_range"))
            if low > high:
                raise ConfigError(f"complexity_range [{low}, {high}] runs backwards", path=path,
                                  pointer=pointer, expected="[low, high] with low <= high")
            spans.append((low, high, index))
            must_pass = item.get("tests_must_pass", item["tests_required"])
            profiles.append(GateProfile(
                task_type=task_type,
                complexity_range=(low, high),
                arch_review_required=item["arch_review_required"],
                arch_review_threshold=int(item.get("arch_review_threshold", 0)),
                coverage_required=item["coverage_required"],
                coverage_threshold=float(item.get("coverage_threshold", 0.0)),
                tests_required=item["tests_required"],
                tests_must_pass=bool(must_pass),
                effective_from=str(item.get("effective_from", "")),
                sources=dict.fromkeys(PROFILE_FIELDS, source),
            ))
        _check_spans(task_type, spans, path)
    if not any(p.task_type == FALLBACK_TASK_TYPE for p in profiles):
        raise ConfigError(f"no '{FALLBACK_TASK_TYPE}' profiles", path=path, pointer="$.profiles",
                          expected=f"a '{FALLBACK_TASK_TYPE}' entry (unknown task types fall back to it)")
    return tuple(profiles)


def _check_spans(task_type: str, spans: list[tuple[int, int, int]], path: Path) -> None:
    """Each type's ranges must tile 1-10: no overlap (ambiguous) and no gap (no profile)."""
    expected_next = 1
    for low, high, index in sorted(spans):
        pointer = format_pointer(("profiles", task_type, index, "complexity_range"))
        if low < expected_next:
            raise ConfigError(f"complexity_range [{low}, {high}] overlaps another {task_type!r} profile",
                              path=path, pointer=pointer, expected="ranges that do not overlap")
        if low > expected_next:
            raise ConfigError(f"no {task_type!r} profile covers complexity {expected_next}-{low - 1}",
                              path=path, pointer=pointer, expected="ranges that together cover 1-10")
        expected_next = high + 1
    if expected_next <= 10:
        raise ConfigError(f"no {task_type!r} profile covers complexity {expected_next}-10",
                          path=path, pointer=format_pointer(("profiles", task_type)),
                          expected="ranges that together cover 1-10")


def _check_aliases(profiles: tuple[GateProfile, ...], path: Path, *, file_aliases: Mapping[str, str]) -> None:
    types = {p.task_type for p in profiles}
    for name, target in file_aliases.items():
        if target not in types:
            raise ConfigError(f"alias {name!r} points to {target!r}, which has no profiles", path=path,
                              pointer=format_pointer(("aliases", name)), expected=f"one of {', '.join(sorted(types))}")


@contextlib.contextmanager
def _lines_from(parsed: ParsedYaml) -> Iterator[None]:
    """Give a ConfigError raised inside (pointer, no line) the line of the key it points at."""
    try:
        yield
    except ConfigError as exc:
        if exc.line is None:
            exc.line = _line_of(parsed.node, exc.pointer)
        raise


def _line_of(node: yaml.Node | None, pointer: str | None) -> int | None:
    """1-based line of the key (or item) a ``$.a.b[0]`` pointer names, as deep as it resolves."""
    if node is None or not pointer:
        return None
    try:
        return node_line(node, parse_pointer(pointer)) or node.start_mark.line + 1
    except ValueError:
        return None
