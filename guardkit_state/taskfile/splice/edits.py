"""The edits a splice makes: a value rewritten in place, criteria updated entry by entry, turns
appended after the last one, and the state block filled in or (the fallback) re-rendered alone.

Old values come from the strict parse, so only what changes is rendered; anchors stay where the
user put them (an anchored value rewritten keeps its ``&name``), so aliases of it keep working.
Layouts these edits do not handle raise :class:`Fallback`, and the caller re-renders the block.
"""

from __future__ import annotations

from typing import Any

import yaml

from guardkit_state.taskfile.splice.positions import (
    Edits,
    Entry,
    LayoutError,
    above_comments,
    by_key,
    entries_of,
    line_start,
)
from guardkit_state.taskfile.splice.render import (
    indent_lines,
    plain_data,
    render_scalar,
    render_value,
    render_yaml,
    same,
)
from guardkit_state.taskfile.splice.update import StateUpdate, apply_update_to_block

MISSING: Any = object()
_INLINE_STYLES = (None, "", "'", '"')  # "" is plain for the C loader, None for the Python one


class Fallback(Exception):
    """The splice cannot handle this layout; re-render the state block instead."""


def set_value(fm: str, edits: Edits, entry: Entry | None, key: str, value: Any, old: Any, indent: int, nl: str,
              *, insert_at: int) -> None:
    """Set ``key`` to ``value``: rewrite its value when it differs from ``old``, or add the key.

    A one-line scalar is replaced in place (anchor and trailing comment kept); any other value is
    replaced with its whole entry, keeping the key exactly as written and the value's anchor.
    """
    value = plain_data(value)
    if entry is None:
        edits.add(insert_at, insert_at, indent_lines(render_yaml({key: value}), indent, nl))
        return
    if old is not MISSING and same(old, value):
        return
    if entry.colon < 0:
        raise Fallback(f"'{key}' is written as a '? key' entry")
    node = entry.value
    anchor = entry.anchor(fm)
    # In place only when the value ends at a blank or the line's end: a quoted value followed
    # directly by more text (``''#``, which YAML reads as ``''``) is rewritten with its whole entry.
    if (isinstance(node, yaml.ScalarNode) and node.style in _INLINE_STYLES and not entry.tagged(fm)
            and node.end_mark.index <= entry.line_end and fm[node.end_mark.index:node.end_mark.index + 1]
            in ("", " ", "\t", "\r", "\n")):
        scalar = render_scalar(value)
        if scalar is not None:
            start = node.start_mark.index + len(anchor)
            if start >= node.end_mark.index:  # an empty value: ``key:`` or ``key: &a``
                edits.add(start, start, " " + scalar)
            else:
                start = _skip_blanks(fm, start)
                edits.add(start, node.end_mark.index, scalar)
            return
    edits.add(entry.start, entry.end, render_value(value, entry.key_text(fm), anchor, entry.indent, nl,
                                                   _comment_after(fm, entry)))


def splice_block(fm: str, edits: Edits, block: Entry, old: dict[str, Any] | None, update: StateUpdate,
                 nl: str) -> None:
    """Add the edits ``update`` makes to the state block ``block`` (whose data is ``old``)."""
    node = block.value
    if node is None:
        raise Fallback(f"'{block.key}' is an alias")
    if block.tagged(fm):
        raise Fallback(f"'{block.key}' carries a tag")
    if block.is_null() or (isinstance(node, yaml.MappingNode) and node.flow_style and not node.value):
        edits.add(block.start, block.end, render_value(apply_update_to_block(old, update), block.key_text(fm),
                                                       block.anchor(fm), 0, nl, _comment_after(fm, block)))
        return
    if not block.is_block(yaml.MappingNode):
        raise Fallback(f"the '{block.key}' value is written inline (flow style)")
    assert isinstance(node, yaml.MappingNode) and old is not None
    children = _entries(fm, node, block, "the state block")
    named = by_key(children)
    indent = children[0].indent
    # New keys go in front of criteria/turns, like GuardKit's own key order.
    anchors = [above_comments(fm, named[k].start, indent) for k in ("criteria", "turns") if k in named]
    scalar_at = min(anchors) if anchors else block.end
    for key, value in update.block_scalars.items():
        set_value(fm, edits, named.get(key), key, value, old.get(key, MISSING), indent, nl, insert_at=scalar_at)
    if update.criteria is not None:
        turns = named.get("turns")
        _set_criteria(fm, edits, named.get("criteria"), old.get("criteria", MISSING), dict(update.criteria),
                      indent, nl, insert_at=above_comments(fm, turns.start, indent) if turns else block.end)
    if update.append_turns:
        _append_turns(fm, edits, named.get("turns"), update.append_turns, indent, nl, insert_at=block.end)


def rerender_block(fm: str, block: Entry, old: dict[str, Any] | None, update: StateUpdate, nl: str) -> str:
    """The fallback: the whole state block rendered from its data (key spelling and anchor kept)."""
    return render_value(apply_update_to_block(old, update), block.key_text(fm), block.anchor(fm), 0, nl)


def _entries(fm: str, node: yaml.MappingNode, owner: Entry, what: str) -> list[Entry]:
    try:
        children = entries_of(fm, node, owner.line_end, owner.end)
    except LayoutError as why:
        raise Fallback(f"{what}: {why}") from None
    if not children or any(child.merge for child in children):
        raise Fallback(f"{what} has a '<<' merge key")
    return children


def _set_criteria(fm: str, edits: Edits, entry: Entry | None, old: Any, desired: dict[str, str], indent: int,
                  nl: str, *, insert_at: int) -> None:
    """Create the ``criteria`` map, or rewrite/add/remove only the entries that differ."""
    if entry is None:
        if desired:
            edits.add(insert_at, insert_at, indent_lines(render_yaml({"criteria": desired}), indent, nl))
        return
    if same(old, desired):
        return
    if entry.value is None or entry.colon < 0:
        raise Fallback("'criteria' is an alias or a '? key' entry")
    node = entry.value
    if not desired or not entry.is_block(yaml.MappingNode) or entry.tagged(fm):
        edits.add(entry.start, entry.end, render_value(desired, entry.key_text(fm), entry.anchor(fm), indent, nl,
                                                       _comment_after(fm, entry)))
        return
    assert isinstance(node, yaml.MappingNode) and isinstance(old, dict)
    lines = _entries(fm, node, entry, "'criteria'")
    current = [line.key for line in lines]
    kept = [key for key in current if key in desired]
    added = [key for key in desired if key not in current]
    if None in current or list(desired) != kept + added:
        # Unusual keys, or an order the entry-by-entry edit would not produce: rewrite the map.
        edits.add(entry.start, entry.end, render_value(desired, entry.key_text(fm), entry.anchor(fm), indent, nl,
                                                       _comment_after(fm, entry)))
        return
    for line in lines:
        assert line.key is not None
        if line.key not in desired:
            edits.add(line.start, line.end, "")
        else:
            set_value(fm, edits, line, line.key, desired[line.key], old.get(line.key, MISSING), line.indent, nl,
                      insert_at=entry.end)
    if added:
        edits.add(entry.end, entry.end, indent_lines(render_yaml({k: desired[k] for k in added}), lines[0].indent, nl))


def _append_turns(fm: str, edits: Edits, entry: Entry | None, turns: list[dict[str, Any]], indent: int, nl: str,
                  *, insert_at: int) -> None:
    """Append rendered turn entries after the last item of ``turns`` (matching its indent)."""
    items = render_yaml(plain_data(turns))
    if entry is None:
        edits.add(insert_at, insert_at, indent_lines("turns:\n", indent, nl) + indent_lines(items, indent, nl))
        return
    node = entry.value
    if node is None or entry.colon < 0 or entry.tagged(fm):
        raise Fallback("'turns' is an alias, a tagged value or a '? key' entry")
    if entry.is_null() or (isinstance(node, yaml.SequenceNode) and node.flow_style and not node.value):
        # 'turns: []' becomes a block list, items at the key's indent like GuardKit writes them.
        edits.add(entry.start, entry.end, render_value(plain_data(turns), entry.key_text(fm), entry.anchor(fm),
                                                       indent, nl, _comment_after(fm, entry)))
        return
    if not entry.is_block(yaml.SequenceNode):
        raise Fallback("'turns' is written in flow style or is not a list")
    first = line_start(fm, entry.line_end, entry.end)
    inner = len(fm[first:entry.end]) - len(fm[first:entry.end].lstrip(" "))
    if not fm.startswith("-", first + inner):
        raise Fallback("'turns' is not a block list")
    edits.add(entry.end, entry.end, indent_lines(items, inner, nl))


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
        after = _skip_blanks(fm, entry.colon + 1) + len(entry.anchor(fm))
    tail = fm[after : entry.line_end].rstrip("\r\n")
    body = tail.lstrip(" \t")
    if not body.startswith("#"):
        return ""
    return tail if tail[:1] in (" ", "\t") else "  " + body


def _skip_blanks(fm: str, pos: int) -> int:
    while fm[pos : pos + 1] in (" ", "\t"):
        pos += 1
    return pos
