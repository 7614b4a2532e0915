"""A feature plan against ``schemas/feature_plan.schema.json``: every problem with its JSON path
and the file line it sits on.

The schema is permissive about what GuardKit and its users add and strict about the values a
feature run relies on (see the schema's description); it is one more record kind of
:mod:`guardkit_state.store.schemas`, found there by its file name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from guardkit_state.errors import InvalidTaskIdError, SchemaError
from guardkit_state.store.json_paths import PathParts, format_pointer, sort_key
from guardkit_state.store.safe_paths import validate_task_id
from guardkit_state.store.schemas import problems_of
from guardkit_state.yamltext.positions import node_line

#: The record kind (``schemas/feature_plan.schema.json``).
PLAN_KIND = "feature_plan"

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class PlanProblem:
    """One problem (or warning) in a plan file: what, the file line and the JSON path.

    ``message`` already says what was expected. ``line`` is 1-based; either may be None.
    """

    message: str
    line: int | None = None
    pointer: str | None = None
    severity: Severity = "error"

    def to_dict(self) -> dict[str, Any]:
        return {"severity": self.severity, "line": self.line, "pointer": self.pointer, "message": self.message}


def schema_problems(data: Any, node: yaml.Node | None = None) -> list[PlanProblem]:
    """Every schema violation of ``data`` as a plan, then every id a feature run would refuse,
    sorted by JSON path, each with its line."""
    found = [(problem.parts, problem.text) for problem in problems_of(PLAN_KIND, data)]
    found += id_problems(data)
    found.sort(key=lambda item: sort_key(item[0]))
    return [PlanProblem(text, node_line(node, parts), format_pointer(parts)) for parts, text in found]


def id_problems(data: Any) -> list[tuple[PathParts, str]]:
    """Every id in the plan that is not a plain task id, with its JSON path.

    The ids become branch names, worktree folders and task file names, so a feature run refuses
    them with :func:`~guardkit_state.store.safe_paths.validate_task_id`; the same rule is applied here so
    that ``validate`` and the plan reader refuse exactly what a run would (a JSON Schema
    ``pattern`` would be a second copy of that rule). Values of the wrong type are left to the
    schema.
    """
    return [(parts, message) for parts, value in _id_values(data)
            if (message := _id_refusal(value)) is not None]


def _id_values(data: Any) -> list[tuple[PathParts, str]]:
    if not isinstance(data, dict):
        return []
    found: list[tuple[PathParts, Any]] = [(("id",), data.get("id"))]
    tasks = data.get("tasks")
    for index, task in enumerate(tasks if isinstance(tasks, list) else []):
        if isinstance(task, dict):
            found.append((("tasks", index, "id"), task.get("id")))
            found += _list_items(task.get("dependencies"), ("tasks", index, "dependencies"))
    orchestration = data.get("orchestration")
    groups = orchestration.get("parallel_groups") if isinstance(orchestration, dict) else None
    for index, group in enumerate(groups if isinstance(groups, list) else []):
        found += _list_items(group, ("orchestration", "parallel_groups", index))
    return [(parts, value) for parts, value in found if isinstance(value, str)]


def _list_items(value: Any, parts: PathParts) -> list[tuple[PathParts, Any]]:
    return [((*parts, index), item) for index, item in enumerate(value)] if isinstance(value, list) else []


def _id_refusal(value: str) -> str | None:
    try:
        validate_task_id(value)
    except InvalidTaskIdError as exc:
        return exc.described()
    return None


def check_plan_data(data: Any, *, node: yaml.Node | None = None, path: Path | str | None = None) -> None:
    """Refuse a plan whose data does not match the schema.

    Raises:
        SchemaError: ``problems`` lists every violation as ``(pointer, message)``; the error's
            own message, pointer and line are the first one's.
    """
    problems = schema_problems(data, node)
    if not problems:
        return
    raise_problems(problems, path, "the feature plan does not match its schema")


def raise_problems(problems: list[PlanProblem], path: Path | str | None, what: str) -> None:
    """Raise :class:`SchemaError` for ``problems`` (not empty), the first one leading."""
    first = problems[0]
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    raise SchemaError(f"{what}: {first.message}{more}", problems=[(p.pointer or "$", p.message) for p in problems],
                      path=path, line=first.line, pointer=first.pointer, expected="a valid feature plan")


__all__ = ["PLAN_KIND", "PlanProblem", "check_plan_data", "id_problems", "raise_problems",
           "schema_problems"]
