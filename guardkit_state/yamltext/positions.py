"""Where each key of a frontmatter mapping sits in the text, from the strict parse's node marks.

A regular expression only knows the keys it was written for; a key with a space, a quote, a
leading digit or a non-ASCII letter would be taken for part of the value above it, and a rewrite
of that value would delete it. The parser knows every key YAML allows, so the splice takes each
key's position from its node (libyaml's ``mark.index`` counts characters, as ``str`` offsets do)
and only the extent of a value's trailing lines from the text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import yaml

from guardkit_state.yamltext.strict_yaml import MERGE_TAG

_STR_TAG = "tag:yaml.org,2002:str"


class LayoutError(Exception):
    """A layout that cannot take what is asked of it: here, a mapping whose keys cannot each be given
    a line of their own (an alias used as a key ...)."""

    def __init__(self, message: str, at: int = 0) -> None:
        super().__init__(message)
        self.at = at  # the offset it is about


def top_level_entries(fm: str, root: yaml.Node | None, *, column_0: bool = True) -> list[Entry]:
    """The entries of the document's top-level block mapping (none for an empty document).

    Raises:
        LayoutError: not a block mapping (a bare ``~``, a scalar, a flow mapping: keys added to it
            would not parse), keys that cannot be located, or (``column_0``) keys indented (a key
            added at column 0 would not parse).
    """
    if root is None:
        return []
    if not isinstance(root, yaml.MappingNode) or root.flow_style:
        raise LayoutError("it is not a block 'key: value' mapping")
    entries = entries_of(fm, root, 0, len(fm))
    if column_0 and entries and entries[0].indent != 0:
        raise LayoutError("its top-level keys are indented", entries[0].start)
    return entries


@dataclass
class Entry:
    """One ``key: value`` of a block mapping, as offsets into the YAML text.

    Attributes:
        key: the key when it is a string (plain or quoted), else None (never looked up).
        start: start of the key's line.
        key_pos: where the key (or its anchor or tag) starts on that line.
        colon: the ``:`` after the key, or -1 when it is on another line (a ``? key``).
        line_end: just after the key's line.
        end: just after the value's last line (trailing comments at or left of the key's indent
            belong to what follows).
        indent: the key's column.
        value: the value's node, or None when it is an alias (its marks are the anchor's).
        merge: True for a ``<<`` merge key.
    """

    key: str | None
    start: int
    key_pos: int
    colon: int
    line_end: int
    end: int
    indent: int
    value: yaml.Node | None
    merge: bool = False

    def key_text(self, fm: str) -> str:
        """The key's line up to its ``:``, exactly as written (indent, quotes, anchor)."""
        return fm[self.start : self.colon].rstrip(" \t")

    def anchor(self, fm: str) -> str:
        """The value's anchor (``&name``) as written, or ``""``."""
        if self.value is None:
            return ""
        pos = self.value.start_mark.index
        if fm[pos : pos + 1] != "&":
            return ""
        end = pos
        while end < len(fm) and fm[end] not in " \t\r\n":
            end += 1
        return fm[pos:end]

    def tagged(self, fm: str) -> bool:
        """True when the value carries an explicit tag (``!!str``, ``!x`` ...) after any anchor."""
        if self.value is None:
            return False
        pos = self.value.start_mark.index
        anchor = self.anchor(fm)
        if anchor:
            pos = skip_blanks(fm, pos + len(anchor))
        return fm[pos : pos + 1] == "!"


def entries_of(fm: str, node: yaml.MappingNode, lo: int, hi: int) -> list[Entry]:
    """The entries of the block mapping ``node``, whose keys all lie in ``fm[lo:hi]``.

    Raises:
        LayoutError: a key that does not start its own line at the mapping's indent.
    """
    found: list[tuple[yaml.Node, yaml.Node, int, int, int, int]] = []
    previous = lo - 1
    indent: int | None = None
    for key_node, value_node in node.value:
        pos = key_node.start_mark.index
        start = fm.rfind("\n", 0, pos) + 1
        lead = fm[start:pos].lstrip(" ")  # only a '? ' may stand between the indent and a key
        column = pos - start - len(lead)
        explicit = lead[:1] == "?" and not lead[1:].strip(" \t")
        if pos <= previous or start < lo or pos >= hi or (lead and not explicit):
            raise LayoutError(f"the key on line {key_node.start_mark.line + 1} does not start a line of its own "
                              "(an alias used as a key?)")
        if indent is not None and column != indent:
            raise LayoutError(f"the key on line {key_node.start_mark.line + 1} is not aligned with the others")
        indent = column
        key_end = key_node.end_mark.index
        # Most keys are followed by their ':' at once; blanks before it are looked past.
        colon = key_end if fm[key_end : key_end + 1] == ":" else _colon_after(fm, key_end)
        if colon < 0 and not explicit:
            raise LayoutError(f"no ':' after the key on line {key_node.start_mark.line + 1}")
        found.append((key_node, value_node, start, pos, colon, column))
        previous = pos
    entries = []
    last = len(found) - 1
    for index, (key_node, value_node, start, pos, colon, column) in enumerate(found):
        stop = found[index + 1][2] if index < last else hi
        newline = fm.find("\n", pos, stop)
        line_end = stop if newline < 0 else newline + 1
        own = value_node.start_mark.index >= (colon if colon > pos else pos)  # an alias's marks are its anchor's
        end = _content_end(fm, line_end, stop, column)
        scalar = last_block_scalar(fm, value_node) if own else None
        if scalar is not None:
            if "+" in scalar[1]:
                # The blank lines a '|+' scalar ends with are its text: what follows goes after them.
                # (Any other block scalar's end mark lies past the blank lines that follow it: they
                # separate it from what follows, and stay there when it is rewritten.)
                end = max(end, _line_end_at(fm, scalar[0].end_mark.index, stop))
        elif own and (isinstance(value_node, yaml.ScalarNode) or getattr(value_node, "flow_style", False)):
            # A quoted scalar may continue on lines that look like comments: its end mark is exact.
            end = max(end, _line_end_at(fm, value_node.end_mark.index, stop))
        tag = key_node.tag
        key = key_node.value if tag == _STR_TAG and isinstance(key_node, yaml.ScalarNode) else None
        entries.append(Entry(key, start, pos, colon, line_end, end, column, value_node if own else None,
                             merge=tag == MERGE_TAG))
    return entries


def last_block_scalar(fm: str, node: yaml.Node | None) -> tuple[yaml.ScalarNode, str] | None:
    """The block collection ``node``'s last scalar and its header (``|+``, ``>2-`` ...) when it is a
    block scalar, else None."""
    while isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and node.value and not node.flow_style:
        last = node.value[-1]
        node = last[1] if isinstance(node, yaml.MappingNode) else last
    if not isinstance(node, yaml.ScalarNode) or node.style not in ("|", ">"):
        return None
    start = node.start_mark.index
    newline = fm.find("\n", start)
    return node, fm[start : newline if newline >= 0 else len(fm)].split("#", 1)[0]


def by_key(entries: list[Entry]) -> dict[str, Entry]:
    """The entries with a string key, by key (the strict parse already refused duplicates)."""
    return {entry.key: entry for entry in entries if entry.key is not None}


def _colon_after(fm: str, pos: int) -> int:
    """Offset of the ``:`` following a key that ends at ``pos`` on the same line, else -1."""
    pos = skip_blanks(fm, pos)
    return pos if fm[pos : pos + 1] == ":" else -1


def skip_blanks(fm: str, pos: int) -> int:
    """The first offset from ``pos`` on that is no space or tab."""
    while fm[pos : pos + 1] in (" ", "\t"):
        pos += 1
    return pos


def _line_end_at(fm: str, pos: int, stop: int) -> int:
    """``pos`` when it starts a line, else the end of its line (bounded by ``stop``)."""
    if pos <= 0 or fm[pos - 1] == "\n":
        return min(pos, stop)
    newline = fm.find("\n", pos, stop)
    return stop if newline < 0 else newline + 1


# --------------------------------------------------------------------------- edits


@dataclass
class Edits:
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


# --------------------------------------------------------------------------- text helpers


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


def above_comments(fm: str, pos: int, indent: int) -> int:
    """Move an insertion point at a key line above the comment lines that introduce that key."""
    while pos > 0:
        newline = fm.rfind("\n", 0, pos - 1)
        start = newline + 1
        line = fm[start:pos].rstrip("\r\n")
        if not line.startswith(" " * indent + "#"):
            break
        pos = start
    return pos


def line_start(fm: str, lo: int, hi: int) -> int:
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


def line_of(fm: str, pos: int, line_offset: int) -> int:
    """The file line (1-based) of offset ``pos`` of the YAML text."""
    return fm.count("\n", 0, pos) + 1 + line_offset


def node_line(root: yaml.Node | None, parts: Sequence[str | int], line_offset: int = 0) -> int | None:
    """The file line (1-based) of the deepest node on the JSON path ``parts``: a key's own line in a
    mapping, an item's line in a sequence; None without a node tree (or past its first step)."""
    node, line = root, None
    for part in parts:
        if isinstance(node, yaml.MappingNode):
            pair = next(((k, v) for k, v in node.value if getattr(k, "value", None) == str(part)), None)
            if pair is None:
                break
            line, node = pair[0].start_mark.line, pair[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line
        else:
            break
    return None if line is None else int(line) + 1 + line_offset

