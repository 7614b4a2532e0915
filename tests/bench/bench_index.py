"""Benchmark: the Graphiti index on embedded FalkorDB, next to the file scan (the floor).

``run()`` writes 200 turn states (20 tasks x 10 turns over 4 features) in a temp repository and
reports, in milliseconds:

* ``import_graphiti_ms``: importing graphiti-core in a fresh interpreter (why it is lazy),
  next to ``import_cli_ms`` (the CLI parser alone);
* ``server_start_ms``: starting the embedded redis-server + FalkorDB;
* ``sync_200_ms``: indexing the 200 turn states (episodes, entities, facts, hashing embeddings);
* ``resync_200_ms``: a second sync that finds nothing to do (hash comparison only);
* ``search_ms`` / ``files_search_ms``: one content query (``failing test in module 7``, answered by
  text and vector search) on each backend, median of 5;
* ``lookup_ms`` / ``files_lookup_ms``: one identifier lookup (``turn TASK-B-007``, resolved from
  the identifier, never reaching text or vector search) on each backend, median of 5;
* ``group_filter_correct``: the lookup returned exactly that task's 10 turns.

With ``kuzu`` importable it also measures Kuzu (the rejected embedded alternative) indexing the
same 200 episodes and answering the same search with a group filter, to keep the choice honest.

Then the labelled query set and the 10,000-turn case (:mod:`.bench_index_queries`): precision@5
and latency of the file scan and the index side by side, printed as a table and returned under
``queryset`` and ``scale`` (``--quick``: ~1,100 turns instead of ~10,000).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TASKS = 20
TURNS = 10
QUERY = "turn TASK-B-007"  # an identifier lookup
CONTENT_QUERY = "failing test in module 7"  # content words: text and vector search


def _write_project(root: Path) -> None:
    for t in range(TASKS):
        task = f"TASK-B-{t:03d}"
        directory = root / ".guardkit" / "autobuild" / task
        directory.mkdir(parents=True)
        for n in range(1, TURNS + 1):
            data = {"id": f"TURN-FEAT-{t % 4}-{task}-T{n}", "feature_id": f"FEAT-{t % 4}", "task_id": task,
                    "turn_number": n, "mode": "continuing_work", "player_summary": f"Attempt {n} on {task}",
                    "player_decision": "implemented", "coach_decision": "approved" if n == TURNS else "feedback",
                    "coach_feedback": None if n == TURNS else f"Fix failing test {n} in module {t}",
                    "blockers_found": ["flaky CI"] if n % 3 == 0 else [],
                    "acceptance_criteria_status": {"AC-001: works": "completed"},
                    "files_modified": [f"src/m{t}.py"], "completed_at": f"2026-01-01T{t:02d}:{n:02d}:00"}
            (directory / f"turn_state_turn_{n}.json").write_text(json.dumps(data))


def _import_ms(statement: str) -> float:
    code = f"import time; t = time.perf_counter(); {statement}; print((time.perf_counter() - t) * 1000)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"GRAPHITI_TELEMETRY_ENABLED": "false", "PATH": "/usr/bin:/bin"})
    return float(out.stdout.strip())


def _median_ms(fn: Any, repeat: int = 5) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(samples), 2)


def run() -> dict[str, Any]:
    from guardkit_state.index import FileIndex, open_graphiti

    result: dict[str, Any] = {
        "import_graphiti_ms": round(_import_ms("import graphiti_core"), 1),
        "import_cli_ms": round(_import_ms("from guardkit_state.cli.app import build_parser; build_parser()"), 1),
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "bench"
        _write_project(root)
        start = time.perf_counter()
        with open_graphiti(root) as index:
            result["server_start_ms"] = round((time.perf_counter() - start) * 1000, 1)
            start = time.perf_counter()
            report = index.sync()
            result["sync_200_ms"] = round((time.perf_counter() - start) * 1000, 1)
            result["indexed"] = len(report.added)
            start = time.perf_counter()
            index.sync()
            result["resync_200_ms"] = round((time.perf_counter() - start) * 1000, 1)
            hits: list[Any] = []
            result["lookup_ms"] = _median_ms(lambda: hits.__setitem__(slice(None), index.search(QUERY)))
            result["group_filter_correct"] = sorted(h.turn_number for h in hits) == list(range(1, TURNS + 1))
            content: list[Any] = []
            result["search_ms"] = _median_ms(lambda: content.__setitem__(slice(None), index.search(CONTENT_QUERY)))
            result["content_hits"] = len(content)
        files = FileIndex(root)
        result["files_lookup_ms"] = _median_ms(lambda: files.search(QUERY))
        result["files_search_ms"] = _median_ms(lambda: files.search(CONTENT_QUERY))
        result["search_ratio_vs_files"] = round(result["search_ms"] / max(result["files_search_ms"], 1e-6), 2)
        result["lookup_ratio_vs_files"] = round(result["lookup_ms"] / max(result["files_lookup_ms"], 1e-6), 2)
        result["kuzu"] = _kuzu(root)
    from . import bench_index_queries

    result.update(bench_index_queries.run(quick="--quick" in sys.argv))
    return result


def _kuzu(root: Path) -> dict[str, Any]:
    """The same 200 episodes in Kuzu (if installed): index time, search time, group filtering."""
    try:
        import kuzu  # noqa: F401
    except ImportError:
        return {"skipped": "kuzu not installed"}
    import asyncio

    from graphiti_core.driver.kuzu_driver import KuzuDriver
    from graphiti_core.nodes import EpisodeType, EpisodicNode
    from graphiti_core.utils.datetime_utils import utc_now

    from guardkit_state.index.records import TURN_STATES
    from guardkit_state.index.sources import load_project_records

    records = [r for r in load_project_records(root).records if r.kind == TURN_STATES]

    async def main() -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as tmp:
            driver = KuzuDriver(db=str(Path(tmp) / "kuzu.db"))
            group = records[0].group_id
            driver._database = group  # add_episode* and saves need it set (FINDINGS)
            await driver.build_indices_and_constraints()
            for stmt in ("CALL CREATE_FTS_INDEX('Episodic', 'episode_content', ['content', 'source', "
                         "'source_description']);",):
                try:
                    await driver.execute_query(stmt)
                except Exception as exc:
                    return {"error": f"fulltext index: {exc}"}
            now = utc_now()
            start = time.perf_counter()
            for r in records:
                await EpisodicNode(uuid=r.uuid, name=r.name, group_id=r.group_id, source=EpisodeType.json,
                                   source_description="bench", content=r.content, valid_at=now,
                                   created_at=now).save(driver)
            index_ms = (time.perf_counter() - start) * 1000
            from graphiti_core.search.search_filters import SearchFilters
            from graphiti_core.search.search_utils import episode_fulltext_search

            start = time.perf_counter()
            found = await episode_fulltext_search(driver, QUERY, SearchFilters(), [group], limit=10)
            search_ms = (time.perf_counter() - start) * 1000
            wanted = {r.uuid for r in records if r.task_id == "TASK-B-007"}
            return {"index_200_ms": round(index_ms, 1), "search_ms": round(search_ms, 2),
                    "hits_of_the_task": len(wanted & {e.uuid for e in found}), "of": len(wanted)}

    try:
        return asyncio.run(main())
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
