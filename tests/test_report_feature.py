"""``guardkit-state report FEAT-X``: a feature's page, from a real feature run (real git, task loops in
processes of their own, the scripted agents of ``tests/feature_agents``).

The page is checked as HTML here: the waves × tasks grid read back cell by cell against the run's
own result, each task's section and its criteria matrix, the fragment links, and that nothing a task
file or an agent wrote becomes markup. ``feature-build FEAT-X --report FILE`` is checked live (the
page as it stood at each event of a run) and through the CLI. ``test_report_feature_browser.py``
opens the page in Chromium.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from guardkit_state.agents.protocol import Agent, CallableAgent, TurnRequest
from guardkit_state.cli.app import run as cli_run
from guardkit_state.cli.live_report import report_events
from guardkit_state.cli.output import Output
from guardkit_state.errors import FeatureNotFoundError, InputError
from guardkit_state.features.build import build_feature
from guardkit_state.features.result import FeatureResult
from guardkit_state.loop.events import Event
from guardkit_state.report import build_feature_report, build_task_report, write_feature_report
from tests.feature_support import (
    FEATURE_ID,
    PLAN_REL,
    FeatureProject,
    TaskSpec,
    cli_argv,
    git,
    make_feature,
    task_rel,
)
from tests.test_report import HOSTILE

T1, T2, T3 = "TASK-FB-001", "TASK-FB-002", "TASK-FB-003"
WAVES = [[T1, T2], [T3]]
SHARED = "src/shared.txt"
#: The feature page's only elements and attributes: the task page's, the grid's, and fragment links.
ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "header", "main", "footer", "section", "h1",
                "h2", "h3", "h4", "p", "b", "br", "span", "code", "ul", "li", "div", "table", "thead", "tbody",
                "tr", "th", "td", "details", "summary", "a"}
ALLOWED_ATTRS = {"lang", "charset", "http-equiv", "content", "name", "class", "id", "scope", "title", "colspan",
                 "href", "data-criterion", "data-turn", "data-status", "data-task", "data-wave", "data-field"}


# -- reading a feature page back -----------------------------------------------------------------------

@dataclass
class FeaturePage:
    """What a rendered feature page holds: its tags, grid cells, sections and matrices."""

    tags: list[tuple[str, dict[str, str | None]]] = field(default_factory=list)
    #: task id -> data-field -> the cell's text.
    grid: dict[str, dict[str, str]] = field(default_factory=dict)
    waves: dict[str, str] = field(default_factory=dict)
    #: task id (of the section) -> criterion id -> each turn's cell status.
    matrices: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    ids: list[str] = field(default_factory=list)
    hrefs: list[str] = field(default_factory=list)
    text: list[str] = field(default_factory=list)


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = FeaturePage()
        self._task: str | None = None  # the grid row being read
        self._field: str | None = None
        self._section: str | None = None
        self._criterion: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.page.tags.append((tag, found))
        if found.get("id"):
            self.page.ids.append(str(found["id"]))
        if tag == "a":
            self.page.hrefs.append(str(found.get("href")))
        if tag == "section" and found.get("data-task"):
            self._section = str(found["data-task"])
            self.page.matrices[self._section] = {}
        elif tag == "tr" and found.get("data-task"):
            self._task = str(found["data-task"])
            self.page.grid[self._task] = {}
            self.page.waves[self._task] = str(found.get("data-wave"))
        elif tag == "td" and self._task is not None and found.get("data-field"):
            self._field = str(found["data-field"])
            self.page.grid[self._task][self._field] = ""
        elif tag == "tr" and found.get("data-criterion") and self._section is not None:
            self._criterion = str(found["data-criterion"])
            self.page.matrices[self._section][self._criterion] = []
        elif tag == "td" and self._criterion is not None and self._section is not None and found.get("data-status"):
            self.page.matrices[self._section][self._criterion].append(str(found["data-status"]))

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._field = None
        elif tag == "tr":
            self._task = self._criterion = None

    def handle_data(self, data: str) -> None:
        self.page.text.append(data)
        if self._task is not None and self._field is not None:
            cells = self.page.grid[self._task]
            cells[self._field] = " ".join((cells[self._field] + " " + data).split())


def read_page(html: str) -> FeaturePage:
    reader = _Reader()
    reader.feed(html)
    reader.close()
    return reader.page


def assert_inert(html: str) -> FeaturePage:
    """Only the page's own tags and attributes, links only down the page, every id once."""
    page = read_page(html)
    assert {tag for tag, _ in page.tags} <= ALLOWED_TAGS
    for tag, attrs in page.tags:
        assert set(attrs) <= ALLOWED_ATTRS, (tag, attrs)
    assert html.count("<style>") == 1 and html.count("<meta http-equiv") == 1
    assert "\x1b" not in html and "\u202e" not in html and "\x07" not in html
    assert len(page.ids) == len(set(page.ids)), "an id is used twice"
    assert page.hrefs and all(h.startswith("#") and h[1:] in page.ids for h in page.hrefs), page.hrefs
    return page


# -- running a feature -----------------------------------------------------------------------------

@dataclass
class FeatureRun:
    project: FeatureProject
    result: FeatureResult
    #: The page as it stood when each event of the run arrived (``--report``'s live rewrites).
    snapshots: list[tuple[Event, str]]
    page: Path


def run_feature(project: FeatureProject, agents: tuple[Agent, Agent] | None = None) -> FeatureRun:
    """Run the feature with ``feature-build --report``'s callback around the run, recording the page
    as each event arrives (the page is rewritten after the event is passed on)."""
    page = project.root.parent / f"{project.root.name}-live" / "feature.html"
    snapshots: list[tuple[Event, str]] = []

    def seen(event: Event) -> None:
        snapshots.append((event, page.read_text(encoding="utf-8") if page.is_file() else ""))

    stderr = io.StringIO()
    out = Output(io.StringIO(), stderr, colour=False)
    args = argparse.Namespace(repo=project.root, task_id=FEATURE_ID, report=page)
    events = report_events(seen, out, args, feature=True)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in project.env().items():
            patch.setenv(name, value)
        try:
            result = build_feature(project.root, FEATURE_ID, *(agents or project.agents()), on_event=events)
        finally:
            events.finish()
    assert "not written" not in stderr.getvalue()
    return FeatureRun(project, result, snapshots, page)


@pytest.fixture(scope="module")
def conflict_run(tmp_path_factory: pytest.TempPathFactory) -> FeatureRun:
    """T1 approved in turn 2 and merged; T2 approved but its merge conflicts with T1's (same file):
    blocked; so wave 2 (T3) never starts."""
    # T1's Player takes a second, so the page written when its turn starts can show it running.
    specs = [TaskSpec(T1, approve_at=2, file=SHARED, mode="replace", sleep=1.0),
             TaskSpec(T2, file=SHARED, mode="replace"), TaskSpec(T3, [T1, T2])]
    run = run_feature(make_feature(tmp_path_factory.mktemp("conflict"), specs, WAVES))
    assert (run.result.status, run.result.task(T2).status) == ("stopped", "blocked")
    return run


def test_grid_cells_are_the_runs_tasks(conflict_run: FeatureRun) -> None:
    html = conflict_run.page.read_text(encoding="utf-8")
    page = assert_inert(html)
    result = conflict_run.result
    merge = result.task(T1).merge_commit
    assert merge
    assert page.grid == {
        T1: {"status": "completed", "turns": "2", "outcome": "approved", "merged": f"yes {merge[:10]}",
             "blocked": "—", "timeline": "1 2"},
        T2: {"status": "blocked", "turns": "1", "outcome": "approved", "merged": "no", "blocked": SHARED,
             "timeline": "1"},
        T3: {"status": "pending", "turns": "0", "outcome": "—", "merged": "no", "blocked": "—",
             "timeline": "no turn yet"},
    }
    assert page.waves == {T1: "1", T2: "1", T3: "2"}
    # The grid says what the run's own result says, task by task.
    for task in result.tasks:
        assert page.grid[task.task_id]["status"] == task.status
        assert page.grid[task.task_id]["turns"] == str(task.turns)
        assert page.grid[task.task_id]["merged"].startswith("yes" if task.merge_commit else "no")
    assert conflict_run.result.task(T2).conflicts == (SHARED,)


def test_each_task_has_its_section_with_its_own_report(conflict_run: FeatureRun) -> None:
    root = conflict_run.project.root
    html = conflict_run.page.read_text(encoding="utf-8")
    page = read_page(html)
    # The sections' criteria matrices are each task's own report, as `report TASK-X` draws it.
    assert page.matrices == {T1: {"AC-001": ["rejected", "verified"]}, T2: {"AC-001": ["verified"]},
                             T3: {"AC-001": []}}
    assert [row.cells[-1].status for row in build_task_report(root, T2).criteria] == ["verified"]
    # Each chip of the grid links to that turn's column of its task's section.
    assert {"#t1-TASK-FB-001-turn-1", "#t1-TASK-FB-001-turn-2", "#t2-TASK-FB-002-turn-1"} <= set(page.hrefs)
    assert "t1-TASK-FB-001" in page.ids and "t3-TASK-FB-003" in page.ids
    text = " ".join(page.text)
    assert "TASK-FB-001: turn 1 is not finished yet" in text  # the Coach's feedback, folded under turn 1
    assert "next:" in text and "blocked" in text


def test_report_reads_the_merged_tasks_turns_once_its_worktree_is_gone(conflict_run: FeatureRun,
                                                                         tmp_path: Path) -> None:
    root = conflict_run.project.root
    before = build_feature_report(root, FEATURE_ID).task(T1)
    assert before.report is not None and len(before.report.turns) == 2
    git(root, "worktree", "remove", "--force", str(conflict_run.project.task_worktree(T1)))
    try:
        after = build_feature_report(root, FEATURE_ID).task(T1)
        assert after.report is not None
        assert [t.decision for t in after.report.turns] == ["feedback", "approve"]
        assert ".guardkit/worktrees/FEAT-FB/" in after.report.path  # the feature branch's copy
    finally:
        git(root, "worktree", "add", "-q", str(conflict_run.project.task_worktree(T1)), f"autobuild/{T1}")


def test_the_page_is_rewritten_after_every_task_turn(conflict_run: FeatureRun) -> None:
    pages = [(event, read_page(html)) for event, html in conflict_run.snapshots if html]
    t1 = [p.grid[T1] for _, p in pages if T1 in p.grid]
    # While T1's loop runs a turn, the grid says so, with the turn, and a chip marks the running turn
    # after the recorded ones; a turn recorded shows as a chip on the next page.
    assert {"status": "running turn 1", "timeline": "1…"}.items() <= next(
        c for c in t1 if c["status"] == "running turn 1").items()
    assert any(c["status"] == "running turn 2" and c["timeline"] == "1 2…" for c in t1), t1
    # The pages follow the files: turns never go back, a recorded turn is never shown running too.
    turns = [int(c["turns"]) for c in t1]
    assert turns == sorted(turns) and turns[-1] == 2
    for cells in t1:
        chips = cells["timeline"].split()
        assert len(chips) == len({c.rstrip("…") for c in chips}), cells
    # The last page is the run's end: nothing running, every task as the result says.
    final = read_page(conflict_run.page.read_text(encoding="utf-8"))
    assert [final.grid[t.task_id]["status"] for t in conflict_run.result.tasks] == ["completed", "blocked", "pending"]
    assert [p.name for p in conflict_run.page.parent.iterdir()] == ["feature.html"]  # atomic: no temp file


# -- hostile text ------------------------------------------------------------------------------------

def _hostile_project(base: Path) -> FeatureProject:
    """A feature whose plan name and one task's title are HOSTILE (YAML-escaped, so they parse)."""
    project = make_feature(base, [TaskSpec(T1), TaskSpec(T2)], [[T1, T2]])
    task = project.root / task_rel(T1)
    task.write_text(task.read_text().replace(f"title: Build part {T1}", f"title: {json.dumps(HOSTILE)}"))
    plan = project.root / PLAN_REL
    plan.write_text(plan.read_text().replace("name: 'Feature build: parallel waves'", f"name: {json.dumps(HOSTILE)}"))
    git(project.root, "commit", "-q", "-am", "hostile texts")
    return project


def _hostile_player(request: TurnRequest) -> dict[str, Any]:
    (request.workdir / f"{request.task_id}.txt").write_text(f"turn {request.turn}\n")
    return {"summary": HOSTILE, "tests_run": True, "tests_passed": True, "files_created": [f"{request.task_id}.txt"],
            "blockers": [HOSTILE]}


def _hostile_coach(request: TurnRequest) -> dict[str, Any]:
    approve = request.turn >= 2
    return {"decision": "approve" if approve else "feedback", "feedback": None if approve else HOSTILE,
            "criteria_verification": [{"criterion_id": "AC-001", "result": "verified" if approve else "rejected",
                                       "notes": HOSTILE}],
            "issues": [] if approve else [{"severity": "must_fix", "description": HOSTILE}], "rationale": HOSTILE,
            "validation_results": {"tests_passed_count": 1, "tests_failed_count": 0}}


@pytest.fixture(scope="module")
def hostile_feature(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished feature whose plan, task title, Player and Coach wrote HOSTILE everywhere."""
    project = _hostile_project(tmp_path_factory.mktemp("hostile"))
    run = run_feature(project, (CallableAgent(_hostile_player), CallableAgent(_hostile_coach)))
    assert run.result.status == "completed", run.result.reason
    return run.page


def test_hostile_plan_title_and_feedback_are_inert(hostile_feature: Path) -> None:
    html = hostile_feature.read_text(encoding="utf-8")
    page = assert_inert(html)
    text = "".join(page.text)
    assert "<script>window.__pwned=1</script>" in text and 'onerror="window.__pwned=2"' in text
    assert "javascript:window.__pwned=3" in text and "\\u202e" in text
    assert page.grid[T1]["status"] == "completed" and page.grid[T1]["timeline"] == "1 2"


# -- the commands ------------------------------------------------------------------------------------

def test_cli_report_of_a_feature(conflict_run: FeatureRun, capsys: pytest.CaptureFixture[str]) -> None:
    root = conflict_run.project.root
    code = cli_run(["report", FEATURE_ID, "--repo", str(root), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    data = json.loads(captured.out)
    path = root / ".guardkit" / "reports" / f"{FEATURE_ID}.html"
    assert data["path"] == str(path) and data["bytes"] == path.stat().st_size
    assert data["waves"] == 2 and data["task_statuses"] == {"completed": 1, "blocked": 1, "pending": 1}
    assert [(t["task_id"], t["status"], t["turns"], t["merged"], t["blocked_paths"]) for t in data["tasks"]] == [
        (T1, "completed", 2, True, []), (T2, "blocked", 1, False, [SHARED]), (T3, "pending", 0, False, [])]
    out = root.parent / "feature-out" / "f.html"
    code = cli_run(["report", str(root / PLAN_REL), "--repo", str(root), "-o", str(out)])  # the plan's path
    captured = capsys.readouterr()
    assert code == 0 and captured.out.startswith(f"wrote {out}") and "3 task(s) in 2 wave(s)" in captured.out
    assert read_page(out.read_text(encoding="utf-8")).grid == read_page(path.read_text(encoding="utf-8")).grid


def test_cli_report_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1)], None)
    assert cli_run(["report", "FEAT-NOPE", "--repo", str(project.root)]) == 2
    assert "no feature plan FEAT-NOPE" in capsys.readouterr().err
    with pytest.raises(FeatureNotFoundError):
        write_feature_report(project.root, "FEAT-NOPE")
    with pytest.raises(InputError, match="is a directory"):
        write_feature_report(project.root, FEATURE_ID, project.root)
    # Before any run: every task pending, no turn, the page says what a run would do.
    page = read_page(write_feature_report(project.root, FEATURE_ID).path.read_text(encoding="utf-8"))
    assert page.grid[T1] == {"status": "pending", "turns": "0", "outcome": "—", "merged": "no", "blocked": "—",
                             "timeline": "no turn yet"}


@pytest.fixture
def cli_project(tmp_path: Path) -> Iterator[FeatureProject]:
    yield make_feature(tmp_path, [TaskSpec(T1), TaskSpec(T2, approve_at=2)], [[T1, T2]])


def test_feature_build_report_option(cli_project: FeatureProject) -> None:
    page = cli_project.root.parent / "live" / "feature.html"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARDKIT_", "FEATURE_"))}
    env.update(cli_project.env(), NO_COLOR="1")
    run = subprocess.run(cli_argv(cli_project, "--report", str(page)), cwd=cli_project.root, env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "not written" not in run.stderr
    grid = assert_inert(page.read_text(encoding="utf-8")).grid
    assert {t: (c["status"], c["turns"], c["timeline"]) for t, c in grid.items()} == {
        T1: ("completed", "1", "1"), T2: ("completed", "2", "1 2")}
    assert [p.name for p in page.parent.iterdir()] == ["feature.html"]
