"""Benchmark: the demo's 2-turn loop with an index against the same loop without one.

The project and the scripted Player and Coach of ``examples/`` (``make demo``), run straight
through (no interruption): turn 1 is rejected, turn 2 approved. Each repetition builds two fresh
copies, one with an embedded index synced before the loop; ``guardkit-state feature-build`` is timed
on both, alternately. After an indexed run the background indexer the hook started is waited for
(outside the timing) so it cannot slow the next run. The budget: with an index <= 1.1x without.

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
    """Medians of ``repeat`` timed loops with and without an index, and their ratio."""
    from guardkit_state.index import search, update_graphiti

    demo = _demo_module()
    plain: list[float] = []
    indexed: list[float] = []
    caught_up = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeat):
            without = demo.make_project(Path(tmp) / f"plain{i}")
            with_index = demo.make_project(Path(tmp) / f"indexed{i}")
            update_graphiti(with_index, "sync")
            plain.append(_loop_seconds(without, demo))
            indexed.append(_loop_seconds(with_index, demo))
            _wait_background(with_index)
            caught_up += search(with_index, f"turn {TASK_ID}").backend == "graphiti"
    result = {"repeat": repeat, "without_index_s": round(statistics.median(plain), 3),
              "with_index_s": round(statistics.median(indexed), 3), "runs_without": [round(x, 3) for x in plain],
              "runs_with": [round(x, 3) for x in indexed], "index_caught_up": f"{caught_up}/{repeat}"}
    result["ratio"] = round(result["with_index_s"] / result["without_index_s"], 3)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    print(json.dumps(run(parser.parse_args().repeat), indent=2))
