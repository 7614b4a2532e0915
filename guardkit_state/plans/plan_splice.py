"""Surgical, verified edits of a feature plan's text. Pure functions, text in and text out.

A :class:`PlanUpdate` sets values of task entries (``tasks[3].status``, ``result``, a new
``merged_commit`` ...), of the ``execution`` block (created when absent) and top-level values.
:func:`splice_plan` never re-dumps the plan: every key is located from the strict parse's node
marks (inside list items too), a one-line scalar is replaced in place (its quoting style chosen
afresh, its trailing comment kept), any other value is rewritten with its own entry only, new
keys are added after the last key of their mapping, and a flow list (``completed_waves: [1, 2]``)
stays a flow list. Comments, key order, quoting, block scalars and every other byte are kept.

Before it is returned the new text is verified: parsed with the same strict reader, its data
compared (type-exact) with :func:`apply_plan_update` of the old data, every edit checked to lie
inside the entries the update sets, and the plan's schema problems must not grow. Any mismatch
raises a typed error and the caller writes nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from guardkit_state.errors import (
    FeaturePlanError,
    ParseError,
    TaskNotFoundError,
    WriteVerificationError,
)
from guardkit_state.plans.schema import node_line, raise_problems, schema_problems
from guardkit_state.store.json_paths import format_pointer
from guardkit_state.taskfile.splice.edits import MISSING, Fallback, set_value
from guardkit_state.taskfile.splice.positions import (
    Edits,
    Entry,
    LayoutError,
    by_key,
    entries_of,
    last_block_scalar,
    top_level_entries,
)
from guardkit_state.taskfile.splice.render import plain_data, render_scalar, same
from guardkit_state.taskfile.splice.verify import check_edits, first_difference, read_back
from guardkit_state.taskfile.strict_yaml import ParsedYaml, parse_yaml

#: The text before a list item's first key on the item's own line: indent, ``-``, blanks.
_ITEM_PREFIX = re.compile(r"[ ]*-[ \t]+\Z")
#: A scalar safe to write inside a flow list as it is (no ``,`` ``[`` ``]`` ``{`` ``}`` ``#`` ``:``).
_FLOW_SAFE = re.compile(r"[A-Za-z0-9_.\-/']+\Z")


@dataclass
class PlanUpdate:
    """What to change in a plan: values of task entries, of ``execution``, and top-level values.

    Attributes:
        tasks: task id -> ``{key: value}`` to set on that entry (changed when different, added
            after the entry's last key when missing). A task's ``id`` cannot be changed.
        execution: ``execution`` keys to set; the block is added at the end of the plan when absent.
        top_level: top-level keys to set (``status`` ...); not ``tasks`` or ``execution``.

    Values are plain YAML data (str, int, float, bool, None, lists and mappings of them).
    """

    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    execution: dict[str, Any] = field(default_factory=dict)
    top_level: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("tasks", "execution"):
            if name in self.top_level:
                raise ValueError(f"set {name!r} through its own field, not top_level")
        for task_id, values in self.tasks.items():
            if "id" in values:
                raise ValueError(f"the id of task {task_id} cannot be changed")
        for values in (self.execution, self.top_level, *self.tasks.values()):
            bad = [key for key in values if not isinstance(key, str)]
            if bad:
                raise ValueError(f"keys must be strings, not {bad[0]!r}")

    def set_task(self, task_id: str, **values: Any) -> PlanUpdate:
        """Add values to set on task ``task_id``; returns this update (for chaining)."""
        if "id" in values:
            raise ValueError(f"the id of task {task_id} cannot be changed")
        self.tasks.setdefault(task_id, {}).update(values)
        return self

    def set_execution(self, **values: Any) -> PlanUpdate:
        """Add ``execution`` values to set; returns this update."""
        self.execution.update(values)
        return self

    def set_top_level(self, **values: Any) -> PlanUpdate:
        """Add top-level values to set; returns this update."""
        for name in ("tasks", "execution"):
            if name in values:
                raise ValueError(f"set {name!r} through its own field, not top_level")
        self.top_level.update(values)
        return self

    @property
    def is_empty(self) -> bool:
        return not (self.execution or self.top_level or any(self.tasks.values()))


@dataclass(frozen=True)
class PlanSpliceResult:
    """The new text, whether it differs from the old one, and its verified strict parse."""

    text: str
    changed: bool
    parsed: ParsedYaml = field(repr=False, compare=False)


# --------------------------------------------------------------------------- the data twin


def apply_plan_update(data: dict[str, Any], update: PlanUpdate, *, path: Path | str | None = None) -> dict[str, Any]:
    """The plan data after ``update`` (pure: ``data`` is not changed): the twin of :func:`splice_plan`.

    Existing keys keep their place; new keys go after the last key of their mapping, a new
    ``execution`` after the plan's last key, then new top-level keys, in the update's order.

    Raises:
        TaskNotFoundError: the update names a task the plan does not have.
        FeaturePlanError: the update names a task listed twice.
    """
    out = dict(data)
    if any(update.tasks.values()):
        tasks = list(out.get("tasks") or [])
        for task_id, values in update.tasks.items():
            if values:
                index = _task_index(tasks, task_id, path)
                tasks[index] = {**tasks[index], **plain_data(values)}
        out["tasks"] = tasks
    if update.execution:
        old = out.get("execution")
        out["execution"] = {**(old if isinstance(old, dict) else {}), **plain_data(update.execution)}
    for key, value in update.top_level.items():
        out[key] = plain_data(value)
    return out


def _task_index(tasks: list[Any], task_id: str, path: Path | str | None) -> int:
    found = [index for index, task in enumerate(tasks) if isinstance(task, dict) and task.get("id") == task_id]
    if not found:
        raise TaskNotFoundError(f"the feature plan has no task {task_id}", path=path, task_id=task_id,
                                expected="the id of one of the plan's tasks")
    if len(found) > 1:
        raise FeaturePlanError(f"task {task_id} is listed {len(found)} times in the plan; which entry to update "
                               "is ambiguous", task_ids=[task_id], path=path, expected="each task id once",
                               pointer=format_pointer(("tasks", found[1], "id")))
    return found[0]


# --------------------------------------------------------------------------- the splice


@dataclass
class _Splice:
    """One splice in progress: the old text and parse, the edits, and the spans they may touch."""

    text: str
    parsed: ParsedYaml
    path: Path | str | None
    newline: str
    edits: Edits = field(default_factory=Edits)
    allowed: list[tuple[int, int]] = field(default_factory=list)

    def error(self, message: str, parts: tuple[str | int, ...], **context: Any) -> FeaturePlanError:
        return FeaturePlanError(message, path=self.path, line=node_line(self.parsed.node, parts),
                                pointer=format_pointer(parts), **context)

    def append_point(self, at: int) -> int:
        """``at``, after giving a text without a final line break one when ``at`` is its end."""
        end = len(self.text)
        if at == end and self.text and not self.text.endswith("\n") and not any(
                stop == end and new.endswith("\n") for _, stop, _, new in self.edits.items):
            last = last_block_scalar(self.text, self.parsed.node)
            if last is not None and "-" not in last[1]:  # the value keeps its final line break
                raise FeaturePlanError("the plan ends inside a block scalar ('|' or '>') without a final line break: "
                                       "a line added after it would change that value", path=self.path,
                                       line=self.text.count("\n") + 1, expected="a line break at the end of the file")
            self.edits.add(end, end, self.newline)
            self.allowed.append((end, end))
        return at

    def set(self, entry: Entry | None, key: str, value: Any, old: Any, indent: int, insert_at: int,
            parts: tuple[str | int, ...]) -> None:
        """Set ``key`` (at ``parts``) to ``value``: rewritten when it differs, added when missing."""
        if entry is not None and old is not MISSING and same(old, value):
            return
        if entry is None:
            insert_at = self.append_point(insert_at)
            self.allowed.append((insert_at, insert_at))
        else:
            entry = _without_blank_tail(self.text, entry)
            self.allowed.append((entry.start, entry.end))
            if self._set_flow_list(entry, value):
                return
        try:
            set_value(self.text, self.edits, entry, key, value, old, indent, self.newline, insert_at=insert_at)
        except Fallback as why:
            raise self.error(f"cannot update {format_pointer(parts)}: {why}", parts, expected="'key: value'") from None

    def _set_flow_list(self, entry: Entry, value: Any) -> bool:
        """Rewrite a flow list (``[1, 2]``) as a flow list, when every new item is a simple scalar."""
        node = entry.value
        if not (isinstance(node, yaml.SequenceNode) and node.flow_style and isinstance(value, list)):
            return False
        if entry.anchor(self.text) or entry.tagged(self.text):
            return False
        items = [render_scalar(item) for item in value]
        if not all(item is not None and _FLOW_SAFE.match(item) for item in items):
            return False
        self.edits.add(node.start_mark.index, node.end_mark.index, "[" + ", ".join(map(str, items)) + "]")
        return True


def splice_plan(text: str, update: PlanUpdate, *, path: Path | str | None = None,
                parsed: ParsedYaml | None = None) -> PlanSpliceResult:
    """Apply ``update`` to a plan's text, changing only the values it sets, and verify the result.

    Args:
        text: the plan's text.
        update: what to change.
        path: the file, for error messages.
        parsed: the strict parse of ``text`` when the caller has it.

    A no-op update (every value already as asked) returns the identical text, ``changed`` False.

    Raises:
        ParseError, DuplicateKeyError: ``text`` is not a plan the strict reader accepts.
        TaskNotFoundError: the update names a task the plan does not have.
        FeaturePlanError: a layout the splice cannot edit (a flow-style ``tasks`` list, an alias
            where a value is set ...), or a task listed twice.
        WriteVerificationError: the new text would not read back as exactly the intended update.
        SchemaError: the update would give the plan a value of the wrong type.
    """
    if parsed is None:
        parsed = parse_yaml(text, path=path, error_type=ParseError)
    if update.is_empty:
        return PlanSpliceResult(text, False, parsed)
    first_line = text[: text.find("\n") + 1]
    splice = _Splice(text, parsed, path, "\r\n" if first_line.endswith("\r\n") else "\n")
    data = parsed.data if isinstance(parsed.data, dict) else {}
    top = _top_entries(splice)
    expected = apply_plan_update(data, update, path=path)
    if any(update.tasks.values()):
        _edit_tasks(splice, top, data, update)
    if update.execution:
        _edit_execution(splice, top.get("execution"), data.get("execution", MISSING), plain_data(update.execution))
    for key, value in update.top_level.items():
        splice.set(top.get(key), key, plain_data(value), data.get(key, MISSING), 0, len(text), (key,))
    if not splice.edits.items:
        return PlanSpliceResult(text, False, parsed)
    new_text = splice.edits.apply(text)
    if new_text == text:
        return PlanSpliceResult(text, False, parsed)
    return PlanSpliceResult(new_text, True, _verify(splice, new_text, expected))


def _top_entries(splice: _Splice) -> dict[str, Entry]:
    try:
        return by_key(top_level_entries(splice.text, splice.parsed.node))
    except LayoutError as why:
        raise FeaturePlanError(f"the feature plan cannot be edited in place: {why}", path=splice.path,
                               line=splice.text.count("\n", 0, why.at) + 1,
                               expected="top-level 'key: value' lines at column 0") from None


def _edit_tasks(splice: _Splice, top: dict[str, Entry], data: dict[str, Any], update: PlanUpdate) -> None:
    entry = top.get("tasks")
    tasks = data.get("tasks")
    node = entry.value if entry is not None else None
    if entry is None or not isinstance(tasks, list) or not isinstance(node, yaml.SequenceNode) \
            or node.flow_style or entry.tagged(splice.text) or len(node.value) != len(tasks):
        raise splice.error("the plan's 'tasks' is not a block list of entries written in place (flow style, an "
                           "alias or a tag?); its entries cannot be edited", ("tasks",),
                           expected="'tasks:' followed by '- id: ...' entries")
    for task_id, values in update.tasks.items():
        if not values:
            continue
        index = _task_index(tasks, task_id, splice.path)
        children = _item_entries(splice, entry, node, index)
        named = by_key(children)
        old_item = tasks[index]
        for key, value in plain_data(values).items():
            splice.set(named.get(key), key, value, old_item.get(key, MISSING), children[0].indent,
                       _without_blank_tail(splice.text, children[-1]).end, ("tasks", index, key))


def _item_entries(splice: _Splice, owner: Entry, sequence: yaml.SequenceNode, index: int) -> list[Entry]:
    """The entries of task ``index``'s mapping, located from node marks.

    The first key of a list item sits after its ``- `` on the same line; the layout reader wants
    every key to start its own line, so it reads a copy of the text where that ``-`` is a blank
    (same length: every offset stays true).
    """
    text = splice.text
    item = sequence.value[index]
    parts: tuple[str | int, ...] = ("tasks", index)
    if not isinstance(item, yaml.MappingNode) or item.flow_style or not item.value \
            or not owner.line_end <= item.start_mark.index < owner.end:
        raise splice.error(f"task entry {index + 1} is not a block mapping written in place (flow style or an "
                           "alias?); it cannot be edited", parts, expected="'- id: ...' followed by 'key: value' lines")
    key_at = item.start_mark.index
    lo = _item_start(text, item)
    hi = _item_start(text, sequence.value[index + 1]) if index + 1 < len(sequence.value) else owner.end
    prefix = text[lo:key_at]
    if "\n" not in prefix and not _ITEM_PREFIX.match(prefix):
        raise splice.error(f"task entry {index + 1} starts with something other than '- key:' (an anchor or a "
                           "tag?); it cannot be edited", parts, expected="'- id: ...'")
    masked = text if "\n" in prefix else text[:lo] + prefix.replace("-", " ") + text[key_at:]
    try:
        children = entries_of(masked, item, lo, hi)
    except LayoutError as why:
        raise splice.error(f"the keys of task entry {index + 1} cannot be located: {why}", parts,
                           expected="one 'key: value' per line") from None
    if any(child.merge for child in children):
        raise splice.error(f"task entry {index + 1} has a '<<' merge key; it cannot be edited", parts)
    return children


def _without_blank_tail(text: str, entry: Entry) -> Entry:
    """``entry`` without the blank lines that end it.

    A block scalar's node ends after the blank lines that follow it, though (but with ``+``
    chomping) they are not part of its value: they separate it from what follows, and stay there
    when the value is rewritten or a key is added after it.
    """
    node = entry.value
    if not isinstance(node, yaml.ScalarNode) or node.style not in ("|", ">"):
        return entry
    header = text[node.start_mark.index : text.find("\n", node.start_mark.index)].split("#")[0]
    if "+" in header:
        return entry
    end = entry.end
    while end > entry.line_end:
        start = text.rfind("\n", 0, end - 1) + 1
        if text[start:end].strip():
            break
        end = start
    return replace(entry, end=end)


def _item_start(text: str, item: yaml.Node) -> int:
    """The start of the line holding a list item's ``-`` (the item's own line without one)."""
    pos = item.start_mark.index
    back = pos - 1
    while back >= 0 and text[back] in " \t\r\n":
        back -= 1
    at = back if back >= 0 and text[back] == "-" else pos
    return text.rfind("\n", 0, at) + 1


def _edit_execution(splice: _Splice, entry: Entry | None, old: Any, values: dict[str, Any]) -> None:
    """Set ``execution`` values key by key; add the block when absent; rewrite a layout it cannot
    edit key by key (null, flow style) as one entry."""
    text = splice.text
    node = entry.value if entry is not None else None
    if entry is None or not isinstance(old, dict) or not isinstance(node, yaml.MappingNode) or node.flow_style \
            or not node.value or entry.tagged(text):
        merged = {**(old if isinstance(old, dict) else {}), **values}
        at = entry.end if entry is not None else len(text)
        splice.set(entry, "execution", merged, old, 0, at, ("execution",))
        return
    try:
        children = entries_of(text, node, entry.line_end, entry.end)
    except LayoutError as why:
        raise splice.error(f"the keys of 'execution' cannot be located: {why}", ("execution",),
                           expected="one 'key: value' per line") from None
    if any(child.merge for child in children):
        raise splice.error("'execution' has a '<<' merge key; it cannot be edited", ("execution",))
    named = by_key(children)
    for key, value in values.items():
        splice.set(named.get(key), key, value, old.get(key, MISSING), children[0].indent,
                   _without_blank_tail(text, children[-1]).end, ("execution", key))


# --------------------------------------------------------------------------- verification


def _verify(splice: _Splice, new_text: str, expected: dict[str, Any]) -> ParsedYaml:
    """The strict parse of ``new_text`` once it is shown to be exactly the intended update."""
    path = splice.path
    check_edits(splice.text, new_text, splice.edits, splice.allowed, path)
    new = read_back(new_text, partial(parse_yaml, path=path, error_type=ParseError), path)
    pointer = first_difference(expected, new.data)
    if pointer is not None:
        hint = " (a YAML alias of a value the update changes?)" if splice.parsed.aliased else ""
        raise WriteVerificationError(f"the new text would change {pointer}, which the update does not set{hint}; "
                                     "nothing was written", path=path, pointer=pointer)
    problems = schema_problems(new.data, new.node)
    if problems:
        before = {(p.pointer, p.message) for p in schema_problems(splice.parsed.data, splice.parsed.node)}
        added = [p for p in problems if (p.pointer, p.message) not in before]
        if added:
            raise_problems(added, path, "the update would give the plan an invalid value; nothing was written")
    return new


__all__ = ["PlanSpliceResult", "PlanUpdate", "apply_plan_update", "splice_plan"]
