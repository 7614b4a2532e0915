"""Benchmark: the labelled query set, file scan against the Graphiti index — precision@5 and latency.

``run()`` generates the repository of :mod:`.index_queryset` (24 tasks, ~115 turns, 5 features),
asks its 47 questions of both backends and reports, per kind of question and overall:

* **P@5**: the answer's records among the first five / min(5, records expected), averaged;
* **latency**: the median search time in milliseconds (the file scan reads every file per
  query; the index is warm: its server is running, as in any command after it started).

Then the scale case: a repository of ~10,000 turns (``--quick``: ~1,100), every task in progress
so retention keeps them all in the index; the same five queries on both sides (warm index searches,
median of 7, against file scans, one each), reported apart: the three content queries (text and
vector search) and the two identifier lookups (which never reach text or vector search).
Printed as a Markdown table; the numbers go into the bench results as ``index.queryset``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .index_queryset import Question, generate, questions

CONTENT_QUERIES = ("flaky tests", "latency too high", "waiting for the payments api contract")
IDENTIFIER_QUERIES = ("turn 3 of TASK-PAY-042", "last turn of TASK-OPS-055")
SCALE_QUERIES = CONTENT_QUERIES + IDENTIFIER_QUERIES


def precision_at_5(hits: list[Any], expected: frozenset[str]) -> float:
    found = sum(1 for hit in hits[:5] if hit.key in expected)
    return found / min(5, len(expected))


def _timed(fn: Callable[[], Any], repeat: int) -> tuple[Any, float]:
    samples, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        samples.append((time.perf_counter() - started) * 1000)
    return result, statistics.median(samples)


def _ask(question: Question, search: Callable[..., list[Any]], repeat: int) -> tuple[float, float]:
    from guardkit_state.index import make_filters

    filters = make_filters(**dict(question.filters))
    hits, ms = _timed(lambda: search(question.text, limit=10, filters=filters), repeat)
    return precision_at_5(hits, question.expected), ms


def run_queryset(root: Path, *, repeat: int = 3) -> dict[str, Any]:
    """Both backends over the labelled questions: P@5 and median latency, per kind and overall."""
    from guardkit_state.index import FileIndex, open_graphiti

    repo = generate(root)
    asked = questions(repo)
    files = FileIndex(root)
    rows: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    with open_graphiti(root) as index:
        index.sync()
        index.search("warm up")
        for question in asked:
            for name, search in (("files", files.search), ("index", index.search)):
                p5, ms = _ask(question, search, repeat)
                for kind in (question.kind, "all"):
                    rows[kind][f"{name}_p5"].append(p5)
                    rows[kind][f"{name}_ms"].append(ms)
    table = {kind: {"questions": len(v["files_p5"]),
                    **{k: round(statistics.mean(x) if k.endswith("p5") else statistics.median(x), 3)
                       for k, x in v.items()}}
             for kind, v in rows.items()}
    return {"tasks": len(repo.tasks), "turns": len(repo.turns), "questions": len(asked), "by_kind": table}


def run_scale(root: Path, *, quick: bool) -> dict[str, Any]:
    """Warm index searches against the file scan on a large repository (every turn indexed)."""
    from guardkit_state.index import FileIndex, open_graphiti

    repo = generate(root, turns_scale=10 if quick else 88, in_progress=True)
    started = time.perf_counter()
    with open_graphiti(root) as index:
        report = index.sync()
        sync_s = time.perf_counter() - started
        index.search("warm up")
        index_ms = {q: round(_timed(lambda q=q: index.search(q), 7)[1], 1) for q in SCALE_QUERIES}
    files = FileIndex(root)
    files_ms = {q: round(_timed(lambda q=q: files.search(q), 1)[1], 1) for q in SCALE_QUERIES}

    def median(times: dict[str, float], queries: tuple[str, ...]) -> float:
        return round(statistics.median(times[q] for q in queries), 1)

    return {"turns": len(repo.turns), "indexed": len(report.added), "sync_s": round(sync_s, 1),
            "index_ms": index_ms, "files_ms": files_ms, "index_max_ms": max(index_ms.values()),
            "index_content_median_ms": median(index_ms, CONTENT_QUERIES),
            "files_content_median_ms": median(files_ms, CONTENT_QUERIES),
            "index_identifier_median_ms": median(index_ms, IDENTIFIER_QUERIES),
            "files_identifier_median_ms": median(files_ms, IDENTIFIER_QUERIES)}


def render(result: dict[str, Any]) -> str:
    """The Markdown tables (docs/performance.md's index section quotes them)."""
    qs = result["queryset"]
    lines = [f"Labelled query set: {qs['questions']} questions over {qs['tasks']} tasks and {qs['turns']} turns "
             "(P@5 = answer records in the first five / min(5, expected); latency = median ms).", "",
             "| questions | n | file scan P@5 | index P@5 | file scan ms | index ms (warm) |",
             "|---|---|---|---|---|---|"]
    for kind in ("identifier", "recency", "filtered", "task", "feature", "theme", "all"):
        row = qs["by_kind"].get(kind)
        if row:
            lines.append(f"| {kind} | {row['questions']} | {row['files_p5']:.2f} | {row['index_p5']:.2f} | "
                         f"{row['files_ms']:.1f} | {row['index_ms']:.1f} |")
    scale = result.get("scale")
    if scale:
        lines += ["", f"At {scale['turns']:,} turns ({scale['indexed']:,} records indexed in {scale['sync_s']} s), "
                  f"the same queries on both sides: {len(CONTENT_QUERIES)} content queries, warm index median "
                  f"{scale['index_content_median_ms']} ms against file scan median "
                  f"{scale['files_content_median_ms']:,} ms; {len(IDENTIFIER_QUERIES)} identifier lookups, "
                  f"index {scale['index_identifier_median_ms']} ms against scan "
                  f"{scale['files_identifier_median_ms']:,} ms (index max {scale['index_max_ms']} ms)."]
    return "\n".join(lines)


def run(*, quick: bool = False) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        result: dict[str, Any] = {"queryset": run_queryset(Path(tmp) / "queryset", repeat=1 if quick else 3)}
        result["scale"] = run_scale(Path(tmp) / "scale", quick=quick)
    print(render(result), file=sys.stdout, flush=True)
    return result


if __name__ == "__main__":
    import json

    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
