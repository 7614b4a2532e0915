"""The corpus's feature plans laid out as a GuardKit repository: ``status``, ``show``, ``log`` and
``report`` give every plan the same counts, with and without GuardKit's feature branches."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from guardkit_state.inspect.feature_log import read_feature_log
from guardkit_state.inspect.feature_view import feature_view
from guardkit_state.inspect.status import feature_status
from guardkit_state.report.feature import build_feature_report

from .conftest import run_git, writable_copy

pytestmark = [pytest.mark.corpus, pytest.mark.slow]


@pytest.fixture(scope="module")
def corpus_repo(corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus-features") / "repo"
    writable_copy(corpus_dir / "tasks", root / "tasks")
    writable_copy(corpus_dir / "features", root / ".guardkit" / "features")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "corpus"]):
        subprocess.run(["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args], cwd=root,
                       check=True, capture_output=True)
    return root


def _counts_agree(root: Path) -> int:
    summaries = feature_status(root)
    assert len(summaries) == len(list((root / ".guardkit" / "features").glob("FEAT-*.yaml")))
    for summary in summaries:
        assert summary.error is None, summary
        view = feature_view(root, summary.feature_id)
        counts = view.tally
        got = (summary.total, summary.done, summary.failed, summary.total_turns, summary.tasks)
        assert got == (counts.tasks, counts.done, counts.failed, counts.turns, counts.by_status), summary.feature_id
        assert read_feature_log(root, summary.feature_id).tally == counts, summary.feature_id
        assert build_feature_report(root, summary.feature_id, generated_at="-").view.tally == counts, summary.feature_id
    return len(summaries)


def test_every_plan_gives_the_same_counts_in_every_view(corpus_repo: Path) -> None:
    assert _counts_agree(corpus_repo) > 30


def test_the_counts_match_guardkits_own_execution_block(corpus_repo: Path) -> None:
    """Where GuardKit finished a run (``execution.completed_at``), its counters are the tasks' counts;
    the one exception is a task it 'deferred', which it counts as completed and we show as deferred."""
    differ = {}
    for summary in feature_status(corpus_repo):
        view = feature_view(corpus_repo, summary.feature_id)
        from guardkit_state.plans.plan import find_plan, load_plan

        execution = load_plan(find_plan(corpus_repo, summary.feature_id)).execution
        if execution is None or not execution.raw.get("completed_at"):
            continue
        told = (execution.raw.get("tasks_completed"), execution.raw.get("tasks_failed"),
                execution.raw.get("total_turns"))
        if told != (view.tally.done, view.tally.failed, view.tally.turns):
            differ[summary.feature_id] = (told, view.tally.by_status)
    assert set(differ) <= {"FEAT-HARV"}, differ
    assert all("deferred" in by_status for _, by_status in differ.values())


def test_with_guardkits_feature_branches_the_plans_still_decide(corpus_repo: Path, tmp_path: Path) -> None:
    """GuardKit names its feature branches as we do (autobuild/FEAT-X): with them, show reads git,
    finds no run of ours, and still agrees with status (no task 'skipped' because its file is closed)."""
    root = tmp_path / "with-branches"
    subprocess.run(["git", "clone", "-q", str(corpus_repo), str(root)], check=True, capture_output=True)
    for plan in sorted((root / ".guardkit" / "features").glob("FEAT-*.yaml")):
        run_git(root, "branch", f"autobuild/{plan.stem}")
    assert _counts_agree(root) > 30
    view = feature_view(root, "FEAT-CR01")
    assert view.started and view.tally.describe() == "7/10 task(s) done · 59 turn(s) · 2 failed/blocked"
