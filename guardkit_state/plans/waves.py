"""The waves of a feature: which tasks run together, and in which order. Pure functions.

From ``orchestration.parallel_groups`` when the plan has it: every id listed must be a task of the
plan, every task must be in exactly one wave, and every dependency of a task must be in an earlier
wave (groups that contradict the dependencies are refused: running them as written would start a
task before what it needs). Without groups the waves are computed from the tasks' ``dependencies``:
topological layers, each wave holding the tasks whose dependencies all ran in earlier waves.

Within a wave the tasks are in plan order (their order in ``tasks``): the order their branches are
merged in, so the result of a run does not depend on which agent finished first. An unknown
dependency or a cycle is a :class:`WaveError` naming the tasks, raised before anything starts.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from guardkit_state.errors import WaveError
from guardkit_state.plans.plan import FeaturePlan, PlanTask
from guardkit_state.store.json_paths import format_pointer, parse_pointer

WaveSource = Literal["parallel_groups", "dependencies"]


@dataclass(frozen=True)
class Waves:
    """A feature's waves, in the order they run; each wave's task ids in plan order.

    ``source`` says where they came from: the plan's ``parallel_groups`` or its dependencies.
    """

    groups: tuple[tuple[str, ...], ...]
    source: WaveSource

    def __len__(self) -> int:
        return len(self.groups)

    def __iter__(self) -> Iterator[tuple[str, ...]]:
        return iter(self.groups)

    def wave_of(self, task_id: str) -> int:
        """The 1-based wave number of ``task_id`` (GuardKit counts ``current_wave`` from 1).

        Raises:
            KeyError: the task is in no wave.
        """
        for number, group in enumerate(self.groups, start=1):
            if task_id in group:
                return number
        raise KeyError(task_id)

    def to_lists(self) -> list[list[str]]:
        return [list(group) for group in self.groups]


# --------------------------------------------------------------------------- dependencies


def dependency_map(tasks: Sequence[PlanTask], *, path: Path | str | None = None) -> dict[str, list[str]]:
    """Each task's dependencies by task id, in plan order.

    Raises:
        WaveError: two entries share an id, a task depends on itself, or on an id that is not a
            task of the plan.
    """
    deps: dict[str, list[str]] = {}
    for task in tasks:
        if task.id in deps:
            first = next(t for t in tasks if t.id == task.id)
            raise WaveError(f"task {task.id} is listed twice in the plan (entries {first.index + 1} and "
                            f"{task.index + 1})", task_ids=[task.id], path=path, line=task.line,
                            pointer=format_pointer(("tasks", task.index, "id")), expected="each task id once")
        deps[task.id] = task.dependencies
    for index, (task_id, needs) in enumerate(deps.items()):
        for position, need in enumerate(needs):
            if need == task_id:
                raise WaveError(f"task {task_id} depends on itself", task_ids=[task_id], path=path,
                                pointer=format_pointer(("tasks", index, "dependencies", position)),
                                expected="dependencies on other tasks of the plan")
            if need not in deps:
                raise WaveError(f"task {task_id} depends on {need}, which is not a task of this plan",
                                task_ids=[task_id, need], path=path,
                                pointer=format_pointer(("tasks", index, "dependencies", position)),
                                expected=f"one of the plan's {len(deps)} task ids")
    return deps


def waves_from_dependencies(deps: Mapping[str, Sequence[str]], *,
                            path: Path | str | None = None) -> list[list[str]]:
    """Topological layers of ``deps`` (ids in plan order): wave N holds the tasks whose
    dependencies are all in waves before N, in plan order.

    Raises:
        WaveError: a cycle (named, with the tasks waiting on it), or an unknown dependency.
    """
    for task_id, needs in deps.items():
        unknown = [need for need in needs if need not in deps]
        if unknown:
            raise WaveError(f"task {task_id} depends on {unknown[0]}, which is not a task of this plan",
                            task_ids=[task_id, unknown[0]], path=path, expected="dependencies on tasks of the plan")
    placed: set[str] = set()
    waves: list[list[str]] = []
    while len(placed) < len(deps):
        wave = [task_id for task_id, needs in deps.items()
                if task_id not in placed and all(need in placed for need in needs)]
        if not wave:
            raise _cycle_error(deps, placed, path)
        waves.append(wave)
        placed.update(wave)
    return waves


def _cycle_error(deps: Mapping[str, Sequence[str]], placed: set[str], path: Path | str | None) -> WaveError:
    """Name one cycle among the tasks that could not be placed, and how many wait on it."""
    left = [task_id for task_id in deps if task_id not in placed]
    walk: list[str] = []
    current = left[0]
    while current not in walk:
        walk.append(current)
        # Every unplaced task waits on some unplaced task (else it would have been placed).
        current = next(need for need in deps[current] if need not in placed)
    cycle = walk[walk.index(current):] + [current]
    blocked = [task_id for task_id in left if task_id not in cycle]
    tail = f"; {len(blocked)} more task(s) wait on it ({', '.join(blocked[:5])})" if blocked else ""
    index = list(deps).index(cycle[0])
    return WaveError(f"the tasks' dependencies form a cycle: {' -> '.join(cycle)}{tail}", task_ids=cycle[:-1],
                     path=path, pointer=format_pointer(("tasks", index, "dependencies")),
                     expected="dependencies without a cycle")


def waves_from_groups(deps: Mapping[str, Sequence[str]], groups: Sequence[Sequence[str]], *,
                      path: Path | str | None = None) -> list[list[str]]:
    """``groups`` (``parallel_groups``) checked against ``deps``, each wave in plan order.

    Raises:
        WaveError: a group names an unknown task, a task is in two waves or in none, a wave is
            empty, or a task's dependency is not in an earlier wave.
    """
    wave_of: dict[str, int] = {}
    for number, group in enumerate(groups):
        if not group:
            raise WaveError(f"wave {number + 1} of parallel_groups is empty", path=path,
                            pointer=_group_pointer(number), expected="at least one task id per wave")
        for position, task_id in enumerate(group):
            where = _group_pointer(number, position)
            if task_id not in deps:
                raise WaveError(f"wave {number + 1} of parallel_groups lists {task_id}, which is not a task of "
                                "this plan", task_ids=[task_id], path=path, pointer=where,
                                expected="ids of the plan's tasks")
            if task_id in wave_of:
                raise WaveError(f"task {task_id} is in waves {wave_of[task_id] + 1} and {number + 1} of "
                                "parallel_groups", task_ids=[task_id], path=path, pointer=where,
                                expected="each task in exactly one wave")
            wave_of[task_id] = number
    missing = [task_id for task_id in deps if task_id not in wave_of]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise WaveError(f"task(s) {shown} in no wave of parallel_groups", task_ids=missing, path=path,
                        pointer=format_pointer(("orchestration", "parallel_groups")),
                        expected="every task of the plan in exactly one wave")
    for task_id, number in wave_of.items():
        for need in deps[task_id]:
            if need in wave_of and wave_of[need] >= number:
                when = "the same wave" if wave_of[need] == number else f"wave {wave_of[need] + 1}, after it"
                raise WaveError(f"parallel_groups contradicts the dependencies: {task_id} (wave {number + 1}) "
                                f"depends on {need}, which runs in {when}", task_ids=[task_id, need], path=path,
                                pointer=_group_pointer(number, list(groups[number]).index(task_id)),
                                expected=f"{need} in a wave before {number + 1}")
    order = {task_id: index for index, task_id in enumerate(deps)}
    return [sorted(group, key=order.__getitem__) for group in groups]


def _group_pointer(number: int, position: int | None = None) -> str:
    parts: list[Any] = ["orchestration", "parallel_groups", number]
    if position is not None:
        parts.append(position)
    return format_pointer(parts)


# --------------------------------------------------------------------------- a plan's waves


def plan_waves(plan: FeaturePlan) -> Waves:
    """The waves of ``plan``: its ``parallel_groups`` when present, else from its dependencies.

    Raises:
        WaveError: see :func:`dependency_map`, :func:`waves_from_groups` and
            :func:`waves_from_dependencies`; the error carries the plan's file, the JSON path
            and the line of the entry concerned.
    """
    try:
        deps = dependency_map(plan.tasks, path=plan.path)
        groups = plan.parallel_groups
        if groups is not None:
            return Waves(tuple(map(tuple, waves_from_groups(deps, groups, path=plan.path))), "parallel_groups")
        return Waves(tuple(map(tuple, waves_from_dependencies(deps, path=plan.path))), "dependencies")
    except WaveError as exc:
        if exc.line is None and exc.pointer is not None:
            from guardkit_state.yamltext.positions import node_line  # an error's line: the text parsed now

            exc.line = node_line(plan.node, parse_pointer(exc.pointer))
        raise


def default_max_parallel(plan: FeaturePlan, *, cpu_count: int | None = None) -> int:
    """How many tasks of a wave run at once by default: the plan's ``recommended_parallel``,
    capped by the machine's CPUs (``cpu_count``, default :func:`os.cpu_count`); at least 1."""
    cpus = cpu_count if cpu_count is not None else (os.cpu_count() or 1)
    recommended = plan.recommended_parallel
    wanted = recommended if recommended is not None and recommended >= 1 else cpus
    return max(1, min(wanted, cpus))


__all__ = ["WaveError", "WaveSource", "Waves", "default_max_parallel", "dependency_map", "plan_waves",
           "waves_from_dependencies", "waves_from_groups"]
