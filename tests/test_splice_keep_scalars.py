"""A recorded turn whose last value is a block scalar that keeps its final line breaks (``|+``).

The blank lines a ``|+`` scalar ends with are part of its text. A new turn appended before them
would take them from the old turn's value: the verified write refused that, and every later turn
of such a task failed. The new turn now goes after them, and the old value reads as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from guardkit_state import TaskFile, record_turn

from .helpers import coach_decision, make_task_repo, player_report

TASK = "TASK-KEEP-001"


def _task(last_feedback: str) -> str:
    return f"""---
id: {TASK}
title: Keep chomping
status: in_progress
autobuild_state:
  current_turn: 2
  turns:
  - turn: 1
    decision: feedback
    feedback: |+
      Fix the parser.

    timestamp: '2026-01-01T00:00:00+00:00'
  - turn: 2
    decision: feedback
    timestamp: '2026-01-02T00:00:00+00:00'
{last_feedback}---

# {TASK}

## Acceptance Criteria

- [ ] It parses
"""


def _turns(path: Path) -> list[dict[str, object]]:
    data = yaml.safe_load(path.read_text(encoding="utf-8").split("---\n")[1])
    turns: list[dict[str, object]] = data["autobuild_state"]["turns"]
    return turns


#: The last turn's last lines, and whether its blank lines belong to its value (a keeping scalar).
LAST_VALUES = {
    "one blank line": ("    feedback: |+\n      Fix it again.\n\n", True),
    "two blank lines": ("    feedback: |+\n      Fix it again.\n\n\n", True),
    "folded": ("    feedback: >+\n      Fix it\n      again.\n\n", True),
    "indent indicator and comment": ("    feedback: |2+ # kept as written\n      Fix it again.\n\n", True),
    "nested in a list": ("    notes:\n    - |+\n      Fix it again.\n\n", True),
    "clipped (its blank line is not its text)": ("    feedback: |\n      Fix it again.\n\n", False),
}


@pytest.mark.parametrize(("last", "keeps"), LAST_VALUES.values(), ids=list(LAST_VALUES))
def test_turns_are_appended_after_the_kept_blank_lines_and_old_values_read_as_before(
        tmp_path: Path, last: str, keeps: bool) -> None:
    path = make_task_repo(tmp_path, _task(last), name=f"{TASK}-keep.md")
    before = _turns(path)
    for turn in (3, 4):
        record_turn(tmp_path, TASK, player_report(turn, task_id=TASK),
                    coach_decision(turn, "feedback", task_id=TASK, feedback=f"turn {turn} feedback"))
    after = _turns(path)
    assert after[:2] == before
    assert [t["turn"] for t in after] == [1, 2, 3, 4]
    if keeps:
        assert last in path.read_text(encoding="utf-8")  # the old turn's lines, blank ones included
    assert TaskFile.load(path).state is not None
