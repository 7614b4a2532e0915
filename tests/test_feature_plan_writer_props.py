"""Property tests of plan writes over generated plans: whatever the layout (comments, blank lines,
quoting, block scalars, flow and block lists, indented items, CRLF, no final newline) and whatever
the update, the new text reads back as exactly the intended data, every line the update does not
own is kept byte for byte, and applying the same update again changes nothing.

The intended data is judged without the code under test: old and new texts are read by ruamel.yaml
and compared with a reference model of the update (``tests/update_oracle.py``), not with
``apply_plan_update`` (the writer's own verification) nor the product's reader.

Mutation check (by hand once, kept as ``test_a_broken_shared_conversion_fails_the_oracle``): make
``plain_data`` -- which both the writer's rendering and ``apply_plan_update`` go through -- turn a
null into an empty string. The writer writes ``''``, its verification expects ``''``, the former
comparison with ``apply_plan_update`` agreed; the reference model expects null and fails.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guardkit_state.plans import plan_splice
from guardkit_state.plans.plan_splice import PlanUpdate, splice_plan
from guardkit_state.yamltext.strict_yaml import parse_yaml

from .update_oracle import expected_plan, read_yaml, same

#: Who owns a line: ("top", key), ("task", index, key), ("execution",), ("execution", key), or None.
Owner = tuple[Any, ...] | None

_TEXT = st.text(alphabet="abcXYZ 019:#'\"-\n", max_size=30)
_TIMESTAMP = st.builds(lambda d, h: f"2026-0{d}-1{d}T1{h}:00:00.{d}{h}0000", st.integers(1, 9), st.integers(0, 9))
_TASK_VALUES = st.fixed_dictionaries({}, optional={
    "status": st.sampled_from(["pending", "in_progress", "completed", "failed", "blocked", "in_review"]),
    "turns_completed": st.integers(0, 30),
    "result": st.one_of(st.none(), st.just("passed"), st.fixed_dictionaries({
        "total_turns": st.integers(0, 9),
        "final_decision": st.sampled_from(["approved", "max_turns_exceeded", "unrecoverable_stall"]),
        "error": st.one_of(st.none(), _TEXT)})),
    "merged_commit": st.text(alphabet="0123456789abcdef", min_size=7, max_size=40),
    "note": _TEXT,
    "started_at": _TIMESTAMP,
})
_EXECUTION_VALUES = st.fixed_dictionaries({}, optional={
    "current_wave": st.integers(0, 9),
    "completed_waves": st.lists(st.integers(1, 12), max_size=5),
    "tasks_completed": st.integers(0, 9),
    "total_turns": st.integers(0, 99),
    "worktree_path": st.one_of(st.none(), st.just("/home/u/repo/.guardkit/worktrees/FEAT-H"), _TEXT),
    "last_updated": _TIMESTAMP,
})


@dataclass
class Layout:
    """A generated plan: its lines, who owns each, and how its ``execution`` is written."""

    lines: list[tuple[str, Owner]] = field(default_factory=list)
    tasks: int = 0
    execution: str = "absent"
    counter: itertools.count[int] = field(default_factory=itertools.count)

    def tag(self) -> str:
        """A unique trailing comment: lines stay unique, so a line diff attributes every change."""
        return f"  # c{next(self.counter)}"

    def add(self, line: str, owner: Owner) -> None:
        self.lines.append((line, owner))


def _task_key(draw: Callable[..., Any], layout: Layout, key: str, index: int, pad: str) -> None:
    owner: Owner = ("task", index, key)
    tag = layout.tag
    if key == "name":
        quoted = draw(st.sampled_from(["'task {i}: quoted'", '"task {i} \\u00e9"', "task {i} plain"]))
        layout.add(f"{pad}name: {quoted.format(i=index)}{tag()}", owner)
    elif key == "status":
        layout.add(f"{pad}status: pending{tag()}", owner)
    elif key == "turns_completed":
        layout.add(f"{pad}turns_completed: 0{tag()}", owner)
    elif key == "dependencies":
        earlier = [f"TASK-{i}" for i in range(index)]
        style = draw(st.sampled_from(["flow", "block", "indented"])) if earlier else "flow"
        if style == "flow":
            layout.add(f"{pad}dependencies: [{', '.join(earlier)}]{tag()}", owner)
        else:
            layout.add(f"{pad}dependencies:{tag()}", owner)
            inner = pad + ("  " if style == "indented" else "")
            for dep in earlier:
                layout.add(f"{inner}- {dep}{tag()}", owner)
    elif key == "result":
        style = draw(st.sampled_from(["null", "word", "mapping"]))
        if style == "mapping":
            layout.add(f"{pad}result:{tag()}", owner)
            for line in ("total_turns: 1", "final_decision: approved", "error: null"):
                layout.add(f"{pad}  {line}{tag()}", owner)
        else:
            layout.add(f"{pad}result: {'null' if style == 'null' else 'passed'}{tag()}", owner)
    elif key == "note":
        header = draw(st.sampled_from(["|", ">-", "|-"]))
        layout.add(f"{pad}note: {header}{tag()}", owner)
        for n in range(draw(st.integers(1, 3))):
            layout.add(f"{pad}  line {n} of task {index} note {next(layout.counter)}", owner)


def _execution(draw: Callable[..., Any], layout: Layout) -> None:
    layout.execution = draw(st.sampled_from(["absent", "null", "empty", "block"]))
    whole: Owner = ("execution",)
    if layout.execution == "null":
        layout.add(f"execution:{layout.tag()}", whole)
    elif layout.execution == "empty":
        layout.add(f"execution: {{}}{layout.tag()}", whole)
    elif layout.execution == "block":
        layout.add(f"execution:{layout.tag()}", whole)
        layout.add(f"  current_wave: 1{layout.tag()}", ("execution", "current_wave"))
        style = draw(st.sampled_from(["flow", "block", "empty"]))
        waves: Owner = ("execution", "completed_waves")
        if style == "block":
            layout.add(f"  completed_waves:{layout.tag()}", waves)
            layout.add(f"  - 1{layout.tag()}", waves)
        else:
            layout.add(f"  completed_waves: {'[1, 2]' if style == 'flow' else '[]'}{layout.tag()}", waves)
        layout.add(f"  last_updated: '2026-01-01T00:00:00'{layout.tag()}", ("execution", "last_updated"))


@st.composite
def layouts(draw: Callable[..., Any]) -> Layout:
    layout = Layout()
    if draw(st.booleans()):
        layout.add("# A plan written by hand", None)
    layout.add(f"id: FEAT-H{layout.tag()}", ("top", "id"))
    layout.add(f"status: planned{layout.tag()}", ("top", "status"))
    layout.add("tasks:", None)
    pad = draw(st.sampled_from(["", "  "]))
    layout.tasks = draw(st.integers(1, 4))
    for index in range(layout.tasks):
        if draw(st.booleans()):
            layout.add("", None)
        if draw(st.booleans()):
            layout.add(f"{pad}# task {index} comes next", None)
        layout.add(f"{pad}- id: TASK-{index}{layout.tag()}", ("task", index, "id"))
        keys = draw(st.permutations(["name", "status", "dependencies", "result", "note", "turns_completed"]))
        for key in keys[: draw(st.integers(0, len(keys)))]:
            _task_key(draw, layout, key, index, pad + "  ")
    if draw(st.booleans()):
        layout.add("orchestration:", None)
        layout.add(f"  parallel_groups: [[{', '.join(f'TASK-{i}' for i in range(layout.tasks))}]]", None)
    _execution(draw, layout)
    return layout


@st.composite
def updates(draw: Callable[..., Any], tasks: int) -> PlanUpdate:
    update = PlanUpdate()
    for index in draw(st.lists(st.integers(0, tasks - 1), unique=True, max_size=tasks)):
        update.set_task(f"TASK-{index}", **draw(_TASK_VALUES))
    update.set_execution(**draw(_EXECUTION_VALUES))
    if draw(st.booleans()):
        update.set_top_level(status=draw(st.sampled_from(["planned", "in_progress", "completed"])))
    return update


def _owned_by_update(owner: Owner, update: PlanUpdate, layout: Layout) -> bool:
    if owner is None:
        return False
    if owner[0] == "top":
        return owner[1] in update.top_level
    if owner[0] == "task":
        return owner[2] in update.tasks.get(f"TASK-{owner[1]}", {})
    if not update.execution:
        return False
    if len(owner) == 1:  # the 'execution:' line: rewritten only when the block is null or '{}'
        return layout.execution in ("null", "empty")
    return owner[1] in update.execution


def check_plan_write(layout: Layout, update: PlanUpdate, crlf: bool, final_newline: bool) -> None:
    """Write ``update`` into the plan ``layout`` and judge the result independently (see the module)."""
    last_owner = layout.lines[-1][1]
    if last_owner is not None and last_owner[-1] == "note":
        final_newline = True  # a text ending inside a block scalar cannot grow (tested on its own)
    newline = "\r\n" if crlf else "\n"
    lines = [line + newline for line, _ in layout.lines]
    if not final_newline:
        lines[-1] = lines[-1][: -len(newline)]
    text = "".join(lines)
    old = read_yaml(text)
    assert isinstance(old, dict)

    result = splice_plan(text, update)

    new = read_yaml(result.text)
    intended = expected_plan(old, update.tasks, update.execution, update.top_level)
    assert same(new, intended), f"the plan is not the update applied:\n{text}\n=> {result.text}"
    assert result.changed == (result.text != text)
    assert same(parse_yaml(result.text).data, yaml.safe_load(result.text))  # GuardKit's own reader agrees
    if result.changed:
        assert "\n" not in result.text.replace("\r\n", "") if crlf else "\r" not in result.text
    # Every line the update does not own is kept, byte for byte (lines are unique: see Layout.tag).
    matcher = difflib.SequenceMatcher(None, lines, result.text.splitlines(True), autojunk=False)
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            for line_index in range(i1, i2):
                line, owner = layout.lines[line_index]
                at_end = line_index == len(lines) - 1 and not final_newline
                assert _owned_by_update(owner, update, layout) or at_end, f"line {line_index + 1} changed: {line!r}"
    # The same update again is a no-op.
    again = splice_plan(result.text, update)
    assert not again.changed and again.text == result.text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_plan_writes_change_only_what_they_set(data: st.DataObject) -> None:
    layout = data.draw(layouts())
    update = data.draw(updates(layout.tasks))
    check_plan_write(layout, update, data.draw(st.booleans()), data.draw(st.booleans()))


def test_a_broken_shared_conversion_fails_the_oracle(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutation check: a fault shared by the writer and its data twin passes the writer's own
    verification, so only the independent oracle can fail it."""
    layout = Layout()
    for line, owner in [("id: FEAT-H", ("top", "id")), ("tasks:", None), ("- id: TASK-0", ("task", 0, "id")),
                        ("  result: passed", ("task", 0, "result"))]:
        layout.add(line, owner)
    layout.tasks = 1
    update = PlanUpdate().set_task("TASK-0", result=None)
    check_plan_write(layout, update, False, True)  # the real conversion passes
    real = plan_splice.plain_data
    monkeypatch.setattr(plan_splice, "plain_data", lambda value: real(
        {k: ("" if v is None else v) for k, v in value.items()} if isinstance(value, dict) else value))
    assert "result: ''" in splice_plan("".join(line + "\n" for line, _ in layout.lines), update).text  # accepted
    with pytest.raises(AssertionError, match="the plan is not the update applied"):
        check_plan_write(layout, update, False, True)
