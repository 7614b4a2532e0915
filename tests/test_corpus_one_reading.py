"""One reading for every view, on a repository shaped like GuardKit's (the corpus's 41 plans and task
files, a task file at every path a plan names, GuardKit's ``autobuild/`` and ``autobuild-private/``
reports, two features whose tasks were completed by hand): every plan gives the same counts in
``status``, ``show``, ``log`` and ``report``; every task with loop state the same criterion statuses
in ``show``, ``context`` and ``report``; the words around the counts never contradict them."""

from __future__ import annotations

from pathlib import Path

import pytest

from guardkit_state.inspect.feature_log import read_feature_log
from guardkit_state.inspect.feature_view import feature_view
from guardkit_state.inspect.status import feature_status, repo_status
from guardkit_state.inspect.task_view import continuation_context, task_view
from guardkit_state.report.collect import build_task_report
from guardkit_state.report.feature import build_feature_report
from guardkit_state.turns.ledger import IMPLIED_WORDS

from .bench.guardkit_repo import CLOSED_BY_HAND, make_guardkit_repo
from .guardkit_fixtures import cli as run_cli

pytestmark = [pytest.mark.corpus, pytest.mark.slow]


@pytest.fixture(scope="module")
def guardkit_repo(corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("guardkit-shaped") / "repo"
    made = make_guardkit_repo(root, corpus_dir, files=0)
    assert made["plans"] == 41 and made["plan_files_added"] > 200
    return root


def test_every_plan_gives_the_same_counts_in_every_view(guardkit_repo: Path) -> None:
    summaries = feature_status(guardkit_repo)
    assert len(summaries) == 41
    for summary in summaries:
        assert summary.error is None, summary
        counts = feature_view(guardkit_repo, summary.feature_id).tally
        got = (summary.total, summary.done, summary.failed, summary.total_turns, summary.tasks)
        assert got == (counts.tasks, counts.done, counts.failed, counts.turns, counts.by_status), summary.feature_id
        assert read_feature_log(guardkit_repo, summary.feature_id).tally == counts, summary.feature_id
        assert build_feature_report(guardkit_repo, summary.feature_id, generated_at="-").view.tally == counts


@pytest.mark.parametrize("feature", CLOSED_BY_HAND)
def test_tasks_completed_by_hand_are_done_in_every_view(guardkit_repo: Path, feature: str) -> None:
    """GuardKit's plan still says ``planned``; its tasks' files say completed: 3/3 done, skipped,
    and no view calls the feature "not started" beside that."""
    [summary] = [s for s in feature_status(guardkit_repo) if s.feature_id == feature]
    view = feature_view(guardkit_repo, feature)
    assert (summary.done, summary.total) == (view.tally.done, view.tally.tasks) == (3, 3)
    assert [row.status for row in view.tasks] == ["skipped"] * 3
    shown = run_cli(guardkit_repo, "show", feature)
    assert "3/3 task(s) done" in shown.stdout and "not started" not in shown.stdout
    logged = run_cli(guardkit_repo, "log", feature)
    assert "3/3 task(s) done" in logged.stdout and "not started" not in logged.stdout


def test_log_of_a_feature_guardkit_ran_never_says_it_has_not_started(guardkit_repo: Path) -> None:
    logged = run_cli(guardkit_repo, "log", "FEAT-CR01")
    assert logged.returncode == 0, logged.stderr
    first = logged.stdout.splitlines()[0]
    assert first.startswith("FEAT-CR01: ") and "0/" not in first
    assert "has not started" not in logged.stdout and "not started" not in logged.stdout
    assert "no branch autobuild/FEAT-CR01 here: the progress is what the plan and the task files record" \
        in logged.stdout


def _context_statuses(text: str) -> dict[str, str]:
    """``{criterion id: status}`` from a context's ``**Acceptance Criteria Status**`` lines."""
    found: dict[str, str] = {}
    words = {"verified": "verified", "rejected": "rejected", "pending": "pending", IMPLIED_WORDS: "implied"}
    for line in text.split("**Acceptance Criteria Status**:", 1)[-1].splitlines():
        if not line.startswith("  ") or line[2:3] not in ("✓", "✗", "○"):
            continue
        cid = line[4:].split(": ", 1)[0]
        found[cid] = next(short for word, short in words.items() if line.endswith(f": {word}"))
    return found


def test_every_task_gives_the_same_criterion_statuses_in_every_view(guardkit_repo: Path) -> None:
    rows = [s for s in repo_status(guardkit_repo) if s.error is None and s.turns]
    assert len(rows) > 80
    for summary in rows:
        view = task_view(guardkit_repo, summary.task_id)
        shown = {row.id: "implied" if row.implied_by_approval and row.status == "verified" else row.status
                 for row in view.criteria}
        report = build_task_report(guardkit_repo, summary.task_id, generated_at="-")
        assert report.final_statuses() == shown, summary.task_id
        context = continuation_context(guardkit_repo, summary.task_id).text
        if shown:
            assert _context_statuses(context) == shown, summary.task_id
        counts = view.counts
        assert (summary.verified, summary.implied_by_approval, summary.rejected, summary.pending) == (
            counts.verified, counts.implied_by_approval, counts.rejected, counts.pending), summary.task_id
        assert report.counts == counts, summary.task_id
