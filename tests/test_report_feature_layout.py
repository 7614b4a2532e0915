"""The feature page's grid fits a laptop-sized window, however many turns a task took.

GuardKit tasks run up to 25 turns (the corpus has several), one chip each in the grid's "turns at a
glance" cell: those chips wrap inside their cell instead of widening the whole grid into a sideways
scroll that hides the columns on its right. Checked in a real headless Chromium (the fixture of
``test_report_browser.py``: skipped, saying why, where there is none).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from guardkit_state.report import write_feature_report
from tests import test_report_browser
from tests.test_report_browser import Visit

from .conftest import run_git

pytestmark = pytest.mark.slow
browser = test_report_browser.browser

TURNS = 25
LONG = "TASK-LONG-001"
SHORT = "TASK-LONG-002"


def _guardkit_task(task_id: str, turns: int) -> str:
    """A task file as GuardKit leaves it: its turns in the frontmatter only (no turn reports)."""
    lines = ["---", f"id: {task_id}", f"title: Trim dataclasses.md and pydantic-models.md after verification {task_id}",
             "status: cancelled", "complexity: 3"]
    if turns:
        lines += ["autobuild_state:", f"  current_turn: {turns}", f"  max_turns: {turns}", "  turns:"]
        for n in range(1, turns + 1):
            lines += [f"  - turn: {n}", "    decision: feedback", "    feedback: '- Tests did not pass'",
                      f"    timestamp: '2026-02-05T17:{n + 10:02d}:14'", "    player_success: true"]
    lines += ["---", "", f"# {task_id}", "", "## Acceptance Criteria", "", "- [ ] AC-001: it works", ""]
    return "\n".join(lines)


@pytest.fixture
def long_feature(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "tasks" / "cancelled").mkdir(parents=True)
    (root / ".guardkit" / "features").mkdir(parents=True)
    run_git(root, "init", "-q", "-b", "main")
    for task_id, turns in ((LONG, TURNS), (SHORT, 0)):
        (root / "tasks" / "cancelled" / f"{task_id}-trim.md").write_text(_guardkit_task(task_id, turns))
    (root / ".guardkit" / "features" / "FEAT-LONG.yaml").write_text(
        "id: FEAT-LONG\nname: Context reduction\nstatus: failed\ntasks:\n"
        f"- id: {LONG}\n  name: Trim dataclasses.md and pydantic-models.md after Graphiti verification\n"
        "  dependencies: []\n"
        f"- id: {SHORT}\n  name: Regression test core workflows\n  dependencies: [{LONG}]\n")
    run_git(root, "add", ".")
    run_git(root, "commit", "-q", "-m", "plan")
    return write_feature_report(root, "FEAT-LONG", tmp_path / "FEAT-LONG.html").path


#: The grid's scroll box, and each chip cell against the chips it holds.
READ_FIT = """() => {
    const box = document.querySelector('#grid .scroll');
    const cells = [...document.querySelectorAll('table.grid td.timeline')].map(td => {
        const chips = [...td.querySelectorAll('.chip')].map(c => c.getBoundingClientRect().right);
        return {right: td.getBoundingClientRect().right, chips: chips.length ? Math.max(...chips) : 0};
    });
    return {scroll: box.scrollWidth, client: box.clientWidth, cells: cells,
            chips: document.querySelectorAll('table.grid .chip').length};
}"""


def test_many_turns_wrap_inside_the_grid(browser: Any, long_feature: Path) -> None:
    visit = Visit(browser, long_feature)  # a 1100-pixel-wide window
    try:
        fit = visit.page.evaluate(READ_FIT)
        visit.assert_quiet()
    finally:
        visit.close()
    assert fit["chips"] == TURNS
    # The whole grid is visible: nothing to scroll sideways, every chip inside its cell.
    assert fit["scroll"] <= fit["client"], fit
    assert all(cell["chips"] <= cell["right"] for cell in fit["cells"]), fit
