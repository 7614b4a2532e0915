"""A task's acceptance criteria as GuardKit numbers them, read from its frontmatter or its body.

GuardKit's rule: a frontmatter ``acceptance_criteria`` list comes first; otherwise the items under
the body's ``## Acceptance Criteria`` heading, with ``### AC-... —`` sub-headings there counting as
criteria of their own. An explicit label at the start of a criterion (``AC-1: ...``,
``**AC-2** ...``, ``AC-ANTISTUB-1 ...``) is its id; a criterion without one is ``AC-00N`` by its
position. Using the task's own labels matters: a Coach judges ``AC-1``, and a ledger that renamed it
``AC-001`` would report the same criterion twice, once pending and once verified.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from guardkit_state.model import Criterion

_AC_HEADING = re.compile(r"^(#{2,3})[ \t]+acceptance criteria\b", re.I)
_ANY_HEADING = re.compile(r"^(#{1,6})[ \t]+(\S.*?)[ \t#]*$")
_FENCE = re.compile(r"^[ \t]*(```|~~~)")
_CHECKBOX = re.compile(r"^([ \t]*)[-*+][ \t]+\[([ xX])\][ \t]+(.*\S)?[ \t]*$")
_LIST_ITEM = re.compile(r"^([ \t]*)(?:[-*+]|\d+[.)])[ \t]+(.*\S)[ \t]*$")
#: A label opening a criterion: ``AC-1``, ``AC-001A``, ``AC-ANTISTUB-1``, ``AC-007-6``, perhaps in
#: bold, italics, backticks or brackets. Template placeholders (``AC-XXX``) have no digit: no label.
_LABEL = re.compile(r"^(\*\*|__|\*|_|`|\[)?(AC(?:-[A-Z0-9]+)+)(?![A-Za-z0-9])")
_CLOSERS = {"**": "**", "__": "__", "*": "*", "_": "_", "`": "`", "[": "]"}
_SEPARATORS = re.compile(r"^[ \t]*(?:[:.|\-–—][ \t]*)*")
#: Stands in for the lines of an ``### AC-...`` block while the list items around it are read: a
#: heading (it ends the item above it) that is neither a checkbox nor a list item.
_BLOCK = "# -"


@dataclass(frozen=True)
class _Item:
    """One criterion as written: where it starts in the section, its lines, its checkbox."""

    line: int
    parts: tuple[str, ...]
    checked: bool = False


def extract_criteria(data: dict[str, Any], body: str) -> list[Criterion]:
    """The task's acceptance criteria with GuardKit's ids, in order, each text on one line.

    From a frontmatter ``acceptance_criteria`` list (strings, or mappings with ``id`` and
    ``text``/``description``/``criterion``) when it has items; else from the body's acceptance-criteria
    section (sub-headings inside it included, up to the next heading of the same or a higher level):
    its ``### AC-...`` headings, and its checkbox items ``- [ ]``/``* [x]`` at any depth, each with its
    continuation lines folded in; a section without checkboxes gives its top-level list items.
    """
    listed = _frontmatter_criteria(data.get("acceptance_criteria"))
    if listed:
        criteria = _numbered([(label, text, False) for label, text, _ in listed])
        return [replace(c, verifier=stamp[0], test_ref=stamp[1]) if stamp else c
                for c, (_, _, stamp) in zip(criteria, listed, strict=True)]
    section = _criteria_section(body)
    if not section:
        return []
    return _numbered([(None, " ".join(item.parts), item.checked) for item in _section_items(section)])


def criterion_label(text: str) -> tuple[str | None, str]:
    """``(label, text without it)`` for a criterion's text; ``(None, text)`` when it has no label.

    ``**AC-2** — Works`` -> ``("AC-2", "Works")``; ``AC-1 (design gate): x`` -> ``("AC-1", "(design
    gate): x")``; ``**AC-1 — Fast.** It is`` -> ``("AC-1", "Fast. It is")``.
    """
    match = _LABEL.match(text)
    if match is None or not any(ch.isdigit() for ch in match.group(2)):
        return None, text
    rest = text[match.end():]
    opener = match.group(1)
    if opener:
        closer = _CLOSERS[opener]
        at = rest.find(closer)
        if at == -1 and opener in ("*", "_", "`", "["):
            return None, text  # an emphasis or code span that does not close is not a label's markup
        if at != -1:
            rest = rest[:at] + rest[at + len(closer):]
    rest = _SEPARATORS.sub("", rest, count=1).strip()
    return match.group(2), rest or match.group(2)


def _numbered(items: list[tuple[str | None, str, bool]]) -> list[Criterion]:
    """Criteria with ids: each one's label, else ``AC-00N`` by position; every id used once.

    A label repeated by mistake, and a position taken by another criterion's label, fall back to
    ``AC-00N``, then ``AC-00N.k``: two criteria must never share an id (the ledger is keyed by it).
    """
    found: list[tuple[str | None, str, str, bool]] = []
    for given, written, checked in items:
        label, text = criterion_label(written)
        found.append((given or label, text if label else written, written, checked))
    taken: set[str] = set()
    chosen: list[str | None] = []
    for label, *_ in found:
        chosen.append(label if label and label not in taken else None)
        if label:
            taken.add(label)
    criteria: list[Criterion] = []
    for position, (cid, (_, text, written, checked)) in enumerate(zip(chosen, found, strict=True), start=1):
        if cid is None:
            cid = base = f"AC-{position:03d}"
            suffix = 1
            while cid in taken:
                suffix += 1
                cid = f"{base}.{suffix}"
            taken.add(cid)
        criteria.append(Criterion(id=cid, text=text, checked=checked,
                                  written=written if written != text else None))
    return criteria


def _criteria_section(body: str) -> list[str]:
    """The lines of the first acceptance-criteria section (level 2 preferred, else level 3), with
    its fenced code blocked out (:func:`_without_fences`)."""
    lines = _without_fences(body.splitlines())
    for wanted in ("##", "###"):
        for index, line in enumerate(lines):
            heading = _AC_HEADING.match(line)
            if heading and heading.group(1) == wanted:
                return _until_next_heading(lines, index + 1, len(wanted))
    return []


def _until_next_heading(lines: list[str], start: int, level: int) -> list[str]:
    for end in range(start, len(lines)):
        heading = _ANY_HEADING.match(lines[end])
        if heading and len(heading.group(1)) <= level:
            return lines[start:end]
    return lines[start:]


def _without_fences(lines: list[str]) -> list[str]:
    out: list[str] = []
    in_fence = False
    for line in lines:
        if _FENCE.match(line):
            in_fence = not in_fence
            out.append("")
            continue
        out.append("" if in_fence else line)
    return out


def _section_items(lines: list[str]) -> list[_Item]:
    """The section's criteria in order: ``### AC-...`` headings, then the items outside them.

    The lines under an ``AC-...`` heading (up to the next heading) describe that criterion: its
    bullets are details, not criteria of their own.
    """
    headings: list[_Item] = []
    rest = list(lines)
    index = 0
    while index < len(lines):
        heading = _ANY_HEADING.match(lines[index])
        label = criterion_label(heading.group(2))[0] if heading else None
        if heading is None or label is None:
            index += 1
            continue
        headings.append(_Item(index, (heading.group(2),)))
        rest[index] = _BLOCK
        index += 1
        while index < len(lines) and not _ANY_HEADING.match(lines[index]):
            rest[index] = _BLOCK
            index += 1
    listed = _checkbox_items(rest) or _list_items(rest)
    return sorted([*headings, *listed], key=lambda item: item.line)


def _checkbox_items(lines: list[str]) -> list[_Item]:
    """Each checkbox line with its continuation lines (deeper, not a checkbox, not a heading)."""
    items: list[_Item] = []
    index = 0
    while index < len(lines):
        match = _CHECKBOX.match(lines[index])
        start = index
        index += 1
        if match is None:
            continue
        depth = _width(match.group(1))
        parts = [match.group(3) or ""]
        while index < len(lines):
            line = lines[index]
            if not line.strip():
                following = next((n for n in lines[index + 1 :] if n.strip()), "")
                if following and _width(following) > depth and not _CHECKBOX.match(following):
                    index += 1
                    continue
                break
            if _CHECKBOX.match(line) or _width(line) <= depth or _ANY_HEADING.match(line):
                break
            parts.append(line.strip())
            index += 1
        items.append(_Item(start, tuple(part for part in parts if part), match.group(2) in "xX"))
    return items


def _list_items(lines: list[str]) -> list[_Item]:
    """Top-level list items (the shallowest bullets or numbers) of a section without checkboxes."""
    found = [(index, _width(m.group(1)), m.group(2))
             for index, m in enumerate(map(_LIST_ITEM.match, lines)) if m]
    if not found:
        return []
    top = min(depth for _, depth, _ in found)
    return [_Item(index, (text,)) for index, depth, text in found if depth == top]


def _frontmatter_criteria(value: Any) -> list[tuple[str | None, str, tuple[str, str | None] | None]]:
    """``(id given, text, stamp)`` of each item of a frontmatter list; a mapping may name its ``id``
    and carry GuardKit's routing-law stamp (``verifier:``, with ``test_ref:``)."""
    if not isinstance(value, list):
        return []
    out: list[tuple[str | None, str, tuple[str, str | None] | None]] = []
    for item in value:
        given: str | None = None
        stamp: tuple[str, str | None] | None = None
        if isinstance(item, dict):
            raw_id = item.get("id")
            given = raw_id.strip() if isinstance(raw_id, str) and raw_id.strip() else None
            verifier, test_ref = item.get("verifier"), item.get("test_ref")
            if isinstance(verifier, str) and verifier.strip():
                stamp = (verifier.strip(), test_ref.strip() if isinstance(test_ref, str) and test_ref.strip() else None)
            item = item.get("text") or item.get("description") or item.get("criterion")
        if item is not None and str(item).strip():
            out.append((given, " ".join(str(item).split()), stamp))
    return out


def _width(line: str) -> int:
    return len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip())


__all__ = ["criterion_label", "extract_criteria"]
