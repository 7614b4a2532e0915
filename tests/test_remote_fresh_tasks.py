"""``remote/fresh_tasks.py``: tasks nobody has started, found from one look at the remote (no fetch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from guardkit_state.features.progress import TaskState
from guardkit_state.remote.fresh_tasks import fresh_tasks
from tests.feature_support import FEATURE_ID, TaskSpec, make_feature
from tests.remote_support import clone, make_bare

WAVES = [("T-1", "T-2", "T-3"), ("T-4",)]
CLAIMS = "refs/guardkit/claims/F"


def never_run(closed: tuple[str, ...] = ()) -> dict[str, TaskState]:
    return {task: TaskState(task, "closed" if task in closed else "new") for wave in WAVES for task in wave}


@pytest.mark.parametrize(("refs", "merged", "closed", "local", "expected"), [
    ({}, {}, (), set(), ["T-1", "T-2", "T-3"]),
    ({f"{CLAIMS}/T-1": "c"}, {}, (), set(), ["T-2", "T-3"]),  # claimed elsewhere
    ({f"{CLAIMS}/T-1/x": "c"}, {}, (), set(), ["T-2", "T-3"]),  # a ref below its claim ref: in its way
    ({f"{CLAIMS}/x/T-1": "c"}, {}, (), set(), ["T-1", "T-2", "T-3"]),  # a ref at another depth: no claim
    ({"refs/heads/autobuild/T-2": "b"}, {}, (), set(), ["T-1", "T-3"]),  # started elsewhere: a reading tells
    ({}, {}, (), {"autobuild/T-3"}, ["T-1", "T-2"]),  # started in this clone
    ({}, {}, ("T-2",), set(), ["T-1", "T-3"]),  # finished before the feature ran
    ({"refs/heads/autobuild/T-1": "b"}, {"T-1": "m", "T-2": "m", "T-3": "m"}, (), set(), ["T-4"]),  # next wave
    ({"refs/heads/autobuild/T-1": "b"}, {"T-2": "m", "T-3": "m"}, (), set(), []),  # T-1 only a reading can tell
    ({}, {"T-1": "m", "T-2": "m", "T-3": "m", "T-4": "m"}, (), set(), []),  # every wave merged
])
def test_fresh_tasks_are_the_first_open_waves_tasks_nobody_started(
        tmp_path: Path, refs: dict[str, str], merged: dict[str, str], closed: tuple[str, ...], local: set[str],
        expected: list[str]) -> None:
    states = never_run(closed)
    assert fresh_tasks(refs, WAVES, merged, CLAIMS, tmp_path, local, states.__getitem__) == expected


def test_a_task_with_a_worktree_in_this_clone_is_not_fresh(tmp_path: Path) -> None:
    (tmp_path / "T-1").mkdir()
    assert fresh_tasks({}, WAVES, {}, CLAIMS, tmp_path, set(), never_run().__getitem__) == ["T-2", "T-3"]


def test_a_worker_starts_the_tasks_nobody_started_without_a_fetch_for_each(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from guardkit_state.remote.branches import RemoteBranches
    from guardkit_state.remote.worker import WorkerOptions, run_worker

    tasks = [TaskSpec(f"TASK-FB-{n:03d}") for n in range(1, 6)]
    project = make_feature(tmp_path, tasks)
    machine = clone(make_bare(tmp_path, project.root).as_uri(), tmp_path / "machine")
    for name, value in project.env().items():
        monkeypatch.setenv(name, value)
    fetches: list[int] = []
    real = RemoteBranches.fetch

    def counted(self: RemoteBranches, *also: str, listed: tuple[str, ...] = ()) -> dict[str, str]:
        fetches.append(1)
        return real(self, *also, listed=listed)

    monkeypatch.setattr(RemoteBranches, "fetch", counted)
    player, coach = project.agents()
    result = run_worker(machine, FEATURE_ID, player, coach, WorkerOptions(remote="origin", poll=0.1))
    assert result.done and sorted(result.ran) == [t.task_id for t in tasks], result.reason
    # One fetch to start, one to see the wave approved (and merge it); none before each of the five
    # tasks after the first.
    assert len(fetches) == 2
