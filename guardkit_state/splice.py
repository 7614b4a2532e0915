"""Surgical splice of the ``autobuild_state`` block into a task file's frontmatter.

Pure functions, text in and text out. Saving the block never re-dumps the user's frontmatter:
:func:`splice_state` finds lines with a linear, indentation-aware scan, appends new turns after the
last item of ``turns:``, rewrites only scalar lines whose value changed, and renders only the new
fragments (each verified by parsing it alone). Layouts the splice cannot handle (flow style,
anchors, multi-line values to replace...) fall back to re-rendering the state block alone, and say
so. A no-op update returns the text unchanged.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Literal

import yaml

from .errors import DuplicateKeyError, FrontmatterError, GuardkitStateError
from .frontmatter import LEGACY_STATE_KEY, STATE_KEY, STATE_KEYS, FrontmatterSplit, split_frontmatter
from .strict_yaml import StrictLoader, parse_yaml

log = logging.getLogger("guardkit_state.splice")

_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_.\-]*)[ \t]*:(?:[ \t]+(.*))?")
_QUOTED_STATE_KEY = re.compile(r"^[\"']?(?:autobuild_state|feature_build)[\"']?[ \t]*:", re.M)
_LINE_PATTERNS: dict[int, re.Pattern[str]] = {}

SpliceMethod = Literal["noop", "splice", "rerender"]


# --------------------------------------------------------------------------- rendering


class _Dumper(yaml.CSafeDumper):  # type: ignore[misc]
    """C dumper that writes multi-line strings as literal blocks, so feedback stays readable."""


def _represent_str(dumper: yaml.BaseDumper, data: str) -> yaml.ScalarNode:
    # A literal block only for ordinary multi-line text: leading blanks or trailing blank lines
    # would need "keep" chomping, which PyYAML ends with a '...' document-end line.
    ordinary = "\n" in data.strip("\n") and not data.startswith((" ", "\n")) and not data.endswith("\n\n")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if ordinary else None)


_Dumper.add_representer(str, _represent_str)  # type: ignore[arg-type]


def plain_data(value: Any) -> Any:
    """``value`` with enums as their values and tuples as lists, so the safe dumper accepts it."""
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
    fast = _render_flat(data)
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
        if _same(parse_yaml(text).data, data):
            return str(text)
    raise GuardkitStateError("rendered YAML does not read back as the same data", expected="plain data")


# --- an exact fast path for the lines a turn rewrites (``current_turn: 3``, ``AC-001: verified``,
# ``last_updated: '2026-...'``): rendering and re-reading them through PyYAML was most of a
# turn's CPU. Only forms whose meaning is unambiguous in YAML 1.1 are handled; anything else
# (words YAML reads as booleans or null, numbers with leading zeros, quotes, non-printables...)
# goes the slow, verified way.
_PLAIN_TOKEN = re.compile(r"[A-Za-z_./][A-Za-z0-9_\-./]*\Z")
_INT_TOKEN = re.compile(r"(?:0|-?[1-9][0-9]{0,17})\Z")
_SIMPLE_LINE = re.compile(r"( *)([A-Za-z_./][A-Za-z0-9_\-./]*): ([^ #'\"][^ #]*|'[^'\r\n]*')( +#.*)?\Z")
_TIMESTAMP_TOKEN = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[Tt ][0-9:.]+(?:Z|[+-][0-9]{2}:?[0-9]{2})?)?\Z")
_NO_VALUE = object()
#: What other YAML readers resolve (timestamps included): a value written plain must read as a string.
_WRITE_RESOLVERS = yaml.resolver.Resolver.yaml_implicit_resolvers
_DOCUMENT_END = re.compile(r"^\.\.\.(?:[ \t].*)?\r?$", re.M)


def _reads_as_str(token: str, resolvers: dict[Any, list[tuple[str, re.Pattern[str]]]]) -> bool:
    """True when a plain ``token`` resolves to a string under ``resolvers`` (PyYAML's own rule)."""
    for _tag, regexp in [*resolvers.get(token[:1], []), *resolvers.get(None, [])]:
        if regexp.match(token):
            return False
    return True


def _fast_scalar(value: Any) -> str | None:
    """``value`` as a YAML scalar when it can be written without PyYAML, else ``None``."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if type(value) is int and _INT_TOKEN.match(str(value)):
        return str(value)
    if type(value) is str:
        if _PLAIN_TOKEN.match(value) and _reads_as_str(value, _WRITE_RESOLVERS):
            return value
        if _TIMESTAMP_TOKEN.match(value):  # PyYAML quotes these too: they would read as dates
            return f"'{value}'"
    return None


def _read_fast_scalar(token: str) -> Any:
    """The value of a scalar token :func:`_fast_scalar` could have written, else ``_NO_VALUE``."""
    if token.startswith("'"):
        inner = token[1:-1]
        return inner if _TIMESTAMP_TOKEN.match(inner) else _NO_VALUE
    if _INT_TOKEN.match(token):
        return int(token)
    if token in ("null", "true", "false"):
        return {"null": None, "true": True, "false": False}[token]
    if _PLAIN_TOKEN.match(token) and _reads_as_str(token, StrictLoader.yaml_implicit_resolvers):
        return token
    return _NO_VALUE


def _render_flat(data: Any) -> str | None:
    """``key: scalar`` lines for a flat mapping of simple keys and scalars, else ``None``."""
    if not isinstance(data, dict) or not data:
        return None
    lines = []
    for key, value in data.items():
        rendered = _fast_scalar(value)
        if type(key) is not str or _fast_scalar(key) != key or rendered is None:
            return None
        lines.append(f"{key}: {rendered}\n")
    return "".join(lines)


def _read_flat_line(content: str) -> tuple[str, Any, str] | None:
    """(key, value, trailing comment) of a simple ``key: scalar  # comment`` line, else ``None``."""
    match = _SIMPLE_LINE.match(content)
    if match is None:
        return None
    value = _read_fast_scalar(match.group(3))
    return None if value is _NO_VALUE else (match.group(2), value, match.group(4) or "")


def _same(a: Any, b: Any) -> bool:
    """Equality that also tells ``1`` from ``True`` and ``1.0``."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _indent(text: str, indent: int, newline: str) -> str:
    """Indent every non-empty line of rendered YAML and use the file's line ending."""
    pad = " " * indent
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return "".join((pad + line if line else line) + newline for line in lines)


# --------------------------------------------------------------------------- the update


@dataclass
class StateUpdate:
    """What to change in a task file's state block (and top-level scalars such as ``status``).

    Attributes:
        key: ``autobuild_state``, or ``feature_build`` when the file already has that key
            (the splice always writes to the key the file has).
        block_scalars: state keys to set (``current_turn``, ``last_updated`` ...): changed when
            different, added when missing.
        criteria: the desired full ``criteria`` map, or None to leave it alone.
        append_turns: turn-entry dicts, in key order, appended to ``turns``.
        top_level: top-level frontmatter keys to set (``status`` ...).
    """

    key: str = STATE_KEY
    block_scalars: dict[str, Any] = field(default_factory=dict)
    criteria: dict[str, str] | None = None
    append_turns: list[dict[str, Any]] = field(default_factory=list)
    top_level: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.key not in STATE_KEYS:
            raise ValueError(f"state key must be one of {STATE_KEYS}, not {self.key!r}")
        for name in ("criteria", "turns"):
            if name in self.block_scalars:
                raise ValueError(f"set {name!r} through its own field, not block_scalars")
        for name in STATE_KEYS:
            if name in self.top_level:
                raise ValueError(f"{name!r} is the state block, not a top-level scalar")

    @property
    def touches_state(self) -> bool:
        return bool(self.block_scalars or self.criteria is not None or self.append_turns)

    @property
    def is_empty(self) -> bool:
        return not (self.touches_state or self.top_level)


def apply_update_to_block(block: dict[str, Any] | None, update: StateUpdate) -> dict[str, Any]:
    """The state block dict after ``update``: the data twin of :func:`splice_state` (pure).

    New scalars go before ``criteria``/``turns``; a new ``criteria`` map before ``turns``.
    """
    out = dict(block or {})
    for key, value in update.block_scalars.items():
        if key in out:
            out[key] = plain_data(value)
        else:
            out = _insert_before(out, key, plain_data(value), ("criteria", "turns"))
    if update.criteria is not None:
        if "criteria" in out:
            out["criteria"] = dict(update.criteria)
        elif update.criteria:
            out = _insert_before(out, "criteria", dict(update.criteria), ("turns",))
    if update.append_turns or "turns" not in out:
        out["turns"] = list(out.get("turns") or []) + plain_data(update.append_turns)
    return out


def _insert_before(data: dict[str, Any], key: str, value: Any, before: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    placed = False
    for name, existing in data.items():
        if not placed and name in before:
            out[key] = value
            placed = True
        out[name] = existing
    if not placed:
        out[key] = value
    return out


# --------------------------------------------------------------------------- the splice


@dataclass(frozen=True)
class SpliceResult:
    """The new text and how it was made: ``noop``, ``splice``, or ``rerender`` (with why)."""

    text: str
    method: SpliceMethod
    reason: str | None = None


@dataclass
class _Entry:
    """A ``key:`` line found by the scan and the span of its value, as offsets into the YAML text."""

    key: str
    start: int  # start of the key line
    line_end: int  # just after the key line's newline
    end: int  # just after the last content line of the value
    rest: str  # text after the colon on the key line

    @property
    def single_line(self) -> bool:
        return self.end == self.line_end


class _Fallback(Exception):
    """The splice cannot handle this layout; re-render the state block instead."""


@dataclass
class _Edits:
    """Replacements ``(start, end, seq, text)`` on the YAML text, applied in one pass."""

    items: list[tuple[int, int, int, str]] = field(default_factory=list)

    def add(self, start: int, end: int, text: str) -> None:
        self.items.append((start, end, len(self.items), text))

    def apply(self, text: str) -> str:
        parts: list[str] = []
        pos = 0
        for start, end, _, new in sorted(self.items):
            parts.append(text[pos:start])
            parts.append(new)
            pos = max(pos, end)
        parts.append(text[pos:])
        return "".join(parts)


def splice_state(text: str, update: StateUpdate, *, path: Path | str | None = None) -> SpliceResult:
    """Apply ``update`` to a task file's text, changing only the lines it must.

    Never re-parses the whole frontmatter: lines are located by an indentation-aware scan and
    only the rendered fragments (and the few old values compared) are parsed. A no-op update
    returns the identical text with method ``noop``.

    Raises:
        FrontmatterError: broken delimiters, both state keys, a state block that is not a mapping.
        DuplicateKeyError: a key this update touches appears twice.
    """
    if update.is_empty:
        return SpliceResult(text, "noop")
    split = split_frontmatter(text, path=path)
    if not split.has_frontmatter:
        return _create_frontmatter(split, update)
    fm = split.yaml_text
    nl = split.newline
    end_marker = _DOCUMENT_END.search(fm)
    if end_marker is not None:
        # Text spliced after YAML's document-end marker would start a second document.
        raise FrontmatterError("the frontmatter contains a YAML document-end line ('...'); the state block "
                               "cannot be spliced after it", path=path,
                               line=split.line_offset + fm.count("\n", 0, end_marker.start()) + 1,
                               expected="no '...' line inside the frontmatter")
    if _first_content_indent(fm, 0, len(fm)) not in (None, 0):
        # An indented top-level mapping: a block spliced in at column 0 would not parse.
        raise FrontmatterError("the frontmatter mapping is indented; the state block cannot be spliced into it",
                               path=path, line=split.line_offset + 1, expected="top-level keys at column 0")
    edits = _Edits()
    top = _group(_scan_entries(fm, 0, len(fm), 0, strict=False), path, fm, split.line_offset)
    if not top and _first_content_indent(fm, 0, len(fm)) is not None:
        # Content but no `key:` line (a bare `~`, a scalar): keys appended to it would not parse.
        raise FrontmatterError("the frontmatter is not a 'key: value' mapping; the state block cannot be "
                               "spliced into it", path=path, line=split.line_offset + 1,
                               expected="a YAML mapping")
    present = [key for key in STATE_KEYS if key in top]
    if len(present) > 1:
        raise FrontmatterError(
            f"both '{STATE_KEY}' and '{LEGACY_STATE_KEY}' are present",
            path=path,
            line=_line(fm, top[LEGACY_STATE_KEY].start, split.line_offset),
            expected="one state block per task",
        )
    if not present and _QUOTED_STATE_KEY.search(fm):
        raise FrontmatterError(
            "the state block's key is written in a form the splice cannot locate (quoted?)",
            path=path,
            expected=f"a plain '{STATE_KEY}:' line at column 0",
        )
    block = top[present[0]] if present else None
    method: SpliceMethod = "splice"
    reason: str | None = None
    # Top-level keys first, so a key added before the state block lands above it.
    for key, value in update.top_level.items():
        try:
            _set_scalar(fm, edits, top.get(key), key, value, 0, nl,
                        insert_at=block.start if block else len(fm), replace_multiline=True)
        except _Fallback as why:
            raise FrontmatterError(
                f"cannot update top-level '{key}': {why}",
                path=path,
                line=_line(fm, top[key].start, split.line_offset),
                expected="'key: value' on one line",
            ) from None
    if update.touches_state:
        if block is None:
            new_block = apply_update_to_block({}, update)
            prefix = "" if not fm or fm.endswith("\n") else nl
            edits.add(len(fm), len(fm), prefix + _indent(render_yaml({update.key: new_block}), 0, nl))
        else:
            block_edits = _Edits()
            try:
                _splice_block(fm, block_edits, block, update, nl, path, split.line_offset)
                edits.items.extend(
                    (s, e, len(edits.items) + i, t) for i, (s, e, _, t) in enumerate(block_edits.items)
                )
            except _Fallback as why:
                method, reason = "rerender", str(why)
                log.info("%s: re-rendering the state block: %s", path or "<text>", reason)
                edits.add(block.start, block.end,
                          _rerender_block(fm, block, update, nl, path, split.line_offset))
    if not edits.items:
        return SpliceResult(text, "noop")
    new_fm = edits.apply(fm)
    if new_fm == fm:
        return SpliceResult(text, "noop")
    return SpliceResult(split.prefix + new_fm + split.closing + split.body, method, reason)


def _create_frontmatter(split: FrontmatterSplit, update: StateUpdate) -> SpliceResult:
    """A file without frontmatter gets one holding the top-level keys and the new block."""
    data: dict[str, Any] = dict(update.top_level)
    if update.touches_state:
        data[update.key] = apply_update_to_block({}, update)
    nl = split.newline
    fm = _indent(render_yaml(data), 0, nl)
    return SpliceResult(split.bom + "---" + nl + fm + "---" + nl + split.body, "splice")


def _splice_block(
    fm: str,
    edits: _Edits,
    block: _Entry,
    update: StateUpdate,
    nl: str,
    path: Path | str | None,
    line_offset: int,
) -> None:
    """Add edits for the state block; raise :class:`_Fallback` for layouts not handled."""
    rest = _strip_comment(block.rest)
    child_indent = _first_content_indent(fm, block.line_end, block.end)
    if child_indent is None:
        if rest not in ("", "~", "null", "{}"):
            raise _Fallback(f"the '{block.key}' value is written inline ({rest[:40]!r})")
        new_block = apply_update_to_block({}, update)
        edits.add(block.start, block.end, _indent(render_yaml({block.key: new_block}), 0, nl))
        return
    if rest:
        raise _Fallback(f"the '{block.key}' line carries {rest[:40]!r} (flow style, anchor or tag)")
    if fm.startswith("-", _line_start(fm, block.line_end, block.end) + child_indent):
        raise FrontmatterError(
            f"'{block.key}' is a list, not a mapping",
            path=path,
            line=_line(fm, block.line_end, line_offset),
            expected="a mapping with current_turn, turns ...",
        )
    children = _group(_scan_entries(fm, block.line_end, block.end, child_indent, strict=True),
                      path, fm, line_offset)
    # New keys go in front of criteria/turns, like GuardKit's own key order.
    anchors = [_above_comments(fm, children[k].start, child_indent) for k in ("criteria", "turns")
               if k in children]
    scalar_anchor = min(anchors) if anchors else block.end
    for key, value in update.block_scalars.items():
        _set_scalar(fm, edits, children.get(key), key, value, child_indent, nl,
                    insert_at=scalar_anchor, replace_multiline=False)
    if update.criteria is not None:
        turns = children.get("turns")
        _set_criteria(fm, edits, children.get("criteria"), dict(update.criteria), child_indent, nl,
                      insert_at=_above_comments(fm, turns.start, child_indent) if turns else block.end)
    if update.append_turns:
        _append_turns(fm, edits, children.get("turns"), update.append_turns, child_indent, nl,
                      insert_at=block.end)


def _set_scalar(
    fm: str,
    edits: _Edits,
    entry: _Entry | None,
    key: str,
    value: Any,
    indent: int,
    nl: str,
    *,
    insert_at: int,
    replace_multiline: bool,
) -> None:
    """Rewrite one ``key: value`` line when the value differs (keeping a trailing comment)."""
    value = plain_data(value)
    if entry is None:
        edits.add(insert_at, insert_at, _indent(render_yaml({key: value}), indent, nl))
        return
    if entry.single_line and _strip_comment(entry.rest)[:1] not in ("|", ">", "&", "*", "!"):
        line = fm[entry.start : entry.line_end]
        content = line.rstrip("\r\n")
        ending = line[len(content) :]
        parsed = _parse_line(content)
        if parsed is None:
            raise _Fallback(f"cannot read the current value of '{key}'")
        old, suffix = parsed
        if _same(old, value):
            return
        rendered = render_yaml({key: value})
        new_content = _indent(rendered, indent, nl)[: -len(nl)]
        if suffix and "\n" not in rendered.rstrip("\n"):
            # A comment must follow whitespace, or it becomes part of a plain value.
            new_content += suffix if suffix[:1].isspace() else " " + suffix
        edits.add(entry.start, entry.line_end, new_content + ending)
        return
    old_map = _parse_fragment(fm[entry.start : entry.end])
    if old_map is not None and _same(old_map.get(key), value):
        return
    if not replace_multiline:
        raise _Fallback(f"'{key}' has a multi-line, nested, anchored or tagged value to replace")
    edits.add(entry.start, entry.end, _indent(render_yaml({key: value}), indent, nl))


def _set_criteria(
    fm: str,
    edits: _Edits,
    entry: _Entry | None,
    desired: dict[str, str],
    indent: int,
    nl: str,
    *,
    insert_at: int,
) -> None:
    """Create the ``criteria`` map, or rewrite/add/remove only the entries that differ."""
    if entry is None:
        if desired:
            edits.add(insert_at, insert_at, _indent(render_yaml({"criteria": desired}), indent, nl))
        return
    rest = _strip_comment(entry.rest)
    inner = _first_content_indent(fm, entry.line_end, entry.end)
    if inner is None:
        if rest not in ("", "~", "null", "{}"):
            raise _Fallback("'criteria' is written in flow style")
        if desired or rest != "{}":
            edits.add(entry.start, entry.end, _indent(render_yaml({"criteria": desired}), indent, nl))
        return
    if rest:
        raise _Fallback("'criteria' carries an anchor, tag or flow value")
    parsed = _parse_fragment(fm[entry.line_end : entry.end])
    lines = _scan_entries(fm, entry.line_end, entry.end, inner, strict=True)
    if parsed is None or len(lines) != len(parsed) or any(not e.single_line for e in lines):
        raise _Fallback("'criteria' entries are not one 'id: status' line each")
    current = {str(k): v for k, v in parsed.items()}
    if not desired:
        edits.add(entry.start, entry.end, _indent(render_yaml({"criteria": {}}), indent, nl))
        return
    by_key = {e.key: e for e in lines}
    if set(by_key) != set(current):
        raise _Fallback("'criteria' keys are quoted or unusual")
    for key, line in by_key.items():
        if key not in desired:
            edits.add(line.start, line.line_end, "")
        elif not _same(current[key], desired[key]):
            content = fm[line.start : line.line_end]
            ending = content[len(content.rstrip("\r\n")) :]
            edits.add(line.start, line.line_end,
                      _indent(render_yaml({key: desired[key]}), inner, nl)[: -len(nl)] + ending)
    missing = {k: v for k, v in desired.items() if k not in current}
    if missing:
        edits.add(entry.end, entry.end, _indent(render_yaml(missing), inner, nl))


def _append_turns(
    fm: str,
    edits: _Edits,
    entry: _Entry | None,
    turns: list[dict[str, Any]],
    indent: int,
    nl: str,
    *,
    insert_at: int,
) -> None:
    """Append rendered turn entries after the last item of ``turns`` (matching its indent)."""
    items = render_yaml(plain_data(turns))
    if entry is None:
        edits.add(insert_at, insert_at, _indent("turns:\n", indent, nl) + _indent(items, indent, nl))
        return
    rest = _strip_comment(entry.rest)
    inner = _first_content_indent(fm, entry.line_end, entry.end)
    if inner is None:
        if rest not in ("", "~", "null", "[]"):
            raise _Fallback("'turns' is written in flow style")
        # 'turns: []' becomes a block list, items at the key's indent like GuardKit writes them.
        edits.add(entry.start, entry.end, _indent("turns:\n", indent, nl) + _indent(items, indent, nl))
        return
    if rest:
        raise _Fallback("'turns' carries an anchor, tag or flow value")
    first = _line_start(fm, entry.line_end, entry.end) + inner
    if not fm.startswith("-", first):
        raise _Fallback("'turns' is not a block list")
    edits.add(entry.end, entry.end, _indent(items, inner, nl))


def _rerender_block(
    fm: str, block: _Entry, update: StateUpdate, nl: str, path: Path | str | None, line_offset: int
) -> str:
    """Fallback: parse the state block alone, apply the update, render the block alone."""
    parsed = parse_yaml(fm[block.start : block.end], path=path,
                        line_offset=line_offset + fm.count("\n", 0, block.start))
    current = (parsed.data or {}).get(block.key) if isinstance(parsed.data, dict) else None
    if current is not None and not isinstance(current, dict):
        raise FrontmatterError(
            f"'{block.key}' is not a mapping",
            path=path,
            line=_line(fm, block.start, line_offset),
            expected="a mapping with current_turn, turns ...",
        )
    return _indent(render_yaml({block.key: apply_update_to_block(current, update)}), 0, nl)


# --------------------------------------------------------------------------- the line scan


def _line_pattern(indent: int) -> re.Pattern[str]:
    """Lines with exactly ``indent`` spaces then content (not blank, not a comment)."""
    pattern = _LINE_PATTERNS.get(indent)
    if pattern is None:
        # A literal "\n" + spaces prefix lets the regex engine jump between candidate lines;
        # a MULTILINE "^" would be tried at every character.
        pattern = re.compile(r"\n {%d}([^ \t\r\n#][^\r\n]*)" % indent)
        _LINE_PATTERNS[indent] = pattern
    return pattern


def _scan_entries(fm: str, lo: int, hi: int, indent: int, *, strict: bool) -> list[_Entry]:
    """Find the ``key:`` lines at exactly ``indent`` in ``fm[lo:hi]`` and the span of each value.

    Deeper lines, blank lines and ``- item`` lines at the same indent (GuardKit's indentless
    lists) belong to the key above them. With ``strict``, any other line at this indent (a quoted
    or complex key) raises :class:`_Fallback`; otherwise it is taken as a continuation line.
    """
    found: list[tuple[int, str, str]] = []
    # The pattern matches from the newline before a line; read fm[lo:hi] as "\n" + fm[lo:hi].
    view = fm if lo > 0 else "\n" + fm
    shift = 0 if lo > 0 else 1
    for match in _line_pattern(indent).finditer(view, lo - 1 + shift, hi + shift):
        content = match.group(1).rstrip("\r")
        if content[0] == "-" and (len(content) == 1 or content[1] == " "):
            continue
        key_match = _KEY.fullmatch(content)
        if key_match is None:
            if strict:
                raise _Fallback(f"unsupported line in the state block: {content[:40]!r}")
            continue
        found.append((match.start() + 1 - shift, key_match.group(1), (key_match.group(2) or "").strip()))
    found = _outside_quoted_values(fm, found)
    entries: list[_Entry] = []
    for index, (start, key, rest) in enumerate(found):
        stop = found[index + 1][0] if index + 1 < len(found) else hi
        newline = fm.find("\n", start, stop)
        line_end = stop if newline < 0 else newline + 1
        entries.append(_Entry(key, start, line_end, _content_end(fm, line_end, stop, indent), rest))
    return entries


def _outside_quoted_values(fm: str, found: list[tuple[int, str, str]]) -> list[tuple[int, str, str]]:
    """Drop "keys" that are really lines inside a quoted value continuing over several lines.

    PyYAML accepts a quoted scalar whose continuation lines sit at its key's own indent; such a
    line can look exactly like ``key: value`` and must not be taken for one.
    """
    kept: list[tuple[int, str, str]] = []
    inside_until = -1
    for start, key, rest in found:
        if start < inside_until:
            continue
        kept.append((start, key, rest))
        if rest[:1] in ("'", '"'):
            opening = fm.index(rest[0], fm.index(":", start))
            inside_until = _quote_end(fm, opening)
    return kept


def _quote_end(fm: str, opening: int) -> int:
    """Offset just after the quote closing the scalar opened at ``opening`` (end of text if none)."""
    quote = fm[opening]
    pos = opening + 1
    while True:
        pos = fm.find(quote, pos)
        if pos < 0:
            return len(fm)
        if quote == "'" and fm.startswith("''", pos):
            pos += 2  # an escaped quote inside single quotes
            continue
        if quote == '"':
            before = pos - 1
            while before > opening and fm[before] == "\\":
                before -= 1
            if (pos - 1 - before) % 2:  # an odd run of backslashes escapes this quote
                pos += 1
                continue
        return pos + 1


def _content_end(fm: str, lo: int, hi: int, indent: int) -> int:
    """Offset after the last line of ``fm[lo:hi]`` that belongs to a value at ``indent``.

    Trailing blank lines and comments at or left of ``indent`` belong to what follows.
    """
    pos = hi
    while pos > lo:
        newline = fm.rfind("\n", lo, pos - 1)
        start = lo if newline < 0 else newline + 1
        line = fm[start:pos].rstrip("\r\n")
        body = line.lstrip(" ")
        if body and not (body.startswith("#") and len(line) - len(body) <= indent):
            return pos
        pos = start
    return lo


def _first_content_indent(fm: str, lo: int, hi: int) -> int | None:
    """Indent of the first non-blank, non-comment line in ``fm[lo:hi]``, or None."""
    start = _line_start(fm, lo, hi)
    if start >= hi:
        return None
    return len(fm[start:hi]) - len(fm[start:hi].lstrip(" "))


def _above_comments(fm: str, pos: int, indent: int) -> int:
    """Move an insertion point at a key line above the comment lines that introduce that key."""
    while pos > 0:
        newline = fm.rfind("\n", 0, pos - 1)
        start = newline + 1
        line = fm[start:pos].rstrip("\r\n")
        if not line.startswith(" " * indent + "#"):
            break
        pos = start
    return pos


def _line_start(fm: str, lo: int, hi: int) -> int:
    """Offset of the first non-blank, non-comment line in ``fm[lo:hi]``."""
    pos = lo
    while pos < hi:
        newline = fm.find("\n", pos, hi)
        end = hi if newline < 0 else newline + 1
        body = fm[pos:end].strip()
        if body and not body.startswith("#"):
            return pos
        pos = end
    return hi


def _group(entries: list[_Entry], path: Path | str | None, fm: str, line_offset: int) -> dict[str, _Entry]:
    out: dict[str, _Entry] = {}
    for entry in entries:
        if entry.key in out:
            raise DuplicateKeyError(
                f"duplicate key {entry.key!r} (first defined on line "
                f"{_line(fm, out[entry.key].start, line_offset)})",
                path=path,
                line=_line(fm, entry.start, line_offset),
                expected="each key once per mapping",
            )
        out[entry.key] = entry
    return out


def _line(fm: str, pos: int, line_offset: int) -> int:
    return fm.count("\n", 0, pos) + 1 + line_offset


def _strip_comment(rest: str) -> str:
    """A key line's value text without a trailing comment; only used to classify the value."""
    if rest.startswith("#"):
        return ""
    if rest[:1] in ("'", '"'):
        return rest
    cut = rest.find(" #")
    return (rest if cut < 0 else rest[:cut]).strip()


def _parse_fragment(fragment: str) -> dict[Any, Any] | None:
    """Parse a small indented mapping fragment alone; None when it is not one."""
    lines = fragment.splitlines()
    simple = [_read_flat_line(line) for line in lines]
    indents = {len(line) - len(line.lstrip(" ")) for line in lines}
    if lines and len(indents) == 1 and all(simple):
        flat = {item[0]: item[1] for item in simple if item}
        if len(flat) == len(lines):  # a duplicate key takes the slow path, which reports it
            return flat
    try:
        data = parse_yaml(fragment).data
    except GuardkitStateError:
        return None
    return data if isinstance(data, dict) else None


def _parse_line(content: str) -> tuple[Any, str] | None:
    """Value of a one-line ``key: value  # comment`` and the text after the value (the comment)."""
    simple = _read_flat_line(content)
    if simple is not None:
        return simple[1], simple[2].rstrip()
    try:
        parsed = parse_yaml(content)
    except GuardkitStateError:
        return None
    node = parsed.node
    if not isinstance(node, yaml.MappingNode) or len(node.value) != 1 or not isinstance(parsed.data, dict):
        return None
    value_node = node.value[0][1]
    suffix = content[value_node.end_mark.index :]
    if suffix.strip() and not suffix.strip().startswith("#"):
        return None
    return next(iter(parsed.data.values())), suffix.rstrip()
