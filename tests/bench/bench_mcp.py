"""Benchmark: every MCP read tool, warm, in the server process, beside the CLI's start-up.

The repository is shaped like GuardKit's (:mod:`.guardkit_repo`: the corpus's 41 plans and task
files, 3,300 task files; the subjects are a task GuardKit ran for 25 turns and its feature).
Without the corpus, the status case's generated mix is used with one task of five recorded turns,
and the result says so. The server is started once (``guardkit-state mcp``) and driven by the SDK's
client over stdio; after warm-up calls each timed call is a full round trip (JSON-RPC over the
pipes, the answer read from the files). Beside them: ``guardkit-state --help`` (what any command
costs to start) and ``show``/``context --json`` through the CLI, a process per answer.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .bench_first_hour import edited_task
from .bench_status import _env, _run, make_repo
from .common import TASK_ID, cli_command, coach_decision, make_task_repo, median_ms, player_report, ratio
from .guardkit_repo import FEATURE_ID, make_guardkit_repo, settle
from .guardkit_repo import TASK_ID as GUARDKIT_TASK

#: GuardKit's own repository holds about this many task files.
GUARDKIT_FILES = 3_300
TURNS = 5
#: Every read tool of the server, in the order the table lists them.
TOOLS = ("status", "show", "context", "criteria", "turn_reports", "feature", "search")
#: The target of every read tool, warm.
TARGET_MS = 20.0
PHRASE = "tests did not pass during task-work execution"


def _arguments(task: str, feature: str | None) -> dict[str, dict[str, Any]]:
    calls: dict[str, dict[str, Any]] = {"status": {}, "show": {"task_id": task}, "context": {"task_id": task},
                                        "criteria": {"task_id": task}, "turn_reports": {"task_id": task},
                                        "search": {"query": PHRASE, "backend": "files"}}
    if feature is not None:
        calls["feature"] = {"feature_id": feature}
    return calls


def _repository(root: Path, files: int, corpus: Path | None) -> tuple[dict[str, Any], str, str | None]:
    """The repository, the task and the feature the calls ask about."""
    if corpus is not None:
        made = make_guardkit_repo(root, corpus, files=files)
        return made, GUARDKIT_TASK, FEATURE_ID
    from guardkit_state.turns.lifecycle import record_turn

    made = make_repo(root, files, corpus)
    make_task_repo(root)
    for turn in range(1, TURNS + 1):
        record_turn(root, TASK_ID, player_report(turn), coach_decision(turn), max_turns=50)
    return made, TASK_ID, None


def run(*, files: int = GUARDKIT_FILES, repeat: int = 25, corpus: Path | None = None) -> dict[str, Any]:
    """Every read tool, warm, through the server; ``--help`` and the CLI's show/context beside; medians in ms."""
    import anyio

    cli = cli_command()
    env = _env()
    with tempfile.TemporaryDirectory(prefix="gks-bench-mcp-") as tmp:
        root = Path(tmp) / "repo"
        root.mkdir()
        made, task, feature = _repository(root, files, corpus)
        settle(root)  # files changed within the caches' racy window are read again, not kept
        calls = _arguments(task, feature)
        served = anyio.run(_served, root, repeat, calls)
        changed = anyio.run(_search_after_a_change, root, max(3, repeat // 5), calls["search"])
        floor = anyio.run(_floor, root, repeat)
        through_cli: dict[str, list[float]] = {"help": [], "show": [], "context": []}
        for name in through_cli:
            argv = [*cli, "--help"] if name == "help" else [*cli, name, task, "--json", "--repo", str(root)]
            _run(argv, root, env)  # warm-up
            for _ in range(max(3, repeat // 5)):
                through_cli[name].append(_run(argv, root, env)[0])
    row: dict[str, Any] = {"files": made["files"], "source": made["source"], "task": task, "feature": feature,
                           "tools": {name: median_ms(samples) for name, samples in served.items()},
                           "status_floor_ms": median_ms(floor),
                           "help_ms": median_ms(through_cli["help"]),
                           "cli_show_ms": median_ms(through_cli["show"]),
                           "cli_context_ms": median_ms(through_cli["context"])}
    # The columns the earlier table had (show and context beside the CLI), kept for comparison.
    row["mcp_show_ms"], row["mcp_context_ms"] = row["tools"]["show"], row["tools"]["context"]
    row["cli/mcp show"] = ratio(row["cli_show_ms"], row["mcp_show_ms"])
    row["cli/mcp context"] = ratio(row["cli_context_ms"], row["mcp_context_ms"])
    row["turns"] = TURNS if feature is None else None
    row["search_changed_ms"] = median_ms(changed)
    return row


def _server(root: Path) -> Any:
    from mcp.client.stdio import StdioServerParameters

    # The environment the CLI runs get (PYTHONPATH too: a bench of another checkout's code runs it).
    return StdioServerParameters(command=sys.executable, args=["-m", "guardkit_state", "mcp", "--repo", str(root)],
                                 cwd=str(root), env=_env())


async def _search_after_a_change(root: Path, repeat: int, arguments: dict[str, Any]) -> list[float]:
    """``search`` right after a task file changed (as a recorded turn changes its task file): each
    call after an edit of the same task file, in a server that answered before the change."""
    from mcp import Client

    edited = edited_task(root)
    samples: list[float] = []
    async with Client(_server(root)) as client:
        for _ in range(3):
            await client.call_tool("search", arguments)
        for turn in range(repeat):
            edited.write_text(edited.read_text(encoding="utf-8") + f"\nEdited by the bench, {turn}.\n",
                              encoding="utf-8")
            start = time.perf_counter()
            result = await client.call_tool("search", arguments)
            samples.append((time.perf_counter() - start) * 1000.0)
            if result.is_error:
                raise RuntimeError(f"search: {result.content}")
            settle(root)  # the next change starts from a server holding every file as read
            await client.call_tool("search", arguments)
    return samples


async def _served(root: Path, repeat: int, calls: dict[str, dict[str, Any]]) -> dict[str, list[float]]:
    from mcp import Client

    samples: dict[str, list[float]] = {name: [] for name in calls}
    async with Client(_server(root)) as client:
        for _ in range(3):  # warm-up: the server's modules loaded, its caches read, the files in the page cache
            for name, arguments in calls.items():
                await client.call_tool(name, arguments)
        for _ in range(repeat):
            for name, arguments in calls.items():
                start = time.perf_counter()
                result = await client.call_tool(name, arguments)
                samples[name].append((time.perf_counter() - start) * 1000.0)
                if result.is_error:
                    raise RuntimeError(f"{name}: {result.content}")
    return samples


async def _floor(root: Path, repeat: int) -> list[float]:
    """``status``'s answer sent from memory by a bare SDK server (:mod:`.mcp_floor_server`): the
    round trip of an answer that size, the floor of the ``status`` row."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "tests.bench.mcp_floor_server", str(root)],
                                   cwd=str(Path(__file__).resolve().parents[2]))
    samples: list[float] = []
    async with Client(params) as client:
        for _ in range(3):
            await client.call_tool("status", {})
        for _ in range(repeat):
            start = time.perf_counter()
            result = await client.call_tool("status", {})
            samples.append((time.perf_counter() - start) * 1000.0)
            if result.is_error:
                raise RuntimeError(f"floor: {result.content}")
    return samples


def table_rows(case: Any) -> list[tuple[str, ...]]:
    """The rows ``report.render_table`` adds for this case: each read tool, warm, beside ``--help``."""
    if not isinstance(case, dict) or "tools" not in case:
        return []
    shape = "GuardKit-shaped" if case.get("feature") else "generated"
    where = f"{case['files']:,} task files, {shape}"
    rows: list[tuple[str, ...]] = []
    for name, ms in case["tools"].items():
        beside, label, times = f"{case['help_ms']:.0f} ms", "beside: --help start-up", ""
        if name == "status" and case.get("status_floor_ms"):
            floor = case["status_floor_ms"]
            beside, label = f"{floor:.2f} ms", "floor: the same answer sent from memory by a bare SDK server"
            times = f"{ms / floor:.2f}x"
        rows.append((f"MCP {name}, warm tool call in the server ({where}; {label})",
                     f"{ms:.2f} ms" if ms < 100 else f"{ms:.0f} ms", beside, times, "", "",
                     f"<= {TARGET_MS:g} ms", "yes" if ms <= TARGET_MS else "**no**"))
    if case.get("search_changed_ms") is not None:
        ms = case["search_changed_ms"]
        rows.append((f"MCP search, right after one task file changed ({where}; beside: --help start-up)",
                     f"{ms:.2f} ms" if ms < 100 else f"{ms:.0f} ms", f"{case['help_ms']:.0f} ms", "", "", "", "",
                     "-"))
    for name in ("show", "context"):
        rows.append((f"CLI {name} --json, a process per answer ({where}; beside: the MCP call)",
                     f"{case[f'cli_{name}_ms']:.0f} ms", f"{case[f'mcp_{name}_ms']:.2f} ms",
                     f"{case[f'cli/mcp {name}']:.1f}x", "", "", "", "-"))
    return rows
