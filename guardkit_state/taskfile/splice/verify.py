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

from guardkit_state.errors import GuardkitStateError, WriteVerificationError
from guardkit_state.taskfile.frontmatter import ParsedFrontmatter, parse_frontmatter
from guardkit_state.taskfile.splice.positions import Edits, line_of
from guardkit_state.taskfile.splice.render import plain_data
from guardkit_state.taskfile.splice.update import StateUpdate, apply_update_to_block

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
        raise WriteVerificationError("the update would change the markdown body after the closing '---'; "
                                     "nothing was written", path=path)
    pointer = first_difference(expected_data(old, update), new.data)
    if pointer is not None:
        raise WriteVerificationError(f"the new text would change {pointer}, which the update does not set"
                                     f"{_alias_hint(old)}; nothing was written",
                                     path=path, pointer=pointer)
    if edits is not None:
        if (new.split.prefix, new.split.closing) != (old.split.prefix, old.split.closing):
            raise WriteVerificationError("the splice would change the delimiter lines; nothing was written",
                                         path=path, line=1)
        check_edits(old.split.yaml_text, new.split.yaml_text, edits, allowed, path, old.split.line_offset)
    return new


def _alias_hint(old: ParsedFrontmatter) -> str:
    # An alias *is* its anchored node: an alias elsewhere of a value the update changes changes with it.
    if not old.aliased:
        return ""
    return (" (the frontmatter uses YAML aliases, and an alias of a value the update changes would change with "
            "it: replace the alias with the value itself, or remove the anchor, to record turns)")


def expected_data(old: ParsedFrontmatter, update: StateUpdate) -> dict[str, Any]:
    """The frontmatter data ``update`` must produce from ``old`` (key order included): keys outside
    the update keep their old values."""
    state_key = old.state_key or update.key
    block = old.data.get(state_key)
    new_block = apply_update_to_block(block if isinstance(block, dict) else None, update) \
        if update.touches_state else _ABSENT
    top = {key: plain_data(value) for key, value in update.top_level.items()}
    data = old.data
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
                                     line=line_of(old, at, line_offset))


def read_back(new_text: str, parse: Callable[[str], T], path: Path | str | None) -> T:
    """``parse(new_text)``: the strict reading of a text about to be written.

    Raises:
        WriteVerificationError: the text does not parse (our own edit broke it: nothing is written).
    """
    try:
        return parse(new_text)
    except GuardkitStateError as exc:
        raise WriteVerificationError(f"the new text does not parse ({exc.message}); nothing was written",
                                     path=path, line=exc.line) from exc
