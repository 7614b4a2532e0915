"""Surgical, verified splice of the ``autobuild_state`` block into a task file's frontmatter.

Pure functions, text in and text out. The update's meaning is its data twin
(:func:`apply_update_to_block`): :func:`splice_state` computes the frontmatter data the update
gives and lets the one YAML editor (:mod:`guardkit_state.yamltext.editor`) write the difference into the user's text:
new turns appended after the last item of ``turns:``, changed values rewritten in place, new keys
just above ``criteria:``/``turns:`` (a new top-level key just above the state block), and only the
new fragments rendered. A state block the editor cannot extend in place (a flow-style block, an
alias, a merge key inside it ...) is re-rendered alone, and the result says so. A no-op update
returns the text unchanged.

Every new text is verified before it is returned (:mod:`guardkit_state.yamltext.verify`): parsed
with the same strict reader and compared with the intended data, so a text that would lose or
change anything else is never written. :class:`StateUpdate` says what changes; its data twin,
:func:`apply_update_to_block`, what that means.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

from guardkit_state.errors import FrontmatterError
from guardkit_state.taskfile.frontmatter import (
    STATE_KEY,
    STATE_KEYS,
    ParsedFrontmatter,
    parse_frontmatter,
    refuse_look_alike_frontmatter,
)
from guardkit_state.yamltext.editor import DOCUMENT_END, Edited, Refusal, edit_yaml
from guardkit_state.yamltext.positions import line_of
from guardkit_state.yamltext.render import indent_lines, plain_data, render_yaml
from guardkit_state.yamltext.verify import verify_write

__all__ = ["SpliceMethod", "SpliceResult", "StateUpdate", "apply_update_to_block", "plain_data", "render_yaml",
           "splice_state"]

SpliceMethod = Literal["noop", "splice", "rerender"]


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


@dataclass(frozen=True)
class SpliceResult:
    """The new text and how it was made: ``noop``, ``splice``, or ``rerender`` (with why).

    ``parsed`` is the strict parse of ``text`` the write was verified with (None for a no-op):
    the next write locates its keys from it instead of parsing the file again.
    """

    text: str
    method: SpliceMethod
    reason: str | None = None
    parsed: ParsedFrontmatter | None = field(default=None, repr=False, compare=False)


log = logging.getLogger("guardkit_state.taskfile.splice")
_ABSENT: Any = object()


def splice_state(text: str, update: StateUpdate, *, path: Path | str | None = None,
                 parsed: ParsedFrontmatter | None = None) -> SpliceResult:
    """Apply ``update`` to a task file's text, changing only the lines it must, and verify it.

    Args:
        text: the task file's text.
        update: what to change.
        path: the file, for error messages.
        parsed: the strict parse of ``text`` when the caller has it (a :class:`SpliceResult`'s
            ``parsed``); without it ``text`` is parsed here.

    A no-op update returns the identical text with method ``noop``. Any other result carries
    ``parsed``, the verified reading of the new text, with a node tree located in it: the next
    splice of that text takes its keys' positions from it instead of parsing it again.

    Raises:
        FrontmatterError: broken delimiters, invalid YAML, both state keys, a state block that is
            not a mapping, a frontmatter layout the splice cannot edit.
        DuplicateKeyError: a mapping repeats a key.
        WriteVerificationError: the new text would not read back as exactly the intended update.
    """
    if update.is_empty:
        return SpliceResult(text, "noop")
    # A parse without its node tree cannot locate keys, nor one of another text: read again.
    reusable = parsed is not None and (parsed.node is not None or not parsed.data) and "".join(parsed.pieces) == text
    old = parsed if parsed is not None and reusable else parse_frontmatter(text, path=path)
    split = old.split
    intent = expected_data(old, update)
    nl = split.newline
    if not split.has_frontmatter:
        refuse_look_alike_frontmatter(split.body, path)
        created, verified = new_frontmatter(split.bom, intent, split.body, nl, path)
        return SpliceResult(created, "splice", None, verified)
    fm, offset = split.yaml_text, split.line_offset
    # The substring test first: a multi-line regex search costs more than a whole splice on a long file.
    end_marker = DOCUMENT_END.search(fm) if fm.startswith("...") or "\n..." in fm else None
    if end_marker is not None:
        raise FrontmatterError("the frontmatter contains a YAML document-end line ('...'); the state block "
                               "cannot be spliced after it", path=path, line=line_of(fm, end_marker.start(), offset),
                               expected="no '...' line inside the frontmatter")
    key = old.state_key or update.key
    try:
        edited = edit_yaml(fm, old.node, old.data, intent, newline=nl, narrow=[(key, "turns")],
                           column_0=True, line_offset=offset)
    except Refusal as why:
        raise FrontmatterError(f"the update cannot be written into this frontmatter: {why}", path=path,
                               line=line_of(fm, why.at, offset), expected="top-level 'key: value' lines at column 0") \
            from None
    new_fm = edited.edits.apply(fm)
    if new_fm == fm:
        return SpliceResult(text, "noop")
    pieces = (split.prefix, new_fm, split.closing + split.body)
    new_text = "".join(pieces)
    reason = _rerendered(edited, key)
    if reason is not None:
        log.info("%s: re-rendering the state block: %s", path or "<text>", reason)
    verified = verify_write(new_text, partial(parse_frontmatter, path=path), intent, pieces=pieces, old=fm,
                            edits=edited.edits, path=path, line_offset=offset, aliased=old.aliased)
    return SpliceResult(new_text, "splice" if reason is None else "rerender", reason, verified)


def expected_data(old: ParsedFrontmatter, update: StateUpdate) -> dict[str, Any]:
    """The frontmatter data ``update`` must produce from ``old`` (key order included): keys outside
    the update keep their old values, new top-level keys go just above the state block."""
    state_key = old.state_key or update.key
    block = old.data.get(state_key)
    new_block = apply_update_to_block(block if isinstance(block, dict) else None, update) \
        if update.touches_state else _ABSENT
    top = {key: plain_data(value) for key, value in update.top_level.items()}
    data = old.data
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key == state_key:
            out.update((k, v) for k, v in top.items() if k not in data)
            out[key] = value if new_block is _ABSENT else new_block
        else:
            out[key] = top.get(key, value)
    out.update((k, v) for k, v in top.items() if k not in out)
    if new_block is not _ABSENT and state_key not in out:
        out[state_key] = new_block
    return out


def _rerendered(edited: Edited, key: str) -> str | None:
    """Why the state block was rewritten whole (None when it was edited in place, or was empty)."""
    for rewrite in edited.rewrites:
        if rewrite.path == (key,) and not rewrite.was_empty:
            return rewrite.reason or f"the '{key}' block could not be edited in place"
    return None


def new_frontmatter(bom: str, data: dict[str, Any], body: str, nl: str,
                    path: Path | str | None) -> tuple[str, ParsedFrontmatter]:
    """A text with a new frontmatter holding ``data`` above ``body``, and its verified reading."""
    pieces = (bom + "---" + nl, indent_lines(render_yaml(data), 0, nl), "---" + nl + body)
    text = "".join(pieces)
    return text, verify_write(text, partial(parse_frontmatter, path=path), data, pieces=pieces, path=path)
