"""``guardkit-state report``: the HTML page of a task's loop, read from the files alone.

The page is checked as HTML here (every tag and attribute it contains, the matrix cells against the
ledger ``show`` reports); ``test_report_browser.py`` opens it in a real Chromium.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from guardkit_state import record_turn, write_report
from guardkit_state.cli.app import run as cli_run
from guardkit_state.errors import GuardkitStateError, InputError, TaskNotFoundError
from guardkit_state.report import build_task_report, render_report
from guardkit_state.report.html_text import clean, esc
from tests.e2e_support import TASK_ID, Project, wait_until
from tests.helpers import coach_decision, make_task_repo, player_report

TASK = "TASK-AUTH-001"
#: Agent text trying every way into a page: a script, an event handler, a javascript: link (HTML
#: and markdown), a style that loads something, ANSI colour and a right-to-left override.
HOSTILE = ('<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
           '<a href="javascript:window.__pwned=3">click</a> [x](javascript:alert(1)) '
           '<style>body{background:url(http://example.invalid/x)}</style>'
           '\x1b[31mred\x1b[0m \x1b]8;;http://example.invalid\x07link\x1b]8;;\x07 \u202eevil"\'&')

#: The only elements and attributes the page may contain: no script, link, image, frame or form.
ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "header", "main", "footer", "section", "h1",
                "h2", "h4", "p", "b", "br", "span", "code", "ul", "li", "div", "table", "thead", "tbody", "tr",
                "th", "td", "details", "summary"}
ALLOWED_ATTRS = {"lang", "charset", "http-equiv", "content", "name", "class", "id", "scope", "title",
                 "data-criterion", "data-turn", "data-status"}


class _Page(HTMLParser):
    """Every start tag with its attributes, and the matrix cells, of a rendered page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.cells: dict[str, list[str]] = {}
        self.text: list[str] = []
        self._row: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.tags.append((tag, found))
        if tag == "tr" and found.get("data-criterion"):
            self._row = str(found["data-criterion"])
            self.cells[self._row] = []
        elif tag == "td" and self._row is not None and found.get("data-status"):
            self.cells[self._row].append(str(found["data-status"]))

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr":
            self._row = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    page.close()
    return page


def assert_inert(html: str) -> _Page:
    """Only the page's own tags and attributes: nothing to run, nothing to load, no raw escapes."""
    page = parse(html)
    assert {tag for tag, _ in page.tags} <= ALLOWED_TAGS
    for tag, attrs in page.tags:
        assert set(attrs) <= ALLOWED_ATTRS, (tag, attrs)
    assert html.count("<style>") == 1 and html.count("<meta http-equiv") == 1
    assert "\x1b" not in html and "\u202e" not in html and "\x07" not in html
    return page


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A task with three recorded turns (no git): AC-001 goes green, falls back, and is verified again."""
    root = tmp_path / "repo"
    make_task_repo(root)
    record_turn(root, TASK, player_report(1), coach_decision(1, "feedback", feedback="refresh missing",
                                                             verdicts={"AC-001": "verified", "AC-002": "rejected"}))
    record_turn(root, TASK, player_report(2), coach_decision(2, "feedback", feedback="login broke again",
                                                             verdicts={"AC-001": "rejected", "AC-002": "verified"}))
    record_turn(root, TASK, player_report(3), coach_decision(3, "approve", verdicts={"AC-001": "verified"}))
    return root


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli_run(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def show(capsys: pytest.CaptureFixture[str], root: Path, task: str = TASK) -> dict[str, Any]:
    code, out, err = cli(capsys, "show", task, "--repo", str(root), "--json")
    assert code == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


def final_cells(data: dict[str, Any]) -> dict[str, str]:
    """``show --json``'s criteria as matrix cells (an approval's verification is ``implied``)."""
    return {c["id"]: "implied" if c["implied_by_approval"] else c["status"] for c in data["criteria"]}


# -- the matrix follows the ledger -------------------------------------------------------------------

def test_matrix_cells_follow_each_turns_ledger(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = build_task_report(repo, TASK)
    cells = {row.id: [c.status for c in row.cells] for row in report.criteria}
    assert cells == {"AC-001": ["verified", "rejected", "verified"],
                     "AC-002": ["rejected", "verified", "verified"],
                     "AC-003": ["pending", "pending", "implied"]}
    # Each turn's column is the ledger recorded in that turn's turn-state file ...
    store = repo / ".guardkit" / "autobuild" / TASK
    for number in (1, 2, 3):
        recorded = json.loads((store / f"turn_state_turn_{number}.json").read_text(encoding="utf-8"))
        for cid, status in recorded["acceptance_criteria_status"].items():
            assert cells[cid][number - 1] in ((status,) if status != "verified" else ("verified", "implied"))
    # ... and the last one is the ledger `show` reports.
    assert report.final_statuses() == final_cells(show(capsys, repo))
    assert report.counts.to_dict() == show(capsys, repo)["criteria_counts"]
    regression = report.criteria[0].cells[1]
    assert regression.regression and regression.changed and regression.set_by_turn == 2
    assert [t.delta for t in report.turns] == [["+AC-001"], ["-AC-001", "+AC-002"], ["+AC-001", "+AC-003"]]


def test_rendered_matrix_reads_back_as_the_ledger(repo: Path) -> None:
    report = build_task_report(repo, TASK)
    page = assert_inert(render_report(report))
    assert page.cells == {row.id: [c.status for c in row.cells] for row in report.criteria}
    text = "".join(page.text)
    for turn in report.turns:
        assert f"Turn {turn.number}" in text
    assert "refresh missing" in text and "login broke again" in text
    assert "lesson from turn 2" in text  # lessons folded under their turn


def test_timeline_shows_mode_outcome_decision_duration_commit_and_gates(tmp_path: Path) -> None:
    project = Project.create(tmp_path)
    try:
        assert project.build().returncode == 0
        report = build_task_report(project.root, TASK_ID)
    finally:
        project.cleanup()
    first, second = report.turns
    assert (first.mode, first.decision, first.player_outcome) == ("fresh_start", "feedback", "implemented")
    assert (second.decision, second.source) == ("approve", "reports")
    commits = [c["sha"] for c in project.turn_commits()]
    assert [t.commit for t in report.turns] == commits
    assert all(t.duration_seconds is not None and t.duration_seconds >= 0 for t in report.turns)
    assert {g.name for g in first.gates} >= {"tests", "coverage"}
    assert any(g.passed is False for g in first.gates) and first.tests and "failed" in first.tests
    assert "AC-003" in (first.feedback or "") and first.issues
    html = render_report(report)
    assert_inert(html)
    assert commits[0][:10] in html and "fresh_start" in html


# -- files only: GuardKit's frontmatter history, no index, no git -----------------------------------

GUARDKIT_TASK = """\
---
id: TASK-GK-001
title: Frontmatter-only history
status: in_review
autobuild_state:
  current_turn: 2
  max_turns: 5
  turns:
  - coach_success: true
    decision: feedback
    feedback: '- Tests did not pass during task-work execution'
    player_success: true
    player_summary: 'Implementation via task-work delegation'
    timestamp: '2026-02-05T17:50:14.223442'
    turn: 1
  - coach_success: true
    decision: approve
    feedback: null
    player_success: true
    player_summary: 'Fixed the tests'
    timestamp: '2026-02-05T17:51:14.223442'
    turn: 2
---

## Acceptance Criteria

- [ ] First criterion
- [ ] Second criterion
"""


def test_frontmatter_only_history_renders_from_the_task_file(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "repo"
    make_task_repo(root, GUARDKIT_TASK, name="TASK-GK-001-frontmatter.md")
    report = build_task_report(root, "TASK-GK-001")
    assert [(t.number, t.decision, t.source) for t in report.turns] == [(1, "feedback", "frontmatter"),
                                                                        (2, "approve", "frontmatter")]
    assert report.turns[0].feedback == "- Tests did not pass during task-work execution"
    assert {row.id: [c.status for c in row.cells] for row in report.criteria} == {
        "AC-001": ["pending", "implied"], "AC-002": ["pending", "implied"]}
    assert report.final_statuses() == final_cells(show(capsys, root, "TASK-GK-001"))
    assert any("frontmatter" in note for note in report.notes)
    page = assert_inert(render_report(report))
    assert "Fixed the tests" in "".join(page.text)
    assert not (root / ".guardkit" / "index").exists()  # no index was needed, nor built


def test_frontmatter_criteria_map_is_the_last_column(tmp_path: Path) -> None:
    text = GUARDKIT_TASK.replace("  current_turn: 2\n", "  current_turn: 2\n  criteria:\n    AC-001: verified\n"
                                 "    AC-002: rejected\n").replace("decision: approve", "decision: feedback")
    root = tmp_path / "repo"
    make_task_repo(root, text, name="TASK-GK-001-frontmatter.md")
    report = build_task_report(root, "TASK-GK-001")
    assert report.final_statuses() == {"AC-001": "verified", "AC-002": "rejected"}


@pytest.mark.corpus
@pytest.mark.parametrize("task_id", ["TASK-CR-007", "TASK-HARV-005", "TASK-HARV-002"])
def test_guardkit_corpus_tasks_render(corpus_dir: Path, tmp_path: Path, task_id: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    result = write_report(corpus_dir, task_id, tmp_path / "r.html")
    assert result.report.turns and result.bytes < 200_000
    assert_inert(result.path.read_text(encoding="utf-8"))
    assert result.report.counts.to_dict() == show(capsys, corpus_dir, task_id)["criteria_counts"]


def test_last_column_is_shows_ledger_without_the_last_turn_state_file(repo: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    (repo / ".guardkit" / "autobuild" / TASK / "turn_state_turn_3.json").unlink()
    report = build_task_report(repo, TASK)
    data = show(capsys, repo)
    assert report.final_statuses() == final_cells(data)
    assert report.counts.to_dict() == data["criteria_counts"]
    assert [c.status for c in report.criteria[0].cells[:2]] == ["verified", "rejected"]  # earlier turns: their files


def test_unreadable_report_is_named_and_the_frontmatter_still_tells_the_turn(repo: Path) -> None:
    bad = repo / ".guardkit" / "autobuild" / TASK / "coach_turn_2.json"
    bad.write_text('{"decision": "maybe"}', encoding="utf-8")
    report = build_task_report(repo, TASK)
    assert any("coach_turn_2.json" in note for note in report.notes)
    assert report.turns[1].decision == "feedback" and report.turns[1].feedback == "login broke again"


def test_task_without_turns_renders(tmp_path: Path) -> None:
    make_task_repo(tmp_path)
    report = build_task_report(tmp_path, TASK)
    assert report.turns == [] and [row.cells for row in report.criteria] == [(), (), ()]
    assert "No turn recorded yet" in "".join(assert_inert(render_report(report)).text)


# -- untrusted text --------------------------------------------------------------------------------

def test_hostile_agent_text_is_inert(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    make_task_repo(root)
    record_turn(root, TASK, player_report(1, summary=HOSTILE, blockers=[HOSTILE], lessons=[HOSTILE]),
                coach_decision(1, "feedback", feedback=HOSTILE, verdicts={"AC-001": "rejected"},
                               what_to_try_next=HOSTILE, lessons=[HOSTILE]))
    html = render_report(build_task_report(root, TASK))
    page = assert_inert(html)
    assert "<script>" not in html and "onerror=\"" not in html and "<a " not in html
    text = "".join(page.text)
    # The words are all there, as text: the reader sees what the agent wrote.
    assert "<script>window.__pwned=1</script>" in text and 'onerror="window.__pwned=2"' in text
    assert "javascript:window.__pwned=3" in text and "red" in text and "\\u202eevil" in text


def test_hostile_task_title_and_criteria_are_inert(tmp_path: Path) -> None:
    task = ("---\nid: TASK-X-001\ntitle: '</title><script>window.__pwned=1</script>'\nstatus: backlog\n---\n\n"
            "## Acceptance Criteria\n\n- [ ] <img src=x onerror=alert(1)> works\n")
    root = tmp_path / "repo"
    make_task_repo(root, task, name="TASK-X-001-hostile.md")
    html = render_report(build_task_report(root, "TASK-X-001"))
    page = assert_inert(html)
    assert "</title><script>" in "".join(page.text)


def test_text_helpers_strip_ansi_and_show_controls() -> None:
    assert clean("\x1b[1;31mbold red\x1b[0m \x1b]0;title\x07done") == "bold red done"
    assert clean("a\x00b\u202ec\r\n") == "a\\x00b\\u202ec\n"
    assert esc('<a href="javascript:x">') == "&lt;a href=&quot;javascript:x&quot;&gt;"
    assert esc("x" * 10, limit=4).startswith("xxxx…")


# -- the command -----------------------------------------------------------------------------------

def test_cli_writes_the_default_path_and_says_what_it_counts(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "report", TASK, "--repo", str(repo), "--json")
    assert code == 0, err
    data = json.loads(out)
    path = repo / ".guardkit" / "reports" / f"{TASK}.html"
    assert data["path"] == str(path) and path.is_file() and data["bytes"] == path.stat().st_size
    assert (data["turns"], data["criteria"]) == (3, 3)
    assert data["criteria_counts"] == {"verified": 2, "implied_by_approval": 1, "rejected": 0, "pending": 0,
                                       "total": 3}
    code, out, err = cli(capsys, "report", TASK, "--repo", str(repo), "-o", str(repo / "out" / "r.html"))
    assert code == 0 and out.startswith(f"wrote {repo / 'out' / 'r.html'}") and "3 turn(s)" in out
    assert [p.name for p in (repo / "out").iterdir()] == ["r.html"]  # written atomically: no temp file left


def test_cli_errors(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "report", "FEAT-AUTH", "--repo", str(repo))
    assert code == 2 and "no feature plan FEAT-AUTH" in err  # a feature's report needs its plan
    code, _, err = cli(capsys, "report", "TASK-NOPE-001", "--repo", str(repo))
    assert code == 2 and "TASK-NOPE-001" in err
    code, out, err = cli(capsys, "report", TASK, "--repo", str(repo), "-o", str(repo), "--json")
    assert code == 2 and "is a directory" in err and json.loads(out)["error"] == "InputError"
    with pytest.raises(InputError):
        write_report(repo, "FEAT-AUTH")
    with pytest.raises(TaskNotFoundError):
        build_task_report(repo, "TASK-NOPE-001")


def test_the_page_is_world_readable_whatever_the_umask_or_the_old_mode(repo: Path) -> None:
    page = repo / "out" / "r.html"
    page.parent.mkdir()
    page.write_text("old page", encoding="utf-8")
    page.chmod(0o600)
    umask = os.umask(0o077)
    try:
        write_report(repo, TASK, page)
        write_report(repo, TASK, repo / "new" / "r.html")
    finally:
        os.umask(umask)
    assert stat.S_IMODE(page.stat().st_mode) == 0o644 and page.read_text(encoding="utf-8").startswith("<!DOCTYPE")
    assert stat.S_IMODE((repo / "new" / "r.html").stat().st_mode) == 0o644


def test_a_file_system_refusal_is_said_as_the_reports(repo: Path) -> None:
    blocker = repo / "not-a-folder"
    blocker.write_text("", encoding="utf-8")
    with pytest.raises(GuardkitStateError) as refused:
        write_report(repo, TASK, blocker / "r.html")
    assert type(refused.value) is GuardkitStateError and "cannot write the report" in str(refused.value)


# -- feature-build --report -------------------------------------------------------------------------

@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    proj = Project.create(tmp_path)
    yield proj
    proj.cleanup()


def test_feature_build_report_is_rewritten_as_the_loop_goes(project: Project) -> None:
    page = project.root.parent / "live" / "report.html"
    loop = project.start_build("--report", str(page), DEMO_PLAYER_SLEEP="60", DEMO_PLAYER_SLEEP_TURN="2")
    # While turn 2's Player works, the page already shows turn 1 and says turn 2 is running.
    wait_until(lambda: page.is_file() and "turn 2 is running" in page.read_text(encoding="utf-8"),
               proc=loop.proc, what="the report of running turn 2")
    during = parse(page.read_text(encoding="utf-8"))
    assert during.cells["AC-003"] == ["rejected"]
    # The page says "running" just before the loop marks the turn begun in the files; stop it only
    # once the Player works, so the files hold a begun turn 2 (stopped earlier, turn 2 never began).
    wait_until(lambda: project.has_event("start", "player", 2), proc=loop.proc, what="turn 2's Player")
    loop.signal(signal.SIGINT)
    stopped = loop.finish()
    assert stopped.returncode == 130
    after = page.read_text(encoding="utf-8")
    # The loop's stderr says whether the last rewrite was refused (a "not written" note) or never came.
    assert "turn 2 is running" not in after, stopped.stderr
    assert "turn 2 was interrupted" in after, stopped.stderr

    resume = project.build("--resume", "--report", str(page))
    assert resume.returncode == 0, resume.output
    final = parse(page.read_text(encoding="utf-8"))
    assert final.cells == {"AC-001": ["verified", "verified"], "AC-002": ["verified", "verified"],
                           "AC-003": ["rejected", "verified"], "AC-004": ["verified", "verified"]}
    assert [p.name for p in page.parent.iterdir()] == ["report.html"]  # no temp file left


def test_a_report_that_cannot_be_written_never_stops_the_loop(repo: Path) -> None:
    import io
    from types import SimpleNamespace

    from guardkit_state.cli.live_report import report_events
    from guardkit_state.cli.output import Output
    from guardkit_state.loop.events import LoopEvent, TurnRecorded, TurnStarted
    from guardkit_state.model import TurnMode

    recorded = TurnRecorded(record_turn(repo, TASK, player_report(4), coach_decision(4, "feedback"), reopen=True),
                            commit=None)
    started = TurnStarted(turn=5, mode=TurnMode.CONTINUING_WORK, action="run_turn")
    seen: list[str] = []
    out = Output(io.StringIO(), io.StringIO(), colour=False)

    def follow(event: LoopEvent) -> None:
        seen.append(event.kind)

    events = report_events(follow, out, SimpleNamespace(repo=repo, task_id=TASK, report=repo))  # a directory
    events(started)
    events(recorded)
    events.finish()
    assert seen == ["turn", "recorded"]
    assert out.stderr.getvalue().count("not written") == 1 and "is a directory" in out.stderr.getvalue()
    quiet = report_events(follow, out, SimpleNamespace(repo=repo, task_id=TASK, report=None))
    quiet(started)
    quiet.finish()
    assert not (repo / ".guardkit" / "reports").exists()


def test_reads_and_reports_leave_git_status_clean(tmp_path: Path) -> None:
    """The pages (``.guardkit/reports/``) and the read caches (``.guardkit/cache/``) sit in folders
    holding a ``.gitignore`` of ``*``: ``git status`` never shows them, so a later feature-build never
    warns about "uncommitted changes" the tool made itself."""
    from .guardkit_fixtures import cli as run_cli
    from .guardkit_fixtures import make_repo, task_text

    plan = ("id: FEAT-GS\nname: Clean\ntasks:\n- id: TASK-GS-001\n  file_path: tasks/backlog/TASK-GS-001.md\n"
            "  dependencies: []\n  status: pending\norchestration:\n  parallel_groups:\n  - - TASK-GS-001\n")
    root = make_repo(tmp_path / "repo", {
        "tasks/backlog/TASK-GS-001.md": task_text("TASK-GS-001", "# Task\n\n## Acceptance Criteria\n\n- [ ] works\n",
                                                  turns=[{"turn": 1, "decision": "feedback", "feedback": "more"}]),
        ".guardkit/features/FEAT-GS.yaml": plan})
    for command in (["report", "TASK-GS-001"], ["report", "FEAT-GS"], ["status"], ["show", "TASK-GS-001"],
                    ["search", "more"]):
        assert run_cli(root, *command).returncode == 0, command
    from guardkit_state.inspect.validation import validate_paths

    assert validate_paths([root / "tasks"]).ok
    assert (root / ".guardkit" / "reports" / "TASK-GS-001.html").is_file()
    assert (root / ".guardkit" / "reports" / ".gitignore").read_text() == "*\n"
    untracked = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=root,
                               capture_output=True, text=True, check=True).stdout
    assert untracked == ""


def test_a_reports_cost_counts_only_what_an_agent_can_have_spent_as_show_and_status_do() -> None:
    # A third copy of the cost predicate (show's and status's are turns/spend.reported_usd) took a
    # negative, NaN or infinite figure: the page and --json said "$nan" or a total lowered by -5.
    from guardkit_state.inspect.agent_costs import TurnCost
    from guardkit_state.report.task_report import TaskReport, TurnColumn
    from guardkit_state.turns.ledger import CriteriaCounts

    hostile = {"player": {"cost_usd": 0.5}, "coach": {"cost_usd": -5}, "a": {"cost_usd": float("nan")},
               "b": {"cost_usd": float("inf")}, "c": {"cost_usd": "1"}, "d": {"cost_usd": True}}
    turns = [TurnColumn(1, "fresh_start", "feedback", "implemented", agent_runs=hostile),
             TurnColumn(2, "fresh_start", "approve", "implemented", agent_runs={"player": {"cost_usd": 0.25}})]
    report = TaskReport(TASK_ID, "t", "in_review", "tasks/t.md", None, None, turns, [], CriteriaCounts())
    assert TurnCost(1, hostile).cost_usd == 0.5  # what show counts of turn 1
    assert report.cost_usd == 0.75
    assert report.summary()["cost_usd"] == 0.75
