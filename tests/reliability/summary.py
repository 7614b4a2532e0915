"""Add up the figures the reliability tests recorded: ``python -m tests.reliability.summary``."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from .conftest import SUMMARY_DIR

SUMMED = ("kills", "random_kills", "runs", "resumes", "completed_loops", "checks", "fuzz_examples",
          "hostile_cases", "writers", "turns_recorded", "turns_lost", "edits_made", "edits_lost",
          "faults", "lock_refusals",
          # the remote chaos campaign (test_remote_chaos.py)
          "worker_starts", "claims_attempted", "claims_won", "takeovers", "takebacks", "releases", "player_runs",
          "player_runs_again", "duplicates", "lost_turns")


def collect(directory: Path = SUMMARY_DIR) -> dict[str, object]:
    totals: Counter[str] = Counter()
    by_point: Counter[str] = Counter()
    files = sorted(directory.glob("*.json"))
    for path in files:
        data = json.loads(path.read_text())
        for key in SUMMED:
            if isinstance(data.get(key), int):
                totals[key] += data[key]
        by_point.update(data.get("kills_by_point") or {})
    return {"tests": len(files), **dict(sorted(totals.items())), "kills_by_point": dict(sorted(by_point.items()))}


def main() -> int:
    directory = Path(sys.argv[1]) if len(sys.argv) > 1 else SUMMARY_DIR
    print(json.dumps(collect(directory), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
