"""Players and Coaches: external commands or Python callables behind one protocol.

An agent receives a :class:`TurnRequest` (the turn's files and environment) and returns its JSON
report as a dict; what it tells of its run (agent, model, session, cost, tokens, notes) travels in
that report's ``agent_run``, or in the :class:`AgentError` of a run that failed: one place. Whatever
goes wrong — a non-zero exit, a timeout, no report, invalid JSON — is an :class:`AgentError` with a
precise reason; the loop records it as a turn with decision ``error``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from guardkit_state.errors import AgentError, GuardkitStateError
from guardkit_state.git.environment import clean_environment
from guardkit_state.process.command import escaped_words, run_command, stop_orphans
from guardkit_state.store.jsonio import load_json
from guardkit_state.turns.turn_state import AGENT_RUN_KEY

#: How much of an agent's stderr is quoted in an error reason.
STDERR_TAIL = 400
#: How much of an agent's stderr is kept while it runs (its end: what an error reason quotes).
STDERR_KEPT = 1 << 20


@dataclass(frozen=True)
class TurnRequest:
    """Everything an agent needs for one turn; ``env()`` is the command protocol's environment."""

    role: str  # "player" | "coach"
    task_id: str
    turn: int
    mode: str
    workdir: Path
    task_file: Path
    context_file: Path
    report_file: Path
    prompt_file: Path | None = None
    player_report_file: Path | None = None
    timeout: float | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    #: The task's criteria as JSON (ids, texts, statuses), the strict schema of this role's report,
    #: and (the Coach's) the turn's diff.
    criteria_file: Path | None = None
    schema_file: Path | None = None
    diff_file: Path | None = None
    #: The agent session to go on with (the Player's previous turn's, with ``--continue-session``).
    session_id: str | None = None

    def env(self) -> dict[str, str]:
        env = {
            "GUARDKIT_TASK_ID": self.task_id,
            "GUARDKIT_TURN": str(self.turn),
            "GUARDKIT_MODE": self.mode,
            "GUARDKIT_ROLE": self.role,
            "GUARDKIT_TASK_FILE": str(self.task_file),
            "GUARDKIT_CONTEXT_FILE": str(self.context_file),
            "GUARDKIT_REPORT_FILE": str(self.report_file),
        }
        for name, path in (("PROMPT", self.prompt_file), ("PLAYER_REPORT", self.player_report_file),
                           ("CRITERIA", self.criteria_file), ("SCHEMA", self.schema_file), ("DIFF", self.diff_file)):
            if path is not None:
                env[f"GUARDKIT_{name}_FILE"] = str(path)
        if self.session_id:
            env["GUARDKIT_SESSION_ID"] = self.session_id
        env.update(self.extra_env)
        return env


def agent_environment(request: TurnRequest) -> dict[str, str]:
    """The whole environment of an agent's subprocess: the loop's own, plus the protocol's variables.

    The one place it is built (shell commands and presets alike), so that what every agent must not
    inherit (git's repository-locating variables) is removed here once.
    """
    return {**clean_environment(), **request.env()}  # no inherited GIT_DIR: its git is its worktree's


class Agent(Protocol):
    """A Player or a Coach: run one turn and return the JSON report."""

    def run(self, request: TurnRequest) -> dict[str, Any]: ...


class CallableAgent:
    """An in-process agent: ``fn(request) -> report dict``. Exceptions become :class:`AgentError`."""

    def __init__(self, fn: Callable[[TurnRequest], dict[str, Any]], name: str | None = None) -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "agent")

    def run(self, request: TurnRequest) -> dict[str, Any]:
        try:
            report = self.fn(request)
        except (AgentError, KeyboardInterrupt):
            raise
        except Exception as exc:
            raise AgentError(f"{request.role} {self.name} raised {type(exc).__name__}: {exc}",
                             task_id=request.task_id, turn=request.turn) from exc
        if not isinstance(report, dict):
            raise AgentError(f"{request.role} {self.name} returned {type(report).__name__}, not a report dict",
                             task_id=request.task_id, turn=request.turn, expected="a JSON object")
        return report


class CommandAgent:
    """An external agent: a shell command run in the worktree with the protocol's environment.

    Its run is told (in its report's ``agent_run``, or the :class:`AgentError`) only when there is
    something to say: a process group it left running, killed.
    """

    def __init__(self, command: str) -> None:
        self.command = command

    def run(self, request: TurnRequest) -> dict[str, Any]:
        role = request.role.capitalize()
        done = run_agent_process(self.command, request, shell=True)
        run = {"agent": agent_name(self), "notes": done.notes} if done.notes else None
        try:
            if done.returncode != 0:
                tail = _tail(done.stderr) or _tail(done.stdout)
                raise AgentError(f"{role} exited with status {done.returncode}" + (f": {tail}" if tail else ""),
                                 task_id=request.task_id, turn=request.turn)
            report = read_report_file(request)
        except AgentError as exc:
            exc.run = exc.run or run
            raise
        return {**report, AGENT_RUN_KEY: run} if run else report


def agent_name(agent: Agent) -> str:
    """How a run names its agent: a preset's name, a command's first word, a callable's name."""
    name = getattr(agent, "name", None)
    if isinstance(name, str) and name:
        return name
    command = getattr(agent, "command", None)
    if isinstance(command, str) and command.split():
        return Path(command.split()[0]).name
    return type(agent).__name__


@dataclass(frozen=True)
class AgentExit:
    """How an agent's process ended: its status, what it printed, and what it left to say."""

    returncode: int
    stdout: bytes
    stderr: bytes
    #: A process group it left running (killed), in words (a run's ``notes``).
    notes: list[str] = field(default_factory=list)


def run_agent_process(command: str | list[str], request: TurnRequest, *, shell: bool = False,
                      stdin: bytes | None = None) -> AgentExit:
    """Run an agent's process in the worktree; its exit status, stdout and stderr.

    The agent is waited for, not its pipes: once it exits, what it printed is read for at most
    :data:`~guardkit_state.process.pipes.PIPE_GRACE` seconds more (a dev server it started in the
    background may hold them for good), and whatever it left running in its process group is killed
    and named in a note. It runs in a session of its own (Ctrl+C reaches the loop, which stops it), and
    its pid file lets the next run stop an agent a SIGKILLed loop left running (:func:`stop_orphaned_agents`).
    Raises :class:`AgentError` when ``request.timeout`` passes before the agent exits (the whole
    process tree is killed) or the program cannot be started (``status 127``, as a shell would say).
    """
    role = request.role.capitalize()
    with contextlib.suppress(FileNotFoundError):
        request.report_file.unlink()  # a stale report from an interrupted run must not count
    try:
        done = run_command(command, cwd=request.workdir, env=agent_environment(request), stdin=stdin,
                           timeout=request.timeout, shell=shell, session=True, keep_stderr=STDERR_KEPT,
                           pid_file=agent_pid_file(request.report_file),
                           what=f"the {request.role} of turn {request.turn}")
    except FileNotFoundError as exc:
        raise AgentError(f"{role} exited with status 127: {exc.filename or command}: command not found",
                         task_id=request.task_id, turn=request.turn) from None
    except (OSError, ValueError) as exc:  # E2BIG (a prompt too long for an argument), EACCES (not
        # executable) ..., ValueError: a NUL character in an argument (a task's text in the prompt)
        said = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
        raise AgentError(f"{role} could not be started: {said}", task_id=request.task_id,
                         turn=request.turn) from None
    if done.returncode is None:
        raise AgentError(f"{role} timed out after {request.timeout:g}s (--turn-timeout)",
                         task_id=request.task_id, turn=request.turn)
    notes = [f"exited but left process group {done.pid} running ({done.left_running}); killed it"] \
        if done.left_running else []
    if done.escaped:  # a daemon (setsid): no signal to its group reached it; its run's mark found it
        notes.append(f"exited but left {escaped_words(done.escaped)} running outside its process group; "
                     f"killed {'them' if len(done.escaped) > 1 else 'it'}")
    return AgentExit(done.returncode, done.stdout, done.stderr, notes)


def read_report_file(request: TurnRequest) -> dict[str, Any]:
    """The JSON object the agent wrote to its report file, or :class:`AgentError` saying what is wrong."""
    role = request.role.capitalize()
    if not request.report_file.is_file():
        raise AgentError(f"{role} exited 0 but wrote no report to {request.report_file}",
                         task_id=request.task_id, turn=request.turn, expected="a JSON report file")
    try:
        report = load_json(request.report_file)
    except GuardkitStateError as exc:
        raise AgentError(f"{role} wrote an invalid report: {exc}", task_id=request.task_id,
                         turn=request.turn) from exc
    if not isinstance(report, dict):
        raise AgentError(f"{role} report is a JSON {type(report).__name__}, not an object",
                         path=request.report_file, task_id=request.task_id, turn=request.turn)
    return report


def agent_pid_file(report_file: Path) -> Path:
    """Where a running agent's process group is recorded: next to its report, ``*.agent.json``."""
    return report_file.with_name(report_file.stem + ".agent.json")


def stop_orphaned_agents(work_dir: Path) -> list[str]:
    """Kill agents that a killed loop left running (their pid files outlive it); return one note each.

    Call it only while holding the task's lock: then no live loop owns these agents
    (:func:`~guardkit_state.process.command.stop_orphans` says which processes it kills).
    """
    return stop_orphans(sorted(Path(work_dir).glob("*.agent.json")), by="the interrupted loop")


def _tail(data: bytes | None) -> str:
    text = (data or b"").decode("utf-8", "replace").strip()
    if not text:
        return ""
    last = text.splitlines()[-3:]
    joined = " | ".join(line.strip() for line in last)
    return joined[-STDERR_TAIL:]
