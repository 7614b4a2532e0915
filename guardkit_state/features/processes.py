"""Each task's loop in a process of its own: started, heard, stopped and reaped by one parent.

A child is forked (so Python-callable agents work as well as commands), runs the existing task
loop, and sends its progress events to the parent over a pipe; the parent renders them. What the
child *ended with* is read back from its files by the caller, never trusted from the pipe: the
pipe only adds the reason of an error.

Signals. Each child is in a process group of its own, so a Ctrl+C in the terminal reaches the
parent alone, and the parent forwards exactly one SIGINT to each running child (a second signal
inside a loop's clean-up could otherwise cut it short and leave its agent running). A child stops
on its first SIGINT/SIGTERM/SIGHUP like a task loop run alone: its state saved, its agent killed.
A child whose parent dies (even by SIGKILL) gets that same SIGINT, so no loop runs unattended.
Signals are blocked while a child is forked and registered: an interruption then always finds
every child it has to stop.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Literal

from guardkit_state.agents.protocol import Agent
from guardkit_state.errors import GuardkitStateError
from guardkit_state.loop.events import LoopEvent, Note
from guardkit_state.loop.outcome import LoopInterrupted
from guardkit_state.loop.run import LoopOptions, run_task_loop
from guardkit_state.process.command import STOP_SIGNALS

log = logging.getLogger("guardkit_state.features.processes")

#: How long stopped children may take to save their state before they are killed.
STOP_GRACE = 60.0
#: How often a waiting parent (and a child watching its parent, where the kernel cannot) looks.
POLL = 0.2
#: ``prctl(PR_SET_PDEATHSIG, ...)``: the kernel signals the child when its parent dies (Linux).
_PR_SET_PDEATHSIG = 1

EndKind = Literal["done", "interrupted", "error", "died"]
#: Modules a task loop imports lazily on its first turn: imported once in the parent, each forked
#: child inherits them instead of paying the import again.
_WARM_MODULES = ("guardkit_state.store.schemas",)


@dataclass(frozen=True)
class LoopJob:
    """One task loop to run: the arguments of :func:`~guardkit_state.loop.run.run_task_loop`."""

    task_id: str
    repo_root: Path
    player: Agent
    coach: Agent
    options: LoopOptions


@dataclass(frozen=True)
class ChildEnd:
    """How a task's process ended: what it said (``done``, ``interrupted``, ``error``) or ``died``
    (killed, or exited without a word); ``text`` is its reason, ``exitcode`` the process status."""

    task_id: str
    kind: EndKind
    text: str
    exitcode: int | None


#: The parent's callback for a child's progress: (task id, the loop event).
EventCallback = Callable[[str, LoopEvent | Note], None]


@contextlib.contextmanager
def signals_blocked() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP back for the block; one that arrived is delivered at its end."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class TaskProcess:
    """One task loop in a forked child."""

    def __init__(self, job: LoopJob, on_event: EventCallback) -> None:
        self.job = job
        self.on_event = on_event
        self.process: Any = None
        self.conn: Connection | None = None
        self.told: tuple[str, str] | None = None
        self.interrupted = False

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def start(self) -> None:
        """Fork the child (call with signals blocked: the child unblocks them once it can stop)."""
        context = multiprocessing.get_context("fork")
        reader, writer = context.Pipe(duplex=False)
        # daemon: should the parent ever exit without reaping it, multiprocessing stops it (SIGTERM).
        self.process = context.Process(target=_child_main, args=(writer, os.getpid(), self.job),
                                       name=f"guardkit-state {self.job.task_id}", daemon=True)
        self.process.start()
        with contextlib.suppress(OSError):  # the child does the same; whichever runs first wins
            os.setpgid(self.process.pid, self.process.pid)
        writer.close()  # the child's copy is the only writer left: its exit is the pipe's end
        self.conn = reader

    def interrupt(self) -> None:
        """Ask the child to stop (once): its loop saves its state and stops its agent."""
        if self.interrupted or self.pid is None:
            return
        self.interrupted = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, signal.SIGINT)

    def kill(self) -> None:
        """SIGKILL the child's process group (a child that did not stop within the grace period)."""
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)

    def receive(self) -> bool:
        """Handle every message waiting on the pipe; True once the child closed it (it is ending)."""
        assert self.conn is not None
        try:
            while self.conn.poll():
                self._handle(self.conn.recv())
        except (EOFError, OSError):
            return True
        return False

    def _handle(self, message: Any) -> None:
        if not isinstance(message, tuple) or not message:
            return
        if message[0] == "event":
            self.on_event(self.job.task_id, message[1])
        elif message[0] == "end" and len(message) == 3:
            self.told = (str(message[1]), str(message[2]))

    def finish(self) -> ChildEnd:
        """Reap the child (its pipe is closed; a child still running after :data:`STOP_GRACE` is killed)
        and say how it ended."""
        self.process.join(STOP_GRACE)
        if self.process.exitcode is None:
            self.kill()
            self.process.join()
        if self.conn is not None:
            self.conn.close()
        code = self.process.exitcode
        self.process.close()  # its sentinel's descriptor: a long feature starts many children
        if self.told is not None and self.told[0] in ("done", "interrupted", "error"):
            kind: EndKind = self.told[0]  # type: ignore[assignment]
            return ChildEnd(self.job.task_id, kind, self.told[1], code)
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
            return ChildEnd(self.job.task_id, "died", f"its loop process was killed by {name}", code)
        return ChildEnd(self.job.task_id, "died", f"its loop process exited with status {code} before it ended", code)


class TaskPool:
    """Runs task loops, at most ``max_parallel`` at a time, each in its own process."""

    def __init__(self, max_parallel: int, on_event: EventCallback) -> None:
        self.max_parallel = max(1, max_parallel)
        self.on_event = on_event
        self.running: dict[str, TaskProcess] = {}

    def run(self, jobs: list[LoopJob], *, starting: Callable[[LoopJob], None],
            started: Callable[[LoopJob, int | None], None], ended: Callable[[ChildEnd], None]) -> None:
        """Run ``jobs`` in their order; ``starting`` is called before a fork (the plan says it runs),
        ``started`` after it, ``ended`` once a child is reaped."""
        queue = list(jobs)
        if queue:
            warm_up()
        while queue or self.running:
            while queue and len(self.running) < self.max_parallel:
                job = queue.pop(0)
                starting(job)
                process = TaskProcess(job, self.on_event)
                with signals_blocked():
                    process.start()
                    self.running[job.task_id] = process
                started(job, process.pid)
            for end in self._wait_once(None):
                ended(end)

    def stop(self) -> list[ChildEnd]:
        """Stop every running child (one SIGINT each), wait for them to save their state, reap them.

        Further interruptions while waiting are ignored; a child still running after
        :data:`STOP_GRACE` seconds is killed.
        """
        for process in self.running.values():
            process.interrupt()
        deadline = time.monotonic() + STOP_GRACE
        ends: list[ChildEnd] = []
        while self.running:
            try:
                ends += self._wait_once(POLL)
                if time.monotonic() > deadline:
                    for process in self.running.values():
                        log.warning("task %s did not stop within %ss; killing it", process.job.task_id, STOP_GRACE)
                        process.kill()
            except KeyboardInterrupt:
                continue
        return ends

    def _wait_once(self, timeout: float | None) -> list[ChildEnd]:
        """Wait for messages or exits; return the ends of the children reaped meanwhile.

        A child has ended when its pipe is closed, or when its process exited (its sentinel):
        the pipe alone would not say so if something the child started still held it open.
        """
        waiting: dict[Any, TaskProcess] = {}
        for process in self.running.values():
            waiting[process.conn] = process
            waiting[process.process.sentinel] = process
        ready = wait(list(waiting), timeout)
        ends: list[ChildEnd] = []
        for item in ready:
            process = waiting[item]
            if process.job.task_id not in self.running:
                continue  # both its pipe and its sentinel were ready: reaped already
            closed = process.receive()
            if closed or process.process.sentinel in ready:
                del self.running[process.job.task_id]
                ends.append(process.finish())
        return ends


def warm_up() -> None:
    """Import what every task loop would import on its own (best effort: a missing module is the
    loop's business)."""
    for name in _WARM_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


# --------------------------------------------------------------------------- the child


def _child_main(conn: Connection, parent_pid: int, job: LoopJob) -> None:
    """The child: stop on the first signal, follow the parent's death, run the loop, tell the end."""
    fired = False

    def stop(signum: int, frame: Any) -> None:
        nonlocal fired
        if not fired:  # the first one stops the loop; another must not cut its clean-up short
            fired = True
            raise KeyboardInterrupt

    for signum in STOP_SIGNALS:
        signal.signal(signum, stop)
    package_log = logging.getLogger("guardkit_state")
    for handler in list(package_log.handlers):
        if isinstance(handler, logging.FileHandler):  # the parent's log file: the loop opens its own
            package_log.removeHandler(handler)
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    send = _sender(conn)
    code = 0
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        _stop_with_parent(parent_pid)
        result = run_task_loop(job.repo_root, job.task_id, job.player, job.coach, job.options,
                               on_event=lambda event: send(("event", event)))
        # An approval whose turn commit git refused is an error with git's reason, not "done".
        send(("end", "error" if result.commit_error else "done", result.reason))
    except LoopInterrupted as stopped:
        where = f"during turn {stopped.turn} ({stopped.phase})" if stopped.turn is not None else "before turn 1"
        send(("end", "interrupted", f"interrupted {where}"))
        code = 130
    except KeyboardInterrupt:
        send(("end", "interrupted", "interrupted"))
        code = 130
    except GuardkitStateError as exc:
        send(("end", "error", str(exc)))
        code = 1
    except Exception as exc:  # the parent reports it; the process must still end cleanly
        send(("end", "error", f"{type(exc).__name__}: {exc}"))
        code = 1
    conn.close()
    sys.exit(code)


def _sender(conn: Connection) -> Callable[[tuple[Any, ...]], None]:
    def send(message: tuple[Any, ...]) -> None:
        try:
            conn.send(message)
        except (BrokenPipeError, ConnectionError, EOFError):
            pass  # the parent is gone: the loop goes on to its own stop, its files say the rest
        except Exception:  # an event that cannot be pickled: say what it was
            if message[0] == "event":
                with contextlib.suppress(Exception):
                    conn.send(("event", Note(f"({message[1].kind} event not shown)")))
    return send


def _stop_with_parent(parent_pid: int) -> None:
    """SIGINT this process when its parent dies: by the kernel where it can, else by polling."""
    import ctypes  # here, in the child: the parent (and every other command) never needs it

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        registered = libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGINT), 0, 0, 0) == 0
    except (OSError, AttributeError):
        registered = False
    if registered:
        if os.getppid() != parent_pid:  # it died before the registration
            os.kill(os.getpid(), signal.SIGINT)
        return

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(POLL)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=watch, name="guardkit-state parent watch", daemon=True).start()


__all__ = ["STOP_GRACE", "ChildEnd", "LoopJob", "TaskPool", "TaskProcess", "signals_blocked"]
