"""One line per task with loop state, and one per feature plan: the data behind ``guardkit-state status``.

Repositories hold thousands of task files and most have no loop state, so the scan first checks
the raw text for a state block before parsing anything, and keeps a cache of summaries keyed by
each file's size and mtime in ``.guardkit/cache/status.json``. The cache is rebuildable at any
time and never trusted over the files: an entry is used only while its file is unchanged.
"""

from __future__ import annotations

import bisect
import copy
import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guardkit_state.errors import FileTooLargeError, GuardkitStateError
from guardkit_state.git.checkouts import worktrees_home
from guardkit_state.model import Fields
from guardkit_state.store.layout import features_dir, tasks_dir
from guardkit_state.store.reads import read_bytes_capped
from guardkit_state.store.stat_cache import signature
from guardkit_state.taskfile.discovery import (
    STATE_MARKERS,
    TaskEntry,
    declared_id,
    listing_scope,
    loop_worktrees,
    named_for,
    names_task,
    own_task_files,
    task_entries,
    task_id_from_filename,
)
from guardkit_state.taskfile.resolve import Copy, choose, plan_paths
from guardkit_state.taskfile.task_facts import task_cache

if TYPE_CHECKING:
    from guardkit_state.git.repo import GitRepo
    from guardkit_state.plans.plan import FeaturePlan
    from guardkit_state.taskfile.document import TaskFile

# The task document, the history and the feature plans are imported where a file must be read:
# a status served from its cache reads none, and their imports were most of its time.



@dataclass
class TaskSummary:
    task_id: str
    path: str
    status: str | None
    turns: int
    last_decision: str | None
    #: Criteria verified by an itemised Coach verdict (``implied_by_approval`` are apart).
    verified: int
    total: int
    outcome: str | None
    in_worktree: bool = False
    error: str | None = None
    implied_by_approval: int = 0
    rejected: int = 0
    pending: int = 0
    #: Set when the id has several copies: ``{"path", "reason", "others"}``, as ``show --json`` says.
    resolved: dict[str, Any] | None = None
    #: What the agents of its recorded turns reported they cost (None: none reported a cost).
    cost_usd: float | None = None

    def to_dict(self) -> dict[str, Any]:
        # Built directly: asdict's deep copy of every field was most of a cached status's output time.
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        if self.resolved is not None:
            data["resolved"] = copy.deepcopy(self.resolved)
        return data


def summarise(task: TaskFile, *, relpath: str, in_worktree: bool = False) -> TaskSummary | None:
    """The one-line summary of ``task``, or ``None`` when it has no loop state."""
    state = task.state
    if state is None:
        return None
    # Counted as ``show`` counts them (its checkout holds the turn files: the path minus relpath).
    path = str(task.path)
    checkout = Path(path[: -len(relpath)] if path.endswith(relpath) else task.path.parent)
    from guardkit_state.turns.history import criteria_counts

    counts = criteria_counts(task, checkout)
    from guardkit_state.turns.spend import task_spend

    spent = task_spend(checkout, task.task_id)
    return TaskSummary(
        task_id=task.task_id or Path(relpath).stem, path=relpath, status=task.status, turns=len(state.turns),
        last_decision=state.turns[-1].decision if state.turns else None, verified=counts.verified,
        total=counts.total, outcome=state.extra.get("outcome"), in_worktree=in_worktree,
        implied_by_approval=counts.implied_by_approval, rejected=counts.rejected, pending=counts.pending,
        cost_usd=round(spent, 6) if spent is not None else None,
    )


def repo_status(repo_root: Path, *, use_cache: bool = True) -> list[TaskSummary]:
    """Summaries of every task with loop state under ``tasks/``, sorted by id.

    Each id is read from the copy ``show`` reads (:mod:`guardkit_state.taskfile.resolve`): among several
    copies the rules pick one, and a loop's worktree is read for that loop's own task only.
    """
    with listing_scope():  # one read: tasks/ listed once, the cache saved at its end
        return _repo_status(Path(repo_root).resolve(), use_cache)


def _repo_status(root: Path, use_cache: bool) -> list[TaskSummary]:
    # Outside a repository (no tasks/) there is nothing to cache, and a read must create nothing.
    use_cache = use_cache and tasks_dir(root).is_dir()
    cache = task_cache(root) if use_cache else None
    seen: list[str] = []
    main = _Checkout(root)
    trees: dict[str, _Checkout] = {}
    # Plain strings and scandir entries, not Path objects: 10,000 files cost ~0.1 s less this way.
    for entry, key, relpath, tree in _task_files(str(root)):
        try:
            # Never entry.stat(): a listing reused from an earlier call keeps the stat it made then.
            stat = os.stat(entry.path)  # a symlinked task file (inside the checkout) is keyed by its target
        except OSError:
            continue
        sig = signature(stat)
        hit = cache.entry(key, sig) if cache is not None else None
        if hit is not None and "summary" in hit:
            data, note = hit["summary"], hit.get("duplicates")
        else:
            data, note = _summarise_file(Path(entry.path), relpath, tree is not None)
            if cache is not None:
                cache.put(key, sig, "summary", data)
                cache.put(key, sig, "state", data is not None)  # what the resolver asks (holds_state)
                cache.put(key, sig, "duplicates", note)
        if note:  # said from the cache too: the same warnings whether or not the file was parsed now
            from guardkit_state.taskfile.document import warn_duplicates

            warn_duplicates(entry.path, note)
        seen.append(key)
        checkout = main if tree is None else trees.setdefault(tree, _Checkout(Path(entry.path[:-len(relpath) - 1])))
        checkout.add(entry.name, relpath, data)
    if cache is not None:
        cache.retain(seen)
    summaries = main.pick()
    for task_id, tree_checkout in trees.items():
        # The loop's worktree holds a copy of its task: that copy (with or without state) is the truth.
        summaries.pop(task_id, None)
        summaries.update(tree_checkout.pick(only=task_id))
    return [summaries[k] for k in sorted(summaries)]


class _Checkout:
    """The task files of one checkout as the scan saw them: rows with state, and every name."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.rows: dict[str, dict[str, dict[str, Any]]] = {}  # id -> relpath -> summary data
        self.names: list[tuple[str, str]] = []  # (file name, relpath), for finding other copies

    def add(self, name: str, relpath: str, data: dict[str, Any] | None) -> None:
        self.names.append((name, relpath))
        if data is not None:
            self.rows.setdefault(data["task_id"], {})[relpath] = data

    def pick(self, only: str | None = None) -> dict[str, TaskSummary]:
        """One summary per id, from the copy the resolver's rules choose."""
        self.names.sort()
        picked: dict[str, TaskSummary] = {}
        planned = partial(plan_paths, self.root)  # read once per status: it runs in a listing_scope
        for task_id, rows in self.rows.items():
            if only is not None and task_id != only:
                continue
            copies = self._copies(task_id, rows)
            winner, reason = choose([Copy(rel, rel in rows) for rel in copies], planned)
            if winner.relpath not in rows:
                continue  # a copy without state wins (as it does for show): no loop state to list
            summary = TaskSummary(**rows[winner.relpath])
            if len(copies) > 1:
                summary.resolved = {"path": winner.relpath, "reason": reason,
                                    "others": [rel for rel in copies if rel != winner.relpath]}
            picked[task_id] = summary
        return picked

    def _copies(self, task_id: str, rows: dict[str, dict[str, Any]]) -> list[str]:
        """Relpaths of every file of ``task_id``: its rows, and files named for it that are its own."""
        start = bisect.bisect_left(self.names, (task_id,))
        named = []
        for name, relpath in self.names[start:]:
            if not name.startswith(task_id):
                break
            if named_for(name, task_id):
                named.append(relpath)
        if len(named) <= 1 and set(named) <= set(rows):
            return sorted(rows)
        # Several files carry the name: read their heads for the id (TASK-A-1-2-x.md is not TASK-A-1's).
        found = {rel for rel in named if rel in rows or names_task(self.root / rel, task_id, self.root)}
        return sorted(found | set(rows))


def _summarise_file(path: Path, relpath: str, in_worktree: bool) -> tuple[dict[str, Any] | None, str | None]:
    """The file's summary (None without loop state), and the warning its repeated keys give (or None)."""
    try:
        # Capped, and never a blocking open (the name may have become a FIFO since the scan).
        raw = read_bytes_capped(path)
    except FileTooLargeError as exc:
        return _unreadable(path, relpath, in_worktree, exc), None
    except GuardkitStateError:
        return None, None
    if not any(marker in raw for marker in STATE_MARKERS):
        return None, None
    from guardkit_state.taskfile.document import TaskFile, duplicates_note

    try:
        task = TaskFile.from_bytes(raw, path, warn=False)
        summary = summarise(task, relpath=relpath, in_worktree=in_worktree)
    except GuardkitStateError as exc:
        return _unreadable(path, relpath, in_worktree, exc), None
    parsed = task._parsed
    note = duplicates_note(path, parsed.duplicates) if parsed is not None and parsed.duplicates else None
    return (summary.to_dict() if summary else None), note


def _unreadable(path: Path, relpath: str, in_worktree: bool, exc: GuardkitStateError) -> dict[str, Any]:
    # The id the resolver finds the file by, so the row is the one ``show`` reports on.
    task_id = declared_id(path) or task_id_from_filename(path.name)
    return TaskSummary(task_id=task_id, path=relpath, status=None, turns=0, last_decision=None, verified=0,
                       total=0, outcome=None, in_worktree=in_worktree, error=str(exc)).to_dict()


def _task_files(root: str) -> Iterator[tuple[TaskEntry, str, str, str | None]]:
    """(entry, cache key, path relative to its checkout, the worktree's task id or None) per ``*.md``.

    A loop's worktree (``.guardkit/worktrees/TASK-X``) is a full checkout: only TASK-X's own files
    are read there; every other task is read from the main checkout.
    """
    prefix = len(root) + 1
    for entry in task_entries(root):  # the listing every lookup by id of this command sees
        relpath = entry.path[prefix:]
        yield entry, relpath, relpath, None
    # Loop worktrees live in the repository's main checkout, also when this is a linked worktree.
    home = str(worktrees_home(Path(root)))
    keep = prefix if home == root else 0  # cache keys: relative to the repo, else absolute
    for tree in loop_worktrees(home):
        base = len(tree.path) + 1
        for entry in own_task_files(tree.path, tree.name):
            yield entry, entry.path[keep:], entry.path[base:], tree.name


# --------------------------------------------------------------------------- features


@dataclass
class FeatureSummary(Fields):
    """One feature plan's progress, as the plan reports it (``show FEAT-ID`` reads the files and git).

    ``tasks`` counts the tasks by where they stand, ``done``, ``failed`` (failed or blocked) and
    ``total_turns`` from them: the reading ``show``, ``log`` and ``report`` make
    (:mod:`guardkit_state.features.standing`).
    """

    feature_id: str
    path: str
    name: str | None
    status: str | None
    total: int
    tasks: dict[str, int]
    waves: int | None
    current_wave: int
    completed_waves: list[int]
    total_turns: int
    last_updated: str | None
    error: str | None = None
    done: int = 0
    failed: int = 0


def feature_status(repo_root: Path | str) -> list[FeatureSummary]:
    """One summary per ``.guardkit/features/FEAT-*.yaml``, sorted by file name.

    Each task is read as ``show FEAT-ID`` reads it (:mod:`guardkit_state.features.standing`); git
    is asked about a feature only when one of its branches or worktrees exists. An unreadable
    plan is listed with its error.
    """
    root = Path(repo_root).resolve()
    if not features_dir(root).is_dir():
        return []  # no plans: nothing to import or read
    from guardkit_state.git.repo import GitRepo
    from guardkit_state.plans.plan import find_plans, load_plan
    from guardkit_state.taskfile.locate import autobuild_branches_at

    branches = autobuild_branches_at(root)
    # Without a branch or a worktree of any run, git holds nothing of any feature: each task reads
    # as its files say, git or not (read_standings), so the repository is not looked for (a git call).
    ran = branches or any(loop_worktrees(worktrees_home(root)))
    git = GitRepo.discover(root) if ran else None
    summaries: list[FeatureSummary] = []
    with listing_scope():  # each plan's tasks are resolved under tasks/: list it once
        for path in find_plans(root):
            relpath = path.relative_to(root).as_posix()
            try:
                summaries.append(_feature_summary(root, git, branches, load_plan(path), relpath))
            except GuardkitStateError as exc:
                summaries.append(FeatureSummary(path.stem, relpath, None, None, 0, {}, None, 0, [], 0, None,
                                                str(exc)))
    return summaries


def _feature_summary(root: Path, git: GitRepo | None, branches: frozenset[str], plan: FeaturePlan,
                     relpath: str) -> FeatureSummary:
    from guardkit_state.features.standing import feature_git, read_standings, tally
    from guardkit_state.plans.waves import plan_waves

    counts = tally(read_standings(root, plan, feature_git(root, git, plan.feature_id), branches, counts_only=True))
    try:
        waves: int | None = len(plan_waves(plan))
    except GuardkitStateError:
        waves = None  # the plan's waves cannot be formed: 'show' says why
    execution = plan.execution
    return FeatureSummary(
        plan.feature_id, relpath, plan.name, plan.status, counts.tasks, dict(counts.by_status), waves,
        execution.current_wave if execution else 0, execution.completed_waves if execution else [],
        counts.turns, execution.last_updated if execution else None, None, counts.done, counts.failed)
