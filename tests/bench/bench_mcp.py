"""Benchmark: a warm MCP tool call (``show``, ``context``) beside the same answer through the CLI.

The repository has GuardKit's size (3,300 task files sampled from the corpus as the status case
samples them; generated without it) and one task with recorded turns. The server is started once
(``guardkit-state mcp``) and driven by the SDK's client over stdio; after warm-up calls each timed
call is a full round trip (JSON-RPC over the pipes, the answer read from the files). The CLI column
is ``guardkit-state show|context TASK --json``, a process per answer, as a script pays it.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from guardkit_state.turns.lifecycle import record_turn

from .bench_status import _env, _run, make_repo
from .common import TASK_ID, cli_command, coach_decision, make_task_repo, median_ms, player_report, ratio

#: GuardKit's own repository holds about this many task files.
GUARDKIT_FILES = 3_300
TURNS = 5


def run(*, files: int = GUARDKIT_FILES, repeat: int = 25, corpus: Path | None = None) -> dict[str, Any]:
    """Warm ``show`` and ``context`` through the server and through the CLI; medians in ms."""
    import anyio

    cli = cli_command()
    env = _env()
    with tempfile.TemporaryDirectory(prefix="gks-bench-mcp-") as tmp:
        root = Path(tmp)
        made = make_repo(root, files, corpus)
        make_task_repo(root)
        for turn in range(1, TURNS + 1):
            record_turn(root, TASK_ID, player_report(turn), coach_decision(turn), max_turns=50)
        served = anyio.run(_served, root, repeat)
        through_cli: dict[str, list[float]] = {"show": [], "context": []}
        for name in through_cli:
            argv = [*cli, name, TASK_ID, "--json", "--repo", str(root)]
            _run(argv, root, env)  # warm-up
            for _ in range(max(3, repeat // 5)):
                through_cli[name].append(_run(argv, root, env)[0])
    row: dict[str, Any] = {"files": made["files"], "source": made["source"], "turns": TURNS,
                           "mcp_show_ms": median_ms(served["show"]), "mcp_context_ms": median_ms(served["context"]),
                           "cli_show_ms": median_ms(through_cli["show"]),
                           "cli_context_ms": median_ms(through_cli["context"])}
    row["cli/mcp show"] = ratio(row["cli_show_ms"], row["mcp_show_ms"])
    row["cli/mcp context"] = ratio(row["cli_context_ms"], row["mcp_context_ms"])
    return row


async def _served(root: Path, repeat: int) -> dict[str, list[float]]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "guardkit_state", "mcp", "--repo", str(root)],
                                   cwd=str(root))
    samples: dict[str, list[float]] = {"show": [], "context": []}
    async with Client(params) as client:
        for _ in range(3):  # warm-up: the server's modules loaded, the files in the page cache
            for name in samples:
                await client.call_tool(name, {"task_id": TASK_ID})
        for _ in range(repeat):
            for name in samples:
                start = time.perf_counter()
                result = await client.call_tool(name, {"task_id": TASK_ID})
                samples[name].append((time.perf_counter() - start) * 1000.0)
                if result.is_error:
                    raise RuntimeError(f"{name}: {result.content}")
    return samples
