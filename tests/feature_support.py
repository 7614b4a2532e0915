"""Helpers for the feature-build tests: a git project with a feature plan, scripted agents, and
what a finished (or killed) run left on disk, read back for comparison."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from guardkit_state.agents.protocol import CommandAgent
from guardkit_state.features.build import FeatureOptions, build_feature
from guardkit_state.git.repo import GitRepo
from guardkit_state.loop.events import Event
from guardkit_state.plans.plan import load_plan
from guardkit_state.taskfile.document import TaskFile

AGENTS = Path(__file__).resolve().parent / "feature_agents"
FEATURE_ID = "FEAT-FB"
PLAN_REL = Path(".guardkit/features") / f"{FEATURE_ID}.yaml"
FEATURE_BRANCH = f"autobuild/{FEATURE_ID}"


@dataclass
class TaskSpec:
    """One task of the test feature and how its scripted agents behave."""

    task_id: str
    dependencies: list[str] = field(default_factory=list)
    approve_at: int = 1
    file: str | None = None
    mode: str = "append"
    sleep: float = 0.0
    crash: bool = False
    shell: str | None = None

    def agent_spec(self) -> dict[str, Any]:
        return {"approve_at": self.approve_at, "file": self.file, "mode": self.mode, "sleep": self.sleep,
                "crash": self.crash, "shell": self.shell}


def task_text(task_id: str) -> str:
    return (f"---\nid: {task_id}\ntitle: Build part {task_id}\nstatus: backlog\ntask_type: feature\n"
            f"complexity: 3\n---\n\n# {task_id}\n\n## Acceptance Criteria\n\n- [ ] AC-001: the part works\n")


def task_rel(task_id: str) -> Path:
    return Path("tasks/backlog") / f"{task_id}-part.md"


def plan_text(tasks: Sequence[TaskSpec], groups: Sequence[Sequence[str]] | None, recommended: int = 2) -> str:
    """A GuardKit-shaped plan with comments, quoting and an unknown key, which a run must keep."""
    lines = ["# Feature plan for the feature-build tests (this comment must survive every write)",
             f"id: {FEATURE_ID}", "name: 'Feature build: parallel waves'  # trailing comment",
             "status: planned", "complexity: 5", "tasks:"]
    for spec in tasks:
        deps = "[]" if not spec.dependencies else "\n" + "\n".join(f"  - {d}" for d in spec.dependencies)
        lines += [f"- id: {spec.task_id}", f"  name: Part {spec.task_id}", f"  file_path: {task_rel(spec.task_id)}",
                  "  complexity: 3", f"  dependencies: {deps}", "  status: pending",
                  "  implementation_mode: task-work", "  estimated_minutes: 30"]
    lines += ["orchestration:"]
    if groups is not None:
        lines += ["  parallel_groups:"]
        for group in groups:
            lines += [f"  - - {group[0]}", *(f"    - {task_id}" for task_id in group[1:])]
    lines += ["  estimated_duration_minutes: 90", f"  recommended_parallel: {recommended}",
              "bootstrap_extras:", "  after_wave_1: pytest -q   # kept as written", ""]
    return "\n".join(lines)


@dataclass
class FeatureProject:
    """A project in a temp dir: one commit with the plan and the task files."""

    root: Path
    tasks: list[TaskSpec]
    spec_file: Path
    log_file: Path

    @property
    def plan_path(self) -> Path:
        return self.root / PLAN_REL

    @property
    def feature_worktree(self) -> Path:
        return self.root / ".guardkit/worktrees" / FEATURE_ID

    def task_worktree(self, task_id: str) -> Path:
        return self.root / ".guardkit/worktrees" / task_id

    def env(self) -> dict[str, str]:
        return {"FEATURE_SPEC": str(self.spec_file), "FEATURE_LOG": str(self.log_file)}

    def agents(self) -> tuple[CommandAgent, CommandAgent]:
        """The scripted agents as commands; they read ``FEATURE_SPEC`` from the environment."""
        return CommandAgent(agent_command("player.py")), CommandAgent(agent_command("coach.py"))

    def invocations(self) -> list[dict[str, Any]]:
        if not self.log_file.exists():
            return []
        return [json.loads(line) for line in self.log_file.read_text().splitlines() if line.strip()]


def agent_command(name: str) -> str:
    return f"{shlex.quote(sys.executable)} -S {shlex.quote(str(AGENTS / name))}"


def git(cwd: Path, *args: str) -> str:
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"git {' '.join(args)} failed in {cwd}: {result.stderr}"
    return result.stdout


def make_feature(base: Path, tasks: Sequence[TaskSpec], groups: Sequence[Sequence[str]] | None = None, *,
                 recommended: int = 2, name: str = "project") -> FeatureProject:
    """A git repository with the plan and its task files committed on ``main``."""
    root = base / name
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "README.md").write_text("# feature test\n")
    (root / "src").mkdir()
    (root / "src" / "shared.txt").write_text("base line\n")
    for spec in tasks:
        path = root / task_rel(spec.task_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(task_text(spec.task_id))
    plan = root / PLAN_REL
    plan.parent.mkdir(parents=True)
    plan.write_text(plan_text(tasks, groups, recommended))
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "initial")
    spec_file = base / f"{name}-spec.json"
    spec_file.write_text(json.dumps({spec.task_id: spec.agent_spec() for spec in tasks}))
    return FeatureProject(root, list(tasks), spec_file, base / f"{name}-agents.jsonl")


# --------------------------------------------------------------------------- what a run left


@dataclass
class FeatureState:
    """What a feature run left, without timestamps or commit ids (those differ between runs)."""

    tasks: dict[str, dict[str, Any]]
    execution: dict[str, Any]
    plan_status: str | None
    merged_tasks: list[str]
    feature_files: dict[str, str]

    def comparable(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "execution": self.execution, "plan_status": self.plan_status,
                "merged_tasks": self.merged_tasks, "feature_files": self.feature_files}


def merged_tasks(root: Path) -> list[str]:
    """The ``Guardkit-Task`` trailers of the feature branch's merge commits, oldest first."""
    out = git(root, "log", "--first-parent", "--merges", "--reverse",
              "--format=%(trailers:key=Guardkit-Task,valueonly)%x1e", FEATURE_BRANCH)
    return [item.strip() for item in out.split("\x1e") if item.strip()]


def read_state(project: FeatureProject) -> FeatureState:
    plan = load_plan(project.plan_path)
    tasks: dict[str, dict[str, Any]] = {}
    for task in plan.tasks:
        copy = _task_copy(project, task.id)
        state = copy.state if copy is not None else None
        tasks[task.id] = {
            "status": task.status, "result": task.result, "turns_completed": task.turns_completed,
            "conflicts": task.raw.get("merge_conflicts"), "has_merge_commit": bool(task.raw.get("merge_commit")),
            "turns": [(t.turn, t.decision) for t in state.turns] if state else [],
        }
    execution = {key: value for key, value in (plan.execution.raw if plan.execution else {}).items()
                 if key in ("current_wave", "completed_waves", "tasks_completed", "tasks_failed", "total_turns")}
    files = {}
    for path in sorted((project.feature_worktree / "src").rglob("*.txt")):
        files[path.relative_to(project.feature_worktree).as_posix()] = path.read_text()
    return FeatureState(tasks, execution, plan.status, merged_tasks(project.root), files)


def _task_copy(project: FeatureProject, task_id: str) -> TaskFile | None:
    for checkout in (project.task_worktree(task_id), project.feature_worktree):
        path = checkout / task_rel(task_id)
        if path.is_file():
            return TaskFile.load(path)
    return None


def _processes() -> list[tuple[int, str, int, int]]:
    """(pid, state, process group, session) of every process (zombies included)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found.append((int(entry.name), fields[0], int(fields[2]), int(fields[3])))
    return found


def agent_alive(invocations: list[dict[str, Any]]) -> list[int]:
    """Agent process groups of ``invocations`` that still have a live (not zombie) process."""
    groups = {int(entry["pgid"]) for entry in invocations}
    return sorted({pgid for _, state, pgid, _ in _processes() if pgid in groups and state != "Z"})


def kill_agents(invocations: list[dict[str, Any]]) -> None:
    for pgid in agent_alive(invocations):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# --------------------------------------------------------------------------- processes


def session_processes(sid: int) -> list[int]:
    """Live (not zombie) processes of session ``sid``: a CLI run started in a session of its own,
    and the task loops it forked (agents run in sessions of their own)."""
    return [pid for pid, state, _, session in _processes() if session == sid and state != "Z"]


def kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid`` (the run and its task loops, at once)."""
    for pid in session_processes(sid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def cli_argv(project: FeatureProject, *extra: str) -> list[str]:
    return [sys.executable, "-m", "guardkit_state", "feature-build", FEATURE_ID, "--repo", str(project.root),
            "--player", agent_command("player.py"), "--coach", agent_command("coach.py"), *extra]


def run_cli(project: FeatureProject, *extra: str) -> subprocess.CompletedProcess[str]:
    """The CLI run to its end (see :func:`start_cli`), its output captured."""
    proc = start_cli(project, *extra)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def start_cli(project: FeatureProject, *extra: str, crash_at: str | None = None) -> subprocess.Popen[str]:
    """The CLI in a session of its own (as a terminal would run it), its output piped."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARDKIT_", "FEATURE_"))}
    env.update(project.env(), NO_COLOR="1")
    if crash_at:
        env["GUARDKIT_STATE_CRASH_AT"] = crash_at
    return subprocess.Popen(cli_argv(project, *extra), cwd=project.root, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def build_in_process(project: FeatureProject, monkeypatch: pytest.MonkeyPatch, *,
                     options: FeatureOptions | None = None, events: list[Event] | None = None) -> Any:
    """``build_feature`` on ``project`` in this process, with the project's agent environment set."""
    for name, value in project.env().items():
        monkeypatch.setenv(name, value)
    sink = events.append if events is not None else None
    return build_feature(project.root, FEATURE_ID, *project.agents(), options or FeatureOptions(), on_event=sink)


def count_git_runs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """Every git call this process makes through :class:`GitRepo` from now on, by its arguments (the
    real git runs)."""
    calls: list[tuple[str, ...]] = []
    real = GitRepo.run

    def counting(self: GitRepo, *args: str, **kwargs: Any) -> tuple[int, bytes, str]:
        calls.append(args)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(GitRepo, "run", counting)
    return calls

