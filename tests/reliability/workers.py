"""Processes for the concurrency tests: ``python -m tests.reliability.workers CMD ...``.

``record ROOT TASK-ID TURNS GO`` records TURNS turns through the library (retrying while another
process holds the task's lock) once the file GO exists; ``editor TASK-FILE atomic|inplace STOP``
keeps saving the task file like a careful editor until STOP exists. Each prints a JSON summary.
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
import time
from pathlib import Path

from guardkit_state.errors import LockedError, TurnError
from guardkit_state.turns.lifecycle import record_turn

_COUNTER = re.compile(r"^editor_counter: (\d+)$", re.M)


def _wait_for(path: Path) -> None:
    while not path.exists():
        time.sleep(0.001)


def record(root: Path, task_id: str, turns: int, go: Path) -> dict[str, int]:
    _wait_for(go)
    recorded = refusals = conflicts = 0
    while recorded < turns:
        player = {"files_modified": [], "files_created": [], "tests_written": [], "tests_run": True,
                  "tests_passed": True, "implementation_notes": f"{os.getpid()} work", "concerns": [],
                  "requirements_addressed": [], "requirements_remaining": []}
        coach = {"decision": "feedback", "issues": [], "criteria_verification": [],
                 "validation_results": {}, "rationale": f"more work needed ({os.getpid()})"}
        try:
            record_turn(root, task_id, player, coach, max_turns=1000)
        except LockedError:
            refusals += 1
            time.sleep(0.001)
            continue
        except TurnError:  # refused, nothing written (the file was caught mid-save): try again
            conflicts += 1
            if conflicts > 50:  # a turn entry really was dropped by a stale save: stop and report
                break
            time.sleep(0.01)
            continue
        recorded += 1
    return {"recorded": recorded, "lock_refusals": refusals, "conflicts": conflicts}


def editor(path: Path, mode: str, stop: Path) -> dict[str, int]:
    """Bump ``editor_counter`` and append a body line per save; re-read and redo if the file moved."""
    edits = redone = 0
    while not stop.exists():
        before = path.read_bytes()
        text = before.decode("utf-8")
        match = _COUNTER.search(text)
        if match is None or not text.endswith("\n"):
            time.sleep(0.001)  # caught the store mid-way? It writes atomically, so re-read.
            redone += 1
            continue
        n = int(match.group(1)) + 1
        new = (text[: match.start()] + f"editor_counter: {n}" + text[match.end():] + f"edit {n}\n").encode()
        time.sleep(0.001)  # the time an editor takes between reading and saving
        if path.read_bytes() != before:  # like vim's "file changed since reading it": redo the edit
            redone += 1
            continue
        if mode == "atomic":
            tmp = path.with_name(f".{path.name}.swp")
            tmp.write_bytes(new)
            os.replace(tmp, path)
        else:
            with open(path, "r+b") as handle:
                handle.truncate(0)
                handle.write(new)
        edits = n
        time.sleep(random.uniform(0.005, 0.03))  # ~60 saves a second: far faster than a person
    return {"edits": edits, "redone": redone}


def main(argv: list[str]) -> int:
    command = argv[0]
    if command == "record":
        result = record(Path(argv[1]), argv[2], int(argv[3]), Path(argv[4]))
    elif command == "editor":
        result = editor(Path(argv[1]), argv[2], Path(argv[3]))
    else:
        raise SystemExit(f"unknown command {command}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
