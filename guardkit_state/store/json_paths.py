"""JSON paths of records: ``$.criteria_verification[0].result``, as errors and warnings name them."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

#: A JSON path split into keys and indexes: ``("criteria_verification", 0, "result")``.
PathParts = tuple[str | int, ...]

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_POINTER_PART = re.compile(r'\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')


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


def sort_key(parts: PathParts) -> tuple[tuple[int, int | str], ...]:
    # Indexes sort numerically ([2] before [10]); an index sorts before a key at the same depth.
    return tuple((0, p) if isinstance(p, int) else (1, p) for p in parts)


__all__ = ["PathParts", "format_pointer", "parse_pointer", "sort_key"]
