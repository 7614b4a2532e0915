"""A python-frontmatter handler that reads task files strictly and saves them byte for byte.

``frontmatter.load(path, handler=FrontmatterHandler())`` reads the frontmatter with the task-file
rules (exact ``---`` split, C safe loader, dates kept as strings, duplicate keys refused with a
typed error). The handler keeps the text it loaded, so ``frontmatter.dumps(post)`` (or
``frontmatter.dump``) splices only the keys that changed into that text: comments, key order,
quoting, blank lines and the body's bytes stay as they were: the one YAML editor
(:mod:`guardkit_state.yamltext.editor`) writes the difference between the strict reading of the
original text and the post's metadata (a changed scalar in place, a nested mapping key by key, a
list that grew by appending, any other change by rewriting that value alone; a rewrite that would
drop a comment is refused), and the new text is read back strictly before it is returned.

python-frontmatter strips the text before a handler sees it; the handler takes the unstripped text
from python-frontmatter's own ``loads`` call, so the whitespace around the text is kept too. It
also turns CRLF line endings into LF before any handler runs; :meth:`FrontmatterHandler.read`
keeps them. See ``docs/python-frontmatter.md``.
"""

from __future__ import annotations

import copy
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import frontmatter
from frontmatter.default_handlers import BaseHandler

from guardkit_state.errors import FrontmatterError, GuardkitStateError, InputError
from guardkit_state.taskfile.frontmatter import (
    ParsedFrontmatter,
    parse_frontmatter,
    refuse_look_alike_frontmatter,
    split_frontmatter,
)
from guardkit_state.taskfile.splice import new_frontmatter
from guardkit_state.yamltext.editor import Refusal, edit_yaml
from guardkit_state.yamltext.positions import Edits, line_of
from guardkit_state.yamltext.render import plain_data, render_yaml
from guardkit_state.yamltext.strict_yaml import parse_yaml
from guardkit_state.yamltext.verify import verify_write

__all__ = ["FrontmatterHandler"]

#: python-frontmatter passes metadata to ``Post(content, handler, **metadata)``: these keys cannot pass.
_RESERVED_KEYS = ("content", "handler")
#: How far up the stack python-frontmatter's ``loads`` sits from ``split`` (split ← parse ← loads).
_FRAMES_UP = 4
_LOADS_CODE = frontmatter.loads.__code__


class FrontmatterHandler(BaseHandler):
    """Strict reading and byte-preserving saving for python-frontmatter, one handler per text.

    A handler keeps the text it loaded, and a post keeps the bytes of the text its handler
    loaded: ``frontmatter.dumps(post)`` writes that text with only the changed keys (and body)
    changed. A handler refuses to load a second, different text (use a new one per file); a post
    whose handler loaded no text is written afresh.
    """

    FM_BOUNDARY = re.compile(r"\A\ufeff?---[ \t]*\r?$", re.M)
    START_DELIMITER = END_DELIMITER = "---"

    def __init__(self) -> None:
        super().__init__()
        self.path: Path | None = None  # the file :meth:`read` loaded, for error messages
        self._loaded: LoadedText | None = None
        self._exact: str | None = None  # a text given to :meth:`reads`, before python-frontmatter changes it
        self._handed_out: str | None = None  # the YAML text :meth:`split` gave python-frontmatter

    @property
    def text(self) -> str | None:
        """The text this handler loaded (None before it loaded one)."""
        return self._loaded.text if self._loaded is not None else None

    # ----------------------------------------------------------------- exact reading

    def read(self, path: Path | str) -> frontmatter.Post:
        """Load the file at ``path`` keeping every byte, CRLF line endings included."""
        with open(path, encoding="utf-8", newline="") as handle:
            text = handle.read()
        previous, self.path = self.path, Path(path)
        try:
            return self.reads(text)
        except GuardkitStateError:
            if self._loaded is not None and self._loaded.text != text:
                self.path = previous  # refused: the handler still holds the text it loaded before
            raise

    def reads(self, text: str) -> frontmatter.Post:
        """Load ``text`` keeping every character, CRLF line endings included."""
        self._exact = text
        try:
            return frontmatter.loads(text, handler=self)
        finally:
            self._exact = None

    # ----------------------------------------------------------------- python-frontmatter's interface

    def detect(self, text: str) -> bool:
        """True when ``text`` opens with a frontmatter delimiter line."""
        try:
            return split_frontmatter(text).has_frontmatter
        except GuardkitStateError:
            return True  # an unclosed frontmatter: loading it reports the typed error

    def split(self, text: str) -> tuple[str, str]:
        """Split strictly; raises ValueError (python-frontmatter's "no frontmatter") when there is none.

        Raises:
            FrontmatterError, DuplicateKeyError: the strict reader refuses the text.
            InputError: this handler already loaded a different text.
        """
        original, whole = self._original_of(text)
        if self._loaded is not None and self._loaded.text != original:
            raise InputError("this FrontmatterHandler already holds the text it loaded before; a post is saved "
                             "into the text its handler loaded, so use one FrontmatterHandler per file",
                             path=self.path, fix="frontmatter.load(path, handler=FrontmatterHandler())")
        parsed = parse_frontmatter(original, path=self.path)
        _check_keys(parsed.data, parsed.line_of, self.path)
        self._loaded = LoadedText(original, parsed, whole)
        split = parsed.split
        if not split.has_frontmatter:
            raise ValueError("no frontmatter")
        self._handed_out = split.yaml_text
        return split.yaml_text, split.body.replace("\r\n", "\n")

    def load(self, fm: str, **kwargs: object) -> Any:
        """The strictly read metadata: a copy of what :meth:`split` read, or ``fm`` parsed strictly."""
        if kwargs:
            raise TypeError(f"FrontmatterHandler.load takes no options (got {', '.join(kwargs)})")
        if self._loaded is not None and fm is self._handed_out:
            self._handed_out = None
            # A copy: the post's nested values may be changed in place, the loaded reading may not.
            return copy.deepcopy(self._loaded.parsed.data)
        data = parse_yaml(fm, path=self.path).data
        return {} if data is None else data

    def export(self, metadata: dict[str, object], **kwargs: object) -> str:
        """``metadata`` as block YAML that the strict reader reads back as exactly ``metadata``."""
        if kwargs:
            raise TypeError(f"FrontmatterHandler.export takes no options (got {', '.join(kwargs)})")
        return render_yaml(plain_data(metadata)).removesuffix("\n")

    def format(self, post: frontmatter.Post, **kwargs: object) -> str:
        """The text of ``post``: the loaded text with only what changed spliced in, or a new text.

        Raises:
            FrontmatterError: a change the text's layout cannot take without losing bytes.
            WriteVerificationError: the new text would not read back as the post's metadata.
        """
        if kwargs:
            raise TypeError(f"FrontmatterHandler keeps the text's own layout and takes no options "
                            f"(got {', '.join(kwargs)})")
        owner = post.handler if isinstance(post.handler, FrontmatterHandler) else None
        loaded = owner._loaded if owner is not None else None
        if owner is None or loaded is None:
            return fresh_text(dict(post.metadata), post.content)
        if not loaded.whole:
            raise FrontmatterError("the text around the frontmatter is not known (python-frontmatter strips it "
                                   "before a handler sees it, and frontmatter.parse was called directly): its "
                                   "bytes cannot be kept", path=owner.path,
                                   expected="a post from frontmatter.load or frontmatter.loads")
        return save_text(loaded, dict(post.metadata), post.content, path=owner.path)

    # ----------------------------------------------------------------- the text before python-frontmatter

    def _original_of(self, seen: str) -> tuple[str, bool]:
        """The text python-frontmatter stripped into ``seen``, whitespace around it included, and
        whether it was found (else ``seen`` itself: ``frontmatter.parse`` was called directly).

        python-frontmatter's ``parse`` strips the text before calling ``split``, so no handler is
        given the whitespace around it (a file's final line break, blank lines before the opening
        ``---``); its ``loads``, a frame or two up, still holds the text unstripped. The text is
        taken only when it strips to exactly what was seen.
        """
        candidates: list[object] = [self._exact] if self._exact is not None else []
        frame = sys._getframe(1)
        for _ in range(_FRAMES_UP):
            if frame.f_code is _LOADS_CODE:
                candidates.append(frame.f_locals.get("text"))
                break
            if frame.f_back is None:
                break
            frame = frame.f_back
        del frame  # a frame held by a local keeps every caller's locals alive
        for text in candidates:
            if isinstance(text, str) and text.replace("\r\n", "\n").strip() == seen:
                return text, True
        return seen, False


def _check_keys(data: dict[str, Any], line_of: Callable[[str], int | None], path: Path | None) -> None:
    """Refuse top-level keys python-frontmatter cannot pass to ``Post(content, handler, **metadata)``."""
    for key in data:
        if not isinstance(key, str):
            raise FrontmatterError(f"top-level key {key!r} is not a string: python-frontmatter passes metadata as "
                                   "keyword arguments", path=path, expected="string keys")
        if key in _RESERVED_KEYS:
            raise FrontmatterError(f"top-level key {key!r} cannot pass through python-frontmatter (it is an "
                                   "argument of Post)", path=path, line=line_of(key),
                                   expected=f"no '{key}' key at the top level")


# --------------------------------------------------------------------------- saving


@dataclass(frozen=True)
class LoadedText:
    """A text a handler loaded: its exact characters and their strict reading."""

    text: str
    parsed: ParsedFrontmatter
    whole: bool = True  # False when only the stripped text python-frontmatter handed out is known


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
        body = _keep_around(split.body, content.removeprefix(split.bom), nl)
        return new_frontmatter(split.bom, new, body, nl, path)[0]
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
    return new_frontmatter("", new, body, "\n", None)[0]


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
    verify_write(text, partial(parse_frontmatter, path=path), intent, pieces=pieces, old=old, edits=edits, path=path,
                 line_offset=line_offset, aliased=aliased)
    return text


def _no_frontmatter(text: str) -> tuple[str, str, str]:
    """The pieces of a text read as having no frontmatter: its byte-order mark, no YAML, the rest."""
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    return bom, "", text[len(bom):]
