"""Scripted Coach for the feature-build tests: approves a task at its turn ``approve_at``.

``approve_at`` comes from the task's entry in the ``FEATURE_SPEC`` JSON file (default 1; 0 never
approves). Feedback names the turn, so every turn's decision is the same in every run.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main() -> int:
    task_id = os.environ["GUARDKIT_TASK_ID"]
    turn = int(os.environ["GUARDKIT_TURN"])
    path = os.environ.get("FEATURE_SPEC")
    spec = json.loads(Path(path).read_text(encoding="utf-8")).get(task_id, {}) if path else {}
    approve_at = int(spec.get("approve_at", 1))
    approve = approve_at > 0 and turn >= approve_at
    feedback = None if approve else f"{task_id}: turn {turn} is not finished yet"
    decision = {
        "task_id": task_id, "turn": turn, "decision": "approve" if approve else "feedback",
        "issues": [] if approve else [{"severity": "must_fix", "category": "correctness", "description": feedback}],
        "criteria_verification": [{"criterion_id": "AC-001", "result": "verified" if approve else "rejected",
                                   "notes": f"turn {turn}"}],
        "validation_results": {"tests_passed_count": 3, "tests_failed_count": 0, "coverage": 90.0},
        "rationale": feedback or "Done.",
    }
    if feedback:
        decision["feedback"] = feedback
    Path(os.environ["GUARDKIT_REPORT_FILE"]).write_text(json.dumps(decision), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
