"""Crash-injection harness: real ``feature-build`` loops in subprocesses, killed and resumed.

A *campaign* builds a small project, starts the loop, SIGKILLs its whole process group (at a
random instant, or inside a named write step through ``GUARDKIT_STATE_CRASH_AT``), checks the
invariants on what the kill left on disk, resumes with ``--resume``, kills again … until the loop
finishes; then it compares the final history with an uninterrupted reference run.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from guardkit_state.inspect.validation import validate_paths
from guardkit_state.store.fsio import TEMP_PREFIX
from guardkit_state.taskfile.document import TaskFile

AGENTS = Path(__file__).resolve().parent / "agents"
TASK_ID = "TASK-REL-001"
TASK_REL = Path("tasks/backlog/TASK-REL-001-crash-safety.md")
TASK_TEXT = """\
---
id: TASK-REL-001
title: Crash safety   # a comment the store must keep
status: backlog
task_type: feature
complexity: 5
created: 2026-01-29T00:00:00Z
tags: [reliability, crash]
---

# TASK-REL-001: Crash safety

## Acceptance Criteria

- [ ] Turns survive SIGKILL
- [ ] Resume rolls forward
- [ ] No duplicate turns

## Notes

Body text — kept byte for byte.
"""

#: Named kill points and how often each is reached in one whole run (bounds for the random N).
CRASH_POINTS: dict[str, int] = {
    "write.temp_open": 16,
    "write.before_fsync": 16,
    "write.before_replace": 16,
    "write.after_replace": 16,
    "taskfile.before_write": 4,
    "turn.before_frontmatter": 4,
    "loop.after_player": 4,
    "loop.before_commit": 4,
}

#: A loop process that runs this long is considered hung (fails the campaign, never expected).
PROCESS_TIMEOUT = 120.0


@dataclass(frozen=True)
class Setup:
    """How a campaign's project is laid out: with git (worktree or in-place) or without git."""

    git: bool = True
    worktree: bool = True

    @property
    def name(self) -> str:
        return "no-git" if not self.git else ("worktree" if self.worktree else "no-worktree")


@dataclass
class History:
    """What a finished (or interrupted) loop left: turns, criteria, outcome, commits."""

    turns: list[tuple[int, str, str | None]]
    criteria: dict[str, str]
    outcome: str | None
    status: str | None
    commit_turns: list[int] | None

    def comparable(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CampaignStats:
    """Counts a campaign reports (summed into RELIABILITY.md's figures)."""

    runs: int = 0
    kills: int = 0
    kills_by_point: dict[str, int] = field(default_factory=dict)
    random_kills: int = 0
    resumes: int = 0
    completed_loops: int = 0
    checks: int = 0

    def add(self, other: CampaignStats) -> None:
        self.runs += other.runs
        self.kills += other.kills
        self.random_kills += other.random_kills
        self.resumes += other.resumes
        self.completed_loops += other.completed_loops
        self.checks += other.checks
        for key, value in other.kills_by_point.items():
            self.kills_by_point[key] = self.kills_by_point.get(key, 0) + value


class InvariantViolation(AssertionError):
    """An invariant did not hold after a kill (message says which, and the kill history)."""


def git(cwd: Path, *args: str) -> str:
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed in {cwd}: {result.stderr}")
    return result.stdout


def make_project(root: Path, setup: Setup, text: str = TASK_TEXT) -> Path:
    """A project with one task file (committed when ``setup.git``); returns the root."""
    root.mkdir(parents=True)
    task = root / TASK_REL
    task.parent.mkdir(parents=True)
    task.write_text(text, encoding="utf-8")
    (root / "src").mkdir()
    (root / "src" / "work.txt").write_text("start\n", encoding="utf-8")
    if setup.git:
        git(root, "init", "-q", "-b", "main")
        git(root, "add", ".")
        git(root, "commit", "-q", "-m", "initial")
    return root


def agent_command(name: str) -> str:
    return f"{shlex.quote(sys.executable)} -S {shlex.quote(str(AGENTS / name))}"


def loop_argv(root: Path, setup: Setup, *, resume: bool, max_turns: int = 6) -> list[str]:
    argv = [sys.executable, "-m", "guardkit_state", "feature-build", TASK_ID, "--repo", str(root),
            "--player", agent_command("player.py"), "--coach", agent_command("coach.py"),
            "--max-turns", str(max_turns)]
    if resume:
        argv.append("--resume")
    if not setup.worktree:
        argv.append("--no-worktree")
    return argv


def checkout_of(root: Path, setup: Setup) -> Path:
    if setup.git and setup.worktree:
        return root / ".guardkit" / "worktrees" / TASK_ID
    return root


def start_loop(root: Path, setup: Setup, *, resume: bool, crash_at: str | None = None,
               env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    env = {**os.environ, **(env or {})}
    env.pop("GUARDKIT_STATE_CRASH_AT", None)
    if crash_at:
        env["GUARDKIT_STATE_CRASH_AT"] = crash_at
    env["NO_COLOR"] = "1"
    # A session of its own, so a kill takes the loop *and* its running agent (and any git child).
    return subprocess.Popen(loop_argv(root, setup, resume=resume), cwd=root, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def finish(proc: subprocess.Popen[bytes], timeout: float = PROCESS_TIMEOUT) -> tuple[int, str]:
    """Wait for the loop process; kill its group afterwards so no orphaned agent survives it."""
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        proc.communicate()
        raise InvariantViolation(f"loop process hung for {timeout}s") from None
    kill_group(proc)  # an agent or git child of a SIGKILLed loop must not outlive it
    return proc.returncode, err.decode("utf-8", "replace")


def read_history(root: Path, setup: Setup, *, final: bool) -> History:
    checkout = checkout_of(root, setup)
    task = TaskFile.load(checkout / TASK_REL)
    state = task.state
    turns = [(t.turn, t.decision, t.feedback) for t in state.turns] if state else []
    commit_turns: list[int] | None = None
    if setup.git:
        result = subprocess.run(["git", "log", "--format=%(trailers:key=Turn,valueonly)%x1e", "HEAD"],
                                cwd=checkout, capture_output=True, text=True, check=False)
        if result.returncode != 0 and (final or turns):
            raise InvariantViolation(f"git log fails in {checkout}: {result.stderr.strip()}")
        # A kill inside `git worktree add` leaves a checkout whose HEAD is not written yet.
        log = result.stdout if result.returncode == 0 else ""
        commit_turns = [int(x.strip()) for x in log.split("\x1e") if x.strip()]
        commit_turns.reverse()
    return History(turns, dict(state.criteria) if state else {}, state.extra.get("outcome") if state else None,
                   task.status, commit_turns)


def check_on_disk(root: Path, setup: Setup, *, final: bool) -> History:
    """The invariants that must hold after any kill (and, with ``final``, after completion)."""
    checkout = checkout_of(root, setup)
    task_path = checkout / TASK_REL
    problems: list[str] = []
    if not task_path.exists():  # killed before the worktree existed: the main copy must be untouched
        if (root / TASK_REL).read_text(encoding="utf-8") != TASK_TEXT:
            problems.append("main task file changed although the loop has no checkout yet")
        if problems:
            raise InvariantViolation("; ".join(problems))
        return History([], {}, None, None, None)
    artifacts = checkout / ".guardkit" / "autobuild" / TASK_ID
    targets = [task_path, *sorted(artifacts.glob("*_turn_*.json"))] if artifacts.is_dir() else [task_path]
    report = validate_paths(targets)
    for result in report.results:
        problems += [f"{p.location(result.path)}: {p.message}" for p in result.problems]
    history = read_history(root, setup, final=final)
    numbers = [t[0] for t in history.turns]
    if numbers != list(range(1, len(numbers) + 1)):
        problems.append(f"turns in the frontmatter are {numbers}, expected 1..{len(numbers)} without duplicates")
    if history.commit_turns is not None:
        commits = history.commit_turns
        if len(set(commits)) != len(commits):
            problems.append(f"duplicated turn commits: {commits}")
        if commits != list(range(1, len(commits) + 1)):
            problems.append(f"turn commits are {commits}, expected 1..n in order")
        # A kill between the frontmatter append and the commit may leave the last turn uncommitted.
        lag = len(numbers) - len(commits)
        if lag not in ((0,) if final else (0, 1)):
            problems.append(f"{len(numbers)} turns recorded but {len(commits)} committed")
    for n in numbers:
        for kind in ("player_turn", "coach_turn", "turn_state_turn"):
            if kind != "turn_state_turn" and history.turns[n - 1][1] == "error":
                continue
            if not (artifacts / f"{kind}_{n}.json").is_file():
                problems.append(f"recorded turn {n} has no {kind}_{n}.json")
    if setup.worktree and setup.git and (root / TASK_REL).read_text(encoding="utf-8") != TASK_TEXT:
        problems.append("the main checkout's task file was changed by a worktree loop")
    if final:
        leftovers = leftover_temp_files(root)
        if leftovers:
            problems.append(f"temp files left after a successful run: {leftovers}")
        if setup.git and git(checkout, "status", "--porcelain", "--untracked-files=all", "--", "tasks", "src",
                             ".guardkit/autobuild").strip() and setup.worktree:
            problems.append("the worktree has uncommitted turn changes after the loop finished")
    if problems:
        raise InvariantViolation("; ".join(problems))
    return history


def leftover_temp_files(root: Path) -> list[str]:
    """Temp files of the store's writes anywhere a run writes: the main checkout and every worktree
    under it (not the loop's checkout alone: ``.guardkit/worktrees/``, the main checkout's logs and
    caches are written too), and the guardkit-state folder in git's directory."""
    found = [p for p in root.rglob(f"{TEMP_PREFIX}*") if ".git" not in p.parts]
    return [str(p) for p in [*found, *(root / ".git" / "guardkit-state").rglob(f"{TEMP_PREFIX}*")]]


def reference_history(workdir: Path, setup: Setup) -> History:
    """An uninterrupted run of the same loop: the history every crashed run must end with."""
    root = make_project(workdir / f"reference-{setup.name}", setup)
    code, err = finish(start_loop(root, setup, resume=False))
    if code != 0:
        raise AssertionError(f"reference run failed ({code}): {err}")
    return check_on_disk(root, setup, final=True)


def timed_reference(workdir: Path, setup: Setup) -> tuple[History, float]:
    started = time.monotonic()
    history = reference_history(workdir, setup)
    return history, time.monotonic() - started


def run_campaign(workdir: Path, setup: Setup, *, kills_wanted: int, seed: int, reference: History,
                 duration: float, crash_share: float = 0.5, only_point: str | None = None) -> CampaignStats:
    """Kill loops of fresh projects until ``kills_wanted`` kills happened; check everything.

    Each project's loop is killed again and again (start, kill, resume, kill …) until it
    completes; a project is then compared with ``reference`` and a new one is started.
    """
    rng = random.Random(seed)
    stats = CampaignStats()
    project = 0
    while stats.kills < kills_wanted:
        project += 1
        root = make_project(workdir / f"p{project}", setup)
        trail: list[str] = []
        started = False
        attempts = 0
        while True:
            attempts += 1
            if attempts > 200:
                raise InvariantViolation(f"loop never completed after 200 attempts: {trail}")
            crash_at = None
            delay = None
            if stats.kills < kills_wanted:
                if rng.random() < crash_share:
                    point = only_point or rng.choice(list(CRASH_POINTS))
                    crash_at = f"{point}:{rng.randint(1, CRASH_POINTS[point])}"
                else:
                    delay = rng.uniform(0.0, duration)
            proc = start_loop(root, setup, resume=started, crash_at=crash_at)
            stats.runs += 1
            stats.resumes += started
            killed_by_us = False
            if delay is not None:
                try:
                    proc.wait(timeout=delay)
                except subprocess.TimeoutExpired:
                    kill_group(proc)
                    killed_by_us = True
            code, err = finish(proc)
            what = crash_at or (f"t+{delay:.3f}s" if delay is not None else "clean")
            if code == -signal.SIGKILL:
                stats.kills += 1
                if killed_by_us:
                    stats.random_kills += 1
                else:
                    name = (crash_at or "?").split(":")[0]
                    stats.kills_by_point[name] = stats.kills_by_point.get(name, 0) + 1
                trail.append(f"killed {what}")
                try:
                    check_on_disk(root, setup, final=False)
                except InvariantViolation as exc:
                    raise InvariantViolation(f"{setup.name} project {project} after {trail}: {exc}") from None
                stats.checks += 1
                started = True
                continue
            trail.append(f"exit {code} {what}")
            if code in (1, 2) and "no loop state to resume" in err:
                started = False  # killed before turn 1 began: a fresh start is what the user runs
                continue
            if code != 0:
                raise InvariantViolation(f"{setup.name} project {project}: loop exited {code} after {trail}: {err}")
            final = check_on_disk(root, setup, final=True)
            stats.checks += 1
            if final.comparable() != reference.comparable():
                raise InvariantViolation(
                    f"{setup.name} project {project}: history after {trail} differs from the reference:\n"
                    f"  got      {json.dumps(final.comparable())}\n  expected {json.dumps(reference.comparable())}")
            stats.completed_loops += 1
            break
    return stats
