"""Never on the loop's path: the per-turn hook starts a background sync and returns without waiting for
it; a loop with a busy index finishes while the index is still unsynced, and the index catches up
afterwards; a burst of hooks coalesces behind the one background indexer.

How long the loop takes with an index (idle or busy) against without one is a benchmark row
(``tests/bench/bench_index_loop.py``), not a limit here: timing limits inside tests fail on a
loaded machine and prove nothing on an idle one. The waits below only bound a hang."""

from __future__ import annotations

import contextlib
import logging
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

from guardkit_state.agents.protocol import CallableAgent
from guardkit_state.index import open_graphiti, search
from guardkit_state.index.after_turn import BACKGROUND_LOCK, HOOK_LOG, index_turn_best_effort
from guardkit_state.loop.run import run_task_loop
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


def _hook_log(root: Path) -> str:
    path = root / ".guardkit" / "index" / HOOK_LOG
    return path.read_text() if path.exists() else ""


def test_a_busy_index_does_not_hold_up_the_loop_and_catches_up_after(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    """Guards the loop's hook returning at once (``index_turn_best_effort`` with no budget): a hook
    that waited for its sync could not return while this test holds the index, so the loop would
    stall or report "still running" instead of "indexing in the background"."""
    root = _repo(tmp_path / "indexed")
    with open_graphiti(root) as index:
        index.sync()
    caplog.set_level(logging.INFO, logger="guardkit_state")
    with open_graphiti(root):  # the index is busy for the whole loop: no sync can run meanwhile
        result = run_task_loop(root, TASK, CallableAgent(scripted_player), coach_verifying(3))
        assert result.outcome is Outcome.APPROVED
        hooks = [r.getMessage() for r in caplog.records if r.getMessage().startswith("index turn")]
        assert len(hooks) == 3 and all("pending: indexing in the background" in h for h in hooks), hooks
        assert "synced (" not in _hook_log(root)  # the loop finished before any turn was indexed
    deadline = time.monotonic() + 120  # a hang guard, not a speed claim
    while time.monotonic() < deadline:  # the background indexer syncs once the lock is free
        found = search(root, "turn TASK-AUTH-001")
        if found.backend == "graphiti" and len(found.hits) == 3:
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"the index never caught up: {found.note}")
    assert "synced" in _hook_log(root)


def _holder_pid(lock: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(lock.read_text().split()[0])
    return None


def test_the_hook_returns_before_its_sync_and_a_burst_coalesces(tmp_path: Path) -> None:
    """Guards the background lock of ``after_turn._child_main``: while one indexer runs, a new one
    leaves a marker and exits ("another background indexer runs"), and the running one syncs again.
    Without the lock each of the three hooks' indexers syncs on its own: three syncs, none queued."""
    root = seed001_project(tmp_path / "proj")
    with open_graphiti(root) as index:
        index.sync()
    lock = root / ".guardkit" / "index" / BACKGROUND_LOCK
    with open_graphiti(root):  # hold the index: the first indexer takes the background lock, then waits
        first = index_turn_best_effort(root, write_turn(root, "FEAT-AUTH", TASK, 4, "feedback"))
        assert first.startswith("pending: indexing in the background"), first
        pids = [int(first.rsplit("pid ", 1)[1].rstrip(")"))]
        for _ in range(1200):  # until the first indexer holds the background lock (a hang guard)
            if _holder_pid(lock) == pids[0]:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"the first indexer never took {lock}")
        for n in (5, 6):
            outcome = index_turn_best_effort(root, write_turn(root, "FEAT-AUTH", TASK, n, "feedback"))
            assert outcome.startswith("pending:"), outcome
            pids.append(int(outcome.rsplit("pid ", 1)[1].rstrip(")")))
        for pid in pids[1:]:
            _wait_exit(pid)  # they exit at once, queued behind the first, while the index is still held
        assert _hook_log(root).count("another background indexer runs") == 2, _hook_log(root)
        assert "synced (" not in _hook_log(root)  # the first hook returned long before its sync
    _wait_exit(pids[0])
    syncs = _hook_log(root).count("synced (")
    assert syncs in (1, 2), _hook_log(root)  # one, and one more if the others' marker came after its start
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
