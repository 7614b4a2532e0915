"""Every record of a checkout, read from its files: the one loader behind the file scan and ``sync``.

Turns come from ``turn_state_turn_N.json`` files (a loop worktree's copy wins), then from the turns
task files list without such a file; tasks from task files; features from feature plans. A task
a plan lists without naming its feature in its own frontmatter is given the plan's feature.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from guardkit_state.errors import GuardkitStateError, ParseError
from guardkit_state.index.config_records import system_record
from guardkit_state.index.records import FEATURE, TASK, TURN_STATES, IndexRecord, project_group_id
from guardkit_state.index.task_records import (
    feature_record_from_data,
    frontmatter_turn_records,
    load_feature_records,
    read_task_files,
    task_record_from_data,
    task_records,
)
from guardkit_state.index.turn_records import load_turn_state_records, turn_record


@dataclass
class ProjectRecords:
    """The project group's records (turns, tasks, features) and the files that could not be read."""

    records: list[IndexRecord]
    problems: list[GuardkitStateError] = field(default_factory=list)

    def turns(self) -> list[IndexRecord]:
        return [r for r in self.records if r.turn_number is not None]


def load_project_records(repo_root: Path, group: str | None = None) -> ProjectRecords:
    """Turn, task and feature records of the checkout at ``repo_root``, sorted by key."""
    root = Path(repo_root)
    group = group or project_group_id(root)
    loaded = load_turn_state_records(root, group=group)
    problems = list(loaded.problems)
    records = list(loaded.records)
    known = {(r.task_id or "", r.turn_number or 0) for r in records}
    files, task_problems = read_task_files(root)
    records += frontmatter_turn_records(files, known, group)
    tasks = task_records(root, files, group)
    features, feature_problems = load_feature_records(root, group)
    problems += task_problems + feature_problems
    planned = {str(t.get("id")): f.feature_id for f in features for t in f.data.get("tasks") or []
               if isinstance(t, dict) and f.feature_id}
    for i, task in enumerate(tasks):
        feature = planned.get(task.task_id or "")
        if feature and not task.feature_id:
            data = dict(task.data) | {"feature_id": feature}
            tasks[i] = task_record_from_data(data, group, source_path=task.source_path)
    records += tasks + features
    return ProjectRecords(sorted(records, key=lambda r: r.key), problems)


def record_from_content(group: str, name: str, content: str) -> IndexRecord:
    """Rebuild a record from what the index stored (the episode's name and JSON content).

    Raises:
        ParseError: the content is not a record this version wrote.
    """
    try:
        envelope = json.loads(content)
    except json.JSONDecodeError as exc:
        raise ParseError(f"index episode {name!r} holds invalid JSON", pointer="$") from exc
    if not isinstance(envelope, dict) or not isinstance(envelope.get("data"), dict):
        raise ParseError(f"index episode {name!r} is not a record envelope", pointer="$")
    kind, data = str(envelope.get("kind")), envelope["data"]
    if kind == TURN_STATES:
        return turn_record(data, group)
    if kind == TASK:
        return task_record_from_data(data, group)
    if kind == FEATURE:
        return feature_record_from_data(data, group)
    return system_record(group, name, data)
