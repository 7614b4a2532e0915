"""Canonical JSON text, fast: exactly ``json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)``.

The standard library encodes in C only without ``indent``; with it, it falls back to a chain of
Python generators that costs more than the rest of writing a report. This writer builds the same
text with one recursive pass that appends to a list, escaping strings and spelling floats with the
same C helpers the standard library uses, so each turn's three files cost a third of the time. The
output is byte-identical for every value ``json.dumps`` accepts, and it raises the same
exceptions (``TypeError``, ``ValueError``) for everything it refuses (a property test keeps the two
in step).

Data built only of the exact JSON types (no subclasses, no float that Python spells with an
exponent) is written by ``orjson`` instead (a dependency, imported on first use), in C, at a
tenth of the cost: its text for such data is the same, byte for byte. Everything else, anything it
refuses (a lone surrogate, an integer beyond 64 bits, nesting too deep), and everything when it is
not installed, takes the writer below. Reading is left to ``json``: orjson reads an integer beyond
64 bits as a float.
"""

from __future__ import annotations

import functools
import json
import json.encoder
import math
from collections.abc import Callable
from types import ModuleType
from typing import Any

#: The stdlib's string escaper for ``ensure_ascii=False`` (C-accelerated).
_escape: Callable[[str], str] = json.encoder.encode_basestring
_float_repr = float.__repr__
_int_repr = int.__repr__
_INFINITY = float("inf")
#: How many values :func:`plain_json` looks at before it gives up.
PLAIN_JSON_VALUES = 1_000_000
_FAST_PATH_DEPTH = 200  # orjson refuses nesting beyond 254 levels


def canonical_json(data: Any) -> str:
    """``json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)``, without its slow path.

    Raises:
        TypeError: a value (or a key) JSON cannot represent, as ``json.dumps`` would.
        ValueError: a NaN or an infinity, or a container that contains itself.
    """
    fast = _orjson()
    if fast is not None and plain_json(data, max_depth=_FAST_PATH_DEPTH, float_ok=_spelled_alike):
        try:
            return fast.dumps(data, option=_orjson_options(), default=_refuse).decode()  # type: ignore[no-any-return]
        except fast.JSONEncodeError:
            pass  # a lone surrogate, an integer beyond 64 bits: the writer below spells it as json.dumps does
    parts: list[str] = []
    try:
        _value(data, parts, "\n", set())
    except RecursionError:
        # Two frames a level here, one in the standard library: nesting that deep (far beyond
        # what the store reads back) is left to it, so both still accept and refuse alike.
        return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)
    return "".join(parts)


def plain_json(value: Any, *, max_depth: int, float_ok: Callable[[float], bool] = math.isfinite) -> bool:
    """True when ``value`` is built of the exact JSON types only: dicts with str keys, lists, str,
    int, bool, None and the floats ``float_ok`` accepts; all text valid Unicode (no lone surrogate);
    no container nested ``max_depth`` levels deep; :data:`PLAIN_JSON_VALUES` values at most (a
    container that holds itself would never end). False means "look closer", never "invalid".

    The walk both fast paths on the way to disk take: the canonical writer's C path and the store's
    check of what it may write.
    """
    level, depth, budget = [value], 0, PLAIN_JSON_VALUES
    while level:
        below: list[Any] = []
        for item in level:
            kind = type(item)
            if kind is str:
                if not item.isascii() and not encodable(item):
                    return False
            elif kind is dict:
                if depth >= max_depth:
                    return False
                for key in item:
                    if type(key) is not str or (not key.isascii() and not encodable(key)):
                        return False
                below.extend(item.values())
            elif kind is list:
                if depth >= max_depth:
                    return False
                below.extend(item)
            elif kind is float:
                if not float_ok(item):
                    return False
            elif kind is not int and kind is not bool and item is not None:
                return False
        budget -= len(below)
        if budget < 0:
            return False
        level, depth = below, depth + 1
    return True


def encodable(text: str) -> bool:
    """True when ``text`` can be written as UTF-8 (it holds no lone surrogate)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _spelled_alike(number: float) -> bool:
    """True for a float orjson spells as ``repr`` does: 0, or 1e-4 <= |x| < 1e16, where neither
    takes an exponent (NaN and the infinities fail, as json.dumps refuses them)."""
    return number == 0.0 or 1e-4 <= abs(number) < 1e16


def _refuse(value: Any) -> Any:
    """orjson's hook for a type it does not write itself: none can reach it past :func:`plain_json`."""
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


@functools.cache
def _orjson() -> ModuleType | None:
    """orjson, imported on first use (loading it adds milliseconds to a command that only prints
    its help), or None when it is not installed: then the pure writer serves everything."""
    try:
        import orjson
    except ImportError:  # pragma: no cover - a declared dependency
        return None
    return orjson


@functools.cache
def _orjson_options() -> int:
    """The options under which orjson's text is ``json.dumps(indent=2, ensure_ascii=False)``'s: the
    subclasses, dates and dataclasses it would otherwise write go to ``default``, which refuses them."""
    fast = _orjson()
    assert fast is not None
    return int(fast.OPT_INDENT_2 | fast.OPT_PASSTHROUGH_SUBCLASS | fast.OPT_PASSTHROUGH_DATETIME
               | fast.OPT_PASSTHROUGH_DATACLASS)


def _value(value: Any, parts: list[str], newline: str, open_ids: set[int]) -> None:
    # The order of the tests is json.dumps's: str before int (a str subclass is a string) and
    # bool before int (True is an int).
    if isinstance(value, str):
        parts.append(_escape(value))
    elif value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif isinstance(value, int):
        parts.append(_int_repr(value))
    elif isinstance(value, float):
        parts.append(_float_text(value))
    elif isinstance(value, (list, tuple)):
        _array(value, parts, newline, open_ids)
    elif isinstance(value, dict):
        _object(value, parts, newline, open_ids)
    else:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _float_text(value: float) -> str:
    if value != value or value in (_INFINITY, -_INFINITY):
        raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
    return _float_repr(value)


def _enter(container: Any, open_ids: set[int]) -> int:
    marker = id(container)
    if marker in open_ids:
        raise ValueError("Circular reference detected")
    open_ids.add(marker)
    return marker


def _array(items: list[Any] | tuple[Any, ...], parts: list[str], newline: str, open_ids: set[int]) -> None:
    if not items:
        parts.append("[]")
        return
    marker = _enter(items, open_ids)
    inner = newline + "  "
    separator = "," + inner
    parts.append("[" + inner)
    first = True
    for item in items:
        if not first:
            parts.append(separator)
        first = False
        _value(item, parts, inner, open_ids)
    parts.append(newline + "]")
    open_ids.discard(marker)


def _object(mapping: dict[Any, Any], parts: list[str], newline: str, open_ids: set[int]) -> None:
    if not mapping:
        parts.append("{}")
        return
    marker = _enter(mapping, open_ids)
    inner = newline + "  "
    separator = "," + inner
    parts.append("{" + inner)
    first = True
    for key, item in mapping.items():
        if not first:
            parts.append(separator)
        first = False
        parts.append(_escape(_key_text(key)) + ": ")
        _value(item, parts, inner, open_ids)
    parts.append(newline + "}")
    open_ids.discard(marker)


def _key_text(key: Any) -> str:
    """A key as ``json.dumps`` spells it: strings as they are, numbers, booleans and None as text."""
    if isinstance(key, str):
        return key
    if isinstance(key, float):
        return _float_text(key)
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, int):
        return _int_repr(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")
