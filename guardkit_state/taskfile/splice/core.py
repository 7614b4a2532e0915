"""Surgical, verified splice of the ``autobuild_state`` block into a task file's frontmatter.

Pure functions, text in and text out. Saving the block never re-dumps the user's frontmatter:
:func:`splice_state` takes every key's position from the strict parse (any key YAML allows:
quoted, non-ASCII, with spaces, digit-leading, anchored ...), appends new turns after the last
item of ``turns:``, rewrites only values that changed, and renders only the new fragments.
Layouts the splice cannot handle (a flow-style block, an alias, a merge key inside the block ...)
fall back to re-rendering the state block alone, and say so. A no-op update returns the text
unchanged.

Every new text is verified before it is returned (:mod:`splice_verify`): it is parsed with the
same strict reader and compared with the intended data, so a text that would lose or change
anything else is never written.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from guardkit_state.errors import FrontmatterError
from guardkit_state.taskfile.frontmatter import (
    DOCUMENT_END,
    STATE_KEYS,
    FrontmatterSplit,
    ParsedFrontmatter,
    parse_frontmatter,
    refuse_look_alike_frontmatter,
)
from guardkit_state.taskfile.splice.edits import MISSING, Fallback, rerender_block, set_value, splice_block
from guardkit_state.taskfile.splice.positions import Edits, Entry, LayoutError, by_key, line_of, top_level_entries
from guardkit_state.taskfile.splice.render import indent_lines, plain_data, render_yaml
from guardkit_state.taskfile.splice.update import SpliceMethod, SpliceResult, StateUpdate, apply_update_to_block
from guardkit_state.taskfile.splice.verify import verify_write

__all__ = ["SpliceMethod", "SpliceResult", "StateUpdate", "apply_update_to_block", "plain_data", "render_yaml",
           "splice_state"]

log = logging.getLogger("guardkit_state.taskfile.splice.core")



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
    reusable = parsed is not None and (parsed.node is not None or not parsed.data) and _is_parse_of(parsed, text)
    old = parsed if parsed is not None and reusable else parse_frontmatter(text, path=path)
    split = old.split
    if not split.has_frontmatter:
        refuse_look_alike_frontmatter(split.body, path)
        created = _create_frontmatter(split, update)
        return SpliceResult(created, "splice", None,
                            verify_write(old, created, update, path=path, edits=None, allowed=[]))
    top = _top_entries(old, path)
    block = next((top[key] for key in STATE_KEYS if key in top), None)
    edits = Edits()
    # Spans the edits may touch: the verification refuses a byte changed anywhere else.
    allowed = [(block.start, block.end) if block else (len(split.yaml_text), len(split.yaml_text))]
    # Top-level keys first, so a key added before the state block lands above it.
    allowed += _edit_top_level(old, top, block, update, edits, path)
    method: SpliceMethod = "splice"
    reason: str | None = None
    if update.touches_state:
        method, reason = _edit_state(old, block, update, edits, path)
    new_fm = edits.apply(split.yaml_text) if edits.items else split.yaml_text
    if new_fm == split.yaml_text:
        return SpliceResult(text, "noop")
    new_text = split.prefix + new_fm + split.closing + split.body
    verified = verify_write(old, new_text, update, path=path, edits=edits, allowed=allowed)
    return SpliceResult(new_text, method, reason, verified)


def _edit_top_level(old: ParsedFrontmatter, top: dict[str, Entry], block: Entry | None, update: StateUpdate,
                    edits: Edits, path: Path | str | None) -> list[tuple[int, int]]:
    """Add the edits of the update's top-level keys; returns the spans of the existing ones."""
    split = old.split
    fm = split.yaml_text
    spans = []
    for key, value in update.top_level.items():
        entry = top.get(key)
        if entry is not None:
            spans.append((entry.start, entry.end))
        try:
            set_value(fm, edits, entry, key, value, old.data.get(key, MISSING), 0, split.newline,
                      insert_at=block.start if block else _end_of(fm, edits, split.newline))
        except Fallback as why:
            assert entry is not None
            raise FrontmatterError(f"cannot update top-level '{key}': {why}", path=path,
                                   line=line_of(fm, entry.start, split.line_offset),
                                   expected="'key: value'") from None
    return spans


def _edit_state(old: ParsedFrontmatter, block: Entry | None, update: StateUpdate, edits: Edits,
                path: Path | str | None) -> tuple[SpliceMethod, str | None]:
    """Add the state block's edits; re-render the block alone when its layout is not handled."""
    fm, nl = old.split.yaml_text, old.split.newline
    if block is None:
        at = _end_of(fm, edits, nl)
        key = old.state_key or update.key  # a block reached only through a '<<' merge is overridden
        edits.add(at, at, indent_lines(render_yaml({key: apply_update_to_block(None, update)}), 0, nl))
        return "splice", None
    current = old.data.get(block.key or "")
    current = current if isinstance(current, dict) else None
    block_edits = Edits()
    try:
        splice_block(fm, block_edits, block, current, update, nl)
    except Fallback as why:
        log.info("%s: re-rendering the state block: %s", path or "<text>", why)
        edits.add(block.start, block.end, rerender_block(fm, block, current, update, nl))
        return "rerender", str(why)
    edits.extend(block_edits)
    return "splice", None


def _top_entries(old: ParsedFrontmatter, path: Path | str | None) -> dict[str, Entry]:
    """The top-level entries by key, refusing layouts new keys cannot be spliced into."""
    fm, offset = old.split.yaml_text, old.split.line_offset
    # The substring test first: a multi-line regex search costs more than a whole splice on a long file.
    end_marker = DOCUMENT_END.search(fm) if fm.startswith("...") or "\n..." in fm else None
    if end_marker is not None:
        # Text spliced after YAML's document-end marker would start a second document.
        raise FrontmatterError("the frontmatter contains a YAML document-end line ('...'); the state block "
                               "cannot be spliced after it", path=path, line=line_of(fm, end_marker.start(), offset),
                               expected="no '...' line inside the frontmatter")
    try:
        return by_key(top_level_entries(fm, old.node))
    except LayoutError as why:
        raise FrontmatterError(f"the state block cannot be spliced into this frontmatter: {why}", path=path,
                               line=line_of(fm, why.at, offset),
                               expected="top-level 'key: value' lines at column 0") from None


def _end_of(fm: str, edits: Edits, nl: str) -> int:
    """The offset where keys are appended; a frontmatter without a final newline gets one first."""
    if fm and not fm.endswith("\n") and not any(start == len(fm) for start, *_ in edits.items):
        edits.add(len(fm), len(fm), nl)
    return len(fm)


def _create_frontmatter(split: FrontmatterSplit, update: StateUpdate) -> str:
    """A file without frontmatter gets one holding the top-level keys and the new block."""
    data: dict[str, Any] = dict(update.top_level)
    if update.touches_state:
        data[update.key] = apply_update_to_block({}, update)
    nl = split.newline
    return split.bom + "---" + nl + indent_lines(render_yaml(data), 0, nl) + "---" + nl + split.body


def _is_parse_of(parsed: ParsedFrontmatter, text: str) -> bool:
    split = parsed.split
    return split.prefix + split.yaml_text + split.closing + split.body == text
