"""JSON Schemas of every record (``schemas/<kind>.schema.json``, Draft 2020-12): loading, compiled
validators, validation.

Reading is lenient about *known* legacy shapes (:func:`normalise` maps the aliases GuardKit
producers wrote to the canonical shape) and strict about everything else; writing is strict
(:func:`check_record` validates what we produce as it is). Every problem is reported, sorted by JSON path.

A valid record is first recognised by ``jsonschema-rs`` (~5 µs instead of ~1 ms for ``jsonschema``).
It is trusted only to say "valid", for plain JSON data (a ``tuple`` is an array to it but not to
``jsonschema``): every invalid verdict, and every message, is ``jsonschema``'s.

``format`` keywords are not used: real GuardKit files write offset-less ISO times that
``date-time`` would refuse.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guardkit_state.errors import SchemaError, SchemaVersionError
from guardkit_state.model import SCHEMA_VERSION

# Paths and normalisation have their own modules; callers import them from here too.
from guardkit_state.store.json_paths import PathParts as PathParts
from guardkit_state.store.json_paths import format_pointer as format_pointer
from guardkit_state.store.json_paths import parse_pointer as parse_pointer
from guardkit_state.store.json_paths import sort_key
from guardkit_state.store.legacy import normalise as normalise

if TYPE_CHECKING:  # imported lazily below: ~40 ms that a valid record (jsonschema-rs) never needs
    from importlib.resources.abc import Traversable

    import jsonschema
    import referencing

log = logging.getLogger("guardkit_state.store.schemas")

SCHEMA_PACKAGE = "guardkit_state.schema_files"
SCHEMA_SUFFIX = ".schema.json"

# --------------------------------------------------------------------------------------------------
# Loading and compiling


def schema_dir() -> Traversable:
    """Where the schema files are: the packaged copy, else the source checkout's ``schemas/``.

    The wheel maps the top-level ``schemas/`` folder to the package ``guardkit_state.schema_files``;
    an editable install does not provide that mapping, so a source checkout falls back to the folder.
    """
    import importlib.resources  # here: a read that validates no record never pays for it

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
#: How many values :func:`_is_plain_json` looks at before it gives up (a container may hold itself).
PLAIN_JSON_VALUES = 1_000_000


def _is_plain_json(data: Any) -> bool:
    """True when ``data`` is made of dicts with str keys, lists and JSON scalars only, subclasses
    included (an ``OrderedDict``, an ``IntEnum``: the copy that validation makes turns them into the
    built-in types); False for anything else, or past :data:`PLAIN_JSON_VALUES` values (a container
    that holds itself)."""
    stack, budget = [data], PLAIN_JSON_VALUES
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
        budget -= 1
        if budget < 0:
            return False
    return True


def is_valid_fast(kind: str, data: Any, *, plain: bool | None = None) -> bool:
    """True when jsonschema-rs accepts ``data`` (plain JSON only: ``plain`` says whether it is, when the
    caller knows); False means "ask jsonschema"."""
    if not (_is_plain_json(data) if plain is None else plain):
        return False
    fast = fast_validator(kind)
    if fast is None:
        return False
    try:
        return bool(fast.is_valid(data))
    except Exception:
        return False


def problems_of(kind: str, data: Any, *, plain: bool | None = None) -> list[Problem]:
    """Every schema violation of ``data`` as a ``kind`` record, sorted by JSON path (``plain``: as
    :func:`is_valid_fast` takes it)."""
    if is_valid_fast(kind, data, plain=plain):
        return []
    found = {(sort_key(p.parts), p.text): p for p in map(_problem, validator(kind).iter_errors(data))}
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
            f"{kind} record has schema_version {version}, newer than this guardkit-state understands",
            path=path,
            pointer="$.schema_version",
            expected=f"schema_version <= {SCHEMA_VERSION}",
            fix="upgrade guardkit-state to read it",
            **_context(data),
        )


def validate_with_warnings(kind: str, data: Any, *, path: str | Path | None = None,
                           plain: bool | None = None) -> ValidatedRecord:
    """Normalise and validate a ``kind`` record read from ``path``; keep the warnings.

    ``plain`` says whether ``data`` is plain JSON (dicts with string keys, lists, JSON scalars)
    when the caller already knows (parsed JSON is; :func:`~guardkit_state.store.jsonio.check_storable`
    tells while it walks the data anyway); None: it is looked at here.

    Raises:
        SchemaVersionError: the record comes from a newer major version.
        SchemaError: the record is invalid; ``problems`` lists every violation sorted by JSON path,
            the first one is the message and ``pointer``.
    """
    load_schema(kind)  # an unknown kind fails here, before the record is looked at
    check_version(kind, data, path=path)
    plain = _is_plain_json(data) if plain is None else plain
    canonical, warnings = normalise(kind, data, plain=plain)
    problems = problems_of(kind, canonical, plain=plain)
    if problems:
        _raise_problems(kind, data, problems, path)
    return ValidatedRecord(canonical, warnings)


def validate_record(kind: str, data: Any, *, path: str | Path | None = None,
                    plain: bool | None = None) -> dict[str, Any]:
    """The normalised canonical dict of a ``kind`` record, or :class:`SchemaError`.

    Normalisation warnings are logged at WARNING on ``guardkit_state.store.schemas``; use
    :func:`validate_with_warnings` to get them as data (and for ``plain``).

    Raises:
        SchemaVersionError: the record comes from a newer major version.
        SchemaError: the record is invalid (every problem listed, sorted by JSON path).
    """
    record = validate_with_warnings(kind, data, path=path, plain=plain)
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
