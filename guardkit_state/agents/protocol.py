"""Players and Coaches: external commands or Python callables behind one protocol.

An agent receives a :class:`TurnRequest` (the turn's files and environment) and returns its JSON
report as a dict. Whatever goes wrong — a non-zero exit, a timeout, no report, invalid JSON — is an
:class:`AgentError` with a precise reason; the loop records it as a turn with decision ``error``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from guardkit_state.agents.process_wait import group_commands, wait_for_exit
from guardkit_state.errors import AgentError, GuardkitStateError
from guardkit_state.git.environment import clean_environment
from guardkit_state.store.fsio import TEMP_PREFIX
from guardkit_state.store.jsonio import load_json

#: How much of an agent's stderr is quoted in an error reason.
STDERR_TAIL = 400


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
        if self.prompt_file is not None:
            env["GUARDKIT_PROMPT_FILE"] = str(self.prompt_file)
        if self.player_report_file is not None:
            env["GUARDKIT_PLAYER_REPORT_FILE"] = str(self.player_report_file)
        for name, path in (("CRITERIA", self.criteria_file), ("SCHEMA", self.schema_file), ("DIFF", self.diff_file)):
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
    """An external agent: a shell command run in the worktree with the protocol's environment."""

    def __init__(self, command: str) -> None:
        self.command = command
        #: What the last run left to say (a process group it left running, killed).
        self.last_notes: list[str] = []

    def run(self, request: TurnRequest) -> dict[str, Any]:
        role = request.role.capitalize()
        with contextlib.suppress(FileNotFoundError):
            request.report_file.unlink()  # a stale report from an interrupted run must not count
        self.last_notes = []
        done = run_agent_process(self.command, request, shell=True)
        self.last_notes = done.notes
        if done.returncode != 0:
            tail = _tail(done.stderr) or _tail(done.stdout)
            raise AgentError(f"{role} exited with status {done.returncode}" + (f": {tail}" if tail else ""),
                             task_id=request.task_id, turn=request.turn)
        return read_report_file(request)


@dataclass(frozen=True)
class AgentExit:
    """How an agent's process ended: its status, what it printed, and what it left to say."""

    returncode: int
    stdout: bytes
    stderr: bytes
    #: A process group it left running (killed), in words.
    notes: list[str] = field(default_factory=list)


def run_agent_process(command: str | list[str], request: TurnRequest, *, shell: bool = False,
                      stdin: bytes | None = None) -> AgentExit:
    """Run an agent's process in the worktree; its exit status, stdout and stderr.

    The agent is waited for, not its pipes: once it exits, what it printed is read for at most
    :data:`PIPE_GRACE` seconds more (a dev server it started in the background may hold them for
    good), and whatever it left running in its process group is killed and named in a note.
    Raises :class:`AgentError` when ``request.timeout`` passes before the agent exits (the whole
    process tree is killed) or the program cannot be started (``status 127``, as a shell would say).
    """
    role = request.role.capitalize()
    env = agent_environment(request)
    # A session of its own: Ctrl+C in the terminal reaches the loop, which stops the agent
    # itself, and a timeout kills the agent's whole process tree.
    # Its own session means a SIGKILLed loop cannot take the agent with it: the pid file, which
    # the child writes before the agent starts, lets the next run stop an agent left running.
    pid_file = agent_pid_file(request.report_file)
    # A stop signal that lands while the child is between fork and exec would run the loop's
    # Python handler in the child (a failed start, not a stop) or escape before `proc` exists
    # (an agent nobody stops). Held until the agent runs, it is raised here, in the try below.
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        proc = subprocess.Popen(command, shell=shell, cwd=request.workdir, env=env,
                                stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, preexec_fn=_announcer(pid_file, request, held))
    except FileNotFoundError as exc:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        with contextlib.suppress(OSError):
            pid_file.unlink()  # written by the child before its exec failed
        raise AgentError(f"{role} exited with status 127: {exc.filename or command}: command not found",
                         task_id=request.task_id, turn=request.turn) from None
    except (OSError, ValueError) as exc:  # E2BIG (a prompt too long for an argument), EACCES (not
        # executable) ..., ValueError: a NUL character in an argument (a task's text in the prompt)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        with contextlib.suppress(OSError):
            pid_file.unlink()
        said = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
        raise AgentError(f"{role} could not be started: {said}", task_id=request.task_id,
                         turn=request.turn) from None
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        raise
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        stdout, stderr = wait_for_exit(proc, stdin, request.timeout)
    except subprocess.TimeoutExpired:
        _kill_tree(proc)
        raise AgentError(f"{role} timed out after {request.timeout:g}s (--turn-timeout)",
                         task_id=request.task_id, turn=request.turn) from None
    except BaseException:
        _kill_tree(proc)
        raise
    finally:
        with contextlib.suppress(OSError):
            pid_file.unlink()
    left = _stop_left_running(proc.pid)
    notes = [f"the {role} exited but left process group {proc.pid} running ({left}); killed it"] if left else []
    return AgentExit(proc.returncode, stdout, stderr, notes)


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


def _start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (Linux ``/proc``): tells a process from a later one with its pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


#: Signals the loop turns into a saved stop (see loop/session.py), held while an agent starts.
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def _announcer(pid_file: Path, request: TurnRequest, mask: set[int | signal.Signals]) -> Callable[[], None]:
    """The agent process's first act (in the child, before exec): record its own process group.

    Written by the child itself, the file exists before the agent runs a single instruction, so
    there is no window in which a killed loop leaves an agent nobody knows about.
    """
    role, turn = request.role, request.turn
    target = str(pid_file)

    def announce() -> None:
        try:  # best effort: it only serves the clean-up, and must never stop the agent starting
            pid = os.getpid()
            data = json.dumps({"pgid": pid, "start": _start_time(pid), "role": role, "turn": turn}) + "\n"
            tmp = os.path.join(os.path.dirname(target), f"{TEMP_PREFIX}{os.path.basename(target)}.{pid}")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, data.encode())
            finally:
                os.close(fd)
            os.replace(tmp, target)
        except Exception:
            pass
        # In its own session now: the agent gets default handlers and the loop's signal mask back
        # (a signal that reached it before the session began ends it, as it would have anyway).
        for signum in _STOP_SIGNALS:
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    return announce


def stop_orphaned_agents(work_dir: Path) -> list[str]:
    """Kill agents that a killed loop left running (their pid files outlive it); return one note each.

    Call it only while holding the task's lock: then no live loop owns these agents. A process
    group is killed only when its leader still has the recorded start time, so a pid reused by
    an unrelated process is never touched (where ``/proc`` is missing nothing is killed).
    """
    notes: list[str] = []
    for pid_file in sorted(Path(work_dir).glob("*.agent.json")):
        try:
            info = json.loads(pid_file.read_text(encoding="utf-8"))
            pgid, start = int(info["pgid"]), info.get("start")
        except (OSError, ValueError, KeyError, TypeError):
            info, pgid, start = {}, 0, None
        if pgid > 0 and start is not None and _start_time(pgid) == start:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
                notes.append(f"stopped the {info.get('role', 'agent')} of turn {info.get('turn', '?')} "
                             f"(process group {pgid}) left running by the interrupted loop")
        with contextlib.suppress(OSError):
            pid_file.unlink()
    return notes


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def _stop_left_running(pgid: int) -> str | None:
    """Kill what is left of the process group ``pgid`` once its leader (the agent) has exited; its
    processes' command lines (``/proc``), or None when nothing was left."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return None
    left = group_commands(pgid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    if not left and Path("/proc").is_dir():
        return None  # only exited children not yet reaped (zombies): nothing was left running
    shown = "; ".join(left[:3]) + (f" and {len(left) - 3} more" if len(left) > 3 else "")
    return shown or "processes it started"


def _tail(data: bytes | None) -> str:
    text = (data or b"").decode("utf-8", "replace").strip()
    if not text:
        return ""
    last = text.splitlines()[-3:]
    joined = " | ".join(line.strip() for line in last)
    return joined[-STDERR_TAIL:]
