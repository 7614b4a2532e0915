"""A write is verified before it lands: the new text is read back and compared with the intent.

The new text is read with the same strict reader as any task file, then checked: every
top-level key outside the state block equal by value (type-exact: ``1``, ``True`` and ``1.0``
differ) and in the same order as before, apart from the keys the update sets; the state block
equal to :func:`apply_update_to_block` of the old one; the bytes outside the edited spans and the
markdown body identical. Any mismatch raises :class:`WriteVerificationError` naming the file and
the first differing key, before anything is written. A key elsewhere that is a YAML alias of a
value the update changes would change with it, so such a write is refused too, and says why.

Reading back the whole frontmatter costs as much as the rest of a turn on a long history, so
when the old text has no alias (nothing in it is reached twice) the recorded turns are left out of
what is read back (all of them when new turns follow, else all but the last): every byte outside
the edited spans is shown identical first, the left-out lines are whole items of a block sequence
that no edit touches (such items read the same without the ones before them, when the text after
them opens an item at their dash's column), and the rest of the frontmatter must read as the intent
without them. The top-level entries above the state block, when no edit falls among them, are read
back as blank comment lines of the same lengths (a block mapping's entries read the same without
their neighbours when a key at column 0 follows them at once; none may repeat their keys). The node
tree of that reading, its marks moved to where they are in the new text, is what the next write
locates its keys from, so a loop parses a task file in full once, when it reads it. Whatever that
shortcut cannot confirm is read back in full.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import Any

import yaml

from guardkit_state.errors import GuardkitStateError, WriteVerificationError
from guardkit_state.taskfile.frontmatter import (
    FrontmatterSplit,
    ParsedFrontmatter,
    parse_frontmatter,
    split_frontmatter,
)
from guardkit_state.taskfile.splice.layout import Edits, line_of
from guardkit_state.taskfile.splice.render import plain_data
from guardkit_state.taskfile.splice.update import StateUpdate, apply_update_to_block
from guardkit_state.taskfile.strict_yaml import MERGE_TAG, construct_with, parse_yaml

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_ABSENT = object()


def verify_write(old: ParsedFrontmatter, new_text: str, update: StateUpdate, *, path: Path | str | None,
                 edits: Edits | None, allowed: list[tuple[int, int]]) -> ParsedFrontmatter:
    """The strict reading of ``new_text`` once it is shown to be ``old`` with ``update`` applied.

    Its ``node`` is None when only the edited spans had to be read (see the module's docstring).
    ``edits`` are the replacements made on the old YAML text (None when a frontmatter was created)
    and ``allowed`` the spans of the old YAML text they may touch.

    Raises:
        WriteVerificationError: the new text does not parse, or differs from the intent.
    """
    if edits is not None and not old.aliased:
        confirmed = _verify_pruned(old, new_text, update, edits, allowed, path)
        if confirmed is not None:
            return confirmed
    try:
        new = parse_frontmatter(new_text, path=path)
    except GuardkitStateError as exc:
        raise WriteVerificationError(f"the new text does not parse ({exc.message}); nothing was written",
                                     path=path, line=exc.line, expected="a text the strict reader accepts") from exc
    if new.split.body != old.split.body:
        raise WriteVerificationError("the update would change the markdown body; nothing was written",
                                     path=path, expected="the body after the closing '---' byte for byte")
    pointer = first_difference(expected_data(old, update), new.data)
    if pointer is not None:
        raise WriteVerificationError(f"the new text would change {pointer}, which the update does not set"
                                     f"{_alias_hint(old, update, new.data)}; nothing was written",
                                     path=path, pointer=pointer,
                                     expected="only the state block and the keys the update sets changed")
    if edits is not None:
        _check_bytes(old.split, new.split, edits, allowed, path)
    return new


def _alias_hint(old: ParsedFrontmatter, update: StateUpdate, actual: dict[str, Any]) -> str:
    """Why a key outside the update changed, when the reason is a YAML alias of a changed value."""
    if not old.aliased or first_difference(expected_data(old, update, follow_aliases=True), actual) is not None:
        return ""
    return (" (it is a YAML alias of a value the update changes: replace the alias with the value itself, "
            "or remove the anchor, to record turns)")


def _verify_pruned(old: ParsedFrontmatter, new_text: str, update: StateUpdate, edits: Edits,
                   allowed: list[tuple[int, int]], path: Path | str | None) -> ParsedFrontmatter | None:
    """The new text's reading when its frontmatter, less the turns recorded before, confirms it, else None.

    The result carries the data expected and a node tree located in the new text (see
    :func:`_located`), so the next write splices without parsing the whole file again.
    """
    root = old.node
    try:
        split = split_frontmatter(new_text, path=path)
    except GuardkitStateError:
        return None
    if not isinstance(root, yaml.MappingNode) or split.body != old.split.body or not split.has_frontmatter:
        return None
    try:
        _check_bytes(old.split, split, edits, allowed, path)
    except WriteVerificationError:
        return None  # the full read names the first differing key, which says more
    cut = _history_cut(old, edits)
    fm = split.yaml_text
    lo = hi = left_out = 0
    if cut is not None:
        lo, hi, left_out = _moved(cut[0], edits), _moved(cut[1], edits, before_inserts=True), cut[2]
    head = _head(old, edits)
    text = fm[:lo] + fm[hi:]
    if head is not None:  # the untouched entries above the state block, read as blank comment lines
        text = _blanked(text[:head.end]) + text[head.end:]
    try:
        pruned = parse_yaml(text, path=path)
    except GuardkitStateError:
        return None
    expected = expected_data(old, update)
    wanted: dict[str, Any] | None = _less_turns(old, expected, left_out)
    if head is not None and wanted is not None:
        wanted = head.without(wanted, old, pruned.data)
    if wanted is None or not isinstance(pruned.node, yaml.MappingNode) or pruned.aliased or \
            (head is not None and not head.followed_by(pruned.node)) or \
            first_difference(wanted, pruned.data) is not None:
        return None
    node = _located(old, pruned.node, fm, lo, hi)
    if node is not None and head is not None:
        node.value[0:0] = head.pairs  # their marks stand: no edit comes before them
        node.start_mark = root.start_mark
    return None if node is None else ParsedFrontmatter(expected, split, node)


@dataclass(frozen=True)
class _Head:
    """The top-level entries above the state block, when no edit falls among them: they are read
    back as blank comment lines of the same lengths (every offset after them stays where it is)."""

    end: int  # where the state block's key line starts (the same in the old and the new text)
    keys: frozenset[str]
    pairs: list[tuple[yaml.Node, yaml.Node]]

    def without(self, wanted: dict[str, Any], old: ParsedFrontmatter, read: Any) -> dict[str, Any] | None:
        """``wanted`` less these entries, or None when the update changes one of them or the rest of
        the text repeats one of their keys (which only a full read can judge)."""
        if not isinstance(read, dict) or any(key in self.keys for key in read):
            return None
        if any(wanted.get(key, _ABSENT) is not old.data[key] and
               first_difference(wanted.get(key, _ABSENT), old.data[key]) is not None for key in self.keys):
            return None
        return {key: value for key, value in wanted.items() if key not in self.keys}

    def followed_by(self, root: yaml.MappingNode) -> bool:
        """True when the text read after these entries opens with a key at column 0 right where they
        end: only then do they read as before (a line indented under the last of them, or a blank
        line after its '|+' scalar, would become part of its value in a full read)."""
        return not root.flow_style and bool(root.value) and root.value[0][0].start_mark.index == self.end


def _head(old: ParsedFrontmatter, edits: Edits) -> _Head | None:
    """The :class:`_Head` of ``old`` for these edits, else None (keys not plain strings at column 0,
    a merge key, an edit above the state block)."""
    root, key = old.node, old.state_key
    if not isinstance(root, yaml.MappingNode) or root.flow_style or key is None or len(root.value) != len(old.data):
        return None
    index = next((i for i, (k, _) in enumerate(root.value) if isinstance(k, yaml.ScalarNode) and k.value == key), 0)
    pairs = root.value[:index]
    names = list(old.data)[:index]
    if not pairs or any(not isinstance(k, yaml.ScalarNode) or k.tag == MERGE_TAG or k.start_mark.column != 0 or
                        k.value != name for (k, _), name in zip(pairs, names, strict=True)):
        return None
    end = root.value[index][0].start_mark.index
    fm = old.split.yaml_text
    if root.value[index][0].start_mark.column != 0 or any(start < end for start, _, _, _ in edits.items):
        return None
    return _Head(end, frozenset(names), list(pairs)) if fm[:end].endswith("\n") else None


# A line's text, up to any character YAML reads as a line break.
_LINE_TEXT = re.compile("[^\r\n\x85\u2028\u2029]+")


@functools.lru_cache(maxsize=16)  # a loop blanks the same lines above the state block every turn
def _blanked(text: str) -> str:
    """``text`` as comment lines of the same lengths and breaks: it reads as nothing at all."""
    return _LINE_TEXT.sub(lambda line: "#" + " " * (len(line.group()) - 1), text)


def _history_cut(old: ParsedFrontmatter, edits: Edits) -> tuple[int, int, int] | None:
    """The lines of recorded turns left out of the read-back, and how many turns they hold, else None.

    A block sequence's items read the same without the ones before them, and these lines are
    shown byte-identical: they are most of a long history, so they are left out of what is read.
    When new turns are appended after them, every recorded turn is left out (the new ones keep
    the list a list); otherwise every one but the last.
    """
    span = _recorded_turns_span(old, edits)
    turns = _child_node(_state_node(old), "turns")
    if span is None or not isinstance(turns, yaml.SequenceNode):
        return None
    fm, lo = old.split.yaml_text, span[0]
    # Counted in the data: a tree located by the last write holds only the turns it read.
    recorded = len(old.data[old.state_key]["turns"]) if old.state_key is not None else 0
    if recorded and any(start == end == span[1] and text for start, end, _, text in edits.items):
        # The left-out turns read as before only when what follows them opens an item at their
        # dash's column: a line indented more would continue the last of them in a full read, and
        # a blank line would lengthen its '|+' scalar.
        following = "".join(text for start, end, _, text in sorted(edits.items) if start == end == span[1])
        dash = fm[lo:turns.start_mark.index] + "-"
        if not (following.startswith(dash) and following[len(dash):len(dash) + 1] in (" ", "\r", "\n")):
            return None
        return lo, span[1], recorded
    last = turns.value[-1].start_mark.index
    hi = fm.rfind("\n", 0, last) + 1
    # An item's mark is its content's, after the dash: only '- ' may stand before it on its line.
    touched = any(start <= hi and end >= lo for start, end, _, _ in edits.items)
    if hi <= lo or fm[hi:last].replace(" ", "") not in ("", "-") or touched:
        return None
    return lo, hi, recorded - 1


def _moved(pos: int, edits: Edits, *, before_inserts: bool = False) -> int:
    """Where the old offset ``pos`` (outside every edit) is in the new text: after what was
    inserted exactly there, or (``before_inserts``) before it."""
    return pos + sum(len(text) - (end - start) for start, end, _, text in edits.items
                     if end <= pos and not (before_inserts and start == end == pos))


def _less_turns(old: ParsedFrontmatter, expected: dict[str, Any], left_out: int) -> dict[str, Any]:
    """``expected`` as the pruned text reads: without the ``left_out`` recorded turns."""
    key = old.state_key
    if not left_out or key is None:
        return expected
    block = expected[key]
    return {**expected, key: {**block, "turns": block["turns"][left_out:]}}


def _located(old: ParsedFrontmatter, root: yaml.MappingNode, fm: str, lo: int, hi: int) -> yaml.MappingNode | None:
    """``root``, parsed from ``fm`` less ``fm[lo:hi]``, with every mark moved to where it is in ``fm``.

    The turns sequence starts where its first item does (not the first item read), so the next
    write finds the recorded turns' lines again.
    """
    if hi > lo:
        _shift_marks(root, lo, hi - lo, fm.count("\n", lo, hi))
        key = old.state_key
        block = _child_node(root, key) if key is not None else None
        turns = _child_node(block, "turns") if isinstance(block, yaml.MappingNode) else None
        if not isinstance(turns, yaml.SequenceNode) or not turns.value:
            return None
        first = lo
        while first < hi and fm[first] == " ":
            first += 1
        turns.start_mark = yaml.Mark(turns.start_mark.name, first, fm.count("\n", 0, first),
                                     first - (fm.rfind("\n", 0, first) + 1), None, 0)
    return root


def _shift_marks(root: yaml.Node, lo: int, shift: int, lines: int) -> None:
    """Move every mark at or after ``lo`` by ``shift`` characters and ``lines`` lines (the tree was
    read without aliases: each node is reached once). A node that ends before ``lo`` holds no such
    mark, nor do its children: they are passed over."""
    stack = [root]
    while stack:
        node = stack.pop()
        end = node.end_mark
        if end.index < lo:
            continue
        node.end_mark = yaml.Mark(end.name, end.index + shift, end.line + lines, end.column, None, 0)
        start = node.start_mark
        if start.index >= lo:
            node.start_mark = yaml.Mark(start.name, start.index + shift, start.line + lines, start.column, None, 0)
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack += (key, value)
        elif isinstance(node, yaml.SequenceNode):
            stack += node.value


def _recorded_turns_span(old: ParsedFrontmatter, edits: Edits) -> tuple[int, int] | None:
    """The lines of the turns already recorded, when no edit falls inside them, else None.

    Those lines are most of a long history and are shown byte-identical, so they are left out of
    what is read back: a block sequence's items read the same without the ones before them.
    """
    block = _state_node(old)
    turns = _child_node(block, "turns") if block is not None else None
    if not isinstance(turns, yaml.SequenceNode) or turns.flow_style or not turns.value:
        return None
    fm = old.split.yaml_text
    lo = fm.rfind("\n", 0, turns.start_mark.index) + 1
    hi = turns.end_mark.index
    if hi <= lo or fm[hi - 1] != "\n" or fm[lo:turns.start_mark.index].strip(" "):
        return None
    if any(start < hi and end > lo and not (start == end == hi) for start, end, _, _ in edits.items):
        return None
    return lo, hi


def _state_node(old: ParsedFrontmatter) -> yaml.MappingNode | None:
    key = old.state_key
    node = _child_node(old.node, key) if key is not None else None
    return node if isinstance(node, yaml.MappingNode) and not node.flow_style else None


def _child_node(node: yaml.Node | None, name: str) -> yaml.Node | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    for key, value in node.value:
        if isinstance(key, yaml.ScalarNode) and key.value == name and key.tag != MERGE_TAG:
            return value if isinstance(value, yaml.Node) else None
    return None


def expected_data(old: ParsedFrontmatter, update: StateUpdate, *, follow_aliases: bool = False) -> dict[str, Any]:
    """The frontmatter data ``update`` must produce from ``old`` (key order included).

    Keys outside the update keep their old values. With ``follow_aliases`` an alias of a changed
    value is read as that value's new state (what YAML would read): used only to explain a refusal.
    """
    state_key = old.state_key or update.key
    block = old.data.get(state_key)
    new_block = apply_update_to_block(block if isinstance(block, dict) else None, update) \
        if update.touches_state else _ABSENT
    top = {key: plain_data(value) for key, value in update.top_level.items()}
    changed = dict(top) if new_block is _ABSENT else {**top, state_key: new_block}
    data = _follow_aliases(old, changed) if follow_aliases and old.aliased and changed else old.data
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key == state_key:
            # New top-level keys are written just above the state block.
            out.update((k, v) for k, v in top.items() if k not in data)
            out[key] = value if new_block is _ABSENT else new_block
        else:
            out[key] = top.get(key, value)
    out.update((k, v) for k, v in top.items() if k not in out)
    if new_block is not _ABSENT and state_key not in out:
        out[state_key] = new_block
    return out


def first_difference(expected: Any, actual: Any, pointer: str = "$") -> str | None:
    """JSON path of the first place where ``actual`` differs from ``expected`` (type-exact), or None."""
    if expected is actual:
        return None  # the same object (a value carried over unchanged) cannot differ from itself
    if pointer == "$" and _same_repr(expected, actual):
        return None
    if type(expected) is not type(actual):
        return pointer
    if isinstance(expected, dict):
        for (key_e, value_e), (key_a, value_a) in zip_longest(expected.items(), actual.items(),
                                                              fillvalue=(_ABSENT, None)):
            if key_e is _ABSENT or key_a is _ABSENT or type(key_e) is not type(key_a) or key_e != key_a:
                return _child(pointer, key_a if key_e is _ABSENT else key_e)
            found = first_difference(value_e, value_a, _child(pointer, key_e))
            if found is not None:
                return found
        return None
    if isinstance(expected, list):
        for index, (item_e, item_a) in enumerate(zip_longest(expected, actual, fillvalue=_ABSENT)):
            found = first_difference(item_e, item_a, f"{pointer}[{index}]")
            if found is not None:
                return found
        return None
    if isinstance(expected, float) and math.isnan(expected) and math.isnan(actual):
        return None
    return None if expected == actual else pointer


def _same_repr(expected: Any, actual: Any) -> bool:
    """The common case at C speed: built-in values whose reprs agree are equal, type for type and in
    key order (``1``, ``True``, ``1.0`` and ``'1'`` all differ); any doubt is left to the walk."""
    try:
        return repr(expected) == repr(actual)
    except (RecursionError, ValueError):  # ValueError: an int too long for str() (a YAML 0x... of 3600+ digits)
        return False


def _child(pointer: str, key: Any) -> str:
    if isinstance(key, str) and _NAME.match(key):
        return f"{pointer}.{key}"
    return f"{pointer}[{key!r}]"


def _check_bytes(old: FrontmatterSplit, new: FrontmatterSplit, edits: Edits, allowed: list[tuple[int, int]],
                 path: Path | str | None) -> None:
    """Every edit inside an allowed span, and every byte between the edits as it was."""
    fm, new_fm = old.yaml_text, new.yaml_text
    problem: str | None = None
    pos_old = pos_new = 0
    at = 0
    if (new.prefix, new.closing) != (old.prefix, old.closing):
        problem, at = "the delimiter lines", 0
    for start, end, _, text in sorted(edits.items):
        if problem is not None:
            break
        if start < pos_old or not any(lo <= start and end <= hi for lo, hi in allowed):
            problem, at = "a line outside the keys the update sets", start
            break
        gap = fm[pos_old:start]
        if not new_fm.startswith(gap, pos_new) or not new_fm.startswith(text, pos_new + len(gap)):
            problem, at = "a line outside the changed lines", pos_old
        pos_new += len(gap) + len(text)
        pos_old = end
    if problem is None and new_fm[pos_new:] != fm[pos_old:]:
        problem, at = "a line outside the changed lines", pos_old
    if problem is not None:
        raise WriteVerificationError(f"the splice would change {problem}; nothing was written", path=path,
                                     line=line_of(fm, at, old.line_offset),
                                     expected="every byte outside the changed lines kept")


def _follow_aliases(old: ParsedFrontmatter, changed: dict[str, Any]) -> dict[str, Any]:
    """``old.data`` with every alias of a node written inside a changed key's value read as that
    node's new value (``changed`` maps top-level keys to their new values).

    An alias *is* the anchored node, so a key elsewhere that aliases (part of) the state block, or
    an anchored value the update rewrites, changes with it; nothing else may.
    """
    root = old.node
    if not isinstance(root, yaml.MappingNode):
        return old.data
    paths: dict[int, tuple[str, tuple[Any, ...]]] = {}
    for key, value in root.value:
        name = key.value if isinstance(key, yaml.ScalarNode) and key.tag != MERGE_TAG else None
        if name in changed and value.start_mark.index >= key.end_mark.index:  # an alias value: its anchor stays
            _collect_paths(value, (), paths, name, (value.start_mark.index, value.end_mark.index))
    replacements = {}
    for node_id, (name, node_path) in paths.items():
        value = _at(changed[name], node_path)
        if value is not _ABSENT:
            replacements[node_id] = value
    data = construct_with(root, replacements)
    return data if isinstance(data, dict) else old.data


def _collect_paths(node: yaml.Node, path: tuple[Any, ...], paths: dict[int, tuple[str, tuple[Any, ...]]],
                   name: str, span: tuple[int, int]) -> None:
    """The data path of every node written inside ``span`` (an alias inside it to a node outside
    it does not make that node part of the changed value)."""
    if id(node) in paths or (path and not span[0] <= node.start_mark.index < span[1]):
        return
    paths[id(node)] = (name, path)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.tag != MERGE_TAG:
                _collect_paths(value, (*path, key.value), paths, name, span)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _collect_paths(item, (*path, index), paths, name, span)


def _at(data: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        found = (isinstance(data, dict) and isinstance(step, str) and step in data) or (
            isinstance(data, list) and isinstance(step, int) and step < len(data))
        if not found:
            return _ABSENT
        data = data[step]
    return data

