"""Benchmark: the demo's 2-turn loop with an index (idle, and busy) against the same loop without one.

The project and the scripted Player and Coach of ``examples/`` (``make demo``), run straight
through (no interruption): turn 1 is rejected, turn 2 approved. Each repetition builds three fresh
copies: one without an index, one with an embedded index synced before the loop, and one whose
index this process holds open for the whole loop (busy: as when a sync or another indexer runs, so
the hook's indexer must wait). ``guardkit-state feature-build`` is timed on each, in an order that
rotates from one repetition to the next (plain, indexed, busy; then indexed, busy, plain; ...), so
no side always runs first. After an indexed run the background indexer the hook started is waited
for (outside the timing) so it cannot slow the next run. The budget: with an index <= 1.1x without.
(The busy case was a wall-clock limit inside ``tests/test_index_loop.py``; it is measured here.)

    python -m tests.bench.bench_index_loop [--repeat N]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TASK_ID = "TASK-DEMO-001"


def _demo_module() -> Any:
    spec = importlib.util.spec_from_file_location("run_demo", EXAMPLES / "run_demo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _loop_seconds(project: Path, demo: Any) -> float:
    player = f"{shlex.quote(sys.executable)} {shlex.quote(str(EXAMPLES / 'agents' / 'player.py'))}"
    coach = f"{shlex.quote(sys.executable)} {shlex.quote(str(EXAMPLES / 'agents' / 'coach.py'))}"
    argv = [*demo.guardkit_state(), "feature-build", TASK_ID, "--player", player, "--coach", coach,
            "--max-turns", "5"]
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=project, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"the demo loop exited {done.returncode}: {done.stderr[-500:]}")
    return elapsed


def _wait_background(project: Path, timeout: float = 120.0) -> None:
    """Wait until no background indexer holds the index (so it cannot slow the next run)."""
    from guardkit_state.errors import LockedError
    from guardkit_state.index.after_turn import BACKGROUND_LOCK
    from guardkit_state.store.layout import index_dir
    from guardkit_state.store.locks import exclusive_lock

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(LockedError):
            with exclusive_lock(index_dir(project) / BACKGROUND_LOCK, wait=0.0):
                with exclusive_lock(index_dir(project) / "index.lock", wait=0.0):
                    return
        time.sleep(0.2)


def run(repeat: int = 5) -> dict[str, Any]:
    """Medians of ``repeat`` timed loops without an index, with an idle one and with a busy one, and ratios."""
    from guardkit_state.index import open_graphiti, search, update_graphiti

    demo = _demo_module()
    runs: dict[str, list[float]] = {"plain": [], "indexed": [], "busy": []}
    orders: list[str] = []
    caught_up = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeat):
            order = list(runs)[i % 3:] + list(runs)[:i % 3]
            orders.append(",".join(order))
            for side in order:
                project = demo.make_project(Path(tmp) / f"{side}{i}")
                if side == "plain":
                    runs[side].append(_loop_seconds(project, demo))
                    continue
                update_graphiti(project, "sync")
                if side == "busy":
                    with open_graphiti(project):  # held for the whole loop: the hook's indexer waits
                        runs[side].append(_loop_seconds(project, demo))
                else:
                    runs[side].append(_loop_seconds(project, demo))
                _wait_background(project)
                caught_up += search(project, f"turn {TASK_ID}").backend == "graphiti"
    median = {side: round(statistics.median(times), 3) for side, times in runs.items()}
    result = {"repeat": repeat, "orders": orders, "without_index_s": median["plain"],
              "with_index_s": median["indexed"], "busy_index_s": median["busy"],
              "runs_without": [round(x, 3) for x in runs["plain"]], "runs_with": [round(x, 3) for x in runs["indexed"]],
              "runs_busy": [round(x, 3) for x in runs["busy"]], "index_caught_up": f"{caught_up}/{2 * repeat}"}
    result["ratio"] = round(median["indexed"] / median["plain"], 3)
    result["busy_ratio"] = round(median["busy"] / median["plain"], 3)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    print(json.dumps(run(parser.parse_args().repeat), indent=2))
