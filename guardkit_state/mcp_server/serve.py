"""``guardkit-state mcp``: the loop's memory as a stdio MCP server on the official SDK (``mcp`` 2.x).

The tools are thin: each calls one function of :mod:`guardkit_state.mcp_server.answers` for the
repository the server was started on, and an error the CLI would print as one line is that line,
as an MCP tool error (``is_error``). ``read_only`` leaves the write tools out of the server
altogether (a Coach or a reviewer cannot record a turn through it), and its reads write nothing
either: the status and search caches are read, never written. The SDK points the process's
stdout at stderr while it serves, so nothing but the protocol reaches the client; logging goes
to stderr.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import anyio
import pydantic_core
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.server.stdio import stdio_server
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from guardkit_state import __version__
from guardkit_state.errors import GuardkitStateError
from guardkit_state.mcp_server import answers
from guardkit_state.mcp_server.request_guard import AnsweringReader
from guardkit_state.store.stat_cache import disable_writes
from guardkit_state.taskfile.discovery import listing_scope
from guardkit_state.taskfile.read_scope import watch_reads

log = logging.getLogger("guardkit_state.mcp_server")

_F = TypeVar("_F", bound=Callable[..., Any])

#: What an agent is told on connecting: the loop in a few lines (each tool's description adds its part).
INSTRUCTIONS = """\
guardkit-state is the file-first memory of a Player/Coach coding loop in this repository.
A task (tasks/**/TASK-ID*.md) has acceptance criteria and is worked in numbered turns:
1. Before a turn, read `context` (what the last turn tried, the Coach's feedback, which criteria are
   verified): it is exactly what the loop gives the Player.
2. The Player implements and writes a Player report; the Coach checks the work against the criteria
   and writes a decision (approve, feedback or reject, with a verdict per criterion).
3. `record_turn` records both as the next turn (recorded turns + 1): it validates them, updates the
   criteria ledger, detects a stall (the same feedback turn after turn) and writes the files. A bad
   report is refused with nothing written; the same reports sent again answer "already recorded".
For a feature built through a git remote, `claim_next_task` claims the next ready task for you
and `release_claim` gives it back; `release_quarantined_task` lets workers claim again a task
they quarantined (its runs kept ending in a dead worker or a crash).
`status` lists every task and feature; `show` one task; `criteria` its ledger; `turn_reports` what a
turn left; `feature` a feature's waves; `search` past turns (a blocker seen elsewhere).
Every answer is read from the files when asked: another agent or the CLI may have recorded a turn since."""

TaskRef = Annotated[str, Field(description="a task id (TASK-AUTH-001) or the path of a task file")]
TurnNumber = Annotated[int | None, Field(description="a turn number (default: see the tool)", ge=1)]
Report = Annotated[dict[str, Any] | None, Field(description="the report as a JSON object (or give the *_file)")]
ReportFile = Annotated[str | None, Field(description="the report's JSON file, relative to the repository")]
FeatureRef = Annotated[str, Field(description="a feature id (FEAT-AUTH)")]
RemoteName = Annotated[str, Field(description="the git remote the feature is built through (origin)")]
Mode = Literal["fresh_start", "continuing_work", "recovering_state"]

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
#: Claims push to the git remote: not idempotent (a second call claims another task), the world open.
CLAIM = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True)


def _tool_errors(fn: _F) -> _F:
    """Run a tool; a library error is answered as a tool error (``is_error``) whose text is the
    CLI's one line and whose structured content is the CLI's ``--json`` error; anything else is
    the CLI's "unexpected" line, its traceback logged on stderr. (A ToolError raised instead would
    reach the agent behind the SDK's "Error executing tool NAME: " prefix.)"""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except GuardkitStateError as exc:
            return _error_result(answers.error_line(exc), exc.to_dict())
        except Exception as exc:
            log.exception("tool %s failed", fn.__name__)
            return _error_result(answers.error_line(f"unexpected {type(exc).__name__}: {exc}"), None)

    return call  # type: ignore[return-value]


def _one_read(fn: _F) -> _F:
    """A read tool's call as one read command: ``tasks/`` listed, and each plan looked at, once for
    the call (never across calls: the next call sees every file changed since); the read caches
    saved when it ends (see :func:`~guardkit_state.taskfile.discovery.listing_scope`).

    The answer is made into the tool's result here (its JSON text, compact: the same JSON in fewer
    bytes and an agent's tokens, and the answer as the structured content), once per answer: an
    answer kept unchanged (:func:`answers._kept`) is sent again without being serialised and
    checked again, which for ``status`` (~190 KB) was most of a call."""
    last: list[tuple[object, CallToolResult]] = []

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        with listing_scope():
            answer = fn(*args, **kwargs)
        if last and last[0][0] is answer:
            return last[0][1]
        text = pydantic_core.to_json(answer, fallback=str).decode()
        result = CallToolResult(content=[TextContent(type="text", text=text)], structured_content=answer)
        last[:] = [(answer, result)]
        return result

    return call  # type: ignore[return-value]


def _error_result(line: str, detail: dict[str, object] | None) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=line)], structured_content=detail, is_error=True)


def build_server(repo: Path, *, read_only: bool = False) -> MCPServer[Any]:
    """The server for the repository at ``repo``; without the write tools when ``read_only``."""
    root = Path(repo).resolve()
    # The server answers the same questions again and again: it watches what they are read from,
    # and answers again from what it read while nothing there changed (answers._kept).
    watch_reads(root)
    server: MCPServer[Any] = MCPServer("guardkit-state", version=__version__, instructions=INSTRUCTIONS,
                                       log_level="WARNING")

    def tool(annotations: ToolAnnotations) -> Callable[[_F], _F]:
        def register(fn: _F) -> _F:
            call = _one_read(fn) if annotations is READ else fn
            server.add_tool(_tool_errors(call), name=fn.__name__, description=fn.__doc__, annotations=annotations,
                            structured_output=True)
            return fn
        return register

    @tool(READ)
    def status() -> dict[str, Any]:
        """Every task with loop state (turns, last decision, criteria counts) and every feature plan
        with its progress: the JSON of `guardkit-state status --json --features`. Start here."""
        return answers.status(root)

    @tool(READ)
    def show(task_id: TaskRef) -> dict[str, Any]:
        """One task's loop: status, turns (decision and feedback of each), criteria, stall, and the
        resume point (which turn comes next and how). Given a FEAT-ID, the feature's waves instead.
        The JSON of `guardkit-state show TASK-ID --json`."""
        return answers.show(root, task_id)

    @tool(READ)
    def context(task_id: TaskRef, turn: TurnNumber = None) -> dict[str, Any]:
        """The continuation context the Player of turn `turn` (default: the next) starts from: the
        previous turn's summary and feedback and the cumulative criteria, in markdown ("context").
        Read it before working a turn. The JSON of `guardkit-state context TASK-ID --json`."""
        return answers.context(root, task_id, turn)

    @tool(READ)
    def criteria(task_id: TaskRef) -> dict[str, Any]:
        """The criteria ledger after the last recorded turn: each acceptance criterion's status
        (verified, rejected, pending), the turn that set it, and whether only an approval implies
        it; with the counts and any stall. Verified criteria stay verified in later turns."""
        return answers.criteria(root, task_id)

    @tool(READ)
    def turn_reports(task_id: TaskRef, turn: TurnNumber = None) -> dict[str, Any]:
        """What recorded turn `turn` (default: the last) left: the Player's report, the Coach's
        decision and the assembled turn state (blockers, tests, coverage, gates, what next)."""
        return answers.turn_reports(root, task_id, turn)

    @tool(READ)
    def feature(feature_id: Annotated[str, Field(description="a feature id (FEAT-AUTH) or a plan's .yaml")]
                ) -> dict[str, Any]:
        """A feature's waves × tasks from its plan, the files and git: each task's status, turns,
        criteria and merge, the totals, and what runs next. The JSON of `show FEAT-ID --json`."""
        return answers.feature(root, feature_id)

    @tool(READ)
    def search(query: Annotated[str, Field(description="words; a task, feature, criterion or turn named "
                                           "in it is what the query is about; 'last' puts the newest first")],
               task: Annotated[str | None, Field(description="only this task's records")] = None,
               feature: Annotated[str | None, Field(description="only this feature's records")] = None,
               decision: Annotated[str | None, Field(description="approved, feedback, rejected or error")] = None,
               since: Annotated[str | None, Field(description="a date, or a span back from now: 24h, 7d")] = None,
               groups: Annotated[list[str] | None, Field(description="turn_states, role_constraints, "
                                                         "quality_gate_configs, implementation_modes")] = None,
               limit: Annotated[int, Field(ge=1, le=100)] = 10,
               backend: Literal["auto", "files", "graphiti"] = "auto") -> dict[str, Any]:
        """Search past turns (feedback, blockers, tests, gates), tasks, features and configuration:
        how a blocker looked in other tasks. From the index when it is fresh, else the files
        ("backend" and "note" say which). The JSON of `guardkit-state search --json`."""
        return answers.search(root, query, groups=groups, task=task, feature=feature, decision=decision,
                              since=since, limit=limit, backend=backend)

    # The SDK runs each call in a worker thread: two records at once would meet at the task's lock,
    # and the second be refused as "locked by another run". One at a time, the second is answered
    # as the CLI answers it after the first: the next turn, or "already recorded".
    writing = threading.Lock()

    if not read_only:
        @tool(WRITE)
        def record_turn(task_id: TaskRef, player: Report = None, coach: Report = None,
                        player_file: ReportFile = None, coach_file: ReportFile = None, mode: Mode | None = None,
                        max_turns: Annotated[int | None, Field(ge=1, description="raise the turn budget")] = None,
                        reopen: Annotated[bool, Field(description="record on a completed or approved task")]
                        = False) -> dict[str, Any]:
            """Record the next turn from the Player's report and the Coach's decision (each inline or
            as a file), as `guardkit-state record` does: both are validated first (their schemas, the
            task and turn they name, known criterion ids) and a bad one is refused with nothing
            written; the ledger, stall and outcome are updated. Sending the very reports of a
            recorded turn again answers "already_recorded": true (nothing to do). Returns the JSON
            of `record --json`."""
            with writing:
                return answers.record(root, task_id, player=player, coach=coach, player_file=player_file,
                                      coach_file=coach_file, mode=mode, max_turns=max_turns, reopen=reopen)

        @tool(CLAIM)
        def claim_next_task(feature_id: FeatureRef, remote: RemoteName,
                            worker: Annotated[str | None, Field(description="your worker id (default: a new "
                                                                "one, answered)")] = None,
                            lease_seconds: Annotated[float | None, Field(gt=0, description="how long the claim "
                                                                         "holds (default 1800, at most 86400: a "
                                                                         "day)")] = None
                            ) -> dict[str, Any]:
            """Claim the next ready task of a feature built through a git remote, as a
            `feature-build --remote` worker would: the first task that has to run in the wave whose
            turn has come, not claimed by anyone, by one atomic push of its claim ref. Answers
            status "claimed" (task_id, claim_ref, lease_until, the task branch and what to do next),
            "nothing_ready" or "lost_race" (ask again), with the reason."""
            return answers.claim_next_task(root, feature_id, remote, worker=worker, lease=lease_seconds)

        @tool(CLAIM)
        def release_claim(feature_id: FeatureRef, task_id: TaskRef, remote: RemoteName,
                          worker: Annotated[str, Field(description="the worker id claim_next_task answered")]
                          ) -> dict[str, Any]:
            """Release your claim on a task (when done or giving up) so another worker can take it:
            deleted from the remote only while it is still the claim of `worker`; "released": false
            (with the reason) when it is gone or someone else's."""
            return answers.release_claim(root, feature_id, task_id, remote, worker)

        @tool(CLAIM)
        def release_quarantined_task(feature_id: FeatureRef, task_id: TaskRef, remote: RemoteName) -> dict[str, Any]:
            """Release a task the workers quarantined (its runs ended in a dead worker or a crashed
            loop too often: `feature` and `guardkit-state show FEAT --remote` list them, with why)
            so they claim it again, as `guardkit-state feature-build FEAT --release TASK` does: its
            failed runs are cleared in its history on the remote. "released": false (with the
            reason) when it has no failed run to clear. For a person's decision: release a task
            only once what killed its runs is fixed."""
            return answers.release_quarantined_task(root, feature_id, task_id, remote)

    @server.resource("guardkit://task/{task_id}", name="task-file", mime_type="text/markdown",
                     description="A task file's text, from the copy `show` reads.")
    def task_resource(task_id: str) -> str:
        return _resource(answers.task_file, root, task_id)

    @server.resource("guardkit://task/{task_id}/turn/{turn}", name="turn-reports", mime_type="application/json",
                     description="A recorded turn's reports (Player, Coach, turn state) as `turn_reports` gives them.")
    def turn_resource(task_id: str, turn: str) -> dict[str, Any]:
        if not turn.isdigit():
            raise ResourceError(f"error: turn must be a number, not {turn!r}")
        return _resource(answers.turn_reports, root, task_id, int(turn))

    return server


_R = TypeVar("_R")


def _resource(fn: Callable[..., _R], *args: Any) -> _R:
    """A resource read: a library error becomes the SDK's resource error, with the CLI's one line."""
    try:
        return fn(*args)
    except GuardkitStateError as exc:
        raise ResourceError(answers.error_line(exc)) from exc


def serve(repo: Path, *, read_only: bool = False) -> None:
    """Serve ``repo`` over stdin/stdout until the client closes stdin (``read_only``: no write
    tool, and the read caches under ``.guardkit/cache/`` are read but never written)."""
    if read_only:
        disable_writes()
    anyio.run(_serve_stdio, build_server(repo, read_only=read_only))


async def _serve_stdio(server: MCPServer[Any]) -> None:
    """``server.run("stdio")``, every request it cannot read answered (:class:`AnsweringReader`).

    The SDK's MCPServer has no public way to run on given streams: its low-level server is
    reached as its own ``run_stdio_async`` reaches it (tests/test_mcp_server.py drives the result).
    """
    lowlevel = server._lowlevel_server  # see the docstring
    async with stdio_server() as (read_stream, write_stream):
        await lowlevel.run(AnsweringReader(read_stream, write_stream), write_stream,
                           lowlevel.create_initialization_options())


__all__ = ["INSTRUCTIONS", "build_server", "serve"]
