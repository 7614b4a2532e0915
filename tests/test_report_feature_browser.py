"""A feature's report in a real headless Chromium: it loads cleanly, fetches nothing, draws the grid
the run left, links only down the page, runs no agent text, and can be screenshotted.

Chromium and Playwright as in ``test_report_browser.py`` (the system's browser, nothing downloaded;
skipped with the reason when either is missing).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import test_report_browser, test_report_feature
from tests.test_report_browser import ACTIVE_ELEMENTS, Visit
from tests.test_report_feature import SHARED, T1, T2, T3, FeatureRun

pytestmark = pytest.mark.slow
# The fixtures this module shares: the browser, and the feature runs the HTML tests check.
browser = test_report_browser.browser
conflict_run = test_report_feature.conflict_run
hostile_feature = test_report_feature.hostile_feature

#: The grid as the browser shows it: task id -> data-field -> the cell's visible text.
READ_GRID = """() => Object.fromEntries([...document.querySelectorAll('table.grid tr[data-task]')]
    .map(tr => [tr.dataset.task, Object.fromEntries([...tr.querySelectorAll('td[data-field]')]
        .map(td => [td.dataset.field, td.innerText.trim().split(/\\s+/).join(' ')]))]))"""
#: Each task section's criteria matrix: task id -> criterion id -> each turn's status.
READ_MATRICES = """() => Object.fromEntries([...document.querySelectorAll('section.task')]
    .map(s => [s.dataset.task, Object.fromEntries([...s.querySelectorAll('table.matrix tr[data-criterion]')]
        .map(tr => [tr.dataset.criterion, [...tr.querySelectorAll('td.cell')].map(td => td.dataset.status)]))]))"""
#: Every link: where it points, and whether that element exists on the page.
READ_LINKS = """() => [...document.querySelectorAll('a')].map(a => [a.getAttribute('href'),
    !!document.getElementById(a.getAttribute('href').slice(1))])"""


def test_feature_report_loads_cleanly_and_draws_the_grid(browser: Any, conflict_run: FeatureRun,
                                                         tmp_path: Path) -> None:
    visit = Visit(browser, conflict_run.page)
    try:
        visit.open_all_details()
        grid = visit.page.evaluate(READ_GRID)
        matrices = visit.page.evaluate(READ_MATRICES)
        links = visit.page.evaluate(READ_LINKS)
        title = visit.page.title()
        # A chip leads to its turn's column in the task's section.
        visit.page.click(f"tr[data-task='{T1}'] td[data-field='timeline'] a >> nth=1")
        target = visit.page.evaluate("() => location.hash")
        shot = tmp_path / "feature.png"
        visit.page.screenshot(path=str(shot), full_page=True)
        visit.assert_quiet()
    finally:
        visit.close()
    merge = conflict_run.result.task(T1).merge_commit
    assert merge
    assert grid == {
        T1: {"status": "completed", "turns": "2", "outcome": "approved", "merged": f"yes {merge[:10]}",
             "blocked": "—", "timeline": "1 2"},
        T2: {"status": "blocked", "turns": "1", "outcome": "approved", "merged": "no", "blocked": SHARED,
             "timeline": "1"},
        T3: {"status": "pending", "turns": "0", "outcome": "—", "merged": "no", "blocked": "—",
             "timeline": "no turn yet"},
    }
    assert {t.task_id: t.status for t in conflict_run.result.tasks} == {t: c["status"] for t, c in grid.items()}
    assert matrices == {T1: {"AC-001": ["rejected", "verified"]}, T2: {"AC-001": ["verified"]}, T3: {"AC-001": []}}
    assert links and all(href.startswith("#") and exists for href, exists in links), links
    assert target == "#t1-TASK-FB-001-turn-2" and title.startswith("FEAT-FB")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_feature_report_needs_no_javascript(browser: Any, conflict_run: FeatureRun) -> None:
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(conflict_run.page.resolve().as_uri())
        assert "Waves and tasks" in page.inner_text("body")
        page.click(f"section.task[data-task='{T1}'] details summary")  # folding works without script
        assert page.is_visible(f"section.task[data-task='{T1}'] details h4")
    finally:
        context.close()


@pytest.mark.parametrize("bypass_csp", [False, True], ids=["with-csp", "escaping-alone"])
def test_hostile_title_and_feedback_execute_nothing(browser: Any, hostile_feature: Path, bypass_csp: bool) -> None:
    # Even with the page's Content-Security-Policy switched off, escaping alone keeps it inert.
    visit = Visit(browser, hostile_feature, bypass_csp=bypass_csp)
    try:
        visit.open_all_details()
        pwned = visit.page.evaluate("() => typeof window.__pwned")
        # The page's own fragment links are the only links; nothing else that could run or load.
        active = visit.page.evaluate(f"() => document.querySelectorAll({ACTIVE_ELEMENTS.replace(' a,', '')!r}).length")
        hrefs = visit.page.evaluate("() => [...document.querySelectorAll('a')].map(a => a.getAttribute('href'))")
        heading = visit.page.inner_text("h1")
        section = visit.page.inner_text(f"section.task[data-task='{T1}']")
        background = visit.page.evaluate("() => getComputedStyle(document.body).backgroundImage")
        visit.assert_quiet()
    finally:
        visit.close()
    assert pwned == "undefined" and active == 0 and background == "none"
    assert hrefs and all(h.startswith("#") for h in hrefs)
    # What the plan, the task file and the agents wrote is shown, as text.
    assert "<script>window.__pwned=1</script>" in heading
    assert 'onerror="window.__pwned=2"' in section and "javascript:window.__pwned=3" in section
    assert "\x1b" not in section and "[31m" not in section
