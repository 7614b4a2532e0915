"""``git merge`` of task files and feature plans: the merge driver's text side.

Git runs the driver as ``guardkit-state merge-driver %O %A %B %P`` (base, ours, theirs, the path)
and takes ``%A`` as the result: exit 0 is a clean merge, anything else a conflict. Each version's
frontmatter (a plan: the whole file) is parsed strictly and merged as data by
:mod:`state_merge`; the markdown body is merged by ``git merge-file``.

The result keeps each side's bytes where it can: a top-level key whose merged value is ours (or
theirs, or the base's) is copied as that version wrote it, comments and quoting included; only a
key whose merged value is new (turns from both sides, a status moved forward) is rendered. A
conflicting key is written twice, as ours and as theirs, between conflict markers, and named on
stderr. A clean result is verified by one strict parse, compared with the merged data.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from guardkit_state.errors import GuardkitStateError, ParseError
from guardkit_state.git.runner import execute
from guardkit_state.remote.state_merge import MISSING, MergedData, merge_plan, merge_task_frontmatter
from guardkit_state.taskfile.frontmatter import split_frontmatter
from guardkit_state.yamltext.render import render_yaml, same
from guardkit_state.yamltext.strict_yaml import parse_yaml

MARKER = 7  # git's default conflict-marker size


@dataclass
class DriverResult:
    """The merged text and what did not merge (``conflicts``: one line each)."""

    text: str
    conflicts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.conflicts


@dataclass(frozen=True)
class _Yaml:
    """One version's YAML: its data and its top-level key blocks as written."""

    data: Any
    prefix: str  # comments before the first key
    blocks: dict[Any, str]


def merge_texts(base: str, ours: str, theirs: str, path: str, *, marker: int = MARKER) -> DriverResult:
    """Merge three versions of the file at ``path`` (a task file ``*.md`` or a plan ``*.yaml``)."""
    if path.endswith((".yaml", ".yml")):
        return _merge_plan(base, ours, theirs, path, marker)
    return _merge_task(base, ours, theirs, path, marker)


def _merge_plan(base: str, ours: str, theirs: str, path: str, marker: int) -> DriverResult:
    try:
        sides = [_read_yaml(text, path) for text in (base, ours, theirs)]
    except (ParseError, GuardkitStateError) as exc:
        return _as_text(base, ours, theirs, marker, f"{path}: not plain YAML on one side ({exc}): merged as text")
    merged = merge_plan(sides[0].data, sides[1].data, sides[2].data)
    text, conflicts = _render(sides, merged, _newline(ours), marker)
    return DriverResult(text, conflicts)


def _merge_task(base: str, ours: str, theirs: str, path: str, marker: int) -> DriverResult:
    try:
        splits = [split_frontmatter(text, path=path) for text in (base, ours, theirs)]
        sides = [_read_yaml(s.yaml_text, path) for s in splits]
    except (ParseError, GuardkitStateError) as exc:
        note = f"{path}: a frontmatter that does not parse ({exc}): merged as text"
        return _as_text(base, ours, theirs, marker, note)
    _, split_o, _ = splits
    if not split_o.has_frontmatter and not any(s.has_frontmatter for s in splits):
        return _as_text(base, ours, theirs, marker, None)
    merged = merge_task_frontmatter(sides[0].data, sides[1].data, sides[2].data)
    nl = split_o.newline if split_o.has_frontmatter else _newline(theirs)
    yaml_text, conflicts = _render(sides, merged, nl, marker)
    body, body_conflicts = merge_file(splits[0].body, split_o.body, splits[2].body, marker)
    if body_conflicts:
        conflicts.append(f"the markdown body: {body_conflicts} conflicting hunk(s)")
    opening = split_o.prefix if split_o.has_frontmatter else next(s.prefix for s in splits if s.has_frontmatter)
    closing = split_o.closing if split_o.has_frontmatter else next(s.closing for s in splits if s.has_frontmatter)
    return DriverResult(opening + yaml_text + closing + body, conflicts)


# --------------------------------------------------------------------------- YAML blocks


def _read_yaml(text: str, path: str) -> _Yaml:
    parsed = parse_yaml(text, path=path)
    if parsed.data is None:
        return _Yaml({}, text, {})
    if not isinstance(parsed.data, dict) or not isinstance(parsed.node, yaml.MappingNode):
        raise ParseError("the document is not a mapping", path=path, expected="a YAML mapping")
    if parsed.aliased or "<<" in text:
        return _Yaml(parsed.data, "", {})  # anchors tie keys together: no key's text is copied alone
    starts = [_line_start(text, key.start_mark.index) for key, _ in parsed.node.value]
    ends = [*starts[1:], len(text)]
    blocks = {}
    # Duplicate keys are refused and merge keys excluded: the data's keys are the nodes', in order.
    for key, start, end in zip(parsed.data, starts, ends, strict=True):
        block = text[start:end]
        blocks[key] = block if block.endswith("\n") else block + "\n"
    return _Yaml(parsed.data, text[: starts[0]] if starts else text, blocks)


def _line_start(text: str, index: int) -> int:
    return text.rfind("\n", 0, index) + 1


def _render(sides: list[_Yaml], merged: MergedData, nl: str, marker: int) -> tuple[str, list[str]]:
    """The merged YAML text; a key resolved differently as ours and as theirs goes between markers."""
    base, ours, theirs = sides
    as_o = merged.as_ours if isinstance(merged.as_ours, dict) else {}
    as_t = merged.as_theirs if isinstance(merged.as_theirs, dict) else {}
    out = [ours.prefix if ours.blocks or not theirs.blocks else theirs.prefix]
    for key in list(as_o) + [k for k in as_t if k not in as_o]:
        value_o, value_t = as_o.get(key, MISSING), as_t.get(key, MISSING)
        text_o = _block(key, value_o, sides, nl)
        if value_o is not MISSING and value_t is not MISSING and same(value_o, value_t):
            out.append(text_o)
            continue
        text_t = _block(key, value_t, sides, nl)
        out.append(f"{'<' * marker} ours{nl}{text_o}{'=' * marker}{nl}{text_t}{'>' * marker} theirs{nl}")
    text = "".join(out)
    conflicts = [conflict.describe() for conflict in merged.conflicts]
    if not conflicts:
        text = _verified(text, as_o, base, nl)
    return text, conflicts


def _block(key: Any, value: Any, sides: list[_Yaml], nl: str) -> str:
    if value is MISSING:
        return ""
    for side in (sides[1], sides[2], sides[0]):
        if key in side.blocks and isinstance(side.data, dict) and key in side.data and same(side.data[key], value):
            return side.blocks[key]
    return render_yaml({key: value}).replace("\n", nl)


def _verified(text: str, merged: dict[Any, Any], base: _Yaml, nl: str) -> str:
    """``text`` when it reads back as ``merged``; else the merged data rendered whole (a side's
    block could not stand alone, e.g. a comment line ending one block that YAML tied to the next)."""
    try:
        if same(parse_yaml(text).data or {}, merged):
            return text
    except ParseError:
        pass
    return render_yaml(merged).replace("\n", nl) if merged else ""


# --------------------------------------------------------------------------- text


def merge_file(base: str, ours: str, theirs: str, marker: int = MARKER) -> tuple[str, int]:
    """``git merge-file -p`` of three texts: the result and the number of conflicting hunks."""
    with tempfile.TemporaryDirectory(prefix="guardkit-merge-") as tmp:
        names = []
        for name, text in (("ours", ours), ("base", base), ("theirs", theirs)):
            file = Path(tmp) / name
            file.write_bytes(text.encode("utf-8", "surrogateescape"))
            names.append(str(file))
        status, out, err = execute(Path(tmp), ["git", "merge-file", "-p", f"--marker-size={marker}",
                                               "-L", "ours", "-L", "base", "-L", "theirs", *names])
    if status < 0 or status > 127:
        raise GuardkitStateError(f"git merge-file failed (exit {status}): {err.strip()}")
    return out.decode("utf-8", "surrogateescape"), status


def _as_text(base: str, ours: str, theirs: str, marker: int, note: str | None) -> DriverResult:
    text, hunks = merge_file(base, ours, theirs, marker)
    return DriverResult(text, [f"{hunks} conflicting hunk(s) in a text merge"] if hunks else [],
                        [note] if note else [])


def _newline(text: str) -> str:
    first = text.find("\n")
    return "\r\n" if first > 0 and text[first - 1] == "\r" else "\n"


__all__ = ["MARKER", "DriverResult", "merge_file", "merge_texts"]
