"""Surgical, verified edits of a feature plan's text. Pure functions, text in and text out.

A :class:`PlanUpdate` sets values of task entries (``tasks[3].status``, ``result``, a new
``merged_commit`` ...), of the ``execution`` block (created when absent) and top-level values.
Its meaning is its data twin, :func:`apply_plan_update`; :func:`splice_plan` lets the one YAML
editor (:mod:`guardkit_state.yamltext.editor`) write the difference into the plan's text,
never re-dumping it: each task entry is edited in place key by key, a one-line scalar replaced in
place (its trailing comment kept), new keys added after the last key of their mapping, and a flow
list (``completed_waves: [1, 2]``) kept a flow list. Comments, key order, quoting, block scalars
and every other byte are kept.

Before it is returned the new text is verified: parsed with the same strict reader, its data
compared (type-exact) with :func:`apply_plan_update` of the old data, every byte outside the edits
kept, and the plan's schema problems must not grow. Any mismatch raises a typed error and the
caller writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from guardkit_state.errors import FeaturePlanError, ParseError, TaskNotFoundError
from guardkit_state.plans.schema import node_line, raise_problems, schema_problems
from guardkit_state.store.json_paths import format_pointer
from guardkit_state.yamltext.editor import Refusal, edit_yaml
from guardkit_state.yamltext.render import plain_data
from guardkit_state.yamltext.strict_yaml import ParsedYaml, parse_yaml
from guardkit_state.yamltext.verify import verify_write


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
    data = parsed.data if isinstance(parsed.data, dict) else {}
    expected = apply_plan_update(data, update, path=path)
    _check_tasks(parsed, data, update, path)
    first_line = text[: text.find("\n") + 1]
    try:
        edited = edit_yaml(text, parsed.node, data, expected, newline="\r\n" if first_line.endswith("\r\n") else "\n",
                           narrow=[("tasks",)], column_0=True)
    except Refusal as why:
        raise FeaturePlanError(f"the feature plan cannot be edited in place: {why}", path=path,
                               line=text.count("\n", 0, why.at) + 1, expected="'key: value' lines") from None
    new_text = edited.edits.apply(text)
    if new_text == text:
        return PlanSpliceResult(text, False, parsed)
    new = verify_write(new_text, partial(parse_yaml, path=path, error_type=ParseError), expected,
                       pieces=("", new_text, ""), old=text, edits=edited.edits, path=path, aliased=parsed.aliased,
                       cut=lambda _: ("", new_text, ""))
    problems = schema_problems(new.data, new.node)
    if problems:
        before = {(p.pointer, p.message) for p in schema_problems(parsed.data, parsed.node)}
        added = [p for p in problems if (p.pointer, p.message) not in before]
        if added:
            raise_problems(added, path, "the update would give the plan an invalid value; nothing was written")
    return PlanSpliceResult(new_text, True, new)


def _check_tasks(parsed: ParsedYaml, data: dict[str, Any], update: PlanUpdate, path: Path | str | None) -> None:
    """Refuse, by name, a ``tasks`` list whose entries the update sets but cannot be edited where they are."""
    if not any(update.tasks.values()):
        return
    node = next((value for key, value in parsed.node.value if getattr(key, "value", None) == "tasks"), None) \
        if isinstance(parsed.node, yaml.MappingNode) else None
    tasks = data.get("tasks")
    if not isinstance(node, yaml.SequenceNode) or node.flow_style or not isinstance(tasks, list):
        raise FeaturePlanError("the plan's 'tasks' is not a block list of entries written in place (flow style, an "
                               "alias or a tag?); its entries cannot be edited", path=path,
                               line=node_line(parsed.node, ("tasks",)), pointer=format_pointer(("tasks",)),
                               expected="'tasks:' followed by '- id: ...' entries")
    for task_id, values in update.tasks.items():
        index = _task_index(tasks, task_id, path)
        item = node.value[index]
        if values and (not isinstance(item, yaml.MappingNode) or item.flow_style or not item.value):
            raise FeaturePlanError(f"task entry {index + 1} is not a block mapping written in place (flow style or an "
                                   "alias?); it cannot be edited", path=path, pointer=format_pointer(("tasks", index)),
                                   line=node_line(parsed.node, ("tasks", index)),
                                   expected="'- id: ...' followed by 'key: value' lines")


__all__ = ["PlanSpliceResult", "PlanUpdate", "apply_plan_update", "splice_plan"]
