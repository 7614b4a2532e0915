"""``guardkit-state mcp``: the loop's memory as a stdio MCP server on the official SDK (``mcp`` 2.x).

The tools are one table (:data:`TOOLS`), registered in a loop: each is one function of
:mod:`guardkit_state.mcp_server.answers`, called for the repository the server was started on, and
an error the CLI would print as one line is that line, as an MCP tool error (``is_error``).
``read_only`` leaves the write tools out of the server altogether (a Coach or a reviewer cannot
record a turn through it), and its reads write nothing either: the status and search caches are
read, never written. The SDK points the process's
stdout at stderr while it serves, so nothing but the protocol reaches the client; logging goes
to stderr.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
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

#: What a tool may touch: it reads (``read_only`` keeps it), records a turn, or claims on a remote.
Access = Literal["read", "write", "claim"]
ANNOTATIONS: dict[Access, ToolAnnotations] = {
    "read": ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False),
    "write": ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                             open_world_hint=False),
    # Claims push to the git remote: not idempotent (a second call claims another task), the world open.
    "claim": ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                             open_world_hint=True),
}


def _arg(name: str, annotation: Any, default: Any = inspect.Parameter.empty) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)


@dataclass(frozen=True)
class Tool:
    """One tool: the :mod:`~guardkit_state.mcp_server.answers` function it is (its docstring is the
    description), what it may touch, and its arguments as the SDK publishes them. The function is
    called with the repository and the arguments by name (its parameters are named as they are)."""

    name: str
    answer: Callable[..., dict[str, Any]]
    access: Access
    arguments: tuple[inspect.Parameter, ...] = ()

    @property
    def description(self) -> str:
        return inspect.cleandoc(self.answer.__doc__ or "").split("\n\nRaises:")[0]


TASK, TURN = _arg("task_id", TaskRef), _arg("turn", TurnNumber, None)
TOOLS: tuple[Tool, ...] = (
    Tool("status", answers.status, "read"),
    Tool("show", answers.show, "read", (TASK,)),
    Tool("context", answers.context, "read", (TASK, TURN)),
    Tool("criteria", answers.criteria, "read", (TASK,)),
    Tool("turn_reports", answers.turn_reports, "read", (TASK, TURN)),
    Tool("feature", answers.feature, "read",
         (_arg("feature_id", Annotated[str, Field(description="a feature id (FEAT-AUTH) or a plan's .yaml")]),)),
    Tool("search", answers.search, "read", (
        _arg("query", Annotated[str, Field(description="words; a task, feature, criterion or turn named in it is "
                                           "what the query is about; 'last' puts the newest first")]),
        _arg("task", Annotated[str | None, Field(description="only this task's records")], None),
        _arg("feature", Annotated[str | None, Field(description="only this feature's records")], None),
        _arg("decision", Annotated[str | None, Field(description="approved, feedback, rejected or error")], None),
        _arg("since", Annotated[str | None, Field(description="a date, or a span back from now: 24h, 7d")], None),
        _arg("groups", Annotated[list[str] | None, Field(description="turn_states, role_constraints, "
                                                         "quality_gate_configs, implementation_modes")], None),
        _arg("limit", Annotated[int, Field(ge=1, le=100)], 10),
        _arg("backend", Literal["auto", "files", "graphiti"], "auto"))),
    Tool("record_turn", answers.record, "write", (
        TASK, _arg("player", Report, None), _arg("coach", Report, None), _arg("player_file", ReportFile, None),
        _arg("coach_file", ReportFile, None), _arg("mode", Mode | None, None),
        _arg("max_turns", Annotated[int | None, Field(ge=1, description="raise the turn budget")], None),
        _arg("reopen", Annotated[bool, Field(description="record on a completed or approved task")], False))),
    Tool("claim_next_task", answers.claim_next_task, "claim", (
        _arg("feature_id", FeatureRef), _arg("remote", RemoteName),
        _arg("worker", Annotated[str | None, Field(description="your worker id (default: a new one, answered)")],
             None),
        _arg("lease_seconds", Annotated[float | None, Field(gt=0, description="how long the claim holds (default "
                                                            "1800, at most 86400: a day)")], None))),
    Tool("release_claim", answers.release_claim, "claim", (
        _arg("feature_id", FeatureRef), TASK, _arg("remote", RemoteName),
        _arg("worker", Annotated[str, Field(description="the worker id claim_next_task answered")]))),
    Tool("release_quarantined_task", answers.release_quarantined_task, "claim",
         (_arg("feature_id", FeatureRef), TASK, _arg("remote", RemoteName))),
)


def _tool_function(tool: Tool, root: Path, writing: threading.Lock) -> Callable[..., Any]:
    """What the SDK calls for ``tool``. A read is one read command: ``tasks/`` listed, and each plan
    looked at, once for the call (never across calls: the next call sees every file changed since),
    the read caches saved when it ends (:func:`~guardkit_state.taskfile.discovery.listing_scope`). A
    record waits for ``writing``. A library error is answered as a tool error (``is_error``) whose
    text is the CLI's one line and whose structured content is the CLI's ``--json`` error; anything
    else is the CLI's "unexpected" line, its traceback logged on stderr. (A ToolError raised instead
    would reach the agent behind the SDK's "Error executing tool NAME: " prefix.)"""
    # A read's answer is made into the tool's result here (its JSON text compact: the same JSON in fewer
    # bytes and an agent's tokens, the answer as the structured content), once per answer: an answer
    # kept unchanged (answers._kept) is sent again without being serialised and checked again, which
    # for `status` (~190 KB) was most of a call.
    last: list[tuple[object, CallToolResult]] = []

    def call(**arguments: Any) -> Any:
        scope: contextlib.AbstractContextManager[Any] = listing_scope() if tool.access == "read" \
            else writing if tool.access == "write" else contextlib.nullcontext()
        try:
            with scope:
                answer = tool.answer(root, **arguments)
            if tool.access != "read":
                return answer
            if last and last[0][0] is answer:
                return last[0][1]
            result = CallToolResult(content=[TextContent(type="text", text=pydantic_core.to_json(
                answer, fallback=str).decode())], structured_content=answer)
            last[:] = [(answer, result)]
            return result
        except GuardkitStateError as exc:
            return _error_result(answers.error_line(exc), exc.to_dict())
        except Exception as exc:
            log.exception("tool %s failed", tool.name)
            return _error_result(answers.error_line(f"unexpected {type(exc).__name__}: {exc}"), None)

    call.__name__ = tool.name  # the SDK names the argument and result schemas after it
    call.__signature__ = inspect.Signature(list(tool.arguments),  # type: ignore[attr-defined]
                                           return_annotation=dict[str, Any])
    return call


def _error_result(line: str, detail: dict[str, object] | None) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=line)], structured_content=detail, is_error=True)


def build_server(repo: Path, *, read_only: bool = False) -> MCPServer[Any]:
    """The server for the repository at ``repo``: every tool of :data:`TOOLS`, only the read tools
    when ``read_only``."""
    root = Path(repo).resolve()
    # The server answers the same questions again and again: it watches what they are read from,
    # and answers again from what it read while nothing there changed (answers._kept).
    watch_reads(root)
    server: MCPServer[Any] = MCPServer("guardkit-state", version=__version__, instructions=INSTRUCTIONS,
                                       log_level="WARNING")
    # The SDK runs each call in a worker thread: two records at once would meet at the task's lock,
    # and the second be refused as "locked by another run". One at a time, the second is answered
    # as the CLI answers it after the first: the next turn, or "already recorded".
    writing = threading.Lock()
    for tool in TOOLS:
        if tool.access == "read" or not read_only:
            server.add_tool(_tool_function(tool, root, writing), name=tool.name, description=tool.description,
                            annotations=ANNOTATIONS[tool.access], structured_output=True)

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


__all__ = ["INSTRUCTIONS", "TOOLS", "Tool", "build_server", "serve"]
