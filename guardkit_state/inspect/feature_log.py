"""``log FEAT-X``: the merges on a feature branch, and each task's turns, from git.

A feature run merges every approved task branch into ``autobuild/FEAT-X`` with a merge commit whose
trailers name the feature, the task and the wave (:mod:`guardkit_state.git.merge`); those commits
are the feature's history. Each task's turns are its turn log
(:func:`guardkit_state.inspect.review.read_turn_log`), read from its branch, else from the feature
branch once its own branch is gone. Reads only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guardkit_state.errors import GuardkitStateError
from guardkit_state.features.standing import (
    FeatureTally,
    TaskStanding,
    autobuild_branches,
    branch_note,
    feature_git,
    read_standings,
    tally,
)
from guardkit_state.git.merge import TRAILER_FEATURE, TRAILER_TASK, TRAILER_WAVE
from guardkit_state.git.parse import log_format, parse_log
from guardkit_state.git.repo import GitRepo
from guardkit_state.inspect.review import TurnLog, read_turn_log
from guardkit_state.model import Fields, json_ready
from guardkit_state.plans.merge_queue_log import QueueStep, recorded_steps
from guardkit_state.plans.plan import find_plan, load_plan
from guardkit_state.store.layout import branch_for
from guardkit_state.taskfile.discovery import listing_scope

_FORMAT = log_format(["%H", "%cI", "%s", f"%(trailers:key={TRAILER_FEATURE},valueonly,separator=%x2C)",
                      f"%(trailers:key={TRAILER_TASK},valueonly,separator=%x2C)",
                      f"%(trailers:key={TRAILER_WAVE},valueonly,separator=%x2C)"])


@dataclass(frozen=True)
class FeatureMerge(Fields):
    """One merge commit on the feature branch: the task it brought in (None: merged by hand)."""

    sha: str
    task_id: str | None
    wave: int | None
    date: str
    subject: str


@dataclass
class FeatureLog:
    """A feature's merges (oldest first) and each task's turns, in plan order."""

    feature_id: str
    branch: str
    merges: list[FeatureMerge] = field(default_factory=list)
    tasks: list[TurnLog] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Where each task stands, and the feature's counts: the reading ``status`` and ``show`` make.
    standings: list[TaskStanding] = field(default_factory=list)
    #: The merge queue's steps the plan records (each candidate, its gate result, what was sent back).
    queue: list[QueueStep] = field(default_factory=list)

    @property
    def tally(self) -> FeatureTally:
        return tally(self.standings)

    def standing_of(self, task_id: str) -> TaskStanding | None:
        return next((s for s in self.standings if s.task_id == task_id), None)

    def merge_of(self, task_id: str) -> FeatureMerge | None:
        return next((m for m in reversed(self.merges) if m.task_id == task_id), None)

    def to_dict(self) -> dict[str, Any]:
        standing = {s.task_id: s for s in self.standings}
        return {"feature_id": self.feature_id, "branch": self.branch, "notes": self.notes,
                "totals": self.tally.to_dict(), "merges": [m.to_dict() for m in self.merges],
                "tasks": [{**log.to_dict(), "merge": json_ready(self.merge_of(log.task_id)),
                           "status": standing[log.task_id].status if log.task_id in standing else None}
                          for log in self.tasks], "merge_queue": [step.to_dict() for step in self.queue]}


def read_feature_log(repo_root: Path | str, feature: str) -> FeatureLog:
    """The merges and task turns of ``feature`` (an id ``FEAT-X`` or a plan file's path).

    Raises:
        FeatureNotFoundError, ParseError, SchemaError: the plan cannot be read.
    """
    with listing_scope():  # one listing of tasks/ for every task of the feature (see discovery)
        return _feature_log(Path(repo_root).resolve(), feature)


def _feature_log(root: Path, feature: str) -> FeatureLog:
    plan = load_plan(find_plan(root, feature))
    result = FeatureLog(plan.feature_id, branch_for(plan.feature_id), queue=recorded_steps(plan))
    repo = GitRepo.discover(root)
    exists = repo is not None and result.branch in autobuild_branches(repo)  # the read's one listing
    result.standings = read_standings(root, plan, feature_git(root, repo, plan.feature_id), counts_only=True)
    if repo is None:
        result.notes.append("not a git repository (or no git): no merges; turns read from files only")
    elif not exists:
        result.notes.append(f"{plan.feature_id}: {branch_note(result.branch, exists, result.tally)}")
    else:
        result.merges = feature_merges(repo, result.branch, plan.feature_id)
    for task in plan.tasks:
        try:
            result.tasks.append(read_turn_log(root, task.id))
        except GuardkitStateError as exc:
            result.tasks.append(TurnLog(task.id, "none", notes=[str(exc)]))
    return result


def feature_merges(repo: GitRepo, branch: str, feature_id: str) -> list[FeatureMerge]:
    """The merge commits on ``branch``'s first-parent line since it left its base, oldest first.

    A merge whose trailers name another feature is not this feature's; a merge without trailers
    (a conflict resolved by hand) is listed with no task.
    """
    status, out, _ = repo.run("log", "--first-parent", "--merges", "--reverse", f"--format={_FORMAT}",
                              f"refs/heads/{branch}", "--", check=False)
    if status != 0:
        return []
    merges: list[FeatureMerge] = []
    for sha, date, subject, feature, task, wave in parse_log(out.decode("utf-8", "replace"), 6):
        if feature and feature_id not in feature.split(","):
            continue
        merges.append(FeatureMerge(sha, task.split(",")[0].strip() or None,
                                   int(wave) if wave.isdigit() else None, date, subject))
    return merges


__all__ = ["FeatureLog", "FeatureMerge", "feature_merges", "read_feature_log"]
