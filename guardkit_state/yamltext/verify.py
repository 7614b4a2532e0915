"""A write is verified before it lands: the whole new text is read with the strict reader and
compared with the intent. One check for every writer of YAML (task files, python-frontmatter
saves, feature plans).

The new text must split where it was put together (the frontmatter's delimiter lines, the body
byte for byte), read back as exactly the intended data (type-exact: ``1``, ``True`` and ``1.0``
differ; key order included), and hold every byte outside the edited spans as it was. Any mismatch
raises :class:`WriteVerificationError` naming the file and the first differing key, before
anything is written. A key elsewhere that is a YAML alias of a value the update changes would
change with it, so such a write is refused too, and says why. One full parse, no shortcut: simple
enough to trust without a review.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import zip_longest
from operator import attrgetter
from pathlib import Path
from typing import Any, Protocol, TypeVar

from guardkit_state.errors import GuardkitStateError, WriteVerificationError
from guardkit_state.yamltext.positions import Edits, line_of
from guardkit_state.yamltext.render import same

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_ABSENT = object()


class Reading(Protocol):
    """A strict reading of a text: its data."""

    @property
    def data(self) -> Any: ...


R = TypeVar("R", bound=Reading)


def verify_write(new_text: str, parse: Callable[[str], R], intent: Any, *, pieces: tuple[str, str, str],
                 old: str = "", edits: Edits | None = None, path: Path | str | None, line_offset: int = 0,
                 aliased: bool = False, cut: Callable[[R], tuple[str, str, str]] = attrgetter("pieces")) -> R:
    """The strict reading of ``new_text`` once it is shown to be exactly what was meant.

    Args:
        new_text: ``head + yaml + tail`` as the writer put it together (``pieces``).
        parse: the strict reader; ``cut`` splits its reading the same three ways (by default its
            ``pieces``).
        intent: the data the new text must read as.
        old: the YAML text the edits were made on; ``edits`` those edits (None: a text made anew).
        line_offset: the line of the file the YAML text starts after (1 in a frontmatter).
        aliased: the old text uses YAML aliases (the refusal then says what they do).

    Raises:
        WriteVerificationError: the new text does not parse, or differs from the intent.
    """
    try:
        new = parse(new_text)
    except GuardkitStateError as exc:  # our own edit broke it: nothing is written
        raise WriteVerificationError(f"the new text does not parse ({exc.message}); nothing was written",
                                     path=path, line=exc.line) from exc
    head, yaml_text, tail = cut(new)
    if tail != pieces[2]:
        raise WriteVerificationError("the update would change the markdown body after the closing '---'; "
                                     "nothing was written", path=path)
    if (head, yaml_text) != pieces[:2]:
        raise WriteVerificationError("the new text would change the delimiter lines; nothing was written", path=path,
                                     line=1)
    pointer = first_difference(intent, new.data)
    if pointer is not None:
        hint = (" (the text uses YAML aliases, and an alias of a value the update changes would change with it: "
                "replace the alias with the value itself, or remove the anchor)") if aliased else ""
        raise WriteVerificationError(f"the new text would change {pointer}, which the update does not set{hint}; "
                                     "nothing was written", path=path, pointer=pointer)
    if edits is not None:
        check_edits(old, yaml_text, edits, path, line_offset)
    return new


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
    return None if same(expected, actual) else pointer  # a scalar: NaN is itself, -0.0 is not 0.0


def _child(pointer: str, key: Any) -> str:
    if isinstance(key, str) and _NAME.match(key):
        return f"{pointer}.{key}"
    return f"{pointer}[{key!r}]"


def check_edits(old: str, new: str, edits: Edits, path: Path | str | None, line_offset: int = 0) -> None:
    """Every byte of ``new`` between the edits as it was in ``old``, and the edits apart."""
    problem: str | None = None
    pos_old = pos_new = at = 0
    for start, end, _, text in sorted(edits.items):
        if start < pos_old:
            problem, at = "a span twice (two edits overlap)", start
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
