"""A Ctrl-C before a feature run began says to run the same command again, not ``--resume``.

Stopped while it checked its plan or waited for the feature's lock, a run has made nothing (no
branch): ``--resume`` would answer "nothing to resume", so the message names the fresh start. The
Ctrl-C is made to land there for sure: the test holds the feature's lock (the real lock), so the
run waits for it, and ``/proc`` shows when the run has opened the lock file.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest

from guardkit_state.git.checkouts import shared_lock_path
from guardkit_state.store.locks import exclusive_lock

from .feature_support import (
    FEATURE_BRANCH,
    FEATURE_ID,
    FeatureProject,
    TaskSpec,
    cli_argv,
    git,
    make_feature,
    start_cli,
)

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to see the lock wait")

T1, T2 = "TASK-FB-001", "TASK-FB-002"


def start_command(project: FeatureProject, *extra: str) -> str:
    """The command a user ran (``cli_argv`` after ``python -m guardkit_state``), as the shell takes it."""
    return shlex.join(["guardkit-state", *cli_argv(project, *extra)[3:]])


def _holds_open(pid: int, path: Path) -> bool:
    """True when process ``pid`` has ``path`` open (it has begun waiting for that lock)."""
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    target = str(path.resolve())
    for fd in fds:
        try:
            if os.readlink(fd) == target:
                return True
        except OSError:
            continue
    return False


def _interrupt_while_waiting_for_the_lock(project: FeatureProject, *extra: str) -> subprocess.CompletedProcess[str]:
    lock = shared_lock_path(project.root, FEATURE_ID)
    with exclusive_lock(lock, holder="the test"):
        proc = start_cli(project, *extra)
        deadline = time.monotonic() + 60
        while not _holds_open(proc.pid, lock):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run never reached the feature's lock"
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C, as a terminal sends it to its foreground group
        out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _project(tmp_path: Path) -> FeatureProject:
    return make_feature(tmp_path, [TaskSpec(T1), TaskSpec(T2, [T1])], None)


def test_a_ctrl_c_before_the_start_says_run_it_again(tmp_path: Path) -> None:
    project = _project(tmp_path)
    run = _interrupt_while_waiting_for_the_lock(project)
    assert run.returncode == 130, run.stderr
    assert run.stderr.strip() == (f"error: feature {FEATURE_ID} interrupted before it started; nothing was "
                                  f"recorded: run {start_command(project)} again")
    assert "--resume" not in run.stderr
    assert git(project.root, "branch", "--list", FEATURE_BRANCH).strip() == ""

    # What it says is what works: --resume has nothing to resume, the same command runs the feature.
    resumed = start_cli(project, "--resume")
    _, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 2 and "nothing to resume" in err
    fresh = start_cli(project)
    _, err = fresh.communicate(timeout=120)
    assert fresh.returncode == 0, err


def test_a_ctrl_c_before_a_resume_began_says_resume(tmp_path: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1), TaskSpec(T2, [T1], approve_at=2)], None)
    first = start_cli(project, "--max-turns", "1")
    _, err = first.communicate(timeout=120)
    assert first.returncode == 1, err  # T2 needs two turns: the feature stops, its branch stays

    run = _interrupt_while_waiting_for_the_lock(project, "--max-turns", "2", "--resume")
    assert run.returncode == 130, run.stderr
    assert run.stderr.strip() == (f"error: feature {FEATURE_ID} interrupted: continue with "
                                  f"{start_command(project, '--max-turns', '2', '--resume')}")
