"""Benchmark: stall normalisation of megabytes of feedback without whitespace, beside a linear floor.

The shapes that made the normalising patterns backtrack (minutes, quadratic) before they were
bounded: each row times ``stall.feedback_signature`` on 3 MB of one repeated unit, side by side
with a floor that touches every byte once (``str.lower`` plus ``hashlib.sha256`` of the same
text), and gives the ratio; and the same at 1 MB, so a quadratic regression shows as a 9x ratio
growth, not a slower machine. (Moved here from a 2-second limit inside a test.)

    python -m tests.bench.bench_stall [--repeat N]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from guardkit_state.turns import stall

UNITS = ("a/.guardkit/worktrees/", "x.py::", "1", "1.", "ab")


def _median(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def run(repeat: int = 3, megabytes: tuple[int, ...] = (1, 3)) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for unit in UNITS:
        for size in megabytes:
            text = unit * (size * 1_000_000 // len(unit))
            ours = _median(lambda: stall.feedback_signature(text), repeat)
            floor = _median(lambda: hashlib.sha256(text.lower().encode()).digest(), repeat)
            rows[f"{unit!r} x {size} MB"] = {"signature_s": round(ours, 4), "floor_s": round(floor, 4),
                                             "ratio": round(ours / floor, 1)}
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    print(json.dumps(run(parser.parse_args().repeat), indent=2))
