"""A feature at a glance, as data: what ``show FEAT-X`` prints.

Waves × tasks, each task as its files and git say — the reading the feature run itself makes
(:func:`guardkit_state.features.progress.read_task_state`): its own copy of its task file (in its
worktree, else on its branch or the feature branch), its turn commits, and the feature branch's
merge commits. The plan is read for the waves, the names and what only a run could record there
(the paths of a merge conflict). Nothing is written, no lock is taken: this works while the
feature runs and after it was killed. The next step is what ``--resume`` would do from here.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from guardkit_state.errors import GuardkitStateError
from guardkit_state.features.result import resume_command
from guardkit_state.features.standing import (
    FeatureTally,
    TaskStanding,
    autobuild_branches,
    feature_git,
    read_standings,
    tally,
)
from guardkit_state.git.checkouts import worktrees_home
from guardkit_state.git.repo import GitRepo
from guardkit_state.model import Fields, Outcome
from guardkit_state.plans.failure_rules import skipped_by, skipped_reason, stops_on_failure
from guardkit_state.plans.guardkit_keys import AWAITING_MERGE, run_settings
from guardkit_state.plans.merge_queue_log import QueueStep, recorded_steps
from guardkit_state.plans.plan import FeaturePlan, find_plan, load_plan
from guardkit_state.plans.smoke_gates import SmokeGate, SmokeRun, read_smoke_gate, recorded_runs
from guardkit_state.plans.waves import plan_waves
from guardkit_state.store.layout import artifacts_dir, branch_for, worktree_path, worktrees_dir
from guardkit_state.store.turn_files import TurnStore
from guardkit_state.taskfile.discovery import listing_scope
from guardkit_state.taskfile.locate import TaskLocation, locate_task
from guardkit_state.taskfile.resolve import resolve_task
from guardkit_state.taskfile.task_facts import remembered
from guardkit_state.turns.history import criteria_counts
from guardkit_state.turns.ledger import CriteriaCounts
from guardkit_state.turns.resume import resume_point


@dataclass(frozen=True)
class FeatureTaskRow(Fields):
    """One task of the feature as its files say.

    ``status``: ``pending``, ``in_progress`` (started, not ended), ``approved`` (not merged yet),
    ``blocked`` (approved, its merge conflicted), ``completed`` (merged), ``failed``, ``skipped``
    (closed before the feature ran it). ``copy`` says which copy of the task file was read.
    """

    task_id: str
    wave: int
    name: str | None
    status: str
    phase: str
    turns: int
    decisions: tuple[str, ...]
    outcome: str | None
    reason: str
    merged: bool
    merge_commit: str | None
    conflicts: tuple[str, ...]
    criteria: CriteriaCounts | None
    copy: str | None
    plan_status: str | None
    #: Why its task file could not be read (None when it could): a run refuses to start then.
    error: str | None = None
    #: Which reading decided ``status`` (:mod:`guardkit_state.features.standing`): ``run``, ``plan``, ``task_file``.
    source: str = "run"
    #: Where its loop stands inside a turn, when an interruption left one half done (the task's
    #: resume point: ``rerun_coach``, ``complete_from_reports``, ``rerun_turn``), and that step in words.
    resume_action: str | None = None
    resume_text: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Its fields, the resume point's two as one ``resume`` (None when its loop is not mid-turn)."""
        data = super().to_dict()
        action, text = data.pop("resume_action"), data.pop("resume_text")
        return data | {"resume": {"action": action, "text": text} if action is not None else None}


@dataclass(frozen=True)
class NextStep(Fields):
    """What a run (or ``--resume``) does next: the wave, the tasks it runs or merges, or why it stops;
    ``skipped``: the tasks it passes over because a task they need failed without stopping the feature."""

    wave: int | None
    run: tuple[str, ...]
    merge: tuple[str, ...]
    stopped_by: tuple[str, ...]
    text: str
    command: str | None
    skipped: tuple[str, ...] = ()


@dataclass
class FeatureView:
    """A feature as ``show FEAT-X`` shows it: its waves of task rows and what runs next."""

    feature_id: str
    name: str | None
    plan_path: Path
    plan_status: str | None
    branch: str
    started: bool
    worktree: Path | None
    wave_source: str
    waves: list[list[str]]
    tasks: list[FeatureTaskRow]
    next: NextStep
    #: The feature's counts from its tasks' standings, as ``status``, ``log`` and ``report`` give them.
    tally: FeatureTally
    last_updated: str | None = None
    notes: list[str] = field(default_factory=list)
    #: The plan's smoke gate (GuardKit's ``smoke_gates``) and the runs of it the plan records.
    smoke_gate: SmokeGate | None = None
    smoke_runs: list[SmokeRun] = field(default_factory=list)
    #: The merge queue's steps the plan records: each candidate, its gate result, what was sent back.
    queue_steps: list[QueueStep] = field(default_factory=list)
    #: GuardKit's run keys the plan holds, as ``(key, what it says)`` (:func:`~guardkit_state.plans.
    #: guardkit_keys.run_settings`): shown as written, acted on by GuardKit's runner only.
    settings: list[tuple[str, str]] = field(default_factory=list)

    def wave(self, number: int) -> list[FeatureTaskRow]:
        """The rows of wave ``number`` (1-based), in plan order."""
        return [row for row in self.tasks if row.wave == number]

    def to_dict(self) -> dict[str, Any]:
        counts = self.tally
        return {
            "feature_id": self.feature_id, "name": self.name, "plan": str(self.plan_path),
            "plan_status": self.plan_status, "branch": self.branch, "started": self.started,
            "worktree": str(self.worktree) if self.worktree else None, "wave_source": self.wave_source,
            "waves": [{"number": n, "tasks": [row.to_dict() for row in self.wave(n)]}
                      for n in range(1, len(self.waves) + 1)],
            "totals": {"tasks": counts.tasks, **counts.by_status, "turns": counts.turns}, "tally": counts.to_dict(),
            "next": self.next.to_dict(),
            "last_updated": self.last_updated,
            "notes": self.notes,
            "smoke_gate": {"description": self.smoke_gate.describe(), "command": self.smoke_gate.command}
            if self.smoke_gate is not None else None,
            "smoke_runs": [run.to_dict() for run in self.smoke_runs],
            "merge_queue": [step.to_dict() for step in self.queue_steps],
            "guardkit_settings": dict(self.settings),
        }


def feature_view(repo_root: Path | str, feature: str) -> FeatureView:
    """``feature`` (an id ``FEAT-X`` or a plan file's path) as ``show`` shows it; reads only.

    Raises:
        FeatureNotFoundError, ParseError, SchemaError, WaveError: the plan cannot be read.
    """
    # Each task is resolved several times (its state, its copy, its criteria): list tasks/ once.
    with listing_scope():
        return _feature_view(Path(repo_root).resolve(), feature)


def _feature_view(root: Path, feature: str) -> FeatureView:
    plan_path = find_plan(root, feature)
    plan = load_plan(plan_path)
    waves = plan_waves(plan)
    branch = branch_for(plan.feature_id)
    git = GitRepo.discover(root)
    notes: list[str] = []
    started = git is not None and branch in autobuild_branches(git)  # the read's one listing of them
    home = worktrees_home(root)
    fgit = feature_git(root, git, plan.feature_id)
    if git is None:
        notes.append("not a git repository (or no git): tasks read from the main checkout only")
    standings = read_standings(root, plan, fgit)
    rows = [_row(root, plan, standing, waves.wave_of(standing.task_id)) for standing in standings]
    worktree = worktrees_dir(home) / plan.feature_id
    execution = plan.execution
    gate = None
    try:
        gate = read_smoke_gate(plan)
    except GuardkitStateError as exc:
        notes.append(f"smoke gate not usable: {exc}")
    step = next_step(plan, waves.to_lists(), rows, started=started)
    if plan.status == AWAITING_MERGE and step.wave is None:
        step = replace(step, text=f"{step.text}; the plan awaits its merge (GuardKit's /feature-complete "
                                  f"prepared {branch} for merging into your main branch)")
    return FeatureView(plan.feature_id, plan.name, plan_path, plan.status, branch, started,
                       worktree if worktree.is_dir() else None, waves.source, waves.to_lists(), rows, step,
                       tally(standings), execution.last_updated if execution is not None else None, notes, gate,
                       recorded_runs(plan), recorded_steps(plan), run_settings(plan.data))


def _row(root: Path, plan: FeaturePlan, standing: TaskStanding, wave: int) -> FeatureTaskRow:
    task_id, state = standing.task_id, standing.state
    entry = plan.task(task_id)
    conflicts: tuple[str, ...] = ()
    recorded = entry.raw.get("merge_conflicts")
    # Only a run can know a merge conflicted (it aborts the merge at once): the plan keeps the paths.
    if standing.status == "blocked" and standing.source == "run":
        conflicts = tuple(str(p) for p in recorded) if isinstance(recorded, list) else ()
    outcome, reason = state.outcome, state.reason
    if standing.source == "plan":  # GuardKit's runner (or a run whose branches are gone) said so
        outcome = entry.final_decision or outcome
        reason = entry.error or f"the plan says {standing.status}"
    copy = _read_copy(root, task_id, resumes=state.runs, turns=state.turns)
    return FeatureTaskRow(task_id, wave, entry.name, standing.status, state.phase, standing.turns, state.decisions,
                          outcome, reason, state.phase == "merged", state.merge_commit, conflicts,
                          copy.counts, copy.where, entry.status, copy.error, standing.source, copy.resume_action,
                          copy.resume_text)


@dataclass(frozen=True)
class _Copy:
    """What the copy ``show TASK-ID`` reads says of a task: its criteria, and where a resumed loop starts."""

    counts: CriteriaCounts | None = None
    where: str | None = None
    error: str | None = None
    resume_action: str | None = None
    resume_text: str | None = None


#: Resume points inside a turn: an interruption left part of it on disk, and ``--resume`` does only
#: the rest (which "restarts turn N" or "resumes after turn N" would misstate).
_MID_TURN = ("rerun_coach", "complete_from_reports", "rerun_turn")


def _read_copy(root: Path, task_id: str, *, resumes: bool, turns: int = 0) -> _Copy:
    """The task's criteria counts from the copy ``show TASK-ID`` reads, which copy that is, and (for
    a task a run continues) its resume point when that falls inside a turn.

    The main checkout's copy is counted once per change of its file (kept in ``status``'s cache,
    as ``status`` keeps its counts) unless a run would resume inside its next turn (``turns`` + 1:
    a report or the context of that turn is on disk): a feature's view parses no file it parsed
    before unchanged.
    """
    try:
        location = locate_task(root, task_id)
        if location.source == "main" and location.rev is None \
                and not (resumes and _turn_begun(location, task_id, turns + 1)):
            known = remembered(location.task_path, root, "criteria counts", partial(_counted, location))
            return _Copy(CriteriaCounts(**{k: v for k, v in known.items() if k != "total"}), location.describe())
        task, store = location.load()
        counts, where = criteria_counts(task, location.checkout), location.describe()
    except GuardkitStateError as exc:
        return _Copy(error=str(exc))
    if resumes:
        with contextlib.suppress(GuardkitStateError):
            point = resume_point(task, store)
            if point.action in _MID_TURN:
                return _Copy(counts, where, None, point.action, point.describe())
    return _Copy(counts, where)


def _turn_begun(location: TaskLocation, task_id: str, number: int) -> bool:
    """True when turn ``number`` left a report or its context (a resume point inside that turn)."""
    store = TurnStore(artifacts_dir(location.checkout, task_id), task_id)
    return store.exists("player_turn", number) or store.exists("coach_turn", number) \
        or store.context_path(number).exists()


def _counted(location: TaskLocation) -> dict[str, int]:
    task, _ = location.load()
    return criteria_counts(task, location.checkout).to_dict()


def next_step(plan: FeaturePlan, waves: list[list[str]], rows: list[FeatureTaskRow], *, started: bool) -> NextStep:
    """What the next run of ``plan`` does: the first wave with a task to run or merge, those tasks, and the
    tasks that stop the feature there (pure). A failed task its ``stop_on_failure: false`` lets the
    feature go on past is passed over, as a run without ``--[no-]stop-on-failure`` does
    (:mod:`~guardkit_state.plans.failure_rules`): the tasks that need it are skipped and named."""
    feature_id = plan.feature_id
    by_id = {row.task_id: row for row in rows}
    command = resume_command(feature_id, resume=started)
    # A run reads every task it has to run before it starts anything: one it cannot read stops it there.
    unreadable = [row for row in rows if row.phase in ("new", "resume") and row.error is not None]
    if unreadable:
        return NextStep(unreadable[0].wave, (), (), tuple(r.task_id for r in unreadable),
                        "nothing can run: feature-build refuses to start while a task file cannot be read: "
                        + "; ".join(f"{r.task_id}: {r.error}" for r in unreadable), None)
    passed: list[str] = []  # failed tasks the feature goes on without
    skipped: dict[str, str] = {}  # task -> the failed task it needs
    for number, wave in enumerate(waves, start=1):
        needs = skipped_by(passed, plan) if passed else {}
        skips = {t: needs[t] for t in wave if t in needs and by_id[t].phase in ("new", "resume")}
        skipped.update(skips)
        left = [by_id[t] for t in wave if by_id[t].status not in ("completed", "skipped") and t not in skips]
        # A task its plan calls failed, but no run of ours holds (GuardKit's runner failed it), runs again.
        run = tuple(r.task_id for r in left if r.phase in ("new", "resume"))
        merge = tuple(r.task_id for r in left if r.status == "approved")
        ended = [r.task_id for r in left if r.status in ("failed", "blocked") and r.task_id not in run]
        going = [t for t in ended if by_id[t].status == "failed" and not stops_on_failure(plan, t, None)]
        stop = tuple(t for t in ended if t not in going)
        passed += going
        if not (run or merge or stop):
            continue  # nothing left in it (the feature goes on without its failed tasks)
        parts = [f"skips {_skips_text(skipped, by_id, number)}"] if skipped else []
        if run:
            parts.append("runs " + ", ".join(_run_text(by_id[t]) for t in run))
        if merge:
            parts.append("merges " + ", ".join(merge) + f" into {branch_for(feature_id)}")
        if going:
            parts.append("goes on without " + ", ".join(going) + " (ended without approval; the plan's "
                         "stop_on_failure: false)")
        if stop:
            parts.append("stops: " + "; ".join(_stop_text(by_id[t], feature_id) for t in stop))
        return NextStep(number, run, merge, stop, f"wave {number}/{len(waves)} " + ", then ".join(parts),
                        command if run or merge else None, tuple(skipped))
    if not rows:
        return NextStep(None, (), (), (), "nothing: the feature has no tasks", None)
    if passed:  # as the run ends: not completed, their work is not on the feature branch
        without = [row.task_id for row in rows if row.task_id in passed or row.task_id in skipped]
        why = [f"{t} ended without approval ({by_id[t].outcome}): {by_id[t].reason}" if t in passed
               else f"{t} {skipped_reason(skipped[t])}" for t in without]
        return NextStep(None, (), (), (), f"nothing left to run: the feature ends completed without "
                        f"{', '.join(without)} ({'; '.join(why)})", None, tuple(skipped))
    return NextStep(None, (), (), (), f"nothing: every wave is merged into {branch_for(feature_id)}"
                    if started and all(r.source == "run" or r.status == "skipped" for r in rows)
                    else "nothing: every task is done", None)


def _skips_text(skipped: dict[str, str], by_id: dict[str, FeatureTaskRow], wave: int) -> str:
    """The skipped tasks, each with the failed task it needs (and its wave, when not ``wave``)."""
    return ", ".join(f"{t} ({'' if by_id[t].wave == wave else f'wave {by_id[t].wave}; '}it needs {cause}, "
                     f"which ended without approval)" for t, cause in skipped.items())


def _run_text(row: FeatureTaskRow) -> str:
    if row.source == "plan" and row.status in ("failed", "blocked"):
        return f"{row.task_id} (the plan says {row.status}: {row.outcome or row.reason}; it runs again)"
    if row.phase == "new":
        return row.task_id
    if row.resume_text is not None:
        return f"{row.task_id} ({row.resume_text})"
    return f"{row.task_id} (resumes after turn {row.turns})" if row.turns else f"{row.task_id} (restarts turn 1)"


def _stop_text(row: FeatureTaskRow, feature_id: str) -> str:
    if row.status == "blocked":
        paths = ", ".join(row.conflicts) or "its merge was refused"
        return (f"{row.task_id} is blocked ({paths}): merge {branch_for(row.task_id)} into "
                f"{branch_for(feature_id)} by hand, then --resume")
    text = f"{row.task_id} ended without approval ({row.outcome}): {row.reason}"
    if row.outcome == Outcome.MAX_TURNS_EXCEEDED.value:
        # A run continues such a task when given a larger budget (features.progress reads it so).
        text += f" (--resume --max-turns {row.turns + 1} or more gives it more turns)"
    return text



def task_copy(root: Path, view: FeatureView, row: FeatureTaskRow) -> str:
    """The copy of ``row``'s task its turns are read from: its own worktree's while it has one (found by
    its id), else, once merged, the feature worktree's (its turns came with the merge), else the main
    checkout's."""
    if not row.merged or worktree_path(worktrees_dir(worktrees_home(root)), row.task_id).is_dir():
        return row.task_id
    with contextlib.suppress(GuardkitStateError):
        if view.worktree is not None:
            return str(resolve_task(view.worktree, row.task_id).path)
    return row.task_id


__all__ = ["FeatureTaskRow", "FeatureView", "NextStep", "feature_view", "next_step", "task_copy"]
