"""JSON Schemas of every record: loading, compiled validators, and normalisation of legacy shapes.

Each ``schemas/<kind>.schema.json`` (Draft 2020-12) is one *kind* of record: ``player_turn``,
``coach_turn``, ``turn_state``, ``autobuild_state``, ``quality_gates``, ``entity_overrides`` ...
A validator is built once per process per kind (``jsonschema.validate()`` re-checks the schema on
every call and costs ~28 ms; a built validator costs ~1 ms).

Reading is lenient about *known* legacy shapes and strict about everything else:
:func:`normalise` maps aliases GuardKit producers wrote (``ac_id``, ``description``, ``done``, the v4
coach ``{verdict, findings}`` shape ...) to the canonical shape, and :func:`validate_record` then
checks the canonical shape, reporting every problem sorted by JSON path. Writing is strict:
:func:`check_record` validates what we produce exactly as it is.

Valid records (the hot path: every turn validates several) are first checked by ``jsonschema-rs``
(~5 µs instead of ~1 ms); only a record it does not accept is judged by ``jsonschema``, which also
writes every error message. ``jsonschema`` therefore has the last word on every invalid verdict, and
``jsonschema-rs`` is trusted only to say "valid", for plain JSON data (``tuple`` is an array to it but
not to ``jsonschema``); ``tests/test_schemas.py`` checks both agree on the corpus and the malformed
variants. Without ``jsonschema-rs`` installed everything works the same, slower.

``format`` keywords are not used: timestamps are plain strings, because real GuardKit files write
offset-less ISO times (``2026-06-26T08:09:47.314514``) that ``date-time`` would refuse, and the
format checker would need ``rfc3339-validator``, which is not a dependency.
"""

from __future__ import annotations

import copy
import functools
import importlib.resources
import json
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guardkit_state.errors import SchemaError, SchemaVersionError
from guardkit_state.model import SCHEMA_VERSION

if TYPE_CHECKING:  # imported lazily below: ~40 ms that a valid record (jsonschema-rs) never needs
    import jsonschema
    import referencing

log = logging.getLogger("guardkit_state.store.schemas")

SCHEMA_PACKAGE = "guardkit_state.schema_files"
SCHEMA_SUFFIX = ".schema.json"

#: A JSON path split into keys and indexes: ``("criteria_verification", 0, "result")``.
PathParts = tuple[str | int, ...]

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_POINTER_PART = re.compile(r'\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')


# --------------------------------------------------------------------------------------------------
# Loading and compiling


def schema_dir() -> Traversable:
    """Where the schema files are: the packaged copy, else the source checkout's ``schemas/``.

    The wheel maps the top-level ``schemas/`` folder to the package ``guardkit_state.schema_files``;
    an editable install does not provide that mapping, so a source checkout falls back to the folder.
    """
    try:
        packaged = importlib.resources.files(SCHEMA_PACKAGE)
        if any(entry.name.endswith(SCHEMA_SUFFIX) for entry in packaged.iterdir()):
            return packaged
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
        pass
    return Path(__file__).resolve().parents[2] / "schemas"


@functools.cache
def available_kinds() -> tuple[str, ...]:
    """Every record kind with a schema file, sorted (the file stems without ``.schema.json``)."""
    return tuple(sorted(entry.name[: -len(SCHEMA_SUFFIX)] for entry in schema_dir().iterdir()
                        if entry.name.endswith(SCHEMA_SUFFIX)))


@functools.cache
def load_schema(kind: str) -> dict[str, Any]:
    """The parsed JSON Schema of ``kind`` (cached; do not mutate it).

    Raises:
        SchemaError: no schema file for ``kind``, or the file is not valid JSON.
    """
    if kind not in available_kinds():
        raise SchemaError(
            f"unknown record kind {kind!r}",
            expected=f"one of {', '.join(available_kinds())}",
        )
    entry = schema_dir() / f"{kind}{SCHEMA_SUFFIX}"
    try:
        schema = json.loads(entry.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SchemaError(f"cannot read the {kind} schema: {exc}", path=str(entry)) from exc
    if not isinstance(schema, dict):
        raise SchemaError(f"the {kind} schema is not a JSON object", path=str(entry))
    return schema


@functools.cache
def _registry() -> referencing.Registry[Any]:
    """All schemas by ``$id``, so one schema may ``$ref`` another's ``$defs``."""
    import referencing
    import referencing.jsonschema

    resources = []
    for kind in available_kinds():
        schema = load_schema(kind)
        if "$id" in schema:
            resources.append((schema["$id"], referencing.jsonschema.DRAFT202012.create_resource(schema)))
    return referencing.Registry().with_resources(resources)


@functools.cache
def validator(kind: str) -> jsonschema.protocols.Validator:
    """The compiled Draft 2020-12 validator of ``kind``, built (and its schema checked) once."""
    import jsonschema

    schema = load_schema(kind)
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise SchemaError(f"the {kind} schema itself is invalid: {exc.message}") from exc
    return jsonschema.Draft202012Validator(schema, registry=_registry())


# --------------------------------------------------------------------------------------------------
# JSON paths


def format_pointer(parts: Iterable[str | int]) -> str:
    """``("criteria_verification", 0, "result")`` -> ``$.criteria_verification[0].result``.

    Keys that are not identifiers are quoted: ``$.criteria["AC-001"]``.
    """
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENTIFIER.match(part):
            out += f".{part}"
        else:
            out += f"[{json.dumps(part, ensure_ascii=False)}]"
    return out


def parse_pointer(pointer: str) -> PathParts:
    """The inverse of :func:`format_pointer`; raises ``ValueError`` for anything else."""
    if not pointer.startswith("$"):
        raise ValueError(f"not a JSON path: {pointer!r}")
    parts: list[str | int] = []
    pos = 1
    while pos < len(pointer):
        match = _POINTER_PART.match(pointer, pos)
        if not match:
            raise ValueError(f"not a JSON path: {pointer!r}")
        name, index, quoted = match.groups()
        parts.append(name if name is not None else int(index) if index is not None else json.loads(quoted))
        pos = match.end()
    return tuple(parts)


def _sort_key(parts: PathParts) -> tuple[tuple[int, int | str], ...]:
    # Indexes sort numerically ([2] before [10]); an index sorts before a key at the same depth.
    return tuple((0, p) if isinstance(p, int) else (1, p) for p in parts)


# --------------------------------------------------------------------------------------------------
# Normalisation of legacy shapes (pure: never mutates its input)


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
# Seed 001's per-criterion statuses, read as the ledger's three states.
_CRITERION_STATUS = {"verified": "verified", "rejected": "rejected", "pending": "pending",
                     "completed": "verified", "complete": "verified", "in_progress": "pending",
                     "not_started": "pending", "failed": "rejected"}
_TURN_MODES = ("fresh_start", "continuing_work", "recovering_state")
_PLAYER_LISTS = ("files_modified", "files_created", "tests_written", "concerns",
                 "requirements_addressed", "requirements_remaining", "lessons", "blockers")
_TURN_STATE_LISTS = ("blockers_found", "files_modified", "lessons_from_turn", "gate_results")


@dataclass
class _Notes:
    """Collects warnings while a record is normalised."""

    warnings: list[str] = field(default_factory=list)

    def warn(self, parts: PathParts, text: str) -> None:
        self.warnings.append(f"{format_pointer(parts)}: {text}")


def _rename(obj: dict[str, Any], old: str, new: str, where: PathParts, notes: _Notes) -> None:
    """Move the legacy key ``old`` to ``new``; when both are present and differ, keep both."""
    if old not in obj:
        return
    if new not in obj:
        obj[new] = obj.pop(old)
    elif obj[new] == obj[old]:
        del obj[old]
    else:
        notes.warn(where + (old,), f"legacy key {old!r} ignored: {new!r} is also present")


def _mapped(value: Any, table: dict[str, str]) -> Any:
    """``value`` through ``table`` (case- and space-insensitive) or unchanged when not listed."""
    if isinstance(value, str):
        return table.get(value.strip().lower().replace("-", "_").replace(" ", "_"), value)
    return value


def _null_lists_to_empty(obj: dict[str, Any], names: tuple[str, ...]) -> None:
    for name in names:
        if name in obj and obj[name] is None:
            obj[name] = []


def _normalise_player(data: dict[str, Any], notes: _Notes) -> None:
    _null_lists_to_empty(data, _PLAYER_LISTS)
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


def _normalise_coach(data: dict[str, Any], notes: _Notes) -> None:
    if "verdict" in data and "decision" not in data:
        # The v4 Coach shape: {verdict: approve|reject, findings: [...]}.
        data["decision"] = data.pop("verdict")
        if "findings" in data and "issues" not in data:
            data["issues"] = data.pop("findings")
    if "decision" in data:
        data["decision"] = _mapped(data["decision"], _COACH_DECISION)
    issues = data.get("issues", ())
    if issues is None:
        data["issues"] = []
    elif isinstance(issues, list):
        data["issues"] = [{"description": item} if isinstance(item, str) else item for item in issues]
    checks = data.get("criteria_verification", ())
    if checks is None:
        data["criteria_verification"] = []
    elif isinstance(checks, list):
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
                notes.warn(where + ("result",), f"{json.dumps(result)} read as \"rejected\"")


def _normalise_turn_state(data: dict[str, Any], notes: _Notes) -> None:
    _rename(data, "turn", "turn_number", (), notes)
    for name, default in (("feature_id", None), ("player_summary", ""), ("coach_feedback", None)):
        data.setdefault(name, default)
    if "mode" in data:
        data["mode"] = _mapped(data["mode"], {m: m for m in _TURN_MODES})
    if "player_decision" in data:
        data["player_decision"] = _mapped(data["player_decision"], _TURN_STATE_PLAYER)
    if "coach_decision" in data:
        data["coach_decision"] = _mapped(data["coach_decision"], _TURN_STATE_COACH)
    _null_lists_to_empty(data, _TURN_STATE_LISTS)
    for name in ("acceptance_criteria_status", "criteria_provenance"):
        if name in data and data[name] is None:
            data[name] = {}
    statuses = data.get("acceptance_criteria_status")
    if isinstance(statuses, dict):
        data["acceptance_criteria_status"] = {k: _mapped(v, _CRITERION_STATUS) for k, v in statuses.items()}


def _normalise_autobuild_state(data: dict[str, Any], notes: _Notes) -> None:
    if data.get("turns", ()) is None:
        data["turns"] = []
    if data.get("criteria", ()) is None:
        data["criteria"] = {}
    turns = data.get("turns")
    for i, entry in enumerate(turns if isinstance(turns, list) else ()):  # a non-list is the schema's to report
        if isinstance(entry, dict):
            _rename(entry, "coach_decision", "decision", ("turns", i), notes)


_NORMALISERS: dict[str, Callable[[dict[str, Any], _Notes], None]] = {
    "player_turn": _normalise_player,
    "coach_turn": _normalise_coach,
    "turn_state": _normalise_turn_state,
    "autobuild_state": _normalise_autobuild_state,
}


def normalise(kind: str, data: Any, *, owned: bool = False) -> tuple[Any, list[str]]:
    """Map known legacy shapes of a ``kind`` record to the canonical shape.

    Returns a new object (the input is never mutated, unless ``owned``) and warnings, each ``"$.path: text"``, for
    lossy readings such as a criterion ``result`` of ``"unverified"`` read as ``"rejected"``.
    Anything that is not a known alias is left for :func:`validate_record` to judge.
    """
    return _normalise(kind, data, plain=False, owned=owned)


def _normalise(kind: str, data: Any, *, plain: bool, owned: bool = False) -> tuple[Any, list[str]]:
    notes = _Notes()
    # Plain JSON data is copied by a C-speed JSON round trip (a deepcopy costs ~10x more); data the
    # caller owns (``owned=True``: e.g. just parsed, shared with nobody) is normalised in place.
    if owned:
        out = data
    else:
        out = json.loads(json.dumps(data, ensure_ascii=False)) if plain else copy.deepcopy(data)
    normaliser = _NORMALISERS.get(kind)
    if normaliser is not None and isinstance(out, dict):
        normaliser(out, notes)
    return out, notes.warnings


# --------------------------------------------------------------------------------------------------
# Validation


@dataclass(frozen=True)
class Problem:
    """One schema violation: where (path parts) and what, with what was expected."""

    parts: PathParts
    message: str
    expected: str | None = None

    @property
    def pointer(self) -> str:
        return format_pointer(self.parts)

    @property
    def text(self) -> str:
        if self.expected and "expected" not in self.message:
            return f"{self.message} (expected {self.expected})"
        return self.message


@dataclass(frozen=True)
class ValidatedRecord:
    """A record that passed validation: the canonical dict and the normalisation warnings."""

    data: dict[str, Any]
    warnings: list[str]


_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer",
               float: "number", type(None): "null"}


def _show(value: Any, limit: int = 60) -> str:
    """A short JSON rendering of a value for messages."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + '..."'


def _problem(error: jsonschema.ValidationError) -> Problem:
    parts: PathParts = tuple(error.absolute_path)
    kind, instance = error.validator, error.instance
    spec: Any = error.validator_value  # a keyword's value in the schema: any JSON
    if kind == "required":
        missing = [name for name in spec if isinstance(instance, dict) and name not in instance]
        name = next((n for n in missing if repr(n) in error.message), missing[0] if missing else "?")
        return Problem(parts + (name,), "missing required key", f"key {json.dumps(name)}")
    if kind == "type":
        wanted = " or ".join(spec) if isinstance(spec, list) else str(spec)
        got = _JSON_TYPES.get(type(instance), type(instance).__name__)
        shown = "" if isinstance(instance, (dict, list)) else f" {_show(instance)}"
        return Problem(parts, f"expected {wanted}, got {got}{shown}")
    if kind == "enum":
        allowed = ", ".join(_show(v) for v in spec)
        return Problem(parts, f"{_show(instance)} is not allowed", f"one of {allowed}")
    if kind in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        op = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}[kind]
        return Problem(parts, f"{_show(instance)} is out of range", f"a number {op} {spec}")
    if kind == "minLength" and spec == 1:
        return Problem(parts, "must not be empty", "a non-empty string")
    message = error.message if len(error.message) <= 500 else error.message[:497] + "..."
    return Problem(parts, message)


@functools.cache
def fast_validator(kind: str) -> Any | None:
    """The ``jsonschema-rs`` validator of ``kind``, or ``None`` when jsonschema-rs is not installed."""
    schema = load_schema(kind)  # an unknown kind is refused here
    if re.search(r'"\$ref":\s*"[^#]', json.dumps(schema)):
        return None  # a reference to another file: only jsonschema has the registry (no network)
    try:
        import jsonschema_rs
    except ImportError:
        return None
    try:
        return jsonschema_rs.Draft202012Validator(schema)
    except Exception as exc:
        log.debug("jsonschema-rs cannot compile the %s schema (%s); using jsonschema only", kind, exc)
        return None


_PLAIN_SCALARS = (str, int, float, bool, type(None))


def _is_plain_json(data: Any) -> bool:
    """True when ``data`` is made of dicts with str keys, lists and JSON scalars only."""
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    return False
                stack.append(item)
        elif isinstance(value, list):
            stack.extend(value)
        elif not isinstance(value, _PLAIN_SCALARS):
            return False
    return True


def is_valid_fast(kind: str, data: Any) -> bool:
    """True when jsonschema-rs accepts ``data`` (plain JSON only); False means "ask jsonschema"."""
    return _is_plain_json(data) and _fast_verdict(kind, data)


def _fast_verdict(kind: str, data: Any) -> bool:
    """jsonschema-rs's "valid" for data already known to be plain JSON."""
    fast = fast_validator(kind)
    if fast is None:
        return False
    try:
        return bool(fast.is_valid(data))
    except Exception:
        return False


def problems_of(kind: str, data: Any) -> list[Problem]:
    """Every schema violation of ``data`` as a ``kind`` record, sorted by JSON path."""
    if is_valid_fast(kind, data):
        return []
    found = {(_sort_key(p.parts), p.text): p for p in map(_problem, validator(kind).iter_errors(data))}
    return [found[key] for key in sorted(found)]


def _context(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        return {}
    task_id = data.get("task_id")
    turn = data.get("turn", data.get("turn_number"))
    return {"task_id": task_id if isinstance(task_id, str) else None,
            "turn": turn if isinstance(turn, int) and not isinstance(turn, bool) else None}


def _raise_problems(kind: str, data: Any, problems: list[Problem], path: str | Path | None) -> None:
    first = problems[0]
    message = first.text
    if len(problems) > 1:
        more = len(problems) - 1
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    raise SchemaError(
        message,
        problems=[(p.pointer, p.text) for p in problems],
        path=path,
        pointer=first.pointer,
        expected=first.expected or f"a valid {kind} record",
        **_context(data),
    )


def check_version(kind: str, data: Any, *, path: str | Path | None = None) -> None:
    """Refuse a record written by a newer major ``schema_version`` (absent means 1).

    Raises:
        SchemaVersionError: ``schema_version`` is an integer greater than this version's.
    """
    if not isinstance(data, dict):
        return
    version = data.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{kind} record has schema_version {version}, newer than this guardkit-state understands"
            f" (upgrade guardkit-state to read it)",
            path=path,
            pointer="$.schema_version",
            expected=f"schema_version <= {SCHEMA_VERSION}",
            **_context(data),
        )


def validate_with_warnings(kind: str, data: Any, *, path: str | Path | None = None) -> ValidatedRecord:
    """Normalise and validate a ``kind`` record read from ``path``; keep the warnings.

    Raises:
        SchemaVersionError: the record comes from a newer major version.
        SchemaError: the record is invalid; ``problems`` lists every violation sorted by JSON path,
            the first one is the message and ``pointer``.
    """
    load_schema(kind)  # an unknown kind fails here, before the record is looked at
    check_version(kind, data, path=path)
    plain = _is_plain_json(data)
    canonical, warnings = _normalise(kind, data, plain=plain)
    problems = [] if plain and _fast_verdict(kind, canonical) else problems_of(kind, canonical)
    if problems:
        _raise_problems(kind, data, problems, path)
    return ValidatedRecord(canonical, warnings)


def validate_record(kind: str, data: Any, *, path: str | Path | None = None) -> dict[str, Any]:
    """The normalised canonical dict of a ``kind`` record, or :class:`SchemaError`.

    Normalisation warnings are logged at WARNING on ``guardkit_state.store.schemas``; use
    :func:`validate_with_warnings` to get them as data.

    Raises:
        SchemaVersionError: the record comes from a newer major version.
        SchemaError: the record is invalid (every problem listed, sorted by JSON path).
    """
    record = validate_with_warnings(kind, data, path=path)
    for warning in record.warnings:
        log.warning("%s: %s", path if path is not None else kind, warning)
    return record.data


def check_record(kind: str, data: Any, *, path: str | Path | None = None) -> None:
    """Write-side check: ``data`` must already be a canonical ``kind`` record (no normalisation).

    Raises:
        SchemaError: ``data`` is not valid (every problem listed, sorted by JSON path).
    """
    problems = problems_of(kind, data)
    if problems:
        _raise_problems(kind, data, problems, path)
