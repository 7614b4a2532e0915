"""The one process runner (agents, git, smoke gates, the index's server and indexer): real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from guardkit_state.process.command import run_command, start_time, stop_orphans

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


def test_run_command_keeps_the_last_bytes_of_a_stream_past_its_limit(tmp_path: Path) -> None:
    # 3 MB printed, 1 KiB kept: what a gate's verdict quotes is the end of its output.
    script = "import sys; sys.stdout.write('x' * 3_000_000 + 'END'); sys.stderr.write('e' * 10)"
    done = run_command([sys.executable, "-c", script], cwd=tmp_path, keep_stdout=1024)
    assert done.returncode == 0
    assert len(done.stdout) == 1024 and done.stdout.endswith(b"xEND")
    assert done.stderr == b"e" * 10  # the other stream whole


def test_a_command_past_its_timeout_is_killed_and_says_so(tmp_path: Path) -> None:
    done = run_command([sys.executable, "-c", "print('begun', flush=True); import time; time.sleep(60)"],
                       cwd=tmp_path, timeout=1.0)
    assert done.timed_out and done.returncode is None
    assert done.stdout == b"begun\n"  # what it printed until then
    with pytest.raises(ChildProcessError):
        os.waitpid(done.pid, os.WNOHANG)  # reaped: no zombie left behind


def test_a_recorded_child_names_itself_and_its_pid_file_goes_with_the_run(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.json"
    done = run_command(f"cat {pid_file}", cwd=tmp_path, shell=True, session=True, pid_file=pid_file,
                       what="the probe")
    recorded = json.loads(done.stdout)
    assert recorded == {"pgid": done.pid, "start": recorded["start"], "what": "the probe"}
    assert not pid_file.exists()


def test_stop_orphans_names_what_it_stopped_from_an_older_agent_pid_file(tmp_path: Path) -> None:
    # A pid file an older loop's agent wrote (role and turn, no "what") is still understood.
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        start = start_time(sleeper.pid)
        pid_file = tmp_path / "player_report_3.agent.json"
        pid_file.write_text(json.dumps({"pgid": sleeper.pid, "start": start, "role": "player", "turn": 3}))
        assert stop_orphans([pid_file], by="the interrupted loop") == [
            f"stopped the player of turn 3 (process group {sleeper.pid}) left running by the interrupted loop"]
        assert sleeper.wait(timeout=10) == -signal.SIGKILL
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()
