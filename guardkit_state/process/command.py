"""Running a process: the one way agents, git, smoke gates and the index's own processes are run.

:func:`run_command` runs one to its end. The process is waited for, not its pipes
(:mod:`~guardkit_state.process.pipes`); at ``timeout`` it is killed and the result says so; an
interruption (Ctrl+C, any exception) kills it before it is raised on. In a *session of its own*
(``session=True``: agents, gates) the terminal's Ctrl+C reaches this process alone, which stops
the child itself; a timeout or an interruption kills its whole process group, and what the group
left running once its leader exited is killed and named. Without one (git) the child stays in this
process group, so a signal to the group, a terminal's or a killed machine's, reaches it too.

A process can leave its group and session (``setsid``, a daemon's double fork: a dev server an agent
starts), and no signal to the group reaches it then. So a run in a session of its own carries a
mark of its own in its environment (:data:`RUN_MARK`), which whatever it starts inherits; once it
exits (or is killed), every process of this user still carrying that mark is found (Linux: each
``/proc/PID/environ``) and killed, and named beside what its group left. Elsewhere (no ``/proc``:
macOS, the BSDs) such a process is not found and lives on; so does one that started a program with
an environment of its own (``env -i``), which drops the mark.

A run in a session of its own outlives a SIGKILL of this process. With a ``pid_file`` the child
records its process group there (with the kernel's start time of its leader) as its first act,
before it runs a single instruction of its program; the next run stops it with
:func:`stop_orphans`, which kills a group only when its leader still has that start time, so a
reused pid is never touched. :func:`spawn` starts a process meant to outlive the call (the
embedded index server, the background indexer) the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from guardkit_state.process.pipes import wait_for_exit
from guardkit_state.store.fsio import TEMP_PREFIX

#: Signals a run turns into a saved stop (see loop/session.py), held while a recorded child starts.
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
#: How long a killed orphan's group is given to go before the next process takes its place.
_ORPHAN_GONE = 2.0
#: The environment variable holding a run's mark (see the module): a random value per run.
RUN_MARK = "GUARDKIT_STATE_RUN"

Command = str | Sequence[str]
#: The signal mask a recorded child's start held back (None: nothing was held).
Held = set[int | signal.Signals] | None


@dataclass(frozen=True)
class Finished:
    """How a process ended: its pid, its status (None: it was killed at its timeout), what it printed
    (until the timeout, if it came), and what its process group left running when it exited (killed;
    in words, for a run in a session of its own)."""

    pid: int
    returncode: int | None
    stdout: bytes
    stderr: bytes
    left_running: str | None = None
    #: What it left running outside its process group (it carried the run's mark): pid -> command line,
    #: each killed.
    escaped: Mapping[int, str] = field(default_factory=dict)

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def run_command(command: Command, *, cwd: Path | None = None, env: Mapping[str, str] | None = None,
                stdin: bytes | None = None, timeout: float | None = None, shell: bool = False,
                session: bool = False, pid_file: Path | None = None, what: str = "",
                merge_stderr: bool = False, keep_stdout: int | None = None,
                keep_stderr: int | None = None) -> Finished:
    """Run ``command`` in ``cwd`` with ``env`` (default: this process's) until it exits; see the module.

    ``stdin`` is fed to it (else it reads ``/dev/null``); ``merge_stderr`` sends its stderr into its
    stdout; ``keep_stdout`` and ``keep_stderr`` bound what is kept of each (its last bytes). ``pid_file`` (with
    ``session``) records the child for :func:`stop_orphans`, ``what`` naming it there (``the Player
    of turn 2``); the file is removed when the run ends.

    With ``session``, what it left running outside its group too (see the module): ``escaped``.

    Raises:
        OSError, ValueError: the program cannot be started (``FileNotFoundError``: it does not exist;
            ``ValueError``: a NUL in an argument); the caller says it in its own words.
    """
    mark = secrets.token_hex(12) if session else None
    if mark is not None:
        env = {**(os.environ if env is None else env), RUN_MARK: mark}
    proc, held = _start(command, cwd=cwd, env=env, shell=shell, session=session, pid_file=pid_file, what=what,
                        stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE, mark=mark)
    try:
        _release(held)  # a stop signal that came while it started is raised here, where the child is stopped
        stdout, stderr, exited = wait_for_exit(proc, stdin, timeout, (keep_stdout, keep_stderr))
        if not exited:
            _kill(proc, session)
            stop_marked(mark)
    except BaseException:
        _kill(proc, session)
        stop_marked(mark)
        raise
    finally:
        if pid_file is not None:
            with contextlib.suppress(OSError):
                pid_file.unlink()
    if not exited:
        return Finished(proc.pid, None, stdout, stderr)
    left = _stop_left_running(proc.pid) if session else None
    # Its group is killed: what still carries its mark left the group (a daemon), or is a member of it
    # not gone yet (killed again, not named).
    escaped = {pid: command for pid, (group, command) in stop_marked(mark).items() if group != proc.pid}
    return Finished(proc.pid, proc.returncode, stdout, stderr, left, escaped)


def spawn(command: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None,
          pid_file: Path | None = None, what: str = "", output: Path | None = None) -> subprocess.Popen[bytes]:
    """Start ``command`` in a session of its own, to outlive this call: its stdin ``/dev/null``, its
    stdout and stderr appended to ``output`` (default: ``/dev/null``); ``pid_file`` and ``what`` as
    for :func:`run_command` (the caller removes the file once it stops the process).

    Raises:
        OSError: the program cannot be started.
    """
    with contextlib.ExitStack() as stack:
        sink: int | IO[bytes] = subprocess.DEVNULL
        if output is not None:
            sink = stack.enter_context(open(output, "ab"))  # closed once the child has its own copy
        proc, held = _start(list(command), cwd=cwd, env=env, shell=False, session=True, pid_file=pid_file, what=what,
                            stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT)
    try:
        _release(held)
    except BaseException:
        _kill(proc, True)
        raise
    return proc


def _start(command: Command, *, cwd: Path | None, env: Mapping[str, str] | None, shell: bool, session: bool,
           pid_file: Path | None, what: str, stdin: int, stdout: int | IO[bytes],
           stderr: int, mark: str | None = None) -> tuple[subprocess.Popen[bytes], Held]:
    """The child started, and this process's signal mask before it, for :func:`_release` (None: nothing
    was held, without a pid file)."""
    if pid_file is None:
        proc = subprocess.Popen(command, shell=shell, cwd=cwd, env=env, start_new_session=session, stdin=stdin,
                                stdout=stdout, stderr=stderr)
        return proc, None
    # A stop signal that lands while the child is between fork and exec would run this process's Python
    # handler in the child (a failed start, not a stop) or escape before `proc` exists (a child nobody
    # stops). Held until the child runs, it is raised by _release, where the caller stops the child.
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        proc = subprocess.Popen(command, shell=shell, cwd=cwd, env=env, start_new_session=True, stdin=stdin,
                                stdout=stdout, stderr=stderr, preexec_fn=_announcer(pid_file, what, held, mark))
    except BaseException:
        _release(held)
        with contextlib.suppress(OSError):
            pid_file.unlink()  # written by the child before its exec failed
        raise
    return proc, held


def _release(held: Held) -> None:
    """Unblock what :func:`_start` held (a stop signal that came meanwhile is delivered now)."""
    if held is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _announcer(pid_file: Path, what: str, mask: set[int | signal.Signals],
               mark: str | None = None) -> Callable[[], None]:
    """The child's first act (before exec): record its own process group (and the run's mark).

    Written by the child itself, the file exists before the program runs a single instruction, so
    there is no window in which a killed parent leaves a child nobody knows about.
    """
    target = str(pid_file)
    told = {} if mark is None else {"mark": mark}

    def announce() -> None:
        try:  # best effort: it only serves the clean-up, and must never stop the child starting
            pid = os.getpid()
            data = json.dumps({"pgid": pid, "start": start_time(pid), "what": what, **told}) + "\n"
            tmp = os.path.join(os.path.dirname(target), f"{TEMP_PREFIX}{os.path.basename(target)}.{pid}")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, data.encode())
            finally:
                os.close(fd)
            os.replace(tmp, target)
        except Exception:
            pass
        # In its own session now: the program gets default handlers and the parent's signal mask back
        # (a signal that reached it before the session began ends it, as it would have anyway).
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    return announce


def start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (Linux ``/proc``): tells a process from a later one with its pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def stop_orphans(pid_files: Iterable[Path], *, by: str, marked: bool = True) -> list[str]:
    """Kill what a killed run left running (their pid files outlive it); one note each, naming ``by``
    (``the interrupted loop``). Every file is removed.

    Call it only where no live run can own these children (under the lock of what they worked on).
    A process group is killed only when its leader still has the recorded start time, so a pid
    reused by an unrelated process is never touched (where ``/proc`` is missing nothing is killed);
    and, ``marked``, only while a process of it still carries the run's mark the file records: an
    agent can write where its pid file lies, and a file it forged names a process of the user's,
    which carries no run's mark (a file an older version wrote, with no mark, kills nothing). Not
    ``marked``: a file only this program writes, for a program that rewrites its environment (a
    server's process title over it: :func:`spawn`'s).
    """
    notes: list[str] = []
    for pid_file in pid_files:
        try:
            info = json.loads(pid_file.read_text(encoding="utf-8"))
            pgid, start = int(info["pgid"]), info.get("start")
            # An older loop's agents wrote their role and turn instead of what they were.
            what = info.get("what") or f"the {info.get('role', 'agent')} of turn {info.get('turn', '?')}"
            mark = info.get("mark") if isinstance(info.get("mark"), str) else None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pgid, start, what, mark = 0, None, "", None
        # The file lies where the agent works, so it may be forged: a group is killed only while a process
        # of it still carries the run's mark (none of the user's own does), not on a pid and start time alone.
        ours = not marked or (mark is not None and any(group == pgid for group, _ in marked_processes(mark).values()))
        if pgid > 0 and start is not None and start_time(pgid) == start and ours:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
                notes.append(f"stopped {what} (process group {pgid}) left running by {by}")
                _await_gone(pgid)
        # What left its group carries the run's mark, whether or not its group is still there.
        escaped = {pid: command for pid, (group, command) in stop_marked(mark).items() if group != pgid}
        if escaped:
            notes.append(f"stopped {escaped_words(escaped)} that {what} had left running outside its process "
                         f"group, left running by {by}")
        with contextlib.suppress(OSError):
            pid_file.unlink()
    return notes


def marked_processes(mark: str) -> dict[int, tuple[int, str]]:
    """The live processes of this user whose environment carries the run mark ``mark``: pid -> (its
    process group, its command line). Linux ``/proc``; elsewhere none are found."""
    needle = f"\0{RUN_MARK}={mark}\0".encode()
    found: dict[int, tuple[int, str]] = {}
    uid, me = os.getuid(), os.getpid()
    try:
        listing = os.scandir("/proc")
    except OSError:
        return found
    with listing:
        for entry in listing:
            if not entry.name.isdigit() or int(entry.name) == me:
                continue
            try:  # another user's process (or one gone meanwhile) is not ours to read, nor to stop
                if entry.stat(follow_symlinks=False).st_uid != uid or not _carries(entry.path, needle):
                    continue
                fields = _stat_fields(entry.path)
                if fields[0] != "Z":
                    found[int(entry.name)] = (int(fields[2]), _command_line(entry.path))
            except (OSError, IndexError, ValueError):
                continue
    return found


def stop_marked(mark: str | None) -> dict[int, tuple[int, str]]:
    """Kill every process carrying the run mark ``mark`` (see :func:`marked_processes`), looking again
    until none is left (one may fork while it is killed) or :data:`_ORPHAN_GONE` has passed; what
    was killed, as :func:`marked_processes` gives it."""
    killed: dict[int, tuple[int, str]] = {}
    if mark is None:
        return killed
    needle = f"\0{RUN_MARK}={mark}\0".encode()
    deadline = time.monotonic() + _ORPHAN_GONE
    while found := marked_processes(mark):
        for pid, seen in found.items():
            if _kill_carrier(pid, needle):
                killed.setdefault(pid, seen)
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)  # a killed process is gone a moment later
    return killed


def escaped_words(escaped: Mapping[int, str]) -> str:
    """``process 4242 (cmd)`` or ``processes 4242, 4250 (cmd; cmd)``: what left a process group, in words."""
    pids = ", ".join(str(pid) for pid in escaped)
    return f"process{'es' if len(escaped) > 1 else ''} {pids} ({_listed(list(escaped.values()))})"


def _carries(proc_dir: str, needle: bytes) -> bool:
    """True when the process at ``proc_dir`` (``/proc/PID``) started with the mark ``needle`` in its
    environment (raises OSError when it cannot be read)."""
    with open(os.path.join(proc_dir, "environ"), "rb") as handle:
        return needle in b"\0" + handle.read()


def _kill_carrier(pid: int, needle: bytes) -> bool:
    """SIGKILL ``pid`` if it still carries the mark: through a pidfd where Linux has one, so a pid reused
    between the look and the kill is never touched."""
    opener, sender = getattr(os, "pidfd_open", None), getattr(signal, "pidfd_send_signal", None)
    try:
        if opener is None or sender is None:
            os.kill(pid, signal.SIGKILL)
            return True
        handle = opener(pid)
        try:
            if not _carries(f"/proc/{pid}", needle):
                return False
            sender(handle, signal.SIGKILL)
        finally:
            os.close(handle)
    except OSError:
        return False
    return True


def _stat_fields(proc_dir: str) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the command name: state, parent, process group, ..."""
    with open(os.path.join(proc_dir, "stat"), encoding="ascii", errors="replace") as handle:
        return handle.read().rsplit(")", 1)[1].split()


def _await_gone(pid: int) -> None:
    """Wait (briefly) until the killed ``pid`` is gone or a zombie: its files and ports are free again."""
    deadline = time.monotonic() + _ORPHAN_GONE
    while time.monotonic() < deadline:
        try:
            state = _stat_fields(f"/proc/{pid}")
        except (OSError, IndexError):
            return
        if not state or state[0] == "Z":
            return
        time.sleep(0.02)


def _kill(proc: subprocess.Popen[bytes], group: bool) -> None:
    """Kill the child (its whole process group when it has one of its own), reap it, close its pipes."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def _stop_left_running(pgid: int) -> str | None:
    """Kill what is left of the process group ``pgid`` once its leader has exited; its processes'
    command lines (``/proc``), or None when nothing was left."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return None
    left = group_commands(pgid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    if not left and Path("/proc").is_dir():
        return None  # only exited children not yet reaped (zombies): nothing was left running
    return _listed(left) or "processes it started"


def group_commands(pgid: int) -> list[str]:
    """The command lines of the live processes in process group ``pgid`` (Linux ``/proc``; else none)."""
    found: list[str] = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            fields = _stat_fields(str(entry))
            if int(fields[2]) != pgid or fields[0] == "Z":
                continue
            found.append(_command_line(str(entry)))
        except (OSError, IndexError, ValueError):
            continue
    return found


def _command_line(proc_dir: str) -> str:
    """The command line of the process at ``proc_dir`` (``/proc/PID``), shortened for a note."""
    argv = Path(proc_dir, "cmdline").read_bytes().split(b"\0")
    return " ".join(a.decode("utf-8", "replace") for a in argv if a)[:120]


def _listed(commands: list[str]) -> str:
    """Up to three command lines, and how many more."""
    return "; ".join(commands[:3]) + (f" and {len(commands) - 3} more" if len(commands) > 3 else "")


__all__ = ["RUN_MARK", "STOP_SIGNALS", "Finished", "escaped_words", "group_commands", "marked_processes",
           "run_command", "spawn", "start_time", "stop_marked", "stop_orphans"]
