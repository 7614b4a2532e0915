"""Saving a python-frontmatter post into the text it was loaded from, changing only what changed.

The post's metadata is compared with the strict reading of the original text key by key: an
unchanged key keeps its lines byte for byte, a changed one-line scalar is replaced in place (its
anchor and trailing comment kept), a changed nested mapping is edited key by key the same way, a
list that only grew gets its new items appended, and any other changed value is re-rendered
alone, keeping the key as written. Deleted keys lose their lines; added keys are appended at the
end of their mapping. A rewrite that would drop a comment is refused rather than made.

Every new text is read back with the same strict reader and compared with the data it must hold
(key order included), its delimiters and body checked, before it is returned.
See ``docs/python-frontmatter.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from guardkit_state.errors import FrontmatterError, WriteVerificationError
from guardkit_state.taskfile.frontmatter import (
    DOCUMENT_END,
    ParsedFrontmatter,
    parse_frontmatter,
    refuse_look_alike_frontmatter,
)
from guardkit_state.taskfile.splice.edits import Fallback, set_value
from guardkit_state.taskfile.splice.positions import (
    Edits,
    Entry,
    LayoutError,
    by_key,
    entries_of,
    line_of,
    line_start,
    top_level_entries,
)
from guardkit_state.taskfile.splice.render import indent_lines, plain_data, render_yaml
from guardkit_state.taskfile.splice.verify import first_difference, read_back


@dataclass(frozen=True)
class LoadedText:
    """A text a handler loaded: its exact characters and their strict reading."""

    text: str
    parsed: ParsedFrontmatter
    whole: bool = True  # False when only the stripped text python-frontmatter handed out is known


def equal(a: Any, b: Any) -> bool:
    """Data equality that tells ``1`` from ``True`` and ``1.0``, ``0.0`` from ``-0.0``, treats NaN as
    equal to itself, and ignores key order (a reordered mapping moves no line)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(equal(a[key], b[key]) for key in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return bool(a == b)


# --------------------------------------------------------------------------- the whole text


def save_text(loaded: LoadedText, metadata: dict[str, Any], content: str, *, path: Path | str | None = None) -> str:
    """``loaded``'s text holding ``metadata`` and ``content``, changed only where they differ.

    Raises:
        FrontmatterError: a change the text's layout cannot take without losing bytes.
        WriteVerificationError: the new text would not read back as ``metadata`` and ``content``.
    """
    old, new = loaded.parsed, plain_data(metadata)
    split = old.split
    nl = split.newline
    if not split.has_frontmatter:
        if not new:
            return _verified(_keep_around(split.bom + split.body, content, nl), {}, None, path)
        refuse_look_alike_frontmatter(split.body, path)
        return _created(split.bom, new, _keep_around(split.body, content.removeprefix(split.bom), nl), nl, path)
    edits, intent = frontmatter_edits(old, new, path=path)
    yaml_text = edits.apply(split.yaml_text)
    body = _keep_around(split.body, content, nl)
    # A frontmatter closed at the very end of the text gets a line break before a body that is now there.
    closing = split.closing if not body or split.closing.endswith("\n") else split.closing + nl
    text = split.prefix + yaml_text + closing + body
    if text == loaded.text:
        return text
    return _verified(text, intent, (split.prefix, yaml_text, closing, body), path, aliased=old.aliased)


def fresh_text(metadata: dict[str, Any], content: str) -> str:
    """A new text for a post that was not loaded from one: python-frontmatter's layout, read back strictly."""
    new = plain_data(metadata)
    body = content if not content or content.endswith("\n") else content + "\n"
    if not new:
        return _verified(body, {}, None, None)
    return _created("", new, body, "\n", None)


def _created(bom: str, data: dict[str, Any], body: str, nl: str, path: Path | str | None) -> str:
    """A new frontmatter holding ``data`` above ``body``."""
    yaml_text = indent_lines(render_yaml(data), 0, nl)
    prefix, closing = bom + "---" + nl, "---" + nl
    return _verified(prefix + yaml_text + closing + body, data, (prefix, yaml_text, closing, body), path)


def _keep_around(original: str, content: str, nl: str) -> str:
    """``original`` with its stripped core replaced by ``content``, the whitespace around it kept.

    python-frontmatter strips the body it hands out, so an unchanged ``content`` is the core: the
    original is returned as it was. New content takes the file's line ending.
    """
    core = original.strip()
    if core.replace("\r\n", "\n") == content:
        return original
    if nl == "\r\n":
        content = content.replace("\r\n", "\n").replace("\n", "\r\n")
    if not core:  # a whitespace-only body: the new content follows it, ending its last line
        return original + content + (nl if content and not content.endswith("\n") else "")
    lead = original[: len(original) - len(original.lstrip())]
    trail = original[len(original.rstrip()):]
    return lead + content + trail


def _verified(text: str, intent: dict[str, Any], parts: tuple[str, str, str, str] | None,
              path: Path | str | None, *, aliased: bool = False) -> str:
    """``text`` once its strict reading holds exactly ``intent`` and splits into ``parts`` (prefix,
    YAML, closing line, body), or has no frontmatter when ``parts`` is None."""
    new = read_back(text, partial(parse_frontmatter, path=path), path)
    split = new.split
    found = (split.prefix, split.yaml_text, split.closing, split.body) if split.has_frontmatter else None
    if found != parts:
        raise WriteVerificationError("the new text would not split at the frontmatter's delimiter lines as "
                                     "written; nothing was written", path=path)
    pointer = first_difference(intent, new.data)
    if pointer is not None:
        hint = " (a YAML alias reads as its anchored value, which changed)" if aliased else ""
        raise WriteVerificationError(f"the new text would not read back as the post's metadata{hint}; "
                                     "nothing was written", path=path, pointer=pointer)
    return text


# --------------------------------------------------------------------------- the frontmatter


@dataclass
class _Context:
    fm: str
    nl: str
    line_offset: int
    path: Path | str | None
    edits: Edits

    def line(self, pos: int) -> int:
        return line_of(self.fm, pos, self.line_offset)


def frontmatter_edits(old: ParsedFrontmatter, new: dict[str, Any], *,
                      path: Path | str | None = None) -> tuple[Edits, dict[str, Any]]:
    """The edits that make ``old``'s YAML text hold ``new``, and the data it will then hold.

    The data is ``new`` with the old key order kept and added keys after the old ones, as the
    text will be read back.

    Raises:
        FrontmatterError: a change that cannot be made without losing bytes (see the module).
    """
    split = old.split
    ctx = _Context(split.yaml_text, split.newline, split.line_offset, path, Edits())
    if equal(old.data, new):
        return ctx.edits, old.data
    try:
        entries = top_level_entries(ctx.fm, old.node, column_0=False)
    except LayoutError as why:
        raise FrontmatterError(f"the frontmatter's keys cannot be changed one by one: {why}", path=path,
                               line=ctx.line(why.at), expected="one 'key: value' per line") from None
    indent = entries[0].indent if entries else 0
    intent = _edit_mapping(ctx, entries, old.data, new, indent, len(ctx.fm))
    end_marker = DOCUMENT_END.search(ctx.fm)
    if end_marker is not None and any(start == len(ctx.fm) for start, *_ in ctx.edits.items):
        # Keys appended after YAML's document-end marker would start a second document.
        raise FrontmatterError("the frontmatter contains a YAML document-end line ('...'); keys cannot be "
                               "appended after it", path=path, line=ctx.line(end_marker.start()),
                               expected="no '...' line inside the frontmatter")
    return ctx.edits, intent


def _edit_mapping(ctx: _Context, entries: list[Entry], old: dict[Any, Any], new: dict[Any, Any], indent: int,
                  append_at: int) -> dict[Any, Any]:
    """Edit the block mapping written as ``entries`` from ``old`` to ``new``; return the data it will hold."""
    named = by_key(entries)
    out: dict[Any, Any] = {}
    appended: dict[Any, Any] = {}
    for key, old_value in old.items():
        entry = named.get(key)
        if key not in new:
            if entry is None:
                raise FrontmatterError(f"cannot delete {key!r}: it is not written in its mapping (it comes from "
                                       "a '<<' merge)", path=ctx.path, expected="a key written as 'key: value'")
            ctx.edits.add(entry.start, entry.end, "")
        elif entry is None:
            # A key a '<<' merge brings in: an explicit key written after it overrides it in place.
            if not equal(old_value, new[key]):
                appended[key] = new[key]
            out[key] = new[key] if key in appended else old_value
        else:
            out[key] = _edit_value(ctx, entry, key, old_value, new[key], indent, append_at)
    added = {key: value for key, value in new.items() if key not in old}
    appended.update(added)
    out.update(added)
    if appended:
        lead = ctx.nl if append_at == len(ctx.fm) and ctx.fm and not ctx.fm.endswith("\n") else ""
        ctx.edits.add(append_at, append_at, lead + indent_lines(render_yaml(appended), indent, ctx.nl))
    return out


def _edit_value(ctx: _Context, entry: Entry, key: str, old: Any, new: Any, indent: int, append_at: int) -> Any:
    """Edit one entry's value from ``old`` to ``new`` as narrowly as its layout allows."""
    if equal(old, new):
        return old
    if isinstance(old, dict) and isinstance(new, dict) and new:
        children = _children(ctx, entry)
        if children is not None:
            return _edit_mapping(ctx, children, old, new, children[0].indent, entry.end)
    if isinstance(old, list) and isinstance(new, list) and len(new) > len(old) \
            and all(equal(a, b) for a, b in zip(old, new, strict=False)):
        items_indent = _block_items_indent(ctx, entry)
        if items_indent is not None:
            ctx.edits.add(entry.end, entry.end, indent_lines(render_yaml(new[len(old):]), items_indent, ctx.nl))
            return [*old, *new[len(old):]]
    _rewrite(ctx, entry, key, old, new, indent, append_at)
    return new


def _children(ctx: _Context, entry: Entry) -> list[Entry] | None:
    """The entries of a block mapping value that can be edited one by one, else None."""
    node = entry.value
    if not isinstance(node, yaml.MappingNode) or node.flow_style or entry.colon < 0 or entry.tagged(ctx.fm):
        return None
    try:
        children = entries_of(ctx.fm, node, entry.line_end, entry.end)
    except LayoutError:
        return None
    if not children or any(child.merge or child.key is None for child in children):
        return None
    return children


def _block_items_indent(ctx: _Context, entry: Entry) -> int | None:
    """The column of the ``-`` of a block list's items, when new items can be appended after them."""
    node = entry.value
    if not isinstance(node, yaml.SequenceNode) or node.flow_style or not node.value or entry.colon < 0 \
            or entry.tagged(ctx.fm) or entry.end <= entry.line_end:
        return None
    first = line_start(ctx.fm, entry.line_end, entry.end)
    line = ctx.fm[first:entry.end]
    column = len(line) - len(line.lstrip(" "))
    return column if line.startswith("-", column) else None


def _rewrite(ctx: _Context, entry: Entry, key: str, old: Any, new: Any, indent: int, append_at: int) -> None:
    """Replace the value (in place when it is a one-line scalar), refusing to drop a comment."""
    edits = Edits()
    try:
        set_value(ctx.fm, edits, entry, key, new, old, indent, ctx.nl, insert_at=append_at)
    except Fallback as why:
        raise FrontmatterError(f"cannot change {key!r}: {why}", path=ctx.path, line=ctx.line(entry.start),
                               expected="'key: value'") from None
    for start, end, _, text in edits.items:
        for pos, comment in comments_in(ctx.fm, entry, start, end):
            if comment not in text:
                raise FrontmatterError(
                    f"cannot change {key!r} without dropping the comment on line {ctx.line(pos)}: its value is "
                    "rewritten whole", path=ctx.path, line=ctx.line(pos),
                    fix="move or remove the comment by hand first")
        ctx.edits.add(start, end, text)


def comments_in(fm: str, entry: Entry, lo: int, hi: int) -> list[tuple[int, str]]:
    """The YAML comments in ``fm[lo:hi]`` (inside ``entry``), as ``(offset, text to line end)``.

    A ``#`` starts a comment when it follows a blank or starts a line, outside every scalar (a
    block scalar's header line is outside it: a comment may follow ``|``).
    """
    spans: list[tuple[int, int]] = [(entry.key_pos, max(entry.key_pos, entry.colon))]
    stack: list[yaml.Node] = [entry.value] if entry.value is not None else []
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            start = node.start_mark.index
            if node.style in ("|", ">"):
                newline = fm.find("\n", start, node.end_mark.index)
                start = node.end_mark.index if newline < 0 else newline + 1
            spans.append((start, node.end_mark.index))
        elif isinstance(node, yaml.MappingNode):
            stack.extend(part for pair in node.value for part in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    found: list[tuple[int, str]] = []
    pos = fm.find("#", lo, hi)
    while pos >= 0:
        if (pos == 0 or fm[pos - 1] in " \t\n") and not any(a <= pos < b for a, b in spans):
            end = fm.find("\n", pos)
            found.append((pos, fm[pos: len(fm) if end < 0 else end].rstrip("\r")))
        pos = fm.find("#", pos + 1, hi)
    return found
