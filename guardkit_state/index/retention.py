"""Retention of turn states in the index: what to drop, as a pure function (the files keep everything).

At most :data:`PER_FEATURE` turns per feature and :data:`PER_PROJECT` per project; the oldest turns
of *completed* features go first; a feature in progress is never pruned, even over a cap. A task is
done when its file sits under a finished status directory, or, when none says otherwise, its latest
turn was approved; a feature is completed when every task of it with turns is done (turns without a
feature form one of their own task). Oldest: by ``completed_at``, then turn number, then id.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from guardkit_state.index.records import TURN_STATES, IndexRecord

PER_FEATURE = 50
PER_PROJECT = 200

#: Task status directories (and frontmatter values) that mean the task will run no more turns.
DONE_STATUSES = frozenset({"completed", "in_review", "archived", "cancelled", "obsolete", "review_complete"})
#: Statuses that mean the task is (or may again be) worked on, overriding an approved last turn.
ACTIVE_STATUSES = frozenset({"backlog", "in_progress", "blocked", "design_approved"})


@dataclass(frozen=True)
class TurnRef:
    """What retention needs to know about one indexed turn state."""

    key: str
    feature_id: str | None
    task_id: str
    turn_number: int
    completed_at: str | None
    coach_decision: str | None

    @property
    def feature_key(self) -> str:
        return self.feature_id or f"task:{self.task_id}"

    @property
    def age_key(self) -> tuple[str, int, str]:
        return (self.completed_at or "", self.turn_number, self.key)


def completed_features(turns: Iterable[TurnRef], task_status: Mapping[str, str]) -> set[str]:
    """Feature keys whose every task is done (see the module docstring)."""
    latest: dict[str, TurnRef] = {}
    tasks_of: dict[str, set[str]] = defaultdict(set)
    for turn in turns:
        tasks_of[turn.feature_key].add(turn.task_id)
        best = latest.get(turn.task_id)
        if best is None or turn.turn_number > best.turn_number:
            latest[turn.task_id] = turn

    def task_done(task_id: str) -> bool:
        status = task_status.get(task_id)
        if status in DONE_STATUSES:
            return True
        if status in ACTIVE_STATUSES:
            return False
        return latest[task_id].coach_decision in ("approved", "approve")

    return {feature for feature, tasks in tasks_of.items() if all(task_done(t) for t in tasks)}


def select_pruned(
    turns: Sequence[TurnRef],
    *,
    task_status: Mapping[str, str] | None = None,
    per_feature: int = PER_FEATURE,
    per_project: int = PER_PROJECT,
) -> list[str]:
    """Keys of the turn states to drop from the index, oldest first.

    ``turns`` are every turn state of one project; ``task_status`` maps task ids to their status
    (see :func:`task_statuses`). Pure: records in, ids out.
    """
    done = completed_features(turns, task_status or {})
    by_feature: dict[str, list[TurnRef]] = defaultdict(list)
    for turn in turns:
        by_feature[turn.feature_key].append(turn)
    dropped: list[TurnRef] = []
    kept_completed: list[TurnRef] = []
    for feature, items in by_feature.items():
        items.sort(key=lambda t: t.age_key)
        if feature not in done:
            continue
        excess = max(0, len(items) - per_feature)
        dropped.extend(items[:excess])
        kept_completed.extend(items[excess:])
    remaining = len(turns) - len(dropped)
    if remaining > per_project:
        kept_completed.sort(key=lambda t: t.age_key)
        dropped.extend(kept_completed[: remaining - per_project])
    dropped.sort(key=lambda t: t.age_key)
    return [t.key for t in dropped]


def task_statuses(repo_root: Path) -> dict[str, str]:
    """Task id -> status directory, from ``tasks/<status>/[<feature>/]TASK-ID[-slug].md``.

    The id is matched exactly: ``TASK-ABC-1`` is the file ``TASK-ABC-1.md`` or ``TASK-ABC-1-<slug>.md``
    where the slug does not start with a digit (so ``TASK-ABC-10-x.md`` is not ``TASK-ABC-1``).
    Files are not opened: the status directory is GuardKit's own status.
    """
    tasks_dir = Path(repo_root) / "tasks"
    statuses: dict[str, str] = {}
    for path in sorted(tasks_dir.glob("*/**/*.md")):
        status = path.relative_to(tasks_dir).parts[0]
        for task_id in _candidate_ids(path.stem):
            statuses.setdefault(task_id, status)
    return statuses


def _candidate_ids(stem: str) -> list[str]:
    """Every id a file stem could carry: ``TASK-A-1-fix-x`` -> ``TASK-A-1-fix-x``, ``TASK-A-1-fix``,
    ``TASK-A-1``, ... (the slug boundary is unknown, and the lookup is by exact id)."""
    parts = stem.split("-")
    return ["-".join(parts[:n]) for n in range(len(parts), 1, -1)]


def retained(records: list[IndexRecord], repo_root: Path) -> tuple[list[IndexRecord], list[IndexRecord]]:
    """``records`` without the turns the policy drops, and those turns."""
    turns = [r for r in records if r.kind == TURN_STATES]
    refs = [TurnRef(r.key, r.feature_id, r.task_id or "", r.turn_number or 0, r.completed_at,
                    r.fields.get("coach_decision")) for r in turns]
    drop = set(select_pruned(refs, task_status=task_statuses(repo_root)))
    return [r for r in records if r.key not in drop], [r for r in turns if r.key in drop]
