"""Crash injection for feature runs: real ``feature-build FEAT-X`` processes, killed and resumed.

A campaign builds a small feature (two waves, three tasks, one needing two turns), starts the run
in a session of its own, kills it — every process of the session at once (the run and its task
loops) at a random instant, or the one process reaching a named step (``GUARDKIT_STATE_CRASH_AT``:
the run's merge and plan steps, or a task loop's write steps) — checks what the kill left, resumes
with ``--resume``, and so on until the run completes. The end must equal an uninterrupted run: the
same tasks approved with the same turns and decisions, the same merged files, one merge per task;
and no temp file of a killed write may be left anywhere in the project.
"""

from __future__ import annotations

import json
import random
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guardkit_state.plans.plan import load_plan
from guardkit_state.taskfile.document import TaskFile

from ..feature_support import (
    FeatureProject,
    TaskSpec,
    kill_agents,
    kill_session,
    make_feature,
    merged_tasks,
    read_state,
    session_processes,
    start_cli,
    task_rel,
)
from .harness import leftover_temp_files

T1, T2, T3 = "TASK-FB-001", "TASK-FB-002", "TASK-FB-003"
PLAN_ORDER = [T1, T2, T3]
COMMENT = "# Feature plan for the feature-build tests (this comment must survive every write)"

#: Named kill points and how often each is reached in one whole run (bounds for the random N).
#: The run's own steps (merges, waves, plan writes) kill the run; a task loop's kill that loop.
CRASH_POINTS: dict[str, int] = {
    "feature.before_checkout": 1,
    "feature.before_merge": 3,
    "feature.after_merge": 3,
    "feature.between_waves": 2,
    "plan.before_write": 14,
    "plan.after_write": 14,
    "loop.after_player": 2,
    "loop.before_commit": 2,
    "turn.before_frontmatter": 2,
    # Inside any atomic write of the run (its folders' markers, the plan) or of a task loop: the
    # feature campaign's named kills found the temp files no sweep reached only through these.
    "write.temp_open": 20,
    "write.before_replace": 20,
}
#: A run taking longer than this is hung (fails the campaign; never expected).
RUN_TIMEOUT = 120.0


class InvariantViolation(AssertionError):
    """What a kill left breaks an invariant (the message says which, and the kill history)."""


@dataclass
class FeatureCampaignStats:
    """Counts a campaign reports (summed into RELIABILITY.md's figures)."""

    runs: int = 0
    kills: int = 0
    random_kills: int = 0
    kills_by_point: dict[str, int] = field(default_factory=dict)
    resumes: int = 0
    completed_features: int = 0
    checks: int = 0


def feature_tasks() -> list[TaskSpec]:
    return [TaskSpec(T1, approve_at=2), TaskSpec(T2), TaskSpec(T3, [T1, T2])]


def reference_state(workdir: Path) -> tuple[dict[str, Any], float]:
    """An uninterrupted run of the campaign's feature: what every killed run must end with."""
    project = make_feature(workdir, feature_tasks(), None, name="reference")
    started = time.monotonic()
    proc = start_cli(project)
    _, err = proc.communicate(timeout=RUN_TIMEOUT)
    if proc.returncode != 0:
        raise AssertionError(f"reference run failed ({proc.returncode}): {err}")
    return read_state(project).comparable(), time.monotonic() - started


def check_on_disk(project: FeatureProject) -> None:
    """The invariants that hold after any kill."""
    problems: list[str] = []
    plan = load_plan(project.plan_path)  # parses, and is a plan
    if COMMENT not in project.plan_path.read_text() or plan.data.get("bootstrap_extras") is None:
        problems.append("the plan lost its comment or an unknown key")
    if project.feature_worktree.exists() or _has_branch(project):
        merged = merged_tasks(project.root)
        if len(set(merged)) != len(merged):
            problems.append(f"a task was merged twice: {merged}")
        if merged != [t for t in PLAN_ORDER if t in merged]:
            problems.append(f"merges out of plan order: {merged}")
    for task_id in PLAN_ORDER:
        path = project.task_worktree(task_id) / task_rel(task_id)
        if not path.is_file():
            continue
        state = TaskFile.load(path).state
        numbers = [t.turn for t in state.turns] if state else []
        if numbers != list(range(1, len(numbers) + 1)):
            problems.append(f"{task_id}: turns {numbers}, expected 1..n without duplicates")
    if problems:
        raise InvariantViolation("; ".join(problems))


def _has_branch(project: FeatureProject) -> bool:
    found = subprocess.run(["git", "rev-parse", "-q", "--verify", "refs/heads/autobuild/FEAT-FB"],
                           cwd=project.root, capture_output=True, check=False)
    return found.returncode == 0


def _one_run(project: FeatureProject, *, resume: bool, crash_at: str | None,
             delay: float | None) -> tuple[int | None, str, bool]:
    """Start the run, kill it after ``delay`` (if given); (exit status, its output, killed by us)."""
    proc = start_cli(project, *(["--resume"] if resume else []), crash_at=crash_at)
    killed = False
    try:
        if delay is not None:
            try:
                proc.wait(timeout=delay)
            except Exception:
                kill_session(proc.pid)
                killed = True
        out, err = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        kill_session(proc.pid)  # a task loop the kill left must not outlive it
        deadline = time.monotonic() + 10
        while session_processes(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
    return proc.returncode, out + err, killed


def run_campaign(workdir: Path, *, kills_wanted: int, seed: int, reference: dict[str, Any], duration: float,
                 crash_share: float = 0.5, only_point: str | None = None) -> FeatureCampaignStats:
    """Kill runs of fresh features until ``kills_wanted`` kills happened; check everything."""
    rng = random.Random(seed)
    stats = FeatureCampaignStats()
    number = 0
    while stats.kills < kills_wanted:
        number += 1
        project = make_feature(workdir, feature_tasks(), None, name=f"p{number}")
        try:
            _until_complete(project, rng, stats, kills_wanted, crash_share, only_point, duration)
            final = read_state(project).comparable()
        finally:
            kill_agents(project.invocations())
        stats.checks += 1
        leftovers = leftover_temp_files(project.root)
        if leftovers:
            raise InvariantViolation(f"project {number}: temp files left after the run completed: {leftovers}")
        if final != reference:
            raise InvariantViolation(f"project {number}: result differs from the reference:\n"
                                     f"  got      {json.dumps(final)}\n  expected {json.dumps(reference)}")
        stats.completed_features += 1
    return stats


def _until_complete(project: FeatureProject, rng: random.Random, stats: FeatureCampaignStats, kills_wanted: int,
                    crash_share: float, only_point: str | None, duration: float) -> None:
    trail: list[str] = []
    started = False
    for _ in range(100):
        crash_at, delay = None, None
        if stats.kills < kills_wanted:
            if rng.random() < crash_share:
                point = only_point or rng.choice(list(CRASH_POINTS))
                crash_at = f"{point}:{rng.randint(1, CRASH_POINTS[point])}"
            else:
                delay = rng.uniform(0.0, duration)
        code, err, killed = _one_run(project, resume=started, crash_at=crash_at, delay=delay)
        stats.runs += 1
        stats.resumes += started
        what = crash_at or (f"t+{delay:.3f}s" if delay is not None else "clean")
        trail.append(f"{what}: exit {code}")
        loop_killed = code == 1 and "did not end" in err
        if code == -9 or loop_killed:
            stats.kills += 1
            if killed:
                stats.random_kills += 1
            else:
                name = (crash_at or "?").split(":")[0]
                stats.kills_by_point[name] = stats.kills_by_point.get(name, 0) + 1
            try:
                check_on_disk(project)
            except InvariantViolation as exc:
                raise InvariantViolation(f"{project.root.name} after {trail}: {exc}") from None
            stats.checks += 1
            started = True
            continue
        if code == 2 and "nothing to resume" in err:
            started = False  # killed before the feature branch existed: a fresh start is what a user runs
            continue
        if code != 0:
            raise InvariantViolation(f"{project.root.name}: run exited {code} after {trail}: {err}")
        return
    raise InvariantViolation(f"{project.root.name} never completed: {trail}")
