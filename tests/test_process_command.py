"""The one process runner (agents, git, smoke gates, the index's server and indexer): real processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from guardkit_state.process.command import RUN_MARK, run_command, start_time, stop_orphans

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
    done = run_command(f"cat {pid_file}; echo $GUARDKIT_STATE_RUN", cwd=tmp_path, shell=True, session=True,
                       pid_file=pid_file, what="the probe")
    written, mark = done.stdout.decode().splitlines()
    recorded = json.loads(written)
    # The run's mark, the one in its environment: what escapes its group is found by it after a kill too.
    assert recorded == {"pgid": done.pid, "start": recorded["start"], "what": "the probe", "mark": mark}
    assert len(mark) == 24
    assert not pid_file.exists()


def test_stop_orphans_names_what_it_stopped_from_an_older_agent_pid_file(tmp_path: Path) -> None:
    # A pid file an older loop's agent wrote (role and turn, no "what") is still understood.
    mark = "0123456789abcdef01234567"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True,
                               env={**os.environ, RUN_MARK: mark})
    try:
        start = start_time(sleeper.pid)
        pid_file = tmp_path / "player_report_3.agent.json"
        pid_file.write_text(json.dumps({"pgid": sleeper.pid, "start": start, "role": "player", "turn": 3,
                                        "mark": mark}))
        assert stop_orphans([pid_file], by="the interrupted loop") == [
            f"stopped the player of turn 3 (process group {sleeper.pid}) left running by the interrupted loop"]
        assert sleeper.wait(timeout=10) == -signal.SIGKILL
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()


#: A daemon (double fork + setsid): its pid in ``daemon.pid``, then it sleeps; the command exits at once.
DAEMON = ("import os, time\n"
          "if os.fork() == 0:\n"
          "    os.setsid()\n"
          "    if os.fork() == 0:\n"
          "        open('daemon.pid', 'w').write(str(os.getpid()))\n"
          "        time.sleep(120)\n"
          "    os._exit(0)\n"
          "os.wait()\n"
          "while not os.path.exists('daemon.pid'):\n"
          "    time.sleep(0.01)\n")


def _gone(pid: int) -> bool:
    """True once ``pid`` is gone or a zombie (SIGKILL lands a moment later; the wait only bounds a hang)."""
    for _ in range(600):
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


def _reap(pid: int) -> None:
    """Kill the test's own daemon if it still runs (a failing run must not leave it for two minutes)."""
    with contextlib.suppress(OSError):
        if b"os.setsid()" in Path(f"/proc/{pid}/cmdline").read_bytes():
            os.kill(pid, signal.SIGKILL)


def test_a_daemon_a_timed_out_command_started_is_killed_with_it(tmp_path: Path) -> None:
    done = run_command([sys.executable, "-c", DAEMON + "time.sleep(60)"], cwd=tmp_path, timeout=2.0, session=True)
    daemon = int((tmp_path / "daemon.pid").read_text())
    try:
        assert done.timed_out
        assert _gone(daemon)
    finally:
        _reap(daemon)


def test_stop_orphans_stops_what_a_killed_runs_child_left_outside_its_group(tmp_path: Path) -> None:
    # A run SIGKILLed after its agent daemonized: the agent's group is gone, its daemon is not.
    pid_file = tmp_path / "player_report_1.agent.json"
    mark = "0123456789abcdef01234567"
    script = DAEMON + f"open({str(pid_file)!r}, 'w').write(__import__('json').dumps({{'pgid': 1, 'mark': {mark!r}}}))"
    subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env={**os.environ, RUN_MARK: mark}, check=True)
    daemon = int((tmp_path / "daemon.pid").read_text())
    try:
        [note] = stop_orphans([pid_file], by="the interrupted loop")
        assert note.startswith(f"stopped process {daemon} ({sys.executable} -c import os, time")
        assert note.endswith("that the agent of turn ? had left running outside its process group, left running by "
                             "the interrupted loop")
        assert _gone(daemon)
    finally:
        _reap(daemon)
