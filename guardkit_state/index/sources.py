"""Every record of a checkout, read from its files: the rules across files, one for the file scan and ``sync``.

Each file is read alone (:mod:`.readings`); :func:`combine` then picks, from what each gave, the
records of the checkout, by the rules that look across files:

* turns come from ``turn_state_turn_N.json`` files (a loop worktree's copy of a turn wins over the
  checkout's), then from the turns task files list that no such file tells;
* a task record per task id, of the copy every command reads (:func:`~guardkit_state.taskfile.resolve.choose`;
  a loop's worktree copy of its own task wins), given the feature of the plan listing it when its
  own frontmatter names none;
* a feature record per plan.

The file scan (:mod:`.scan_cache`) keeps each file's reading and runs the same rules after a change,
reading again only the files that changed.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from guardkit_state.errors import GuardkitStateError, ParseError
from guardkit_state.index.config_records import system_record
from guardkit_state.index.readings import (
    ASSIGNED,
    LISTED,
    PLAN_FILE,
    TASK_FILE,
    TURN_FILE,
    FileReading,
    read_source,
    source_files,
)
from guardkit_state.index.records import FEATURE, TASK, TURN_STATES, IndexRecord, project_group_id
from guardkit_state.index.task_records import feature_record_from_data, task_record_from_data
from guardkit_state.index.turn_records import turn_record
from guardkit_state.store.turn_files import turn_state_number
from guardkit_state.taskfile.resolve import Copy, choose, plan_paths


@dataclass
class ProjectRecords:
    """The project group's records (turns, tasks, features) and the files that could not be read."""

    records: list[IndexRecord]
    problems: list[GuardkitStateError] = field(default_factory=list)


def load_project_records(repo_root: Path, group: str | None = None) -> ProjectRecords:
    """Turn, task and feature records of the checkout at ``repo_root``, sorted by key."""
    root = Path(repo_root).absolute()
    group = group or project_group_id(root)
    readings = [read_source(root, source, group) for source in source_files(root)]
    records = [chosen.reading.record(chosen.name) for chosen in combine(readings, lambda: plan_paths(root))]
    return ProjectRecords(records, [r.problem for r in readings if r.problem is not None])


class Chosen(NamedTuple):
    """A record the rules picked: the file's reading, the record's name in it, its key."""

    reading: FileReading
    name: str
    key: str


def combine(readings: Sequence[FileReading], planned_paths: Callable[[], set[str]]) -> list[Chosen]:
    """The records of the checkout, sorted by key, from every file's reading (in :func:`~.readings.source_files`'
    order); ``planned_paths``: every ``file_path`` the plans name (asked only when copies of a task tie)."""
    turns = [r for r in readings if r.source.kind == TURN_FILE]
    tasks = [r for r in readings if r.source.kind == TASK_FILE and r.facts]
    plans = [r for r in readings if r.source.kind == PLAN_FILE and r.facts]
    chosen = _turn_files(turns)
    known = {(c.reading.facts["task"], c.reading.facts["turn"]) for c in chosen}
    chosen += _listed_turns(tasks, known)
    chosen += _tasks(tasks, plans, functools.cache(planned_paths))  # read once, if ever
    chosen += [Chosen(r, "feature", f"{FEATURE}:{r.facts['feature']}") for r in plans]
    return sorted(chosen, key=lambda c: c.key)


def _turn_files(turns: list[FileReading]) -> list[Chosen]:
    """One turn per (task folder, N), a loop worktree's copy winning (listed after the checkout's),
    then one per key."""
    by_turn: dict[tuple[str, int], FileReading] = {}
    for reading in turns:
        folder, name = reading.source.path.rsplit("/", 2)[-2:]
        number = turn_state_number(name)
        if number is not None:  # (the listing kept only these names)
            by_turn[folder, number] = reading
    by_key = {r.facts["key"]: r for r in by_turn.values() if r.facts}
    return [Chosen(r, "turn", key) for key, r in sorted(by_key.items())]


def _listed_turns(tasks: list[FileReading], known: set[tuple[str, int]]) -> list[Chosen]:
    """The turns task files list (GuardKit's own loop keeps its per-turn JSON on the machine that
    ran it), but those a turn state file tells (``known``). Among several copies of a task, the one
    in its own loop worktree wins, else the one listing most turns."""
    best: dict[str, tuple[bool, int, FileReading]] = {}
    for reading in tasks:
        facts = reading.facts
        if not facts["state"] or not facts["turns"]:
            continue
        rank = (reading.source.loop is not None, len(facts["turns"]))
        held = best.get(facts["id"])
        if held is None or rank > held[:2]:
            best[facts["id"]] = (*rank, reading)
    return [Chosen(reading, f"{LISTED}{i}", key) for _, _, reading in best.values()
            for i, (turn, key) in enumerate(reading.facts["turns"]) if (reading.facts["id"], turn) not in known]


def _tasks(tasks: list[FileReading], plans: list[FileReading], planned_paths: Callable[[], set[str]]) -> list[Chosen]:
    """One task record per id: the loop's own copy while it runs, else the copy the resolver's
    rules pick; with the feature of the (last) plan listing it when its own names none."""
    copies: dict[str, dict[str, FileReading]] = {}
    in_loop: dict[str, FileReading] = {}
    for reading in tasks:
        if reading.source.loop is None:
            copies.setdefault(reading.facts["id"], {})[reading.source.path] = reading
        else:
            in_loop[reading.facts["id"]] = reading
    planned = {task: plan.facts["feature"] for plan in plans if plan.facts["feature"] for task in plan.facts["tasks"]}
    chosen = []
    for task_id in sorted(copies.keys() | in_loop.keys()):
        if task_id in in_loop:
            reading = in_loop[task_id]
        else:
            found = copies[task_id]
            pick, _ = choose([Copy(path, r.facts["state"]) for path, r in found.items()], planned_paths)
            reading = found[pick.relpath]
        feature = planned.get(task_id)
        name = f"{ASSIGNED}{feature}" if feature and not reading.facts["feature"] else "task"
        chosen.append(Chosen(reading, name, f"{TASK}:{task_id}"))
    return chosen


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
    build = _BUILDERS.get(str(envelope.get("kind")))
    return build(envelope["data"], group) if build is not None else system_record(group, name, envelope["data"])


#: How a record of each kind is built from its data (any other kind is a configuration entity).
_BUILDERS: dict[str, Callable[[dict[str, Any], str], IndexRecord]] = {
    TURN_STATES: turn_record, TASK: task_record_from_data, FEATURE: feature_record_from_data}
