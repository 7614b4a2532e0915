"""Properties of the three-way merge of loop state (task frontmatter, plans) and of its text."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guardkit_state.remote.merge_driver import merge_texts
from guardkit_state.remote.state_merge import merge_plan, merge_task_frontmatter
from guardkit_state.yamltext.render import render_yaml
from tests.update_oracle import read_yaml, same, split_frontmatter_text

scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=8))
keys = st.sampled_from(["title", "status", "tags", "notes", "owner", "priority"])
mappings = st.dictionaries(keys, st.one_of(scalars, st.lists(scalars, max_size=3)), max_size=5)
#: A shared 2-core machine makes generation look slow; the examples are small.
RELAXED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@RELAXED
@given(mappings, mappings)
def test_a_side_left_as_the_base_takes_the_other(base: dict[str, Any], other: dict[str, Any]) -> None:
    for merged in (merge_task_frontmatter(base, other, base), merge_task_frontmatter(base, base, other)):
        assert merged.clean and alike(merged.as_ours, other)


@RELAXED
@given(mappings, mappings, mappings)
def test_the_merge_is_symmetric(base: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    one, two = merge_task_frontmatter(base, ours, theirs), merge_task_frontmatter(base, theirs, ours)
    assert alike(one.as_ours, two.as_theirs) and alike(one.as_theirs, two.as_ours)
    assert sorted(c.path for c in one.conflicts) == sorted(c.path for c in two.conflicts)
    assert alike(one.as_ours, one.as_theirs) == one.clean


def alike(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Equal values key by key, types included (``0`` is not ``False``); the keys' order aside."""
    return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)


def _turn(number: int, word: str) -> dict[str, Any]:
    return {"turn": number, "decision": word}


@RELAXED
@given(st.integers(0, 4), st.integers(0, 4), st.integers(0, 4), st.sampled_from(["approve", "feedback"]))
def test_turns_appended_on_one_side_merge_by_number(shared: int, more_o: int, more_t: int, word: str) -> None:
    base = [_turn(n, "feedback") for n in range(1, shared + 1)]
    ours = base + [_turn(n, word) for n in range(shared + 1, shared + more_o + 1)]
    theirs = base + [_turn(n, word) for n in range(shared + 1, shared + more_t + 1)]
    merged = merge_task_frontmatter({"autobuild_state": {"turns": base}}, {"autobuild_state": {"turns": ours}},
                                    {"autobuild_state": {"turns": theirs}})
    assert merged.clean  # the same turn recorded alike on both sides is one turn
    numbers = [t["turn"] for t in merged.as_ours["autobuild_state"]["turns"]]
    assert numbers == list(range(1, shared + max(more_o, more_t) + 1))


statuses = st.sampled_from(["pending", "in_progress", "completed", "failed", "blocked"])


@RELAXED
@given(statuses, statuses, statuses)
def test_plan_task_status_never_moves_back(base: str, ours: str, theirs: str) -> None:
    plan = lambda s: {"tasks": [{"id": "TASK-X-001", "status": s}]}  # noqa: E731
    merged = merge_plan(plan(base), plan(ours), plan(theirs))
    order = {"pending": 0, "in_progress": 1, "completed": 2, "failed": 2, "blocked": 2}
    if merged.clean:
        got = merged.as_ours["tasks"][0]["status"]
        assert got in (ours, theirs) and order[got] >= min(order[ours], order[theirs])
        if base not in (ours, theirs) and ours != theirs:
            assert order[got] == max(order[ours], order[theirs])
    else:  # only two different endings conflict
        assert order[ours] == order[theirs] == 2 and ours != theirs and base not in (ours, theirs)


def expected_top_level(base: dict[Any, Any], ours: dict[Any, Any],
                       theirs: dict[Any, Any]) -> tuple[dict[Any, Any], list[Any]]:
    """The reference model of a three-way merge of mappings whose values are not merged inside
    (scalars, lists): per key, what changed on one side only wins; both changed alike is one
    change; both changed otherwise is a conflict. Keys in ours' order, then theirs' new ones."""
    absent = object()
    merged: dict[Any, Any] = {}
    conflicts = []
    for key in [*ours, *(k for k in theirs if k not in ours)]:
        b, o, t = (side.get(key, absent) for side in (base, ours, theirs))
        if o is absent and t is absent:
            continue
        if o is not absent and t is not absent and same(o, t):
            value = o
        elif o is absent or t is absent:
            other = t if o is absent else o
            if b is absent or not same(other, b):
                if b is absent:
                    value = other  # added on one side
                else:
                    conflicts.append(key)  # deleted on one side, changed on the other
                    continue
            else:
                continue  # deleted on one side, untouched on the other
        elif b is not absent and same(o, b):
            value = t
        elif b is not absent and same(t, b):
            value = o
        else:
            conflicts.append(key)
            continue
        merged[key] = value
    return merged, conflicts


def driver_agrees(base: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any]) -> bool:
    """The driver's output, read by ruamel.yaml, against the reference model over ruamel's reading
    of the three inputs (never against the product's own merge or reader)."""
    texts = [f"---\n{render_yaml(d) if d else ''}---\nbody\n" for d in (base, ours, theirs)]
    b, o, t = (read_yaml(split_frontmatter_text(text)[0]) or {} for text in texts)
    expected, conflicts = expected_top_level(b, o, t)
    result = merge_texts(*texts, "tasks/backlog/TASK-X-001.md")
    if conflicts:
        return not result.clean and "<<<<<<< ours\n" in result.text
    if not result.clean:
        return False
    got = read_yaml(split_frontmatter_text(result.text)[0]) or {}
    # Values judged exactly; the keys' order is not (a side left as the base yields the other side
    # whole, in its own order, where the model lists ours' keys first).
    return alike(got, expected)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mappings, mappings, mappings)
def test_the_driver_writes_what_the_reference_merge_says(base: dict[str, Any], ours: dict[str, Any],
                                                         theirs: dict[str, Any]) -> None:
    assert driver_agrees(base, ours, theirs)


def test_the_reference_catches_a_merge_that_keeps_ours(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutation check: a merge that ignores theirs' change disagrees with the reference."""
    from guardkit_state.remote import state_merge

    base, ours, theirs = {"title": "a", "notes": "n"}, {"title": "a", "notes": "n"}, {"title": "b", "notes": "n"}
    assert driver_agrees(base, ours, theirs)
    monkeypatch.setattr(state_merge, "_merge", lambda b, o, t, path, rules, conflicts: (o, o))
    assert not driver_agrees(base, ours, theirs)


def test_one_and_true_are_different_values() -> None:
    # Python's == calls them equal; YAML does not: ours turning 1 into true is a change.
    assert driver_agrees({"priority": 1}, {"priority": True}, {"priority": 2})


@RELAXED
@given(st.integers(1, 4), st.sets(st.integers(1, 4)), st.sets(st.integers(1, 4)), st.integers(0, 2),
       st.integers(0, 2))
def test_a_recorded_turn_is_never_dropped_by_one_side(shared: int, gone_o: set[int], gone_t: set[int],
                                                      more_o: int, more_t: int) -> None:
    base = [_turn(n, "feedback") for n in range(1, shared + 1)]
    ours = [t for t in base if t["turn"] not in gone_o] + [_turn(shared + n, "feedback") for n in range(1, more_o + 1)]
    theirs = [t for t in base if t["turn"] not in gone_t] + [_turn(shared + n, "feedback")
                                                             for n in range(1, more_t + 1)]
    merged = merge_task_frontmatter({"autobuild_state": {"turns": base}}, {"autobuild_state": {"turns": ours}},
                                    {"autobuild_state": {"turns": theirs}})
    one_side = {n for n in range(1, shared + 1) if (n in gone_o) != (n in gone_t)}
    assert merged.clean == (not one_side)
    for n in one_side:  # each named, and each side's merge keeps its own view of it
        assert any(c.path == f"autobuild_state.turns[turn={n}]" and "deletes recorded turn" in c.describe()
                   for c in merged.conflicts)
    if merged.clean:
        numbers = [t["turn"] for t in merged.as_ours["autobuild_state"]["turns"]]
        assert set(range(1, shared + 1)) - set(gone_o) <= set(numbers)
