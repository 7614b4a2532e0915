"""Each file records come from, read on its own: what the rules across files ask of it, and its records.

The file scan and ``sync`` read the same files (:func:`source_files`): turn state files, task files
(the checkout's, and in each loop worktree its loop's own task), feature plans, and the
configuration. A file is read alone into a :class:`FileReading`: its **facts** — what the rules across
files (:func:`guardkit_state.index.sources.combine`) need to pick the records: a turn's key, a task's
id and copies, the turns its frontmatter lists, the tasks a plan names — and its **records**, built
when the rules pick them (a task file's own task record, the same with the feature a plan gives it,
each turn its frontmatter lists; a turn state file's turn; a plan's feature).

The facts are plain JSON: the scan keeps them per file, with the file's signature, in its cache
(:mod:`.scan_cache`), so a search after a change reads only the files that changed. A reading taken
from the cache has no records to build; the scan reads its file again if the rules ever need one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guardkit_state.errors import GuardkitStateError
from guardkit_state.index.config_records import load_system_records
from guardkit_state.index.records import IndexRecord
from guardkit_state.index.task_records import (
    feature_data,
    feature_record_from_data,
    task_data,
    task_feature,
    task_record_from_data,
)
from guardkit_state.index.turn_records import load_turn_state_dict, turn_record, turn_state_files
from guardkit_state.model import turn_state_id
from guardkit_state.store.layout import OVERRIDES_FILE, QUALITY_GATES_FILE
from guardkit_state.store.reads import read_bytes_capped
from guardkit_state.taskfile.discovery import iter_task_files, loop_worktrees, own_task_files
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.turns.history import entry_turn_state

log = logging.getLogger("guardkit_state.index")

#: The kinds of source file, in the order :func:`source_files` lists them.
TURN_FILE, TASK_FILE, PLAN_FILE, CONFIGURATION = "turn", "task", "plan", "config"
#: The configuration's reading is one, of both its files (:data:`CONFIG_FILES`), under this name.
CONFIG_PATH = ".guardkit/config"
CONFIG_FILES = (QUALITY_GATES_FILE.as_posix(), OVERRIDES_FILE.as_posix())
#: The record of a task file carrying the feature a plan gives it: ``task@FEAT-X``.
ASSIGNED = "task@"
#: The record of the ``i``-th turn a task file's frontmatter lists: ``turn:i``.
LISTED = "turn:"


@dataclass(frozen=True)
class Source:
    """A file records come from: its kind, its path relative to the checkout, and for a task file
    found in a loop's worktree, that loop (its task's id)."""

    kind: str
    path: str
    loop: str | None = None


@dataclass
class FileReading:
    """What one file gave, read alone: :attr:`facts` (plain JSON, see the module), the signature it
    was read at (None: read it again next time), why it could not be read, and its records by name
    (only for a file read in this process: :meth:`record`)."""

    source: Source
    facts: dict[str, Any]
    sig: Any = None
    problem: GuardkitStateError | None = None
    build: Callable[[str], IndexRecord] | None = field(default=None, repr=False, compare=False)

    def record(self, name: str) -> IndexRecord:
        """The record ``name`` of the file (``task``, ``task@FEAT-X``, ``turn:2``, ``turn``, ``feature``,
        ``config:3``).

        Raises:
            LookupError: the reading came from the cache (read the file again), or has no such record.
        """
        if self.build is None:
            raise LookupError(f"{self.source.path}: not read in this process")
        return self.build(name)


def _none(name: str) -> IndexRecord:
    raise LookupError(f"no record {name!r}")


def source_files(root: Path) -> list[Source]:
    """Every file records may come from, in the order the rules across files read them: turn state
    files (the checkout's, then each loop worktree's), task files (the checkout's in walk order,
    then each loop's own task in its worktree), feature plans. (The configuration is read apart:
    :func:`read_configuration`.)"""
    from guardkit_state.plans.plan import find_plans

    base = len(str(root)) + 1
    found = [Source(TURN_FILE, str(path)[base:]) for path in turn_state_files(root)]
    found += [Source(TASK_FILE, str(path)[base:]) for path in iter_task_files(root)]
    found += [Source(TASK_FILE, entry.path[base:], tree.name) for tree in loop_worktrees(root)
              for entry in own_task_files(tree.path, tree.name)]
    found += [Source(PLAN_FILE, str(path)[base:]) for path in find_plans(root)]
    return found


def source_paths(root: Path) -> list[str]:
    """The paths :func:`source_files` lists, sorted (what ``sync`` signs, for the index's staleness)."""
    return sorted({source.path for source in source_files(root)})


def read_source(root: Path, source: Source, group: str) -> FileReading:
    """Read the file of ``source`` (a turn, task or plan); a file that cannot be read gives no
    facts and says why (:attr:`FileReading.problem`)."""
    reader = {TURN_FILE: _read_turn, TASK_FILE: _read_task, PLAN_FILE: _read_plan}[source.kind]
    return reader(root / source.path, source, group)


def _read_turn(path: Path, source: Source, group: str) -> FileReading:
    try:
        record = turn_record(load_turn_state_dict(path), group, source_path=source.path)
    except GuardkitStateError as exc:
        log.warning("skipping %s: %s", path, exc)
        return FileReading(source, {}, problem=exc, build=_none)
    facts = {"key": record.key, "task": record.task_id or "", "turn": record.turn_number or 0}
    return FileReading(source, facts, build=lambda name: record if name == "turn" else _none(name))


def _read_task(path: Path, source: Source, group: str) -> FileReading:
    try:
        task = TaskFile.from_bytes(read_bytes_capped(path), path)
    except GuardkitStateError as exc:
        log.debug("task file not indexed: %s", exc)
        return FileReading(source, {}, problem=exc, build=_none)
    if source.loop not in (None, task.task_id):
        return FileReading(source, {}, build=_none)  # in a loop's worktree, another task's file: not read there
    data = task_data(task.task_id, task.data, [(c.id, c.text) for c in task.criteria])
    entries = task.state.turns if task.state is not None else []
    facts = {"id": task.task_id, "state": task.state is not None, "feature": task_feature(data),
             "turns": [[entry.turn, turn_state_id(task.feature_id, task.task_id, entry.turn)] for entry in entries]}

    def build(name: str) -> IndexRecord:
        if name == "task":
            return task_record_from_data(data, group, source_path=source.path)
        if name.startswith(ASSIGNED):
            return task_record_from_data(dict(data) | {"feature_id": name[len(ASSIGNED):]}, group,
                                         source_path=source.path)
        if name.startswith(LISTED):
            told = entry_turn_state(entries[int(name[len(LISTED):])], task_id=task.task_id,
                                    feature_id=task.feature_id, verified_count=None)
            return turn_record(told.to_dict(), group, source_path=source.path)
        return _none(name)

    return FileReading(source, facts, build=build)


def _read_plan(path: Path, source: Source, group: str) -> FileReading:
    from guardkit_state.plans.plan import load_plan

    try:
        data = feature_data(load_plan(path))
    except GuardkitStateError as exc:
        return FileReading(source, {}, problem=exc, build=_none)
    facts = {"feature": str(data["id"]),
             "tasks": [str(t.get("id")) for t in data.get("tasks") or [] if isinstance(t, dict)]}
    return FileReading(source, facts, build=lambda name: feature_record_from_data(data, group, source_path=source.path)
                   if name == "feature" else _none(name))


def read_configuration(root: Path, groups: dict[str, str]) -> FileReading:
    """The configuration's records (role constraints, gate profiles, modes: built-ins and this
    project's files): ``config:0`` ... ; none when it cannot be loaded (logged)."""
    try:
        records, reason = load_system_records(root, groups=groups)
    except Exception as exc:  # a configuration that cannot be loaded leaves the other records searchable
        log.warning("configuration not searchable: %s", exc)
        records, reason = [], str(exc)
    if reason:
        log.debug("system groups: %s", reason)
    return FileReading(Source(CONFIGURATION, CONFIG_PATH), {"records": len(records)},
                   build=lambda name: records[int(name.removeprefix("config:"))])


__all__ = ["ASSIGNED", "CONFIGURATION", "CONFIG_FILES", "CONFIG_PATH", "LISTED", "PLAN_FILE", "TASK_FILE", "TURN_FILE",
           "FileReading", "Source",
           "read_configuration", "read_source", "source_files", "source_paths"]
