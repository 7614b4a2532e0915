"""The agents of the remote chaos campaign (stdlib only): ``chaos_agent.py player|coach``.

Every start and end is appended to ``$CHAOS_LOG`` as a JSON line naming the worker incarnation that
ran it (``$CHAOS_INC``), its process group (so a dead machine's agents die with it) and the task
and turn. The Player writes ``src/<TASK>.txt`` whole: one line per turn, the lines of earlier turns
kept as its checkout holds them and its own turn's line saying which incarnation ran it — so the
feature branch tells whose run of each turn was kept. It takes ``$CHAOS_SLEEP`` seconds. The Coach
approves a task at the turn ``approve_at`` of its entry in ``$FEATURE_SPEC``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def _log(role: str, event: str) -> None:
    line = {"event": event, "role": role, "inc": os.environ.get("CHAOS_INC", "?"), "pid": os.getpid(),
            "pgid": os.getpgid(0), "task": os.environ["GUARDKIT_TASK_ID"], "turn": int(os.environ["GUARDKIT_TURN"]),
            "at": time.monotonic()}
    with open(os.environ["CHAOS_LOG"], "a", encoding="utf-8") as handle:
        handle.write(json.dumps(line) + "\n")


def player(task: str, turn: int) -> dict[str, object]:
    target = Path("src") / f"{task}.txt"
    target.parent.mkdir(parents=True, exist_ok=True)
    kept = []
    if target.exists():
        for line in target.read_text(encoding="utf-8").splitlines():
            words = line.split()
            if len(words) >= 3 and words[1] == "turn" and words[2].isdigit() and int(words[2]) < turn:
                kept.append(line)
    kept.append(f"{task} turn {turn} by {os.environ.get('CHAOS_INC', '?')}")
    target.write_text("\n".join(kept) + "\n", encoding="utf-8")
    time.sleep(float(os.environ.get("CHAOS_SLEEP") or 0))
    return {"task_id": task, "turn": turn, "files_modified": [str(target)], "files_created": [], "tests_written": [],
            "tests_run": True, "tests_passed": True, "implementation_notes": f"{task}: turn {turn}", "concerns": [],
            "requirements_addressed": [], "requirements_remaining": [], "summary": f"{task} turn {turn}",
            "tests_passed_count": 3, "tests_failed_count": 0, "coverage": 90.0}


def coach(task: str, turn: int) -> dict[str, object]:
    spec = json.loads(Path(os.environ["FEATURE_SPEC"]).read_text(encoding="utf-8")).get(task, {})
    approve = turn >= int(spec.get("approve_at", 1))
    feedback = None if approve else f"{task}: turn {turn} is not finished yet"
    decision: dict[str, object] = {
        "task_id": task, "turn": turn, "decision": "approve" if approve else "feedback",
        "issues": [] if approve else [{"severity": "must_fix", "category": "correctness", "description": feedback}],
        "criteria_verification": [{"criterion_id": "AC-001", "result": "verified" if approve else "rejected",
                                   "notes": f"turn {turn}"}],
        "validation_results": {"tests_passed_count": 3, "tests_failed_count": 0, "coverage": 90.0},
        "rationale": feedback or "Done."}
    if feedback:
        decision["feedback"] = feedback
    return decision


def main(role: str) -> int:
    task, turn = os.environ["GUARDKIT_TASK_ID"], int(os.environ["GUARDKIT_TURN"])
    _log(role, "start")
    report = player(task, turn) if role == "player" else coach(task, turn)
    Path(os.environ["GUARDKIT_REPORT_FILE"]).write_text(json.dumps(report), encoding="utf-8")
    _log(role, "end")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
