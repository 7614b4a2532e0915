"""The feature demo (``make demo-feature``) runs end to end and leaves what it says it does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from guardkit_state.plans.plan import load_plan
from guardkit_state.taskfile.document import TaskFile

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPT = REPO_ROOT / "examples" / "run_feature_demo.py"
BRANCH = "autobuild/FEAT-DEMO"
#: Task -> (turns, decisions): TASK-FD-001's first draft misses a criterion, so it takes two turns.
EXPECTED_TURNS = {"TASK-FD-001": ["feedback", "approve"], "TASK-FD-002": ["approve"], "TASK-FD-003": ["approve"]}


def _git(cwd: Path, *args: str) -> str:
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    workdir = tmp_path_factory.mktemp("feature-demo")
    env = {"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "HOME": str(workdir)}
    proc = subprocess.run([sys.executable, str(SCRIPT), "--workdir", str(workdir)], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    return proc, workdir / "textkit"


def test_demo_ends_with_every_wave_merged(demo: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, _ = demo
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "FEAT-DEMO: completed" in proc.stdout
    assert "wave 1/2: TASK-FD-001, TASK-FD-002" in proc.stdout
    assert "wave 2/2: TASK-FD-003" in proc.stdout
    assert "Done: two tasks ran side by side" in proc.stdout


def test_plan_records_each_task_approved_with_its_turns(demo: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, project = demo
    plan = load_plan(project / ".guardkit/features/FEAT-DEMO.yaml")
    assert plan.status == "completed"
    for task in plan.tasks:
        assert task.status == "completed"
        assert task.turns_completed == len(EXPECTED_TURNS[task.id])
        assert task.raw["result"]["final_decision"] == "approved"
        assert task.raw["merge_commit"]
    assert plan.execution is not None
    assert plan.execution.raw["completed_waves"] == [1, 2]
    assert plan.execution.raw["total_turns"] == 4
    # Only values were added or changed: the plan's own comment is still its first line.
    assert (project / ".guardkit/features/FEAT-DEMO.yaml").read_text().startswith("# Feature plan in GuardKit's")


def test_feature_branch_has_one_merge_per_task_in_plan_order(
        demo: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, project = demo
    subjects = _git(project, "log", "--first-parent", "--merges", "--reverse", "--format=%s", BRANCH).splitlines()
    assert subjects == [f"Merge autobuild/{task_id} into {BRANCH}" for task_id in EXPECTED_TURNS]
    files = _git(project, "ls-tree", "--name-only", BRANCH).split()
    assert {"slug.py", "words.py", "summary.py"} <= set(files)
    # The user's checkout is untouched: main has none of the tasks' code.
    assert "slug.py" not in _git(project, "ls-tree", "--name-only", "main").split()


def test_each_task_has_its_turns_and_the_merged_code_passes_the_tests(
        demo: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, project = demo
    feature = project / ".guardkit/worktrees/FEAT-DEMO"
    for task_id, decisions in EXPECTED_TURNS.items():
        task_file = next((feature / "tasks/backlog").glob(f"{task_id}-*.md"))
        state = TaskFile.load(task_file).state
        assert state is not None
        assert [(t.turn, t.decision) for t in state.turns] == list(enumerate(decisions, start=1))
    tests = subprocess.run([sys.executable, "-m", "unittest", "discover", "-s", "tests", "-t", "."], cwd=feature,
                           capture_output=True, text=True, timeout=120, check=False)
    assert tests.returncode == 0, tests.stderr
    assert "Ran 8 tests" in tests.stderr and "skipped" not in tests.stderr
