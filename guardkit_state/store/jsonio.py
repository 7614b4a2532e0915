"""Strict JSON reading and canonical JSON writing.

``json.loads`` keeps the last of two duplicate keys, accepts ``NaN``/``Infinity`` (which no other
JSON reader does), and dies with ``RecursionError`` on deep nesting. :func:`load_json` refuses all
three, caps the file size, insists on UTF-8, and names the file and line in every error. It also
refuses what parses but could never be written back (:func:`check_storable`): a lone surrogate
escape (``"\\ud800"``) and a number too large for a float (``1e400`` reads as infinity).
"""

from __future__ import annotations

import json
import json.decoder
import json.scanner
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from guardkit_state.errors import ParseError, SchemaError
from guardkit_state.store.reads import MAX_FILE_BYTES, decode_utf8, read_bytes_capped
from guardkit_state.store.schemas import format_pointer, validate_record

#: Deepest nesting of arrays/objects accepted; real reports nest 4 levels.
MAX_DEPTH = 64

_EXPECTED = "strict JSON (UTF-8, no duplicate keys, no NaN/Infinity)"
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'
_BRACKETS = re.compile(_STRING + r"|[\[\]{}]")
_CONSTANTS = re.compile(_STRING + r"|(-?Infinity|NaN)")
_WS = re.compile(r"[ \t\n\r]*")
#: The stdlib's string scanner (C-accelerated); not in typeshed's stubs.
_scanstring: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


def _skip_ws(text: str, pos: int) -> int:
    match = _WS.match(text, pos)
    return match.end() if match else pos


class _Refused(Exception):
    """Raised from parser hooks; carries what was refused and (when known) where."""

    def __init__(self, message: str, pos: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def check_depth(text: str, path: Path | str | None = None, limit: int = MAX_DEPTH) -> None:
    """Refuse JSON text nested deeper than ``limit`` before parsing it (strings are skipped whole):
    Python's parser would die of a ``RecursionError`` at a few thousand levels.

    Raises:
        ParseError: the nesting is deeper; names ``path``, the line and the column.
    """
    if text.count("[") + text.count("{") <= limit:
        return  # not even that many brackets in all (strings included): no deeper nesting either
    depth = 0
    for match in _BRACKETS.finditer(text):
        char = match.group()
        if char in "[{":
            depth += 1
            if depth > limit:
                line, col = _line_col(text, match.start())
                raise ParseError(f"JSON nested deeper than {limit} levels (column {col})",
                                 path=path, line=line, expected=f"at most {limit} levels of nesting")
        elif char in "]}":
            depth -= 1


def top_level(text: str) -> Any:
    """The top level of JSON text with every array and object inside it read as ``null``: the
    envelope of a message nested too deep to parse whole (a JSON-RPC request's ``id``).

    Raises:
        ParseError: even that is not JSON.
    """
    kept, depth, start = [], 0, 0
    for match in _BRACKETS.finditer(text):
        char = match.group()
        if char in "[{":
            depth += 1
            if depth == 2:
                kept.append(text[start:match.start()] + "null")
        elif char in "]}":
            depth -= 1
            if depth == 1:
                start = match.end()
    kept.append(text[start:] if depth <= 1 else "")
    return parse_json("".join(kept))


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Refused(f"duplicate key {json.dumps(key, ensure_ascii=False)}")
            seen.add(key)
    return out


def _refuse_constant(name: str) -> Any:
    raise _Refused(f"{name} is not valid JSON")


def _locate_duplicate(text: str) -> tuple[int, int] | None:
    """Re-scan slowly (only after a duplicate was seen) to find it: (position, first position)."""

    class _Found(Exception):
        def __init__(self, pos: int, first: int) -> None:
            super().__init__(pos)
            self.pos, self.first = pos, first

    def parse_object(s_and_end: tuple[str, int], strict: bool, scan_once: Any, *_: Any) -> tuple[Any, int]:
        s, end = s_and_end
        seen: dict[str, int] = {}
        end = _skip_ws(s, end)
        if s[end:end + 1] == "}":
            return {}, end + 1
        while True:
            key_pos = end
            key, end = _scanstring(s, end + 1, strict)
            if key in seen:
                raise _Found(key_pos, seen[key])
            seen[key] = key_pos
            end = _skip_ws(s, _skip_ws(s, end) + 1)  # past the colon
            _, end = scan_once(s, end)
            end = _skip_ws(s, end)
            if s[end:end + 1] == "}":
                return {}, end + 1
            end = _skip_ws(s, end + 1)  # past the comma

    decoder = json.JSONDecoder()
    decoder.parse_object = parse_object  # type: ignore[attr-defined]
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    try:
        decoder.decode(text)
    except _Found as found:
        return found.pos, found.first
    except Exception:  # the fast parse already succeeded up to the duplicate
        return None
    return None


def parse_json(text: str, *, path: Path | str | None = None) -> Any:
    """Parse JSON text strictly.

    Raises:
        ParseError: invalid JSON, a duplicate key, NaN/Infinity, nesting deeper than :data:`MAX_DEPTH`,
            or a number too long to convert; the error names ``path``, the line and the column.
    """
    if text.startswith("\ufeff"):
        text = text[1:]  # a UTF-8 byte-order mark is harmless; json.loads would refuse it
    check_depth(text, path)
    overflowed: list[str] = []

    def parse_float(literal: str) -> float:
        number = float(literal)
        if math.isinf(number):
            overflowed.append(literal)
        return number

    try:
        value = json.loads(text, object_pairs_hook=_unique_pairs, parse_constant=_refuse_constant,
                           parse_float=parse_float)
    except json.JSONDecodeError as exc:
        raise ParseError(f"{exc.msg} (column {exc.colno})", path=path, line=exc.lineno,
                         expected=_EXPECTED) from exc
    except _Refused as exc:
        line, detail = None, ""
        if exc.message.startswith("duplicate key"):
            where = _locate_duplicate(text)
            if where is not None:
                line, col = _line_col(text, where[0])
                detail = f" (column {col}; first defined on line {_line_col(text, where[1])[0]})"
        else:
            match = next((m for m in _CONSTANTS.finditer(text) if m.group(1)), None)
            if match is not None:
                line, col = _line_col(text, match.start())
                detail = f" (column {col})"
        raise ParseError(exc.message + detail, path=path, line=line, expected=_EXPECTED) from None
    except RecursionError as exc:
        raise ParseError("JSON nested too deeply", path=path, expected=_EXPECTED) from exc
    except ValueError as exc:  # e.g. an integer literal over Python's 4300-digit limit
        reason = str(exc).split(": value has")[0]
        raise ParseError(f"invalid JSON value: {reason}", path=path, expected=_EXPECTED) from exc
    if overflowed or "\\u" in text:
        # Only a backslash-u escape can spell a lone surrogate (the text itself is valid UTF-8),
        # and a number read as infinity was seen while parsing: otherwise there is nothing to find.
        check_storable(value, path=path)
    return value

_STORABLE = (f"valid Unicode text, finite numbers and at most {MAX_DEPTH} levels of nesting "
             "(what can be written back as JSON and read again)")


def check_storable(value: Any, *, path: Path | str | None = None) -> bool:
    """Refuse data that could not be written back as strict UTF-8 JSON, before anything uses it.

    JSON text may spell a lone UTF-16 surrogate (``"\\ud800"``), which no UTF-8 file can hold,
    and a number like ``1e400``, which reads as infinity; both would only fail later, when the
    record is written (after a lock was taken, or another report already written).

    Returns whether ``value`` is plain JSON as well (dicts with string keys, lists, JSON scalars:
    what the schema's fast validator may judge), found on the same walk.

    Raises:
        SchemaError: names ``path`` and the JSON path of the first such value in document order.
    """
    plain = True
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        item, parts = stack.pop()
        if isinstance(item, str):
            if not encodable(item):
                raise _unstorable(f"text {_escaped(item)} holds a lone surrogate, which is not valid Unicode",
                                  parts, path)
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise _unstorable(f"number is out of range (it reads as {item})", parts, path)
        elif isinstance(item, (dict, list, tuple)) and len(parts) >= MAX_DEPTH:
            # Every read refuses it (see check_depth): a file written with it could never be read.
            raise _unstorable(f"data is nested deeper than {MAX_DEPTH} levels", parts, path)
        elif isinstance(item, dict):
            children: list[tuple[Any, tuple[str | int, ...]]] = []
            for key, child in item.items():
                if not isinstance(key, str):
                    plain = False
                elif not encodable(key):
                    raise _unstorable(f"key {_escaped(key)} holds a lone surrogate, which is not valid Unicode",
                                      parts, path)
                children.append((child, (*parts, key)))
            stack.extend(reversed(children))
        elif isinstance(item, (list, tuple)):
            plain = plain and isinstance(item, list)
            stack.extend((child, (*parts, index)) for index, child in reversed(list(enumerate(item))))
        elif not isinstance(item, _PLAIN_SCALARS):
            plain = False
    return plain


#: The scalars of plain JSON data (as the schema module's fast path takes them).
_PLAIN_SCALARS = (int, bool, type(None))


def encodable(text: str) -> bool:
    """True when ``text`` can be written as UTF-8 (it holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _escaped(text: str, limit: int = 40) -> str:
    """Printable, ASCII-only and short: the surrogate itself could not even be printed."""
    shown = json.dumps(text[:limit])
    return shown[:-1] + '..."' if len(text) > limit else shown


def _unstorable(message: str, parts: tuple[str | int, ...], path: Path | str | None) -> SchemaError:
    # A key with a surrogate cannot be shown in the JSON path either: the path names its parent.
    return SchemaError(message, path=path, pointer=format_pointer(parts), expected=_STORABLE)


def load_json(path: Path, *, limit: int = MAX_FILE_BYTES) -> Any:
    """Read a JSON file strictly: size cap, UTF-8, no duplicate keys, no NaN, bounded nesting.

    Raises:
        FileTooLargeError: the file is over ``limit`` bytes.
        ParseError: bad UTF-8 or bad JSON (names the file and line).
        GuardkitStateError: the file cannot be read (missing, permissions).
    """
    path = Path(path)
    data = read_bytes_capped(path, limit=limit)
    return parse_json(decode_utf8(data, path), path=path)


def dump_json(data: Any) -> str:
    """Canonical JSON text: 2-space indent, UTF-8 kept as is, a trailing newline, no NaN.

    Raises:
        SchemaError: ``data`` holds something JSON cannot represent (NaN, a set, an object).
    """
    try:
        return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    except (TypeError, ValueError) as exc:
        raise SchemaError(f"cannot be written as JSON: {exc}", expected="JSON-representable data") from exc


def load_record(kind: str, path: Path) -> dict[str, Any]:
    """:func:`load_json` then :func:`~guardkit_state.store.schemas.validate_record`: the canonical dict.

    Raises:
        ParseError, FileTooLargeError: the file is not strict JSON.
        SchemaError, SchemaVersionError: the record does not match the ``kind`` schema.
    """
    return validate_record(kind, load_json(path), path=path, plain=True)  # parsed JSON is plain
