"""A recorded turn's reports, read from the files: the MCP server's ``turn_reports`` and its resource."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guardkit_state.errors import InputError, SchemaError
from guardkit_state.inspect.turn_reports import turn_reports
from guardkit_state.turns.lifecycle import record_turn

from .helpers import coach_decision, make_task_repo, player_report

TASK = "TASK-AUTH-001"

GUARDKIT_TASK = """\
---
id: TASK-GK-001
title: Frontmatter-only history
status: in_review
autobuild_state:
  current_turn: 2
  max_turns: 5
  turns:
  - decision: feedback
    feedback: '- Tests did not pass during task-work execution'
    player_summary: 'Implementation via task-work delegation'
    timestamp: '2026-02-05T17:50:14.223442'
    turn: 1
  - decision: approve
    feedback: null
    player_summary: 'Fixed the tests'
    timestamp: '2026-02-05T17:51:14.223442'
    turn: 2
---

## Acceptance Criteria

- [ ] First criterion
"""


def _record(root: Path, turn: int, feedback: str) -> None:
    record_turn(root, TASK, player_report(turn, summary=f"summary of turn {turn}"),
                coach_decision(turn, "feedback", feedback=feedback))


def test_each_recorded_turn_gives_its_three_files(tmp_path: Path) -> None:
    make_task_repo(tmp_path)
    _record(tmp_path, 1, "first feedback")
    _record(tmp_path, 2, "second feedback")
    files = tmp_path / ".guardkit" / "autobuild" / TASK
    for turn, feedback in ((1, "first feedback"), (2, "second feedback")):
        got = turn_reports(tmp_path, TASK, turn).to_dict()
        assert (got["task_id"], got["turn"], got["turn_state_source"]) == (TASK, turn, "file")
        assert got["player"]["summary"] == f"summary of turn {turn}"
        assert got["coach"]["feedback"] == feedback
        assert got["turn_state"] == json.loads((files / f"turn_state_turn_{turn}.json").read_text(encoding="utf-8"))
    assert turn_reports(tmp_path, TASK).turn == 2  # the last, by default
    assert turn_reports(tmp_path, f"tasks/backlog/{TASK}-jwt-auth.md").to_dict()["turn"] == 2  # a path names it too


@pytest.mark.parametrize("turn", [0, 3, -1])
def test_a_turn_not_recorded_is_refused_naming_the_range(tmp_path: Path, turn: int) -> None:
    make_task_repo(tmp_path)
    _record(tmp_path, 1, "first")
    _record(tmp_path, 2, "second")
    with pytest.raises(InputError) as refused:
        turn_reports(tmp_path, TASK, turn)
    assert str(refused.value) == f"turn {turn} is not recorded (expected 1..2)"


def test_a_task_without_turns_says_so(tmp_path: Path) -> None:
    make_task_repo(tmp_path)
    with pytest.raises(InputError, match="has no recorded turn"):
        turn_reports(tmp_path, TASK)


def test_a_turn_guardkit_listed_only_in_the_frontmatter_has_its_entry_as_turn_state(tmp_path: Path) -> None:
    make_task_repo(tmp_path, GUARDKIT_TASK, name="TASK-GK-001-frontmatter.md")
    first = turn_reports(tmp_path, "TASK-GK-001", 1).to_dict()
    assert (first["player"], first["coach"], first["turn_state_source"]) == (None, None, "frontmatter")
    assert first["turn_state"]["coach_decision"] == "feedback"
    assert first["turn_state"]["coach_feedback"] == "- Tests did not pass during task-work execution"
    assert turn_reports(tmp_path, "TASK-GK-001").to_dict()["turn_state"]["coach_decision"] == "approved"


def test_a_report_file_edited_into_an_invalid_record_is_named(tmp_path: Path) -> None:
    make_task_repo(tmp_path)
    _record(tmp_path, 1, "first")
    coach = tmp_path / ".guardkit" / "autobuild" / TASK / "coach_turn_1.json"
    data = json.loads(coach.read_text(encoding="utf-8"))
    data["decision"] = "maybe"
    coach.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(SchemaError) as refused:
        turn_reports(tmp_path, TASK, 1)
    assert refused.value.path == coach
