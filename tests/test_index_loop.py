"""Never on the loop's path: the per-turn hook starts a background sync and returns at once; the loop
runs as fast with a busy index as without one, and the index catches up afterwards."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path

import pytest

from tests.conftest import run_git
from tests.helpers import make_task_repo
from tests.index_helpers import seed001_project, write_turn
from tests.test_loop import coach_verifying, scripted_player

pytest.importorskip("graphiti_core", reason="the graphiti extra is not installed (pip install '.[graphiti]')")
pytest.importorskip("redislite", reason="falkordblite is not installed (see the Makefile's install step)")

from guardkit_state.index import open_graphiti, search
from guardkit_state.index.after_turn import HOOK_LOG, index_turn_best_effort
from guardkit_state.loop.agents import CallableAgent
from guardkit_state.loop.run import feature_build
from guardkit_state.model import Outcome

pytestmark = [pytest.mark.graphiti, pytest.mark.slow]

TASK = "TASK-AUTH-001"


def _repo(root: Path) -> Path:
    root.mkdir(parents=True)
    run_git(root, "init", "-q", "-b", "main")
    make_task_repo(root)
    run_git(root, "add", "tasks")
    run_git(root, "commit", "-q", "-m", "add task")
    return root


def _loop_seconds(root: Path) -> float:
    started = time.monotonic()
    result = feature_build(root, TASK, CallableAgent(scripted_player), coach_verifying(3))
    assert result.outcome is Outcome.APPROVED
    return time.monotonic() - started


def test_a_busy_index_costs_the_loop_nothing_and_catches_up_after(tmp_path: Path) -> None:
    baseline = _loop_seconds(_repo(tmp_path / "plain"))
    root = _repo(tmp_path / "indexed")
    with open_graphiti(root) as index:
        index.sync()
    with open_graphiti(root):  # the index is busy for the whole loop: the hook must not wait for it
        elapsed = _loop_seconds(root)
    assert elapsed < baseline * 1.5 + 1.0, (elapsed, baseline)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # the background indexer syncs once the lock is free
        result = search(root, "turn TASK-AUTH-001")
        if result.backend == "graphiti" and len(result.hits) == 3:
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"the index never caught up: {result.note}")
    hook_log = (root / ".guardkit" / "index" / HOOK_LOG).read_text()
    assert "synced" in hook_log


def test_the_hook_returns_at_once_and_bursts_coalesce(tmp_path: Path) -> None:
    root = seed001_project(tmp_path / "proj")
    with open_graphiti(root) as index:
        index.sync()
    pids = []
    for n in (4, 5, 6):
        path = write_turn(root, "FEAT-AUTH", TASK, n, "feedback")
        started = time.monotonic()
        outcome = index_turn_best_effort(root, path)
        assert time.monotonic() - started < 0.5 and outcome.startswith("pending:"), outcome
        pids.append(int(outcome.rsplit("pid ", 1)[1].rstrip(")")))
    for pid in pids:
        _wait_exit(pid)
    syncs = (root / ".guardkit" / "index" / HOOK_LOG).read_text().count("synced (")
    assert 1 <= syncs <= 3
    with open_graphiti(root) as index:
        assert not index.sync().changed  # the background syncs left nothing to do


def test_the_hook_never_creates_an_index(tmp_path: Path) -> None:
    root = seed001_project(tmp_path / "proj")
    path = root / ".guardkit/autobuild/TASK-AUTH-001/turn_state_turn_1.json"
    assert index_turn_best_effort(root, path).startswith("skipped:")
    assert not (root / ".guardkit" / "index").exists()
    shutil.rmtree(root / ".guardkit" / "autobuild")


def _wait_exit(pid: int, attempts: int = 1200) -> None:
    for _ in range(attempts):
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"indexer pid {pid} did not finish")
