"""CommandAgent's pid file and stop_orphaned_agents: agents a SIGKILLed loop leaves running."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from guardkit_state.agents.protocol import CommandAgent, TurnRequest, agent_pid_file, stop_orphaned_agents
from guardkit_state.errors import AgentError
from guardkit_state.process.command import RUN_MARK

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


def _request(tmp_path: Path, turn: int = 1) -> TurnRequest:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return TurnRequest(role="player", task_id="TASK-AGT-001", turn=turn, mode="fresh_start", workdir=tmp_path,
                       task_file=tmp_path / "task.md", context_file=work / "context.md",
                       report_file=work / f"player_report_{turn}.json")


def _start_time(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _dies(pid: int) -> bool:
    """True once ``pid`` is gone (SIGKILL is delivered asynchronously); the wait only bounds a hang."""
    limit = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < limit:
        time.sleep(0.05)
    return not _alive(pid)


#: The run mark the sleeper carries, as an agent a loop started does (see process/command.py).
MARK = "5eed5eed5eed5eed5eed5eed"


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True,
                            env={**os.environ, RUN_MARK: MARK})
    yield proc
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_command_agent_removes_its_pid_file_after_the_run(tmp_path: Path) -> None:
    request = _request(tmp_path)
    seen = tmp_path / "seen"
    command = f"ls {request.report_file.parent} > {seen}; echo '{{}}' > \"$GUARDKIT_REPORT_FILE\""
    assert CommandAgent(command).run(request) == {}
    assert "player_report_1.agent.json" in seen.read_text()  # present while the agent ran
    assert not agent_pid_file(request.report_file).exists()


def test_command_agent_ignores_a_report_left_by_an_interrupted_run(tmp_path: Path) -> None:
    request = _request(tmp_path)
    request.report_file.write_text('{"stale": true}')  # an earlier run of this turn, killed after writing it
    with pytest.raises(AgentError) as info:
        CommandAgent("true").run(request)  # exits 0 and writes no report
    assert "stale" not in str(info.value)
    assert not request.report_file.exists()


def test_stop_orphaned_agents_kills_a_recorded_live_group(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    pid_file = agent_pid_file(_request(tmp_path, turn=2).report_file)
    pid_file.write_text(json.dumps({"pgid": sleeper.pid, "start": _start_time(sleeper.pid), "role": "player",
                                    "turn": 2, "mark": MARK}))
    notes = stop_orphaned_agents(pid_file.parent)
    assert notes == [f"stopped the player of turn 2 (process group {sleeper.pid}) left running by the "
                     "interrupted loop"]
    assert sleeper.wait(timeout=10) == -signal.SIGKILL
    assert not pid_file.exists()


@pytest.mark.parametrize("content", ["not json", '{"pgid": "x"}', "[]", None, "no mark", "another mark"])
def test_stop_orphaned_agents_never_kills_an_unproven_process(tmp_path: Path, sleeper: subprocess.Popen[bytes],
                                                             content: str | None) -> None:
    pid_file = agent_pid_file(_request(tmp_path).report_file)
    # None: the right pid with another start time, as when the pid was reused by a new process. "no mark",
    # "another mark": the right pid and start time in a file an agent forged (it writes where the file
    # lies) to have the loop kill a process of the user's, which carries no run's mark, or not that one.
    right = {"pgid": sleeper.pid, "start": _start_time(sleeper.pid), "role": "player", "turn": 1}
    forged = {"no mark": right, "another mark": {**right, "mark": "0" * 24}}
    pid_file.write_text(json.dumps(forged[content]) if content in forged
                        else content if content is not None
                        else json.dumps({"pgid": sleeper.pid, "start": "1", "role": "player", "turn": 1}))
    assert stop_orphaned_agents(pid_file.parent) == []
    time.sleep(0.05)  # give a wrongly sent SIGKILL time to land before checking
    assert _alive(sleeper.pid)
    assert not pid_file.exists()


#: An agent that starts a server in the background, its stdout and stderr inherited (as `npm run dev &`
#: does), writes its report and exits 0; the server's pid goes to ``server.pid``.
LEAVES_A_SERVER = ("import json, os, subprocess, sys\n"
                   "server = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
                   "open('server.pid', 'w').write(str(server.pid))\n"
                   "print('server started', flush=True)\n"
                   "open(os.environ['GUARDKIT_REPORT_FILE'], 'w').write(json.dumps({'done': True}))\n")


def test_an_agent_is_waited_for_not_the_child_holding_its_output(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(LEAVES_A_SERVER)
    request = replace(_request(tmp_path), timeout=30.0)
    agent = CommandAgent(f"{sys.executable} agent.py")
    report = agent.run(request)  # not "timed out": the agent itself exited at once
    assert _dies(int((tmp_path / "server.pid").read_text()))
    run = report.pop("agent_run")  # what it left running is said with its run
    assert report == {"done": True}
    [note] = run["notes"]
    assert note.startswith("exited but left process group ") and "killed it" in note
    assert "time.sleep(300)" in note


_PLAYER_REPORT = ("{'files_modified': [], 'files_created': [], 'tests_written': [], 'tests_run': True, "
                  "'tests_passed': True, 'implementation_notes': 'x', 'concerns': [], 'requirements_addressed': [], "
                  "'requirements_remaining': []}")
_APPROVING_COACH = ("import json, os; open(os.environ['GUARDKIT_REPORT_FILE'], 'w').write(json.dumps({'decision': "
                    "'approve', 'rationale': 'ok', 'issues': [], 'criteria_verification': [{'criterion_id': "
                    "'AC-001', 'result': 'verified', 'notes': ''}], 'validation_results': {'tests_passed_count': 1, "
                    "'tests_failed_count': 0, 'coverage': 90.0}}))")


def _one_task_run(tmp_path: Path, task: str, title: str, player: str, *options: str
                  ) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A one-criterion task run by ``feature-build`` with ``player`` (its report put at THE_REPORT) and an
    approving Coach, both Python scripts."""
    from .guardkit_fixtures import cli, make_repo

    body = (f"---\nid: {task}\ntitle: {title}\nstatus: in_progress\n---\n\n## Acceptance Criteria\n\n"
            "- [ ] AC-001: it serves\n")
    root = make_repo(tmp_path / "repo", {f"tasks/in_progress/{task}-server.md": body})
    (tmp_path / "player.py").write_text(player.replace("THE_REPORT", _PLAYER_REPORT))
    (tmp_path / "coach.py").write_text(_APPROVING_COACH)
    return root, cli(root, "feature-build", task, "--player", f"{sys.executable} {tmp_path / 'player.py'}",
                     "--coach", f"{sys.executable} {tmp_path / 'coach.py'}", *options)


def test_a_loop_whose_player_leaves_a_server_running_goes_on(tmp_path: Path) -> None:
    task = "TASK-AGT-002"
    root, run = _one_task_run(tmp_path, task, "Server", LEAVES_A_SERVER.replace("{'done': True}", "THE_REPORT"),
                              "--turn-timeout", "30")
    said = run.stdout + run.stderr
    assert run.returncode == 0, said
    assert "timed out" not in said
    assert f"note: turn 1: the Player ({Path(sys.executable).name}): exited but left process group " in said
    assert _dies(int((root / ".guardkit" / "worktrees" / task / "server.pid").read_text()))


#: A Player that starts a dev server as a daemon (double fork + ``setsid``: out of its process group and
#: session), which writes ``server.log`` every 50 ms for two minutes; its pid goes to ``daemon.pid``.
#: The Player writes its report once the daemon runs, and exits 0.
DAEMONIZES = """\
import json, os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        with open('daemon.pid.tmp', 'w') as handle:
            handle.write(str(os.getpid()))
        os.replace('daemon.pid.tmp', 'daemon.pid')
        end = time.monotonic() + 120
        while time.monotonic() < end:
            with open('server.log', 'a') as handle:
                handle.write('tick\\n')
            time.sleep(0.05)
    os._exit(0)
os.wait()
while not os.path.exists('daemon.pid'):
    time.sleep(0.01)
open(os.environ['GUARDKIT_REPORT_FILE'], 'w').write(json.dumps(THE_REPORT))
"""


@pytest.fixture
def reap() -> Iterator[list[Path]]:
    """Pid files of daemons a test starts: any still alive at its end is killed (a failing run must not
    leave one writing for two minutes)."""
    files: list[Path] = []
    yield files
    for pid_file in files:
        with contextlib.suppress(OSError, ValueError):  # only the daemon itself: it runs where it wrote the file
            pid = int(pid_file.read_text())
            if _alive(pid) and os.readlink(f"/proc/{pid}/cwd") == str(pid_file.parent):
                os.kill(pid, signal.SIGKILL)


def test_an_agents_daemon_that_left_its_session_is_found_killed_and_named(tmp_path: Path, reap: list[Path]) -> None:
    reap.append(tmp_path / "daemon.pid")
    (tmp_path / "agent.py").write_text(DAEMONIZES.replace("THE_REPORT", "{'done': True}"))
    report = CommandAgent(f"{sys.executable} agent.py").run(_request(tmp_path))
    daemon = int((tmp_path / "daemon.pid").read_text())
    assert _dies(daemon)
    [note] = report.pop("agent_run")["notes"]
    assert report == {"done": True}
    assert note == (f"exited but left process {daemon} ({sys.executable} agent.py) running outside its process group; "
                    "killed it")


def test_a_player_whose_daemon_keeps_writing_is_approved_by_an_honest_coach(tmp_path: Path, reap: list[Path]) -> None:
    task = "TASK-AGT-003"
    root, run = _one_task_run(tmp_path, task, "Dev server", DAEMONIZES, "--max-turns", "2")
    said = run.stdout + run.stderr
    worktree = root / ".guardkit" / "worktrees" / task
    reap.append(worktree / "daemon.pid")
    daemon = int((worktree / "daemon.pid").read_text())
    # Its writes stopped when the Player ended: the Coach is not blamed for them, and approves in turn 1.
    assert run.returncode == 0, said
    assert "Coach changed the worktree" not in said
    assert (f"note: turn 1: the Player ({Path(sys.executable).name}): exited but left process {daemon} "
            f"({sys.executable} {tmp_path / 'player.py'}) running outside its process group; killed it") in said
    assert _dies(daemon)
    # The turn commit holds the log as the Player left it; nothing wrote to it after the run.
    committed = subprocess.run(["git", "show", f"autobuild/{task}:server.log"], cwd=root, capture_output=True,
                               check=True).stdout
    assert (worktree / "server.log").read_bytes() == committed
