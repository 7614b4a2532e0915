"""Run every benchmark, print one table, write the results as JSON (``make bench``).

Usage::

    python -m tests.bench                      # full sizes, bench-results.json
    python -m tests.bench --quick --out x.json # tiny sizes (the smoke test)
    python -m tests.bench --only record,resume --repeat 25
    python -m tests.bench --only record        # just recording turns (with and without promises)
    python -m tests.bench --only feature       # feature-build: parallel tasks, orchestration overhead
    python -m tests.bench --only remote        # feature-build --remote: 3 workers vs 1, claim/push per turn
    python -m tests.bench --only agents        # a loop with agent presets beside plain scripted agents
    python -m tests.bench --only mcp --repeat 10  # a warm MCP tool call beside the CLI
    python -m tests.bench --only reads         # show/context/log/status/validate/search beside --help

Every number is a median over repeated runs after warm-up; ratios are against the floor (the same
bytes written or read the cheapest durable way) and against LangGraph's SqliteSaver when installed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import bench_status, bench_turns
from .common import machine
from .report import render_table

CASES = ("record", "resume", "storage", "status", "startup", "reads", "git", "index", "feature", "remote", "mcp",
         "agents", "first_hour")


def _corpus() -> Path | None:
    """The GuardKit corpus beside the repository (``../shared/corpus/guardkit``), if present."""
    env = os.environ.get("GUARDKIT_CORPUS")
    candidates = [Path(env)] if env else []
    here = Path(__file__).resolve().parents[2]
    candidates += [here.parent / "shared" / "corpus" / "guardkit", here / "shared" / "corpus" / "guardkit"]
    return next((c for c in candidates if (c / "tasks").is_dir()), None)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("bench-results.json"), help="JSON results file")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks the runner, not the speed")
    parser.add_argument("--only", default=",".join(CASES), help=f"comma-separated cases from {','.join(CASES)}")
    parser.add_argument("--repeat", type=int, default=None, help="timed repetitions per case (after warm-up)")
    parser.add_argument("--status-files", type=int, default=None, help="task files for the status case")
    parser.add_argument("--no-langgraph", action="store_true", help="leave out the LangGraph columns")
    args = parser.parse_args(argv)
    unknown = set(args.only.split(",")) - set(CASES)
    if unknown:
        parser.error(f"unknown case(s): {', '.join(sorted(unknown))}")
    return args


def _compile_package() -> None:
    """Write the package's bytecode, as installing it does: with ``PYTHONDONTWRITEBYTECODE`` set
    (or a fresh clone installed editable), every process of the CLI cases would compile each module
    it imports from source, a cost no installed copy pays and one that grows with the modules a
    command imports (so it would tilt the feature case's overhead)."""
    import compileall

    compileall.compile_dir(str(Path(__file__).resolve().parents[2] / "guardkit_state"), quiet=1)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    _compile_package()
    only = set(args.only.split(","))
    quick = args.quick
    repeat = args.repeat or (3 if quick else 25)
    results: dict[str, Any] = {"machine": machine(), "quick": quick, "repeat": repeat, "cases": {}, "notes": []}
    corpus = _corpus()

    def case(name: str, fn: Callable[[], Any]) -> None:
        if name not in only and name != "turns":
            return
        print(f"  running {name} ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        try:
            results["cases"][name] = fn()
        except Exception as exc:
            results["cases"][name] = {"error": f"{type(exc).__name__}: {exc}"}
            traceback.print_exc()
        results.setdefault("seconds", {})[name] = round(time.perf_counter() - start, 1)

    if only & {"record", "resume", "storage"}:
        turns_result: dict[str, Any] = {}

        def turns() -> dict[str, Any]:
            turns_result.update(bench_turns.run(
                record_at=((1, 10) if quick else bench_turns.RECORD_AT) if "record" in only else (),
                resume_at=((1, 3) if quick else bench_turns.RESUME_AT) if "resume" in only else (),
                storage_at=(5 if quick else bench_turns.STORAGE_AT) if "storage" in only else None,
                repeat=repeat, langgraph=not args.no_langgraph))
            return turns_result

        case("turns", turns)
        got = results["cases"].pop("turns")
        for name in ("record", "resume", "storage"):
            if name in only:
                results["cases"][name] = got.get(name) if "error" not in got else got
        if "record" in only and "error" not in got:
            results["cases"]["record_no_promises"] = got.get("record_no_promises")
            results["cases"]["record_turn"] = got.get("record_turn")
        if got.get("langgraph") and got["langgraph"] != "langgraph-checkpoint-sqlite":
            results["notes"].append(f"LangGraph columns skipped: {got['langgraph']}")
    case("status", lambda: bench_status.run_status(
        files=args.status_files or (200 if quick else bench_status.DEFAULT_FILES),
        repeat=2 if quick else 5, corpus=corpus))
    case("startup", lambda: bench_status.run_startup(repeat=2 if quick else 15))
    case("reads", lambda: bench_status.run_reads(corpus=corpus, files=args.status_files or (400 if quick else
                                                 bench_status.GUARDKIT_FILES), repeat=2 if quick else 15))
    case("git", lambda: _git(3 if quick else 20))
    case("index", lambda: _index(results["notes"]))
    case("feature", lambda: _feature(quick))
    case("remote", lambda: _remote(quick))
    case("agents", lambda: _agents(quick))
    case("mcp", lambda: _mcp(repeat, args.status_files or (200 if quick else None), corpus))
    case("first_hour", lambda: _first_hour(quick, corpus))

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(render_table(results))
    print(f"\nresults written to {args.out}")
    return 0


def _first_hour(quick: bool, corpus: Path | None) -> dict[str, Any]:
    from . import bench_first_hour

    files = 200 if quick else bench_first_hour.GUARDKIT_FILES
    return bench_first_hour.run_all(files=files, repeat=1 if quick else 3, corpus=corpus)


def _git(repeat: int) -> dict[str, Any]:
    from . import bench_git

    return bench_git.run(repeat)


def _agents(quick: bool) -> dict[str, Any]:
    from . import bench_agents

    return bench_agents.run(repeat=1 if quick else 9)


def _feature(quick: bool) -> dict[str, Any]:
    from . import bench_feature

    return bench_feature.run(quick=quick)


def _remote(quick: bool) -> dict[str, Any]:
    from . import bench_remote

    return bench_remote.run(quick=quick)


def _mcp(repeat: int, files: int | None, corpus: Path | None) -> dict[str, Any]:
    from . import bench_mcp

    return bench_mcp.run(files=files or bench_mcp.GUARDKIT_FILES, repeat=repeat, corpus=corpus)


def _index(notes: list[str]) -> dict[str, Any]:
    """The Graphiti index benchmark when graphiti-core and its embedded backend are installed."""
    try:
        import graphiti_core  # noqa: F401

        from . import bench_index
    except ImportError as exc:
        notes.append(f"Graphiti index skipped: {exc} (pip install 'guardkit-state[graphiti]')")
        return {"skipped": str(exc)}
    if not hasattr(bench_index, "run"):
        notes.append("Graphiti index skipped: tests/bench/bench_index.py has no run() yet")
        return {"skipped": "bench_index.run() missing"}
    return bench_index.run()


if __name__ == "__main__":
    sys.exit(main())
