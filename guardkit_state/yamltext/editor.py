"""The one text-preserving YAML editor: the old text, its strict parse and the new data in, the edits
of only what differs out. Pure: text and data in, edits out.

Every writer (a task file's state, a python-frontmatter save, a feature plan) says *what* the data
becomes with its own data twin, and this editor writes the difference into the user's text:

* a changed one-line scalar is replaced in place, keeping its anchor, quoting room and trailing comment;
* a block mapping is edited key by key: a changed key's value in place, a removed key's lines taken
  out, a new key written just above the next existing key that follows it in the new data (above
  that key's own comment lines), or after the mapping's last entry (at the top level: at the end
  of the text);
* a block list that grew gets its new items appended after its last one, at its indentation; a
  list item that is a block mapping (a plan's ``tasks[3]``) is edited key by key in place;
* a flow list stays a flow list when every item is a simple word (``completed_waves: [1, 2, 3]``);
* any other change rewrites that one value whole, keeping the key as written, its anchor and the
  comment on its line. A writer may name paths that must never be rewritten whole (a task's
  ``turns``): their owner is rewritten instead. With ``keep_comments`` a rewrite that would drop a
  comment is refused rather than made.

The edits are verified by the writer (:mod:`.verify`): one strict parse of the new text, compared
type-exactly with the data, and every byte outside the edited spans unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import yaml

from guardkit_state.yamltext.positions import (
    Edits,
    Entry,
    LayoutError,
    above_comments,
    by_key,
    entries_of,
    last_block_scalar,
    line_start,
    skip_blanks,
    top_level_entries,
)
from guardkit_state.yamltext.render import (
    indent_lines,
    render_scalar,
    render_value,
    render_yaml,
    same,
)
from guardkit_state.yamltext.strict_yaml import walk_nodes

_INLINE_STYLES = (None, "", "'", '"')  # "" is plain for the C loader, None for the Python one
#: YAML's document-end line: text added after it would start a second document.
DOCUMENT_END = re.compile(r"^\.\.\.(?:[ \t].*)?\r?$", re.M)
#: The text before a list item's first key on the item's own line: indent, ``-``, blanks.
_ITEM_PREFIX = re.compile(r"[ ]*-[ \t]+\Z")
#: A scalar safe to write inside a flow list as it is (no ``,`` ``[`` ``]`` ``{`` ``}`` ``#`` ``:``).
_FLOW_SAFE = re.compile(r"[A-Za-z0-9_.\-/']+\Z")

Path_ = tuple[Any, ...]  # the keys and indexes that lead to a value


class Refusal(LayoutError):
    """A change the text's layout cannot take without losing bytes; ``at`` is the offset it is about.

    Each writer raises it as its own typed error (``FrontmatterError``, ``FeaturePlanError``).
    """


class _Wide(LayoutError):
    """A value cannot be edited in place (or, raised by a rewrite or for a ``narrow`` path, not at
    all): the value that catches it is rewritten whole instead, with this as the reason."""


@dataclass(frozen=True)
class Rewrite:
    """A value rewritten whole: where, why (None for a plain change of value), and whether it was empty."""

    path: Path_
    reason: str | None
    was_empty: bool


@dataclass
class Edited:
    """The edits that make the old text hold the new data, and the data it will then hold."""

    edits: Edits
    data: Any
    rewrites: list[Rewrite] = field(default_factory=list)


def edit_yaml(text: str, node: yaml.Node | None, old: dict[Any, Any], new: dict[Any, Any], *, newline: str,
              keep_comments: bool = False, keep_order: bool = False, narrow: Collection[Path_] = (),
              column_0: bool = False, line_offset: int = 0) -> Edited:
    """The edits that make ``text`` (whose strict parse is ``node``, reading ``old``) read as ``new``.

    Args:
        newline: the text's line ending, used for every line written.
        keep_comments: refuse a rewrite that would drop a comment (:class:`Refusal`).
        keep_order: the keys ``old`` and ``new`` share keep the text's order (a reordered mapping
            moves no line; added keys follow), and the returned data says so; otherwise ``new``'s
            order is the order the text must read in.
        narrow: paths whose non-empty value is never rewritten whole.
        column_0: refuse a top-level mapping whose keys are indented.
        line_offset: added to the text's line numbers in messages (a frontmatter starts on line 2).

    Raises:
        Refusal: a change the layout cannot take (see the module).
        GuardkitStateError: a value that cannot be written as YAML.
    """
    editor = _Editor(text, node, newline, line_offset, keep_comments, keep_order, frozenset(narrow))
    if editor.same(old, new):
        return Edited(Edits(), old)
    try:
        entries = top_level_entries(text, node, column_0=column_0)
    except LayoutError as why:
        raise Refusal(f"its keys cannot be changed one by one: {why}", why.at) from None
    try:
        data = editor.mapping(entries, old, new, entries[0].indent if entries else 0, None, ())
    except _Wide as why:
        raise Refusal(str(why), why.at) from None
    return Edited(editor.edits, data, editor.rewrites)


def _name(path: Path_) -> str:
    """``'turns'``, ``entry 3 of 'tasks'``: the value at ``path`` as messages name it."""
    if not path:
        return "the top level"
    last = path[-1]
    if isinstance(last, int):
        return f"entry {last + 1} of {_name(path[:-1])}"
    return f"'{last}'"


@dataclass
class _Editor:
    fm: str
    root: yaml.Node | None
    nl: str
    line_offset: int
    keep_comments: bool
    keep_order: bool
    narrow: frozenset[Path_]
    edits: Edits = field(default_factory=Edits)
    rewrites: list[Rewrite] = field(default_factory=list)
    newline_added: bool = False

    def same(self, a: Any, b: Any) -> bool:
        return same(a, b, ordered=not self.keep_order)

    # ----------------------------------------------------------------- mappings

    def mapping(self, entries: list[Entry], old: dict[Any, Any], new: dict[Any, Any], indent: int, end: int | None,
                path: Path_, *, item: bool = False) -> dict[Any, Any]:
        """Edit the block mapping written as ``entries`` from ``old`` to ``new``; the data it will hold.

        ``end``: where keys are added after the last entry (None: the end of the text). ``item``: the
        first entry shares its line with a list item's ``-``.
        """
        named = by_key(entries)
        if self.keep_order:
            new = {**{key: new[key] for key in old if key in new}, **{k: v for k, v in new.items() if k not in old}}
        if [key for key in new if key in old] != [key for key in old if key in new]:
            raise _Wide(f"the keys of {_name(path)} would change order", entries[0].start if entries else 0)
        first = entries[0] if item else None
        for key in old:
            if key not in new:
                entry = named.get(key)
                if entry is None:
                    raise Refusal(f"cannot delete {_name((*path, key))}: it is not written in its mapping (it comes "
                                  "from a '<<' merge)", entries[0].start if entries else 0)
                if entry is first:
                    raise _Wide(f"{_name(path)} would lose the key on its '-' line", entry.start)
                self.edits.add(entry.start, entry.end, "")
        out: dict[Any, Any] = {}
        added: dict[Any, Any] = {}
        overrides: dict[Any, Any] = {}
        for key, value in new.items():
            entry = named.get(key)
            if key not in old:
                added[key] = out[key] = value
            elif entry is None:  # a key a '<<' merge brings in: an explicit key written after it overrides it
                if not self.same(old[key], value):
                    if not any(e.merge for e in entries):
                        raise _Wide(f"{_name(path)} has a key that is not a string", entries[0].start)
                    overrides[key] = value
                out[key] = value if key in overrides else old[key]
            else:
                if added:
                    if entry is first:
                        raise _Wide(f"no key can be written above the '-' line of {_name(path)}", entry.start)
                    self.insert(above_comments(self.fm, entry.start, indent), added, indent)
                    added = {}
                out[key] = self.value(entry, old[key], value, (*path, key))
        added = {**overrides, **added}
        if added:
            self.insert(len(self.fm) if end is None else end, added, indent)
        return out

    def insert(self, at: int, data: dict[Any, Any], indent: int) -> None:
        """Write the keys of ``data`` at ``at`` (a line start), at ``indent``."""
        self.edits.add(at, at, self.line_break_at(at) + indent_lines(render_yaml(data), indent, self.nl))

    def line_break_at(self, at: int) -> str:
        """What must precede a line added at ``at``: a line break at the end of a text without a final one."""
        fm = self.fm
        if at == len(fm):
            marker = DOCUMENT_END.search(fm) if fm.startswith("...") or "\n..." in fm else None
            if marker is not None:
                raise Refusal("the text contains a YAML document-end line ('...'); nothing can be added after it",
                              marker.start())
        if at != len(fm) or not fm or fm.endswith("\n") or self.newline_added:
            return ""
        last = last_block_scalar(fm, self.root)
        if last is not None and "-" not in last[1]:  # the value keeps its final line break
            raise Refusal("the text ends inside a block scalar ('|' or '>') without a final line break: a line added "
                          "after it would change that value", len(fm))
        self.newline_added = True
        return self.nl

    # ----------------------------------------------------------------- values

    def value(self, entry: Entry, old: Any, new: Any, path: Path_) -> Any:
        """Edit one entry's value from ``old`` to ``new`` as narrowly as its layout allows; its new data."""
        if self.same(old, new):
            return old
        # What a narrow edit that fails half-way made is taken back before the value is rewritten whole.
        mark = (len(self.edits.items), len(self.rewrites), self.newline_added)
        reason: str | None = None
        try:
            narrowed = self.narrowly(entry, old, new, path)
            if narrowed is not _NO:
                return narrowed
        except _Wide as why:
            del self.edits.items[mark[0]:], self.rewrites[mark[1]:]
            self.newline_added = mark[2]
            reason = str(why)
        empty = old is None or old == {} or old == []
        if path in self.narrow and not empty:
            raise _Wide(reason or f"{_name(path)} cannot be edited in place", entry.start)
        self.rewrite(entry, new, path)
        self.rewrites.append(Rewrite(path, reason, empty))
        return new

    def narrowly(self, entry: Entry, old: Any, new: Any, path: Path_) -> Any:
        """The value edited in place (key by key, items appended or edited), or ``_NO`` for a rewrite."""
        node = entry.value
        if node is None:
            raise _Wide(f"{_name(path)} is an alias", entry.start)
        if entry.colon < 0:
            raise _Wide(f"{_name(path)} is written as a '? key' entry", entry.start)
        if entry.tagged(self.fm):
            raise _Wide(f"{_name(path)} carries a tag", entry.start)
        if isinstance(old, dict) and isinstance(new, dict) and new and isinstance(node, yaml.MappingNode):
            if node.flow_style:
                raise _Wide(f"the {_name(path)} value is written inline (flow style)", entry.start)
            children = self.children(node, entry.line_end, entry.end, path)
            return self.mapping(children, old, new, children[0].indent, children[-1].end, path)
        if isinstance(old, list) and isinstance(new, list) and isinstance(node, yaml.SequenceNode):
            if node.flow_style:
                if self.flow_list(entry, node, new):
                    return new
                raise _Wide(f"{_name(path)} is written in flow style", entry.start)
            return self.sequence(entry, node, old, new, path)
        return _NO

    def children(self, node: yaml.MappingNode, lo: int, hi: int, path: Path_, text: str | None = None) -> list[Entry]:
        """The entries of a block mapping that can be edited one by one (else :class:`_Wide`)."""
        try:
            children = entries_of(self.fm if text is None else text, node, lo, hi)
        except LayoutError as why:
            raise _Wide(f"the keys of {_name(path)} cannot be located: {why}", lo) from None
        if not children or any(child.merge for child in children):
            raise _Wide(f"{_name(path)} has a '<<' merge key", lo)
        if any(child.key is None for child in children):
            raise _Wide(f"{_name(path)} has a key that is not a string", lo)
        return children

    def flow_list(self, entry: Entry, node: yaml.SequenceNode, new: list[Any]) -> bool:
        """Rewrite a flow list (``[1, 2]``) as a flow list, when every new item is a simple scalar."""
        if entry.anchor(self.fm):
            return False
        items = [render_scalar(item) for item in new]
        if not all(item is not None and _FLOW_SAFE.match(item) for item in items):
            return False
        self.edits.add(node.start_mark.index, node.end_mark.index, "[" + ", ".join(map(str, items)) + "]")
        return True

    # ----------------------------------------------------------------- lists

    def sequence(self, entry: Entry, node: yaml.SequenceNode, old: list[Any], new: list[Any], path: Path_) -> list[Any]:
        """Edit a block list: items that are block mappings key by key, new items appended after the last."""
        if len(new) < len(old) or len(node.value) != len(old):
            raise _Wide(f"{_name(path)} would lose items", entry.start)
        out = list(new)
        for index, (was, now) in enumerate(zip(old, new, strict=False)):
            if not self.same(was, now):
                out[index] = self.item(entry, node, index, was, now, (*path, index))
        if len(new) > len(old):
            first = line_start(self.fm, entry.line_end, entry.end)
            line = self.fm[first:entry.end]
            inner = len(line) - len(line.lstrip(" "))
            if not line.startswith("-", inner):
                raise _Wide(f"{_name(path)} is not a block list", entry.start)
            rendered = indent_lines(render_yaml(new[len(old):]), inner, self.nl)
            self.edits.add(entry.end, entry.end, self.line_break_at(entry.end) + rendered)
        return out

    def item(self, owner: Entry, sequence: yaml.SequenceNode, index: int, old: Any, new: Any, path: Path_) -> Any:
        """Edit list item ``index``, a block mapping, key by key.

        The first key of a list item sits after its ``- `` on the same line; the entries are located
        in a copy of the text where that ``-`` is a blank (same length: every offset stays true).
        """
        fm = self.fm
        item = sequence.value[index]
        if not (isinstance(old, dict) and isinstance(new, dict) and new and isinstance(item, yaml.MappingNode)
                and not item.flow_style and item.value and owner.line_end <= item.start_mark.index < owner.end):
            raise _Wide(f"{_name(path)} is not a block mapping written in place", owner.start)
        key_at = item.start_mark.index
        lo = _item_start(fm, item)
        hi = _item_start(fm, sequence.value[index + 1]) if index + 1 < len(sequence.value) else owner.end
        prefix = fm[lo:key_at]
        if "\n" not in prefix and not _ITEM_PREFIX.match(prefix):
            raise _Wide(f"{_name(path)} starts with something other than '- key:' (an anchor or a tag?)", lo)
        masked = fm if "\n" in prefix else fm[:lo] + prefix.replace("-", " ") + fm[key_at:]
        children = self.children(item, lo, hi, path, masked)
        return self.mapping(children, old, new, children[0].indent, children[-1].end, path, item="\n" not in prefix)

    # ----------------------------------------------------------------- rewrites

    def rewrite(self, entry: Entry, new: Any, path: Path_) -> None:
        """Replace the value whole (in place when it is a one-line scalar), keeping the key as written."""
        if entry.colon < 0:
            raise _Wide(f"{_name(path)} is written as a '? key' entry", entry.start)
        start, end, text = _replacement(self.fm, entry, new, self.nl)
        if self.keep_comments:
            for pos, comment in comments_in(self.fm, entry, start, end):
                if comment not in text:
                    line = self.fm.count("\n", 0, pos) + 1 + self.line_offset
                    raise Refusal(f"cannot change {_name(path)} without dropping the comment on line {line}: its "
                                  "value is rewritten whole", pos)
        self.edits.add(start, end, text)


_NO: Any = object()


def _replacement(fm: str, entry: Entry, value: Any, nl: str) -> tuple[int, int, str]:
    """The span of ``entry`` to replace, and its text, to make its value ``value``.

    A one-line scalar is replaced in place (anchor and trailing comment kept); any other value is
    replaced with its whole entry, keeping the key exactly as written and the value's anchor.
    """
    node = entry.value
    anchor = entry.anchor(fm)
    # In place only when the value ends at a blank or the line's end: a quoted value followed
    # directly by more text (``''#``, which YAML reads as ``''``) is rewritten with its whole entry.
    if (isinstance(node, yaml.ScalarNode) and node.style in _INLINE_STYLES and not entry.tagged(fm)
            and node.end_mark.index <= entry.line_end
            and fm[node.end_mark.index:node.end_mark.index + 1] in ("", " ", "\t", "\r", "\n")):
        scalar = render_scalar(value)
        if scalar is not None:
            start = node.start_mark.index + len(anchor)
            if start >= node.end_mark.index:  # an empty value: ``key:`` or ``key: &a``
                return start, start, " " + scalar
            return skip_blanks(fm, start), node.end_mark.index, scalar
    return entry.start, entry.end, render_value(value, entry.key_text(fm), anchor, entry.indent, nl,
                                                _comment_after(fm, entry))


def _comment_after(fm: str, entry: Entry) -> str:
    """The comment that follows a one-line value on the key's line (with its blanks), or ``""``."""
    node = entry.value
    if node is None or entry.colon < 0:
        return ""
    if isinstance(node, yaml.ScalarNode) and node.style not in _INLINE_STYLES:
        return ""  # a block scalar: its header line is rewritten with the value
    if isinstance(node, yaml.ScalarNode) or getattr(node, "flow_style", False):
        after = min(node.end_mark.index, entry.line_end)
    else:  # a block collection starts on the next line; only an anchor may sit on the key's line
        after = skip_blanks(fm, entry.colon + 1) + len(entry.anchor(fm))
    tail = fm[after : entry.line_end].rstrip("\r\n")
    body = tail.lstrip(" \t")
    if not body.startswith("#"):
        return ""
    return tail if tail[:1] in (" ", "\t") else "  " + body


def comments_in(fm: str, entry: Entry, lo: int, hi: int) -> list[tuple[int, str]]:
    """The YAML comments in ``fm[lo:hi]`` (inside ``entry``), as ``(offset, text to line end)``.

    A ``#`` starts a comment when it follows a blank or starts a line, outside every scalar (a
    block scalar's header line is outside it: a comment may follow ``|``).
    """
    spans: list[tuple[int, int]] = [(entry.key_pos, max(entry.key_pos, entry.colon))]
    for node in walk_nodes(entry.value) if entry.value is not None else ():
        if isinstance(node, yaml.ScalarNode):
            start = node.start_mark.index
            if node.style in ("|", ">"):
                newline = fm.find("\n", start, node.end_mark.index)
                start = node.end_mark.index if newline < 0 else newline + 1
            spans.append((start, node.end_mark.index))
    found: list[tuple[int, str]] = []
    pos = fm.find("#", lo, hi)
    while pos >= 0:
        if (pos == 0 or fm[pos - 1] in " \t\n") and not any(a <= pos < b for a, b in spans):
            end = fm.find("\n", pos)
            found.append((pos, fm[pos: len(fm) if end < 0 else end].rstrip("\r")))
        pos = fm.find("#", pos + 1, hi)
    return found


def _item_start(text: str, item: yaml.Node) -> int:
    """The start of the line holding a list item's ``-`` (the item's own line without one)."""
    pos = item.start_mark.index
    back = pos - 1
    while back >= 0 and text[back] in " \t\r\n":
        back -= 1
    at = back if back >= 0 and text[back] == "-" else pos
    return text.rfind("\n", 0, at) + 1
