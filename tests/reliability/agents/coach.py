"""Fast scripted Coach for the reliability harness: a fixed decision sequence by turn.

Turn 1 verifies AC-001 (feedback), turn 2 verifies AC-002 and rejects AC-003 (feedback), turn 3
is silent about criteria (feedback), and the turn named by ``RELIABILITY_APPROVE_AT`` (default 4)
verifies everything and approves. Deterministic, so a resumed loop must match a clean run.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

VERDICTS = {1: {"AC-001": "verified"}, 2: {"AC-002": "verified", "AC-003": "rejected"}, 3: {}}


def main() -> int:
    turn = int(os.environ["GUARDKIT_TURN"])
    approve_at = int(os.environ.get("RELIABILITY_APPROVE_AT", "4"))
    approve = turn >= approve_at
    verdicts = {f"AC-00{i}": "verified" for i in (1, 2, 3)} if approve else VERDICTS.get(turn, {})
    feedback = None if approve else f"Turn {turn}: criterion AC-003 still fails (case {turn % 3})"
    decision = {
        "task_id": os.environ["GUARDKIT_TASK_ID"], "turn": turn, "decision": "approve" if approve else "feedback",
        "issues": [] if approve else [{"severity": "must_fix", "category": "correctness", "description": feedback}],
        "criteria_verification": [{"criterion_id": cid, "result": result, "notes": f"turn {turn}"}
                                  for cid, result in verdicts.items()],
        "validation_results": {"tests_passed_count": 10 + turn, "tests_failed_count": 0, "coverage": 95.0,
                               "arch_score": 90},
        "rationale": feedback or "All criteria verified.",
    }
    if feedback:
        decision["feedback"] = feedback
    Path(os.environ["GUARDKIT_REPORT_FILE"]).write_text(json.dumps(decision), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
