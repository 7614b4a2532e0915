"""The records of task files and feature plans: a task, a feature.

A task record (of the copy every command reads: :func:`guardkit_state.index.sources.combine`):
title, status, type and each criterion's text, with a fact per criterion and one placing it in its
feature. A feature record per plan: its tasks (status, decision, turns, wave) and progress, with a
fact per planned task and one for the outcome. (The turns a task file lists are turn records:
:mod:`.turn_records`; the files are read by :mod:`.readings`.)
"""

from __future__ import annotations

from typing import Any

from guardkit_state.errors import GuardkitStateError, one_line
from guardkit_state.index.records import FEATURE, TASK, Entity, Fact, IndexRecord, stable_uuid
from guardkit_state.index.turn_records import feature_entity, task_entity

#: Frontmatter keys naming when a task last changed, most telling first.
_TASK_TIMES = ("completed", "completed_at", "updated", "updated_at", "last_updated", "created", "created_at")


def _project_entity(group: str) -> Entity:
    """The node a fact with no better target points at (a task outside any feature, a feature's outcome)."""
    return Entity(stable_uuid(group, "project"), "project", "Project", "This project", shared=True)


# --------------------------------------------------------------------------- tasks


def task_data(task_id: str, data: dict[str, Any], criteria: list[tuple[str, str]]) -> dict[str, Any]:
    """The part of a task file the index keeps (plain JSON values)."""
    kept: dict[str, Any] = {"id": task_id, "criteria": [{"id": c, "text": t} for c, t in criteria]}
    for key in ("title", "status", "feature_id", "task_type", "complexity", "priority", "parent_review",
                "implementation_mode", "tags", *_TASK_TIMES):
        value = data.get(key)
        if value is not None:
            kept[key] = value if isinstance(value, (int, float, bool, list)) else str(value)
    return kept


def task_feature(data: dict[str, Any]) -> str | None:
    """The feature of a task (``data`` as :func:`task_data` builds it), None when it names none."""
    return str(data["feature_id"]) if data.get("feature_id") else None


def task_record_from_data(data: dict[str, Any], group: str, *, source_path: str | None = None) -> IndexRecord:
    """The record of one task (``data`` as :func:`task_data` builds it)."""
    task_id = str(data["id"])
    title = str(data.get("title") or "")
    status = str(data.get("status") or "unknown")
    feature = task_feature(data)
    criteria = [(str(c.get("id")), str(c.get("text"))) for c in data.get("criteria") or [] if isinstance(c, dict)]
    kind_text = ", ".join(f"{k} {data[k]}" for k in ("task_type", "complexity", "priority") if data.get(k) is not None)
    summary = f"task {task_id}: {title} (status {status}" + (f", {kind_text}" if kind_text else "") + ")"
    anchor = task_entity(group, task_id, feature, summary=one_line(summary, 300), defines=True)
    target = feature_entity(group, feature) if feature else _project_entity(group)
    facts = [Fact(stable_uuid(group, f"fact/{TASK}:{task_id}/in_feature"), "IN_FEATURE",
                  f"{task_id} {title}: status {status}" + (f", part of {feature}" if feature else "")
                  + (f" ({kind_text})" if kind_text else ""), anchor, target)]
    for crit_id, text in criteria:
        node = Entity(stable_uuid(group, f"criterion/{task_id}/{crit_id}"), f"{task_id} {crit_id}", "Criterion",
                      one_line(f"{task_id} {crit_id}: {text}", 500), record_key=f"{TASK}:{task_id}", shared=True,
                      defines=True)
        facts.append(Fact(stable_uuid(group, f"fact/{TASK}:{task_id}/criterion/{crit_id}"), "HAS_CRITERION",
                          one_line(f"{task_id} {crit_id}: {text}", 600), anchor, node))
    lines = [f"task {task_id} {title}", f"status {status}"]
    if feature:
        lines.append(f"feature {feature}")
    if kind_text:
        lines.append(kind_text)
    lines += [f"criterion {c}: {t}" for c, t in criteria]
    when = next((str(data[k]) for k in _TASK_TIMES if data.get(k)), None)
    return IndexRecord(key=f"{TASK}:{task_id}", kind=TASK, group_id=group, name=f"{TASK}:{task_id}", data=data,
                       summary=summary, search_text="\n".join(lines),
                       fields={"status": status, "task_id": task_id, "feature_id": feature or ""},
                       facts=facts, entities=[anchor], source_path=source_path, task_id=task_id,
                       feature_id=feature, completed_at=when, criteria=tuple(c for c, _ in criteria))


# --------------------------------------------------------------------------- features


def feature_data(plan: Any) -> dict[str, Any]:
    """The part of a feature plan the index keeps: tasks, waves and progress (plain JSON values)."""
    from guardkit_state.plans.waves import plan_waves

    try:
        waves = plan_waves(plan).to_lists()
    except GuardkitStateError:
        waves = plan.parallel_groups or []
    wave_of = {task: i + 1 for i, wave in enumerate(waves) for task in wave}
    tasks = [{"id": t.id, "name": t.name, "status": t.status, "final_decision": t.final_decision,
              "turns": t.turns_completed, "wave": wave_of.get(t.id), "error": t.error,
              "completed_at": t.completed_at} for t in plan.tasks]
    execution = plan.execution.raw if plan.execution is not None else {}
    kept: dict[str, Any] = {"id": plan.feature_id, "name": plan.name, "status": plan.status,
                            "description": plan.data.get("description"), "tasks": tasks, "waves": waves,
                            "execution": {k: v for k, v in execution.items() if isinstance(v, (str, int, float, list))}}
    return {k: v for k, v in kept.items() if v is not None}


def feature_record_from_data(data: dict[str, Any], group: str, *, source_path: str | None = None) -> IndexRecord:
    """The record of one feature plan (``data`` as :func:`feature_data` builds it)."""
    feature = str(data["id"])
    name, status = str(data.get("name") or ""), str(data.get("status") or "unknown")
    execution = data.get("execution") or {}
    tasks = [t for t in data.get("tasks") or [] if isinstance(t, dict)]
    done = sum(1 for t in tasks if t.get("status") == "completed")
    failed = sum(1 for t in tasks if t.get("status") == "failed" or t.get("error"))
    progress = (f"{feature} {name}: status {status}; {len(tasks)} tasks in {len(data.get('waves') or [])} waves; "
                f"{done} completed, {failed} failed; current wave {execution.get('current_wave', 0)}; "
                f"total turns {execution.get('total_turns', sum(int(t.get('turns') or 0) for t in tasks))}")
    anchor = feature_entity(group, feature, summary=one_line(progress, 300), defines=True)
    facts = [Fact(stable_uuid(group, f"fact/{FEATURE}:{feature}/outcome"), "FEATURE_OUTCOME", one_line(progress, 600),
                  anchor, _project_entity(group))]
    lines = [f"feature {feature} {name}", f"status {status}", progress]
    if data.get("description"):
        lines.append(str(data["description"]))
    for t in tasks:
        sentence = (f"{feature} wave {t.get('wave') or '?'} plans {t['id']} {t.get('name') or ''}: status "
                    f"{t.get('status') or 'pending'}, final decision {t.get('final_decision') or 'none'}, "
                    f"{t.get('turns') or 0} turns" + (f", error {t['error']}" if t.get("error") else ""))
        lines.append(sentence)
        facts.append(Fact(stable_uuid(group, f"fact/{FEATURE}:{feature}/task/{t['id']}"), "PLANS_TASK",
                          one_line(sentence, 600), anchor, task_entity(group, str(t["id"]), feature)))
    when = execution.get("last_updated") or execution.get("completed_at") or execution.get("started_at")
    return IndexRecord(key=f"{FEATURE}:{feature}", kind=FEATURE, group_id=group, name=f"{FEATURE}:{feature}",
                       data=data, summary=one_line(progress, 200), search_text="\n".join(lines),
                       fields={"status": status, "feature_id": feature}, facts=facts, entities=[anchor],
                       source_path=source_path, feature_id=feature, completed_at=str(when) if when else None)
