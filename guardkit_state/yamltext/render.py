"""Rendering for the splice: block YAML that reads back as exactly the data it was made from.

Only fragments are rendered (a scalar, a turn entry, a state block), never the user's
frontmatter. :func:`render_yaml` renders with PyYAML's safe dumper (the C one where present) and
verifies what it renders by parsing it alone.
"""

from __future__ import annotations

import datetime as dt
import math
from enum import Enum
from typing import Any

import yaml

from guardkit_state.errors import GuardkitStateError
from guardkit_state.yamltext.strict_yaml import parse_yaml

try:  # libyaml's dumper where present (as the loader); the Python one writes the same YAML.
    _SafeDumper: type = yaml.CSafeDumper
except AttributeError:  # pragma: no cover - only without libyaml
    _SafeDumper = yaml.SafeDumper


class _Dumper(_SafeDumper):  # type: ignore[misc]
    """The safe dumper, but it writes multi-line strings as literal blocks, so feedback stays readable."""


def _represent_str(dumper: yaml.BaseDumper, data: str) -> yaml.ScalarNode:
    # A literal block only for ordinary multi-line text: leading blanks or trailing blank lines
    # would need "keep" chomping, which PyYAML ends with a '...' document-end line.
    ordinary = "\n" in data.strip("\n") and not data.startswith((" ", "\n")) and not data.endswith("\n\n")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if ordinary else None)


_Dumper.add_representer(str, _represent_str)


def plain_data(value: Any) -> Any:
    """``value`` as data the strict reader can give back: enums as their values, tuples as lists,
    dates as ISO strings (the strict reader keeps dates as the strings they are written as)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value  # most values: no enum, no container (an enum's type is its own class)
    if isinstance(value, Enum):
        return plain_data(value.value)
    if isinstance(value, dict):
        return {plain_data(k): plain_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_data(v) for v in value]
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    return value


def render_yaml(data: Any) -> str:
    """Render ``data`` as block YAML that parses back to exactly ``data``.

    Uses the safe dumper (no line wrapping, non-ASCII kept, key order kept); strings that would
    change type (timestamps, ``'null'``, numbers) come out quoted. The result is verified by
    parsing it alone; a string the literal style cannot carry falls back to quoted style.
    """
    data = plain_data(data)
    for dumper in (_Dumper, _SafeDumper):
        try:
            text = yaml.dump(
                data,
                Dumper=dumper,
                allow_unicode=True,
                sort_keys=False,
                default_flow_style=False,
                width=-1,  # -1: never wrap long lines
            )
        except yaml.YAMLError as exc:
            raise GuardkitStateError(f"cannot render state as YAML: {exc}") from exc
        if text.endswith("\n...\n"):  # a document-end marker must never land inside a frontmatter
            text = text[: -len("...\n")]
        if same(parse_yaml(text).data, data):
            return str(text)
    raise GuardkitStateError("rendered YAML does not read back as the same data (data that is not plain "
                             "strings, numbers, lists and mappings?)")


def same(a: Any, b: Any, *, ordered: bool = True) -> bool:
    """Data equality that tells ``1`` from ``True`` and ``1.0``, ``0.0`` from ``-0.0``, and NaN equal to
    itself; with ``ordered`` the key order of mappings counts too."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        if (list(a) != list(b)) if ordered else (a.keys() != b.keys()):
            return False
        return all(same(a[key], b[key], ordered=ordered) for key in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y, ordered=ordered) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return bool(a == b)


def indent_lines(text: str, indent: int, newline: str) -> str:
    """Indent every non-empty line of rendered YAML and use the file's line ending."""
    pad = " " * indent
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return "".join((pad + line if line else line) + newline for line in lines)


def render_scalar(value: Any) -> str | None:
    """``value`` as a one-line YAML scalar (plain or quoted), or None when it needs several lines."""
    rendered = render_yaml({"k": value})
    if rendered.count("\n") != 1 or not rendered.startswith("k: ") or rendered[3:4] in ("|", ">", ""):
        return None
    return rendered[3:-1]


def render_value(value: Any, key_text: str, props: str, indent: int, nl: str, comment: str = "") -> str:
    """``key_text: props value  comment`` as lines at ``indent``, the key kept exactly as written.

    ``key_text`` is the key's line up to the ``:`` (indent, quotes, the key's own anchor);
    ``props`` the anchor (``&name``) the value keeps, or ``""``; ``comment`` a trailing comment
    for the first line (with the blanks that separate it), or ``""``.
    """
    rendered = render_yaml({"k": value})
    tail = rendered[2:]  # after "k:": " scalar\n", " |-\n  lines\n" or "\n  nested...\n"
    first, _, rest = tail.partition("\n")
    if props:
        first = f" {props}{first}"
    return key_text + ":" + first + comment + nl + indent_lines(rest, indent, nl)
