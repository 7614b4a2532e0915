"""The report of a task GuardKit's own loop ran (its history is the frontmatter alone): the mode and
duration that history does tell, and the stall ``show`` reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guardkit_state.cli.app import run as cli_run
from guardkit_state.report.collect import build_task_report
from guardkit_state.report.page import render_report

TURN = """  - turn: {n}
    decision: feedback
    feedback: '- Tests did not pass during task-work execution'
    timestamp: '2026-02-05T17:{minute:02d}:14.223442'
    player_summary: Implementation via task-work delegation
    player_success: true
    coach_success: true
"""


def _guardkit_task(root: Path, turns: int) -> None:
    body = "".join(TURN.format(n=n, minute=50 + n) for n in range(1, turns + 1))
    path = root / "tasks" / "in_review" / "TASK-GK-007-trim.md"
    path.parent.mkdir(parents=True)
    path.write_text(f"---\nid: TASK-GK-007\ntitle: Trim\nstatus: in_review\nautobuild_state:\n  current_turn: {turns}\n"
                    f"  max_turns: 25\n  base_branch: main\n  started_at: '2026-02-05T17:51:14.223442'\n"
                    f"  last_updated: '2026-02-05T18:{turns:02d}:14.223442'\n  turns:\n{body}---\n\n"
                    "## Acceptance Criteria\n\n- [ ] trimmed\n", encoding="utf-8")


def test_guardkit_history_gives_modes_durations_and_the_stall(git_repo: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    _guardkit_task(git_repo, 3)
    report = build_task_report(git_repo, "TASK-GK-007", generated_at="-")
    assert [t.mode for t in report.turns] == ["fresh_start", "continuing_work", "continuing_work"]
    # each turn lasted until the next one started; the last one until last_updated
    assert [t.duration_seconds for t in report.turns] == [60.0, 60.0, 600.0]
    assert cli_run(["show", "TASK-GK-007", "--json", "--repo", str(git_repo)]) == 0
    shown = json.loads(capsys.readouterr().out)["stall"]
    assert shown is not None and report.stall == shown
    assert "the same feedback 3 turns in a row with no criteria verified (turns 1-3)" in report.stall
    assert f"<b>stall:</b> {report.stall}" in render_report(report)
    assert report.summary()["stall"] == report.stall


def test_no_stall_no_stall_line(git_repo: Path) -> None:
    _guardkit_task(git_repo, 2)
    report = build_task_report(git_repo, "TASK-GK-007", generated_at="-")
    assert report.stall is None and "stall:" not in render_report(report)
