"""A write is verified before it lands: the whole new text is read with the strict reader and
compared with the intent.

Every top-level key outside the state block must be equal by value (type-exact: ``1``, ``True``
and ``1.0`` differ) and in the same order as before, apart from the keys the update sets; the
state block equal to :func:`apply_update_to_block` of the old one; the bytes outside the edited
spans and the markdown body identical. Any mismatch raises :class:`WriteVerificationError` naming
the file and the first differing key, before anything is written. A key elsewhere that is a YAML
alias of a value the update changes would change with it, so such a write is refused too, and says
why. One full parse, no shortcut: simple enough to trust without a review.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from functools import partial
from itertools import zip_longest
from pathlib import Path
from typing import Any, TypeVar

import yaml

from guardkit_state.errors import GuardkitStateError, WriteVerificationError
from guardkit_state.taskfile.frontmatter import ParsedFrontmatter, parse_frontmatter
from guardkit_state.taskfile.splice.positions import Edits, line_of
from guardkit_state.taskfile.splice.render import plain_data
from guardkit_state.taskfile.splice.update import StateUpdate, apply_update_to_block
from guardkit_state.taskfile.strict_yaml import MERGE_TAG, construct_with

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_ABSENT = object()
T = TypeVar("T")


def verify_write(old: ParsedFrontmatter, new_text: str, update: StateUpdate, *, path: Path | str | None,
                 edits: Edits | None, allowed: list[tuple[int, int]]) -> ParsedFrontmatter:
    """The strict reading of ``new_text`` once it is shown to be ``old`` with ``update`` applied.

    ``edits`` are the replacements made on the old YAML text (None when a frontmatter was created)
    and ``allowed`` the spans of the old YAML text they may touch.

    Raises:
        WriteVerificationError: the new text does not parse, or differs from the intent.
    """
    new = read_back(new_text, partial(parse_frontmatter, path=path), path)
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
        if (new.split.prefix, new.split.closing) != (old.split.prefix, old.split.closing):
            raise WriteVerificationError("the splice would change the delimiter lines; nothing was written",
                                         path=path, line=1, expected="every byte outside the changed lines kept")
        check_edits(old.split.yaml_text, new.split.yaml_text, edits, allowed, path, old.split.line_offset)
    return new


def _alias_hint(old: ParsedFrontmatter, update: StateUpdate, actual: dict[str, Any]) -> str:
    """Why a key outside the update changed, when the reason is a YAML alias of a changed value."""
    if not old.aliased or first_difference(expected_data(old, update, follow_aliases=True), actual) is not None:
        return ""
    return (" (it is a YAML alias of a value the update changes: replace the alias with the value itself, "
            "or remove the anchor, to record turns)")


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


def _child(pointer: str, key: Any) -> str:
    if isinstance(key, str) and _NAME.match(key):
        return f"{pointer}.{key}"
    return f"{pointer}[{key!r}]"


def check_edits(old: str, new: str, edits: Edits, allowed: list[tuple[int, int]], path: Path | str | None,
                line_offset: int = 0) -> None:
    """Every edit inside an allowed span of ``old``, and every byte of ``new`` between the edits as
    it was in ``old`` (the task splice and the plan splice alike)."""
    problem: str | None = None
    pos_old = pos_new = at = 0
    for start, end, _, text in sorted(edits.items):
        if start < pos_old or not any(lo <= start and end <= hi for lo, hi in allowed):
            problem, at = "a line outside the values the update sets", start
            break
        gap = old[pos_old:start]
        if not new.startswith(gap, pos_new) or not new.startswith(text, pos_new + len(gap)):
            problem, at = "a line outside the changed lines", pos_old
            break
        pos_new += len(gap) + len(text)
        pos_old = end
    if problem is None and new[pos_new:] != old[pos_old:]:
        problem, at = "a line outside the changed lines", pos_old
    if problem is not None:
        raise WriteVerificationError(f"the splice would change {problem}; nothing was written", path=path,
                                     line=line_of(old, at, line_offset),
                                     expected="every byte outside the changed lines kept")


def read_back(new_text: str, parse: Callable[[str], T], path: Path | str | None) -> T:
    """``parse(new_text)``: the strict reading of a text about to be written.

    Raises:
        WriteVerificationError: the text does not parse (our own edit broke it: nothing is written).
    """
    try:
        return parse(new_text)
    except GuardkitStateError as exc:
        raise WriteVerificationError(f"the new text does not parse ({exc.message}); nothing was written",
                                     path=path, line=exc.line, expected="a text the strict reader accepts") from exc


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

