"""Exact split and strict parse of a task file's frontmatter (writing is ``splice.py``'s job).

Pure functions, text in and data out. The frontmatter is delimited by lines that are ``---``
followed by nothing but blanks (GuardKit's ``split("---", 2)`` truncates a real file whose
feedback holds ``-----``; python-frontmatter and Jekyll accept ``---`` with trailing blanks);
the YAML is read by :mod:`strict_yaml` (dates as strings, duplicate keys refused) with every
error in the file's own line numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guardkit_state.errors import FrontmatterError, SchemaError
from guardkit_state.model import LEGACY_STATE_KEY as LEGACY_STATE_KEY  # the state block's keys
from guardkit_state.model import STATE_KEY as STATE_KEY
from guardkit_state.model import STATE_KEYS as STATE_KEYS
from guardkit_state.model import AutobuildState
from guardkit_state.store.json_paths import format_pointer, parse_pointer
from guardkit_state.store.schemas import validate_record

if TYPE_CHECKING:  # YAML is imported where a text is parsed: a read answered from the caches parses none
    import yaml

    from guardkit_state.yamltext.strict_yaml import DuplicateKey

#: A delimiter line: three dashes and optional trailing blanks, as python-frontmatter and Jekyll read it.
_OPEN = re.compile(r"---[ \t]*(\r?\n)")
_LONE_OPEN = re.compile(r"---[ \t]*[\r\n]*\Z")
_CLOSE_TAIL = re.compile(r"[ \t]*(?:\n|\r\n|\r?\Z)")
_MD_HEADING = re.compile(r"^#{2,6} \S")
#: Blank lines at the start of a text without frontmatter (before its first non-blank line).
_LEADING_BLANK_LINES = re.compile(r"(?:[ \t\f\v]*\r?\n)*")



# --------------------------------------------------------------------------- split and parse


@dataclass(frozen=True)
class FrontmatterSplit:
    """A task file cut at its delimiters: ``bom + opening + yaml_text + closing + body == text``.

    Attributes:
        has_frontmatter: False when the file does not start with a ``---`` line.
        bom: ``"\\ufeff"`` when the file starts with a byte-order mark, else ``""``.
        opening: the opening ``---`` line with its line ending (``""`` without frontmatter).
        yaml_text: the text between the delimiter lines.
        closing: the closing ``---`` line with its line ending.
        body: everything after the closing line (the whole text without frontmatter).
        newline: the file's line ending, ``"\\n"`` or ``"\\r\\n"``.
        line_offset: add to a 1-based line of ``yaml_text`` to get the file's line (1).
    """

    has_frontmatter: bool
    bom: str
    opening: str
    yaml_text: str
    closing: str
    body: str
    newline: str
    line_offset: int = 1

    @property
    def prefix(self) -> str:
        return self.bom + self.opening


_LONE_CR = re.compile(r"\r(?!\n)")


def check_line_endings(text: str, path: Path | str | None = None) -> None:
    """Refuse a file whose lines end in a lone CR (classic Mac OS): neither GuardKit nor this tool
    reads those as line breaks, so its ``---`` lines are no frontmatter delimiters.

    Raises:
        FrontmatterError: naming the line endings and the fix.
    """
    if _LONE_CR.search(text):
        raise FrontmatterError("the file's lines end in a lone CR (classic Mac OS line endings), which GuardKit "
                               "does not read as line breaks: convert them to LF or CRLF", path=path,
                               expected="LF or CRLF line endings")


def refuse_look_alike_frontmatter(body: str, path: Path | str | None) -> None:
    """Refuse to create a frontmatter above a ``---`` line that is not a delimiter (``--- # meta``,
    or ``---`` after a blank line): the user meant one there, and a new one put above it would push
    their keys into the body. Such a file has no frontmatter for us as for GuardKit, so only the
    user can say which it is."""
    check_line_endings(body, path)
    blanks = _LEADING_BLANK_LINES.match(body)
    assert blanks is not None  # the pattern matches the empty string
    if body.startswith("---", blanks.end()):
        line = body.count("\n", 0, blanks.end()) + 1
        raise FrontmatterError(f"line {line} starts with '---' but is not a frontmatter delimiter (GuardKit reads "
                               "no frontmatter here): make the first line exactly '---'", path=path, line=line)


def split_frontmatter(text: str, *, path: Path | str | None = None) -> FrontmatterSplit:
    """Cut ``text`` at frontmatter delimiter lines (``---`` and optional trailing blanks).

    Raises:
        FrontmatterError: an opening ``---`` without a closing one (reported at line 1).
    """
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    start = len(bom)
    opening = _OPEN.match(text, start)
    if opening is None:
        if _LONE_OPEN.match(text, start):
            raise _missing_closing(path)
        newline = "\r\n" if "\r\n" in text[: text.find("\n") + 1] else "\n"
        return FrontmatterSplit(False, bom, "", "", "", text[start:], newline, 0)
    yaml_start = opening.end()
    close_start, close_end = _find_closing(text, yaml_start)
    if close_start < 0:
        raise _missing_closing(path)
    return FrontmatterSplit(
        has_frontmatter=True,
        bom=bom,
        opening=opening.group(0),
        yaml_text=text[yaml_start:close_start],
        closing=text[close_start:close_end],
        body=text[close_end:],
        newline=opening.group(1),
    )


def _find_closing(text: str, start: int) -> tuple[int, int]:
    """Start and end of the first delimiter line after ``start`` (``(-1, -1)`` when there is none)."""
    # str.find is memchr-fast; a MULTILINE ``^---`` regex tries every character of a 250 KB file.
    pos = start  # always a line start
    while True:
        if text.startswith("---", pos):
            tail = _CLOSE_TAIL.match(text, pos + 3)
            if tail is not None:
                return pos, tail.end()
        newline = text.find("\n---", pos)
        if newline < 0:
            return -1, -1
        pos = newline + 1


def _missing_closing(path: Path | str | None) -> FrontmatterError:
    return FrontmatterError(
        "frontmatter opened by '---' is never closed",
        path=path,
        line=1,
        expected="a closing '---' line",
    )


@dataclass(frozen=True)
class ParsedFrontmatter:
    """The frontmatter's data (``{}`` when absent), where it sits, and its YAML node tree."""

    data: dict[str, Any]
    split: FrontmatterSplit
    node: yaml.Node | None
    aliased: bool = False  # the YAML uses an alias (see :func:`strict_yaml.parse_yaml`)
    #: Keys a mapping repeats, read as their last value (only with ``keep_last``).
    duplicates: tuple[DuplicateKey, ...] = ()

    @property
    def pieces(self) -> tuple[str, str, str]:
        """The text up to the YAML, the YAML, the closing line and body: the three pieces it is made of."""
        split = self.split
        return split.prefix, split.yaml_text, split.closing + split.body

    @property
    def state_key(self) -> str | None:
        """``autobuild_state`` or ``feature_build``, whichever the file has, else None."""
        for key in STATE_KEYS:
            if key in self.data:
                return key
        return None

    def state(self, path: Path | str | None = None) -> AutobuildState | None:
        """The state block, checked against its schema (None when the file has none).

        Raises:
            FrontmatterError: a value of the block is not what the schema allows: its key's line,
                its JSON path (``$.autobuild_state.turns[1].turn``) and what was expected.
        """
        key = self.state_key
        if key is None:
            return None
        try:
            data = validate_record("autobuild_state", self.data[key] or {}, path=path, plain=True)
        except SchemaError as exc:
            parts = (key, *parse_pointer(exc.pointer or "$"))
            raise FrontmatterError(exc.message, path=path, line=self.line_of(*parts), pointer=format_pointer(parts),
                                   expected=exc.expected) from exc
        return AutobuildState.from_dict(data, key=key)

    def line_of(self, *parts: str | int) -> int | None:
        """The file line of the value at ``parts`` (a key's own line for a mapping's), from the node
        marks; else of the deepest of them that exists."""
        from guardkit_state.yamltext.positions import node_line  # YAML's node classes: a read that parses

        return node_line(self.node, parts, self.split.line_offset)


def parse_frontmatter(text: str, *, path: Path | str | None = None, keep_last: bool = False) -> ParsedFrontmatter:
    """Split and strictly parse a task file's frontmatter.

    ``keep_last``: a repeated key is read as its last value and listed in ``duplicates`` (GuardKit
    reads such files so), instead of refused.

    Raises:
        FrontmatterError: bad delimiters, invalid YAML, a non-mapping frontmatter or state block,
            or both ``autobuild_state`` and ``feature_build`` in one file.
        DuplicateKeyError: a key repeated in any mapping (with the file line of the second one).
    """
    split = split_frontmatter(text, path=path)
    if not split.has_frontmatter:
        return ParsedFrontmatter({}, split, None)
    try:
        from guardkit_state.yamltext.strict_yaml import parse_yaml

        parsed = parse_yaml(split.yaml_text, path=path, line_offset=split.line_offset, keep_last=keep_last)
    except FrontmatterError as exc:  # (a DuplicateKeyError is no FrontmatterError: it passes as it is)
        raise _with_closing_hint(exc, split) from exc
    if parsed.data is None:
        return ParsedFrontmatter({}, split, parsed.node)
    result = ParsedFrontmatter(parsed.data, split, parsed.node, parsed.aliased, parsed.duplicates)
    if not isinstance(parsed.data, dict):
        raise FrontmatterError(
            f"frontmatter is a {type(parsed.data).__name__}, not a mapping",
            path=path,
            line=split.line_offset + 1,
            expected="'key: value' lines",
        )
    if all(key in parsed.data for key in STATE_KEYS):
        raise FrontmatterError(
            f"both '{STATE_KEY}' and '{LEGACY_STATE_KEY}' are present",
            path=path,
            line=result.line_of(LEGACY_STATE_KEY),
            pointer=f"$.{LEGACY_STATE_KEY}",
            expected="one state block per task",
        )
    key = result.state_key
    if key is not None and not isinstance(parsed.data[key], (dict, type(None))):
        raise FrontmatterError(
            f"'{key}' is a {type(parsed.data[key]).__name__}, not a mapping",
            path=path,
            line=result.line_of(key),
            pointer=f"$.{key}",
            expected="a mapping with current_turn, turns ...",
        )
    return result


def _with_closing_hint(exc: FrontmatterError, split: FrontmatterSplit) -> FrontmatterError:
    """Point at a markdown heading inside the YAML: the closing ``---`` is probably missing."""
    if exc.line is None:
        return exc
    lines = split.yaml_text.split("\n")
    for index, line in enumerate(lines[: exc.line - split.line_offset]):
        if _MD_HEADING.match(line) and index > 0 and not lines[index - 1].strip():
            heading = index + 1 + split.line_offset
            return FrontmatterError(
                f"{exc.message} (is the closing '---' missing before line {heading}?)",
                path=exc.path,
                line=exc.line,
                expected=exc.expected,
                fix=exc.fix,
            )
    return exc
