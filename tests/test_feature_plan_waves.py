"""Waves: from ``parallel_groups`` (checked against the dependencies) or computed from them."""

from __future__ import annotations

import pytest

from guardkit_state.plans.plan import FeaturePlan, parse_plan
from guardkit_state.plans.waves import (
    WaveError,
    Waves,
    default_max_parallel,
    plan_waves,
    waves_from_dependencies,
    waves_from_groups,
)


def plan(tasks: list[tuple[str, list[str]]], groups: list[list[str]] | None = None,
         recommended: int | None = None) -> FeaturePlan:
    lines = ["id: FEAT-W", "tasks:"]
    for task_id, deps in tasks:
        lines += [f"- id: {task_id}", f"  dependencies: [{', '.join(deps)}]"]
    if groups is not None or recommended is not None:
        lines.append("orchestration:")
    if groups is not None:
        lines.append("  parallel_groups:")
        for group in groups:
            lines.append(f"  - [{', '.join(group)}]")
    if recommended is not None:
        lines.append(f"  recommended_parallel: {recommended}")
    return parse_plan("\n".join(lines) + "\n", path="FEAT-W.yaml")


# --------------------------------------------------------------------------- from dependencies


def test_waves_from_dependencies_are_topological_layers_in_plan_order() -> None:
    deps = {"T-5": [], "T-2": ["T-5"], "T-1": [], "T-4": ["T-2", "T-1"], "T-3": ["T-1"]}
    assert waves_from_dependencies(deps) == [["T-5", "T-1"], ["T-2", "T-3"], ["T-4"]]


def test_plan_without_groups_uses_dependencies() -> None:
    waves = plan_waves(plan([("T-1", []), ("T-2", ["T-1"]), ("T-3", [])]))
    assert waves == Waves((("T-1", "T-3"), ("T-2",)), "dependencies")
    assert waves.wave_of("T-2") == 2 and len(waves) == 2 and waves.to_lists() == [["T-1", "T-3"], ["T-2"]]
    with pytest.raises(KeyError):
        waves.wave_of("T-9")


def test_a_cycle_is_named_with_the_tasks_waiting_on_it() -> None:
    with pytest.raises(WaveError) as info:
        plan_waves(plan([("T-0", []), ("T-1", ["T-3"]), ("T-2", ["T-1"]), ("T-3", ["T-2"]), ("T-4", ["T-3"])]))
    error = info.value
    assert "cycle: T-1 -> T-3 -> T-2 -> T-1" in error.message and "1 more task(s) wait on it (T-4)" in error.message
    assert error.task_ids == ["T-1", "T-3", "T-2"]
    assert error.pointer == "$.tasks[1].dependencies" and error.line == 6 and str(error.path) == "FEAT-W.yaml"


def test_a_task_depending_on_itself_is_refused() -> None:
    with pytest.raises(WaveError, match="T-1 depends on itself") as info:
        plan_waves(plan([("T-1", ["T-1"])]))
    assert info.value.pointer == "$.tasks[0].dependencies[0]" and info.value.line == 4


def test_an_unknown_dependency_is_refused_naming_both_tasks() -> None:
    with pytest.raises(WaveError, match="T-2 depends on T-9, which is not a task of this plan") as info:
        plan_waves(plan([("T-1", []), ("T-2", ["T-1", "T-9"])]))
    assert info.value.task_ids == ["T-2", "T-9"] and info.value.pointer == "$.tasks[1].dependencies[1]"
    with pytest.raises(WaveError, match="not a task"):
        waves_from_dependencies({"T-1": ["T-0"]})


def test_a_task_listed_twice_is_refused() -> None:
    with pytest.raises(WaveError, match="T-1 is listed twice") as info:
        plan_waves(plan([("T-1", []), ("T-1", [])]))
    assert info.value.line == 5


# --------------------------------------------------------------------------- from parallel_groups


def test_groups_are_used_as_written_with_each_wave_in_plan_order() -> None:
    waves = plan_waves(plan([("T-1", []), ("T-2", []), ("T-3", ["T-1"])], groups=[["T-2", "T-1"], ["T-3"]]))
    assert waves == Waves((("T-1", "T-2"), ("T-3",)), "parallel_groups")


def test_groups_may_serialise_more_than_the_dependencies_need() -> None:
    waves = plan_waves(plan([("T-1", []), ("T-2", [])], groups=[["T-2"], ["T-1"]]))
    assert waves.to_lists() == [["T-2"], ["T-1"]]


@pytest.mark.parametrize(("groups", "message", "pointer"), [
    ([["T-1"], ["T-2", "T-9"]], "wave 2 of parallel_groups lists T-9", "$.orchestration.parallel_groups[1][1]"),
    ([["T-1", "T-2"], ["T-2"]], "T-2 is in waves 1 and 2", "$.orchestration.parallel_groups[1][0]"),
    ([["T-1"]], r"task\(s\) T-2 in no wave", "$.orchestration.parallel_groups"),
    ([["T-1"], []], "wave 2 of parallel_groups is empty", "$.orchestration.parallel_groups[1]"),
])
def test_groups_must_list_each_task_exactly_once(groups: list[list[str]], message: str, pointer: str) -> None:
    with pytest.raises(WaveError, match=message) as info:
        waves_from_groups({"T-1": [], "T-2": []}, groups)
    assert info.value.pointer == pointer


@pytest.mark.parametrize(("groups", "when"), [
    ([["T-1", "T-2"]], "the same wave"),
    ([["T-2"], ["T-1"]], "wave 2, after it"),
])
def test_groups_that_contradict_dependencies_are_refused(groups: list[list[str]], when: str) -> None:
    with pytest.raises(WaveError, match=f"T-2 \\(wave .\\) depends on T-1, which runs in {when}") as info:
        plan_waves(plan([("T-1", []), ("T-2", ["T-1"])], groups=groups))
    assert info.value.task_ids == ["T-2", "T-1"] and info.value.line is not None


def test_an_unknown_dependency_is_refused_even_with_groups() -> None:
    with pytest.raises(WaveError, match="T-1 depends on T-0"):
        plan_waves(plan([("T-1", ["T-0"])], groups=[["T-1"]]))


# --------------------------------------------------------------------------- max parallel


@pytest.mark.parametrize(("recommended", "cpus", "expected"), [
    (3, 8, 3), (6, 2, 2), (None, 4, 4), (1, 16, 1), (2, 1, 1),
])
def test_default_max_parallel_is_recommended_capped_by_cpus(recommended: int | None, cpus: int, expected: int) -> None:
    assert default_max_parallel(plan([("T-1", [])], recommended=recommended), cpu_count=cpus) == expected


def test_default_max_parallel_uses_the_machine_by_default() -> None:
    assert 1 <= default_max_parallel(plan([("T-1", [])], recommended=64)) <= 64
