"""Scripted Player for the feature-build tests (stdlib only, deterministic by task and turn).

Its behaviour per task comes from the JSON file named by ``FEATURE_SPEC`` (``{task_id: {...}}``):

* ``file`` (default ``src/<task_id>.txt``): the file it writes; ``mode`` ``append`` (default) adds
  a line per turn, ``replace`` writes the file whole (two tasks replacing one line conflict);
* ``sleep``: seconds to wait before writing its report (orders who finishes first);
* ``crash``: exit 3 without a report (an agent that always fails);
* ``shell``: a shell command run in its worktree after it wrote its file (a Player doing git
  itself: ``git commit``, ``rm .git`` ...).

Every start is appended to ``$FEATURE_LOG`` (when set) as one JSON line with its pid, so tests can
count invocations and check that no agent outlives a run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path


def _spec(task_id: str) -> dict:
    path = os.environ.get("FEATURE_SPEC")
    data = json.loads(Path(path).read_text(encoding="utf-8")) if path else {}
    return data.get(task_id, {})


def _log(event: str, **fields: object) -> None:
    path = os.environ.get("FEATURE_LOG")
    if path:
        line = json.dumps({"event": event, "pid": os.getpid(), "pgid": os.getpgid(0), "role": "player",
                           "task": os.environ["GUARDKIT_TASK_ID"], "turn": int(os.environ["GUARDKIT_TURN"]),
                           **fields})
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")


def main() -> int:
    task_id = os.environ["GUARDKIT_TASK_ID"]
    turn = int(os.environ["GUARDKIT_TURN"])
    spec = _spec(task_id)
    _log("start")
    if spec.get("crash"):
        return 3
    target = Path(spec.get("file") or f"src/{task_id}.txt")
    target.parent.mkdir(parents=True, exist_ok=True)
    if spec.get("mode") == "replace":
        target.write_text(f"{task_id} turn {turn}\n", encoding="utf-8")
    else:
        with target.open("a", encoding="utf-8") as handle:
            handle.write(f"{task_id} turn {turn}\n")
    if spec.get("shell"):
        subprocess.run(spec["shell"], shell=True, check=False)
    sleep = float(spec.get("sleep") or os.environ.get("FEATURE_PLAYER_SLEEP") or 0)
    if sleep:
        time.sleep(sleep)
    report = {
        "task_id": task_id, "turn": turn, "files_modified": [str(target)], "files_created": [],
        "tests_written": [], "tests_run": True, "tests_passed": True,
        "implementation_notes": f"{task_id}: turn {turn}", "concerns": [], "requirements_addressed": [],
        "requirements_remaining": [], "summary": f"{task_id} turn {turn}", "tests_passed_count": 3,
        "tests_failed_count": 0, "coverage": 90.0,
    }
    Path(os.environ["GUARDKIT_REPORT_FILE"]).write_text(json.dumps(report), encoding="utf-8")
    _log("end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
