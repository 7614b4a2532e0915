"""The HTML report in a real headless Chromium: it loads cleanly, fetches nothing, draws the ledger,
runs no agent text, and can be screenshotted.

Chromium is the system's (``apt-get install chromium``; ``make test`` installs it where it can),
driven by Playwright's Python package with ``executable_path``: no browser is downloaded. Without
either, these tests are skipped and say why.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guardkit_state import record_turn, write_report
from tests.e2e_support import REFERENCE_HISTORY, TASK_ID, Project
from tests.helpers import coach_decision, make_task_repo, player_report
from tests.test_report import HOSTILE, TASK

pytestmark = pytest.mark.slow

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: The cells of the matrix as the browser shows them: criterion id -> each turn's status.
READ_MATRIX = """() => Object.fromEntries([...document.querySelectorAll('table.matrix tr[data-criterion]')]
    .map(tr => [tr.dataset.criterion, [...tr.querySelectorAll('td.cell')].map(td => td.dataset.status)]))"""
READ_LABELS = """() => [...document.querySelectorAll('table.matrix td.cell')]
    .map(td => [td.dataset.status, td.innerText])"""
ACTIVE_ELEMENTS = "script, img, iframe, object, embed, link, a, form, input, button, svg, video, audio, base"


def chromium_path() -> str | None:
    explicit = os.environ.get("GUARDKIT_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="the playwright package is not installed (pip install -e '.[test]')")
    executable = chromium_path()
    if executable is None:
        pytest.skip("no Chromium on this machine: install the system package (apt-get install chromium; "
                    "`make test` tries to) or point GUARDKIT_CHROMIUM at a Chromium binary")
    with sync_api.sync_playwright() as playwright:
        try:
            # --no-sandbox: CI and containers run as root, where Chromium's sandbox cannot start.
            launched = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        except sync_api.Error as exc:
            pytest.skip(f"Chromium at {executable} did not start: {str(exc).splitlines()[0]}")
        yield launched
        launched.close()


class Visit:
    """One page opened from a file, with everything it did: console, errors, requests, dialogs."""

    def __init__(self, browser: Any, path: Path, *, bypass_csp: bool = False) -> None:
        self.url = path.resolve().as_uri()
        self.context = browser.new_context(viewport={"width": 1100, "height": 800}, bypass_csp=bypass_csp)
        self.console: list[str] = []
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        # Anything but the page itself is recorded and refused: the test must not reach a network.
        self.context.route("**/*", lambda route: route.continue_() if route.request.url == self.url
                           else route.abort())
        self.page = self.context.new_page()
        self.page.on("console", lambda msg: self.console.append(f"{msg.type}: {msg.text}"))
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.page.on("dialog", lambda dialog: (self.dialogs.append(dialog.message), dialog.dismiss()))
        self.page.goto(self.url, wait_until="load")

    def open_all_details(self) -> None:
        for details in self.page.query_selector_all("details"):
            details.evaluate("element => { element.open = true }")
        self.page.wait_for_timeout(200)

    def assert_quiet(self) -> None:
        assert self.console == [] and self.errors == [] and self.dialogs == []
        assert self.requests == [self.url]

    def close(self) -> None:
        self.context.close()


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Project, Path]]:
    """The demo's task after an uninterrupted approved run, and its report."""
    project = Project.create(tmp_path_factory.mktemp("demo"))
    try:
        run = project.build()
        assert run.returncode == 0, run.output
        result = write_report(project.root, TASK_ID, project.root.parent / "report.html")
        yield project, result.path
    finally:
        project.cleanup()


def test_demo_report_loads_cleanly_and_draws_the_ledger(browser: Any, demo_report: tuple[Project, Path],
                                                          tmp_path: Path) -> None:
    project, path = demo_report
    visit = Visit(browser, path)
    try:
        visit.open_all_details()
        matrix = visit.page.evaluate(READ_MATRIX)
        labels = visit.page.evaluate(READ_LABELS)
        title = visit.page.title()
        timeline = visit.page.inner_text("table.timeline")
        shot = tmp_path / "report.png"
        visit.page.screenshot(path=str(shot), full_page=True)
        visit.assert_quiet()
    finally:
        visit.close()
    # The cells read back from the page are the ledger of each turn, as the turn-state files and
    # `show` tell it (the demo's Coach itemises every criterion: nothing is merely implied).
    history = project.history()
    assert [(turn, decision) for turn, decision, _ in history] == [(t, d) for t, d, _ in REFERENCE_HISTORY]
    expected = {cid: [statuses[cid] for _, _, statuses in history] for cid in history[0][2]}
    assert matrix == expected
    assert {c["id"]: c["status"] for c in project.show()["criteria"]} == {cid: s[-1] for cid, s in matrix.items()}
    assert all(status.split()[0] in text for status, text in labels)
    assert title.startswith(TASK_ID)
    for word in ("fresh_start", "feedback", "approve", "AC-003 not met"):
        assert word in timeline
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_demo_report_needs_no_javascript(browser: Any, demo_report: tuple[Project, Path], tmp_path: Path) -> None:
    _, path = demo_report
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(path.resolve().as_uri())
        assert "Acceptance criteria" in page.inner_text("body")
        page.click("#timeline details summary")  # folding works without script
        assert page.is_visible("#timeline details h4")
    finally:
        context.close()


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A task whose Player and Coach wrote every trick in HOSTILE into every field they have."""
    root = tmp_path_factory.mktemp("hostile") / "repo"
    make_task_repo(root)
    record_turn(root, TASK, player_report(1, summary=HOSTILE, blockers=[HOSTILE], lessons=[HOSTILE]),
                coach_decision(1, "feedback", feedback=HOSTILE, verdicts={"AC-001": "rejected"},
                               what_to_try_next=HOSTILE, lessons=[HOSTILE]))
    return write_report(root, TASK, root.parent / "hostile.html").path


@pytest.mark.parametrize("bypass_csp", [False, True], ids=["with-csp", "escaping-alone"])
def test_hostile_feedback_executes_nothing(browser: Any, hostile_report: Path, bypass_csp: bool) -> None:
    # Even with the page's Content-Security-Policy switched off, escaping alone keeps it inert.
    visit = Visit(browser, hostile_report, bypass_csp=bypass_csp)
    try:
        visit.open_all_details()
        pwned = visit.page.evaluate("() => typeof window.__pwned")
        active = visit.page.evaluate(f"() => document.querySelectorAll({ACTIVE_ELEMENTS!r}).length")
        feedback = visit.page.inner_text("#timeline")
        background = visit.page.evaluate("() => getComputedStyle(document.body).backgroundImage")
        visit.assert_quiet()
    finally:
        visit.close()
    assert pwned == "undefined" and active == 0 and background == "none"
    # What the agent wrote is shown, as text: the reviewer sees the attempt.
    assert "<script>window.__pwned=1</script>" in feedback
    assert 'onerror="window.__pwned=2"' in feedback and "javascript:window.__pwned=3" in feedback
    assert "\x1b" not in feedback and "[31m" not in feedback
