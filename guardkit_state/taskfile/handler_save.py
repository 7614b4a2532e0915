"""Saving a python-frontmatter post into the text it was loaded from, changing only what changed.

The one YAML editor (:mod:`guardkit_state.yamltext.editor`) writes the difference between the strict reading of
the original text and the post's metadata: an unchanged key keeps its lines byte for byte, a
changed one-line scalar is replaced in place (its anchor and trailing comment kept), a changed
nested mapping is edited key by key, a list that only grew gets its new items appended, and any
other changed value is re-rendered alone, keeping the key as written. Deleted keys lose their
lines; added keys are appended at the end of their mapping; the keys keep the text's order. A
rewrite that would drop a comment is refused rather than made.

Every new text is read back with the same strict reader and compared with the data it must hold
(key order included), its delimiters and body checked, before it is returned.
See ``docs/python-frontmatter.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from guardkit_state.errors import FrontmatterError
from guardkit_state.taskfile.frontmatter import ParsedFrontmatter, parse_frontmatter, refuse_look_alike_frontmatter
from guardkit_state.yamltext.editor import Refusal, edit_yaml
from guardkit_state.yamltext.positions import Edits, line_of
from guardkit_state.yamltext.render import indent_lines, plain_data, render_yaml
from guardkit_state.yamltext.verify import verify_write


@dataclass(frozen=True)
class LoadedText:
    """A text a handler loaded: its exact characters and their strict reading."""

    text: str
    parsed: ParsedFrontmatter
    whole: bool = True  # False when only the stripped text python-frontmatter handed out is known


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
            kept = _keep_around(split.bom + split.body, content, nl)
            return _verified(kept, {}, _no_frontmatter(kept), path)
        refuse_look_alike_frontmatter(split.body, path)
        return _created(split.bom, new, _keep_around(split.body, content.removeprefix(split.bom), nl), nl, path)
    try:
        edited = edit_yaml(split.yaml_text, old.node, old.data, new, newline=nl, keep_comments=True, keep_order=True,
                           line_offset=split.line_offset)
    except Refusal as why:
        raise FrontmatterError(str(why), path=path, line=line_of(split.yaml_text, why.at, split.line_offset),
                               expected="one 'key: value' per line") from None
    yaml_text = edited.edits.apply(split.yaml_text)
    body = _keep_around(split.body, content, nl)
    # A frontmatter closed at the very end of the text gets a line break before a body that is now there.
    closing = split.closing if not body or split.closing.endswith("\n") else split.closing + nl
    text = split.prefix + yaml_text + closing + body
    if text == loaded.text:
        return text
    return _verified(text, edited.data, (split.prefix, yaml_text, closing + body), path, old=split.yaml_text,
                     edits=edited.edits, aliased=old.aliased, line_offset=split.line_offset)


def fresh_text(metadata: dict[str, Any], content: str) -> str:
    """A new text for a post that was not loaded from one: python-frontmatter's layout, read back strictly."""
    new = plain_data(metadata)
    body = content if not content or content.endswith("\n") else content + "\n"
    if not new:
        return _verified(body, {}, _no_frontmatter(body), None)
    return _created("", new, body, "\n", None)


def _created(bom: str, data: dict[str, Any], body: str, nl: str, path: Path | str | None) -> str:
    """A new frontmatter holding ``data`` above ``body``."""
    yaml_text = indent_lines(render_yaml(data), 0, nl)
    prefix, closing = bom + "---" + nl, "---" + nl
    return _verified(prefix + yaml_text + closing + body, data, (prefix, yaml_text, closing + body), path)


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


def _verified(text: str, intent: dict[str, Any], pieces: tuple[str, str, str], path: Path | str | None, *,
              old: str = "", edits: Edits | None = None, aliased: bool = False, line_offset: int = 0) -> str:
    """``text`` once its strict reading holds exactly ``intent`` and splits into ``pieces`` (the text up
    to the YAML, the YAML, the closing line and body)."""
    verify_write(text, partial(parse_frontmatter, path=path), intent, cut=_pieces, pieces=pieces, old=old, edits=edits,
                 path=path, line_offset=line_offset, aliased=aliased)
    return text


def _pieces(parsed: ParsedFrontmatter) -> tuple[str, str, str]:
    split = parsed.split
    return split.prefix, split.yaml_text, split.closing + split.body


def _no_frontmatter(text: str) -> tuple[str, str, str]:
    """The pieces of a text read as having no frontmatter: its byte-order mark, no YAML, the rest."""
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    return bom, "", text[len(bom):]
