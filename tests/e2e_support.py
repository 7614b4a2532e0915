"""Helpers for the end-to-end CLI tests: the example project in a temp git repo, driven by the real CLI.

Every agent call goes through ``e2e_agent_wrapper.py``, which logs it to ``agents.jsonl``; the
helpers read that log to count invocations, find an agent's process group, and wait for a phase of
a turn without fixed sleeps.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = REPO_ROOT / "examples"
WRAPPER = Path(__file__).resolve().parent / "e2e_agent_wrapper.py"
GUARDKIT_STATE = Path(sys.executable).parent / "guardkit-state"
TASK_ID = "TASK-DEMO-001"
TASK_REL = Path("tasks/backlog/TASK-DEMO-001-parse-durations.md")
FIX_MARKER = "_WHOLE.fullmatch"  # what turn 2's Player writes into durations.py before its sleep hook

ALL_VERIFIED = {"AC-001": "verified", "AC-002": "verified", "AC-003": "verified", "AC-004": "verified"}
#: The history of an uninterrupted run: (turn, decision, criteria status after the turn).
REFERENCE_HISTORY = [
    (1, "feedback", {"AC-001": "verified", "AC-002": "verified", "AC-003": "rejected", "AC-004": "verified"}),
    (2, "approve", ALL_VERIFIED),
]

#: Upper bound for any wait; only reached when something is broken (never a pacing sleep).
WAIT_LIMIT = 60.0


def run_cli(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``guardkit-state ARGS --repo ROOT`` as a user runs it: a real process, a clean environment."""
    return subprocess.run([str(GUARDKIT_STATE), *args, "--repo", str(root)], cwd=root,
                          env=clean_env(NO_COLOR="1", **env), capture_output=True, text=True, encoding="utf-8",
                          timeout=WAIT_LIMIT, check=False)


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a CLI run: no inherited GIT_*/DEMO_*/GUARDKIT_*/E2E_*/colour settings."""
    dropped = ("GIT_", "DEMO_PLAYER_", "GUARDKIT_", "E2E_")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(dropped) and k not in ("NO_COLOR", "FORCE_COLOR")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="Test Author", GIT_AUTHOR_EMAIL="test@example.com",
               GIT_COMMITTER_NAME="Test Author", GIT_COMMITTER_EMAIL="test@example.com",
               GRAPHITI_TELEMETRY_ENABLED="false")
    env.update(extra)
    return env


def git(cwd: Path, *args: str) -> str:
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False, env=clean_env())
    assert result.returncode == 0, f"git {' '.join(args)} failed: {result.stderr}"
    return result.stdout


def _proc_state(pid: int) -> tuple[str, int] | None:
    """(state letter, process group) of a live process, or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return fields[0], int(fields[2])


def process_alive(pid: int) -> bool:
    state = _proc_state(pid)
    return state is not None and state[0] != "Z"


def group_alive(pgid: int) -> bool:
    """True while any non-zombie process is in process group ``pgid``."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            state = _proc_state(int(entry.name))
            if state is not None and state[1] == pgid and state[0] != "Z":
                return True
    return False


def wait_until(condition: Callable[[], bool], *, proc: subprocess.Popen[bytes] | None = None,
               what: str = "condition", limit: float = WAIT_LIMIT) -> None:
    """Poll ``condition``; fail when ``proc`` exits first or the limit passes."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if condition():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process exited ({proc.returncode}) before {what}")
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@dataclass
class Run:
    """A finished CLI run."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@dataclass
class Background:
    """A CLI run in the background (its own process group), output going to files."""

    proc: subprocess.Popen[bytes]
    args: list[str]
    out_path: Path
    err_path: Path

    def signal(self, signum: int) -> None:
        os.killpg(self.proc.pid, signum)

    def finish(self, timeout: float = WAIT_LIMIT) -> Run:
        self.proc.wait(timeout=timeout)
        return Run(self.args, self.proc.returncode, self.out_path.read_text(encoding="utf-8"),
                   self.err_path.read_text(encoding="utf-8"))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.signal(signal.SIGKILL)
            self.proc.wait(timeout=WAIT_LIMIT)


@dataclass
class Project:
    """The example project committed in a fresh repository, with wrapped example agents."""

    root: Path
    logdir: Path
    started: list[Background] = field(default_factory=list)
    _runs: int = 0

    @classmethod
    def create(cls, base: Path) -> Project:
        root = base / "project"
        shutil.copytree(EXAMPLES / "project", root, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        git(root, "init", "-q", "-b", "main")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "example project")
        logdir = base / "agent-log"
        logdir.mkdir()
        return cls(root, logdir)

    # -- paths -----------------------------------------------------------------------------
    @property
    def worktree(self) -> Path:
        return self.root / ".guardkit" / "worktrees" / TASK_ID

    @property
    def artifacts(self) -> Path:
        return self.worktree / ".guardkit" / "autobuild" / TASK_ID

    @property
    def branch(self) -> str:
        return f"autobuild/{TASK_ID}"

    def agent(self, role: str) -> str:
        script = EXAMPLES / "agents" / f"{role}.py"
        words = [sys.executable, str(WRAPPER), role, str(self.logdir), "--", sys.executable, str(script)]
        return shlex.join(words)

    def build_args(self, *extra: str) -> list[str]:
        return ["feature-build", TASK_ID, "--player", self.agent("player"), "--coach", self.agent("coach"), *extra]

    # -- running ---------------------------------------------------------------------------
    def cli(self, *args: str, timeout: float = WAIT_LIMIT, **env: str) -> Run:
        argv = [str(GUARDKIT_STATE), *args]
        result = subprocess.run(argv, cwd=self.root, env=clean_env(**env), capture_output=True, text=True,
                                encoding="utf-8", timeout=timeout, check=False)
        return Run(list(args), result.returncode, result.stdout, result.stderr)

    def build(self, *extra: str, **env: str) -> Run:
        return self.cli(*self.build_args(*extra), **env)

    def start(self, *args: str, **env: str) -> Background:
        self._runs += 1
        out_path = self.logdir / f"run_{self._runs}.out"
        err_path = self.logdir / f"run_{self._runs}.err"
        with out_path.open("wb") as out, err_path.open("wb") as err:
            proc = subprocess.Popen([str(GUARDKIT_STATE), *args], cwd=self.root, env=clean_env(**env),
                                    stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
        run = Background(proc, list(args), out_path, err_path)
        self.started.append(run)
        return run

    def start_build(self, *extra: str, **env: str) -> Background:
        return self.start(*self.build_args(*extra), **env)

    # -- the agent log ---------------------------------------------------------------------
    def invocations(self, event: str = "start") -> list[dict[str, Any]]:
        path = self.logdir / "agents.jsonl"
        if not path.exists():
            return []
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        return [r for r in records if r["event"] == event]

    def counts(self, event: str = "start") -> Counter[tuple[str, int]]:
        """How many times each (role, turn) agent call reached ``event`` (start, waiting, end)."""
        return Counter((r["role"], r["turn"]) for r in self.invocations(event))

    def has_event(self, event: str, role: str, turn: int) -> bool:
        return self.counts(event)[(role, turn)] > 0

    def unfinished_agents(self) -> Iterator[dict[str, Any]]:
        ended = {r["pid"] for r in self.invocations("end")}
        return (r for r in self.invocations("start") if r["pid"] not in ended)

    def kill_orphaned_agents(self) -> list[int]:
        """SIGKILL agents left running by a SIGKILLed loop (as a machine crash would); return their groups.

        Only the process groups of wrapper calls that logged a start but no end, and only while
        the wrapper itself is still alive (so a recycled group id is never touched).
        """
        killed = []
        for record in self.unfinished_agents():
            if process_alive(record["pid"]) and "e2e_agent_wrapper" in _cmdline(record["pid"]):
                try:
                    os.killpg(record["pgid"], signal.SIGKILL)
                except ProcessLookupError:
                    continue
                killed.append(record["pgid"])
        for pgid in killed:
            wait_until(lambda: not group_alive(pgid), what=f"agent group {pgid} to die", limit=10)
        return killed

    def cleanup(self) -> None:
        for run in self.started:
            run.stop()
        self.kill_orphaned_agents()

    # -- reading the result ----------------------------------------------------------------
    def show(self) -> dict[str, Any]:
        run = self.cli("show", TASK_ID, "--json")
        assert run.returncode == 0, run.output
        return json.loads(run.stdout)

    def history(self) -> list[tuple[int, str, dict[str, str]]]:
        """(turn, decision, criteria status after the turn) from the frontmatter and the turn-state files."""
        out = []
        for turn in self.show()["turns"]:
            state = json.loads((self.artifacts / f"turn_state_turn_{turn['turn']}.json").read_text(encoding="utf-8"))
            assert state["turn_number"] == turn["turn"]
            out.append((turn["turn"], turn["decision"], state["acceptance_criteria_status"]))
        return out

    def turn_commits(self) -> list[dict[str, str]]:
        """The turn commits on the task's branch, oldest first, with their trailers."""
        fmt = "%H%x1f%s%x1f%(trailers:key=Task,valueonly,separator=)%x1f%(trailers:key=Turn,valueonly,separator=)" \
              "%x1f%(trailers:key=Decision,valueonly,separator=)%x1f%(trailers:key=Mode,valueonly,separator=)%x1e"
        out = git(self.root, "log", "--reverse", f"--format={fmt}", self.branch, "--grep", f"^autobuild({TASK_ID})")
        commits = []
        for chunk in out.split("\x1e"):
            if not chunk.strip():
                continue
            sha, subject, task, turn, decision, mode = (part.strip() for part in chunk.strip("\n").split("\x1f"))
            commits.append({"sha": sha, "subject": subject, "task": task, "turn": turn, "decision": decision,
                            "mode": mode})
        return commits

    def validate_worktree(self) -> Run:
        return self.cli("validate", str(self.worktree / "tasks"), str(self.artifacts))


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""
