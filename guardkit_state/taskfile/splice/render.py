"""Rendering for the splice: block YAML that reads back as exactly the data it was made from.

Only fragments are rendered (a scalar, a turn entry, a state block), never the user's
frontmatter. :func:`render_yaml` verifies what it renders by parsing it alone; the common one-line
scalars take an exact fast path whose forms are unambiguous in YAML 1.1.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Any

import yaml

from guardkit_state.errors import GuardkitStateError
from guardkit_state.taskfile.strict_yaml import parse_yaml


class _Dumper(yaml.CSafeDumper):
    """C dumper that writes multi-line strings as literal blocks, so feedback stays readable."""


def _represent_str(dumper: yaml.BaseDumper, data: str) -> yaml.ScalarNode:
    # A literal block only for ordinary multi-line text: leading blanks or trailing blank lines
    # would need "keep" chomping, which PyYAML ends with a '...' document-end line.
    ordinary = "\n" in data.strip("\n") and not data.startswith((" ", "\n")) and not data.endswith("\n\n")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if ordinary else None)


_Dumper.add_representer(str, _represent_str)  # type: ignore[arg-type]


def plain_data(value: Any) -> Any:
    """``value`` with enums as their values and tuples as lists, so the safe dumper accepts it."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value  # most values: no enum, no container (an enum's type is its own class)
    if isinstance(value, Enum):
        return plain_data(value.value)
    if isinstance(value, dict):
        return {plain_data(k): plain_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_data(v) for v in value]
    return value


def render_yaml(data: Any) -> str:
    """Render ``data`` as block YAML that parses back to exactly ``data``.

    Uses the C safe dumper (no line wrapping, non-ASCII kept, key order kept); strings that would
    change type (timestamps, ``'null'``, numbers) come out quoted. The result is verified by
    parsing it alone; a string the literal style cannot carry falls back to quoted style.
    """
    data = plain_data(data)
    fast = _render_flat_items(data) if isinstance(data, list) else _render_flat(data)
    if fast is not None:
        return fast
    for dumper in (_Dumper, yaml.CSafeDumper):
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
    raise GuardkitStateError("rendered YAML does not read back as the same data", expected="plain data")


# --- an exact fast path for the lines a turn rewrites (``current_turn: 3``, ``AC-001: verified``,
# ``last_updated: '2026-...'``): rendering and re-reading them through PyYAML was most of a
# turn's CPU. Only forms whose meaning is unambiguous in YAML 1.1 are handled; anything else
# (words YAML reads as booleans or null, numbers with leading zeros, quotes, non-printables...)
# goes the slow, verified way.
_PLAIN_TOKEN = re.compile(r"[A-Za-z_./][A-Za-z0-9_\-./]*\Z")
_INT_TOKEN = re.compile(r"(?:0|-?[1-9][0-9]{0,17})\Z")
_TIMESTAMP_TOKEN = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[Tt ][0-9:.]+(?:Z|[+-][0-9]{2}:?[0-9]{2})?)?\Z")
#: What other YAML readers resolve (timestamps included): a value written plain must read as a string.
_WRITE_RESOLVERS = yaml.resolver.Resolver.yaml_implicit_resolvers


def _reads_as_str(token: str, resolvers: dict[Any, list[tuple[str, re.Pattern[str]]]]) -> bool:
    """True when a plain ``token`` resolves to a string under ``resolvers`` (PyYAML's own rule)."""
    candidates = [*resolvers.get(token[:1], []), *resolvers.get(None, [])]
    return not any(regexp.match(token) for _tag, regexp in candidates)


def _fast_scalar(value: Any) -> str | None:
    """``value`` as a YAML scalar when it can be written without PyYAML, else ``None``."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if type(value) is int and _INT_TOKEN.match(str(value)):
        return str(value)
    if type(value) is str:
        if _PLAIN_TOKEN.match(value) and not value.startswith("...") and _reads_as_str(value, _WRITE_RESOLVERS):
            return value
        if _TIMESTAMP_TOKEN.match(value) and not _reads_as_str(value, _WRITE_RESOLVERS):
            return f"'{value}'"  # PyYAML quotes these too: they would read as dates
    return None


# One-line text in printable ASCII (most agent feedback), written as the C dumper writes it in a
# block mapping's value: plain unless libyaml's analysis forbids it (an indicator where it would
# start or end a token, a space at either end, a value the resolvers would not read as a string),
# else single-quoted. Anything else (other characters, line breaks, the empty string) goes the slow
# way. tests/test_splice_scalars.py holds the two to the same output over generated text.
_ASCII_LINE = re.compile(r"[\x20-\x7e]+\Z")
_FIRST_INDICATORS = frozenset("#,[]{}&*!|>'\"%@`")


def _fast_text(value: str) -> str | None:
    """``value`` (a str) as a block mapping value, exactly as the C safe dumper writes it, else ``None``."""
    if not _ASCII_LINE.match(value):
        return None
    if _plain_allowed(value) and _reads_as_str(value, _WRITE_RESOLVERS):
        return value
    return "'" + value.replace("'", "''") + "'"


def _plain_allowed(text: str) -> bool:
    """libyaml's rule for a plain scalar in block context, for one line of printable ASCII."""
    first, second = text[0], text[1:2]
    if first in _FIRST_INDICATORS or (first in "?:-" and second in ("", " ")):
        return False
    if text.startswith(("---", "...")) or first == " " or text[-1] == " ":
        return False
    return ": " not in text and not text.endswith(":") and " #" not in text


def _fast_value(value: Any) -> str | None:
    fast = _fast_scalar(value)
    if fast is None and type(value) is str:
        return _fast_text(value)
    return fast


def _flat_lines(data: Any, indent: str = "") -> list[str] | None:
    """``key: scalar`` lines for a flat mapping of simple keys and one-line scalars, else ``None``."""
    if not isinstance(data, dict) or not data:
        return None
    lines = []
    for key, value in data.items():
        rendered = _fast_value(value)
        # Keys stay simple tokens: a long or spaced key is a case for the dumper (it may write '? key').
        # libyaml writes a key over 128 characters as '? key' (and reads a plain one only up to 1024).
        if type(key) is not str or len(key) > 128 or _fast_scalar(key) != key or rendered is None:
            return None
        lines.append(f"{indent}{key}: {rendered}\n")
    return lines


def _render_flat(data: Any) -> str | None:
    """``key: scalar`` lines for a flat mapping of simple keys and scalars, else ``None``."""
    lines = _flat_lines(data)
    return None if lines is None else "".join(lines)


def _render_flat_items(data: list[Any]) -> str | None:
    """A block list of flat mappings (turn entries) as the dumper writes it, else ``None``."""
    out: list[str] = []
    for item in data:
        lines = _flat_lines(item, "  ")
        if lines is None:
            return None
        out += ["- " + lines[0][2:], *lines[1:]]
    return "".join(out) or None


def same(a: Any, b: Any) -> bool:
    """Equality that also tells ``1`` from ``True`` and ``1.0``."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
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
    fast = _fast_value(value)
    if fast is not None:
        return fast
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
