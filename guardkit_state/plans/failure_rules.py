"""What a failed task of a feature stops: GuardKit's ``stop_on_failure`` (pure).

GuardKit's runner stops a feature at its first failed task unless run with ``--no-stop-on-failure``,
and its plans carry the key per wave in the ``waves`` mapping (``wave_3: {tasks: [...],
stop_on_failure: false}``). Here a failed task stops the feature (after the rest of its wave) unless
the run says ``--no-stop-on-failure``, or the plan says ``stop_on_failure: false`` for it: in the
``waves`` entry that lists it, else at the plan's top level. ``--stop-on-failure`` stops at every
failure, whatever the plan says. (A value that is no ``true``/``false`` is refused by the plan's schema.)

A failure that does not stop the feature skips the tasks that need it (its dependents, directly or
through others, by the plan's ``dependencies``); every other task runs, and the feature ends
"completed without" the failed and skipped ones: not completed (exit 1), since their work is not on
the feature branch.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from guardkit_state.plans.plan import FeaturePlan

KEY = "stop_on_failure"


def stops_on_failure(plan: FeaturePlan, task_id: str, flag: bool | None) -> bool:
    """Whether ``task_id`` failing stops the feature: ``flag`` (the run's ``--[no-]stop-on-failure``)
    when given, else the plan's word for it (see the module), else True."""
    if flag is not None:
        return flag
    for entry in _wave_entries(plan):
        tasks = entry.get("tasks")
        if isinstance(tasks, list) and task_id in tasks and isinstance(entry.get(KEY), bool):
            return bool(entry[KEY])
    value = plan.data.get(KEY)
    return value if isinstance(value, bool) else True


def skipped_by(failed: Iterable[str], plan: FeaturePlan) -> dict[str, str]:
    """The tasks that cannot run because a task of ``failed`` did not end approved: each dependent
    (directly or through others), with the failed task it waits on; in plan order."""
    blocked = {root: root for root in failed}  # each failed task blocks by itself
    changed = True
    while changed:  # a dependent's dependents too, whatever order the plan lists them in
        changed = False
        for task in plan.tasks:
            if task.id in blocked:
                continue
            cause = next((blocked[dep] for dep in task.dependencies if dep in blocked), None)
            if cause is not None:
                blocked[task.id], changed = cause, True
    return {task.id: blocked[task.id] for task in plan.tasks if task.id in blocked and blocked[task.id] != task.id}


def skipped_reason(cause: str) -> str:
    """Why a task :func:`skipped_by` names did not run, in the words ``show`` and the result print."""
    return f"skipped: it needs {cause}, which ended without approval"


def _wave_entries(plan: FeaturePlan) -> list[dict[str, Any]]:
    waves = plan.data.get("waves")
    values = waves.values() if isinstance(waves, dict) else waves if isinstance(waves, list) else ()
    return [entry for entry in values if isinstance(entry, dict)]


__all__ = ["skipped_by", "skipped_reason", "stops_on_failure"]
