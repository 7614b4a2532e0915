"""One feature-progress reading: ``status``, ``show``, ``log`` and ``report`` agree on a feature
GuardKit's own runner ran (its branch exists, its tasks have none, the plan holds the outcome)."""

from __future__ import annotations

from pathlib import Path

import pytest

from guardkit_state.features.progress import TaskState
from guardkit_state.features.standing import plan_word, tally, task_standing
from guardkit_state.inspect.feature_log import read_feature_log
from guardkit_state.inspect.feature_view import feature_view
from guardkit_state.inspect.status import feature_status
from guardkit_state.plans.plan import parse_plan
from guardkit_state.report.feature import build_feature_report

from .conftest import run_git

TASK = """---
id: {id}
title: {id}
status: {status}
---

# {id}

## Acceptance Criteria

- [ ] it works
"""

# GuardKit's plan after its run: two approved, one over its turn budget, one never run, one whose
# status GuardKit left 'pending' beside an approved result.
PLAN = """id: FEAT-GK
name: GuardKit ran this
status: failed
tasks:
- id: TASK-GK-001
  file_path: tasks/in_review/TASK-GK-001.md
  dependencies: []
  status: completed
  result: {total_turns: 2, final_decision: approved, error: null}
  turns_completed: 2
- id: TASK-GK-002
  file_path: tasks/in_review/TASK-GK-002.md
  dependencies: []
  status: pending
  result: {total_turns: 3, final_decision: approved, error: null}
  turns_completed: 3
- id: TASK-GK-003
  file_path: tasks/backlog/TASK-GK-003.md
  dependencies: [TASK-GK-001]
  status: failed
  result: {total_turns: 5, final_decision: max_turns_exceeded, error: Maximum turns (5) exceeded}
  turns_completed: 5
- id: TASK-GK-004
  file_path: tasks/backlog/TASK-GK-004.md
  dependencies: [TASK-GK-003]
  status: pending
  result: null
  turns_completed: 0
- id: TASK-GK-005
  file_path: tasks/completed/TASK-GK-005.md
  dependencies: [TASK-GK-003]
  status: pending
orchestration:
  parallel_groups:
  - [TASK-GK-001, TASK-GK-002]
  - [TASK-GK-003]
  - [TASK-GK-004, TASK-GK-005]
execution:
  tasks_completed: 2
  tasks_failed: 1
  total_turns: 10
  current_wave: 2
  completed_waves: [1]
"""


@pytest.fixture
def guardkit_feature(git_repo: Path) -> Path:
    statuses = {"TASK-GK-001": "in_review", "TASK-GK-002": "in_review", "TASK-GK-003": "backlog",
                "TASK-GK-004": "backlog", "TASK-GK-005": "completed"}
    for task_id, status in statuses.items():
        path = git_repo / "tasks" / status / f"{task_id}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(TASK.format(id=task_id, status=status), encoding="utf-8")
    plan = git_repo / ".guardkit" / "features" / "FEAT-GK.yaml"
    plan.parent.mkdir(parents=True)
    plan.write_text(PLAN, encoding="utf-8")
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-q", "-m", "GuardKit's feature")
    run_git(git_repo, "branch", "autobuild/FEAT-GK")  # GuardKit's feature branch, no task branches
    return git_repo


def test_a_guardkit_run_reads_as_its_plan_says_in_every_view(guardkit_feature: Path) -> None:
    view = feature_view(guardkit_feature, "FEAT-GK")
    assert [(r.task_id, r.status, r.turns, r.source) for r in view.tasks] == [
        ("TASK-GK-001", "completed", 2, "plan"), ("TASK-GK-002", "completed", 3, "plan"),
        ("TASK-GK-003", "failed", 5, "plan"), ("TASK-GK-004", "pending", 0, "task_file"),
        ("TASK-GK-005", "skipped", 0, "task_file")]
    counts = view.tally
    assert (counts.tasks, counts.done, counts.failed, counts.turns) == (5, 3, 1, 10)
    assert counts.describe() == "3/5 task(s) done · 10 turn(s) · 1 failed/blocked"
    # The failed task is GuardKit's: a run of ours runs it again, it does not stop at it.
    assert view.next.run == ("TASK-GK-003",) and view.next.stopped_by == ()
    assert "max_turns_exceeded" in view.next.text

    (summary,) = feature_status(guardkit_feature)
    assert (summary.total, summary.done, summary.failed, summary.total_turns) == (5, 3, 1, 10)
    assert summary.tasks == counts.by_status
    log = read_feature_log(guardkit_feature, "FEAT-GK")
    assert log.tally == counts and [s.status for s in log.standings] == [r.status for r in view.tasks]
    report = build_feature_report(guardkit_feature, "FEAT-GK", generated_at="now")
    assert report.view.tally == counts and [t.status for t in report.tasks] == [r.status for r in view.tasks]


def test_a_pending_status_beside_a_result_reads_as_the_result(tmp_path: Path) -> None:
    plan = parse_plan(PLAN.replace("status: completed\n  result: {total_turns: 2",
                                   "status: pending\n  result: {total_turns: 2"), path=tmp_path / "FEAT-GK.yaml")
    entry = plan.task("TASK-GK-001")
    assert plan_word(entry) == "completed"  # a pending status beside an approved result
    closed = task_standing(plan.task("TASK-GK-005"), TaskState("TASK-GK-005", "closed"))
    assert (closed.status, closed.source) == ("skipped", "task_file")


@pytest.mark.parametrize(("phase", "plan_status", "expected"), [
    ("merged", "pending", "completed"), ("approved", "blocked", "blocked"), ("approved", "completed", "approved"),
    ("failed", "completed", "failed"), ("resume", "completed", "in_progress"), ("new", "in_review", "in_review"),
    ("new", "pending", "pending"), ("closed", None, "skipped")])
def test_a_run_of_ours_decides_over_the_plan(tmp_path: Path, phase: str, plan_status: str | None,
                                             expected: str) -> None:
    status_line = f"  status: {plan_status}\n" if plan_status else ""
    plan = parse_plan(f"id: FEAT-X\ntasks:\n- id: TASK-X-1\n{status_line}  turns_completed: 4\n",
                      path=tmp_path / "FEAT-X.yaml")
    standing = task_standing(plan.task("TASK-X-1"), TaskState("TASK-X-1", phase, turns=2))  # type: ignore[arg-type]
    assert standing.status == expected
    assert standing.turns == (4 if standing.source == "plan" else 2)
    assert tally([standing]).done == (expected in ("completed", "skipped"))
