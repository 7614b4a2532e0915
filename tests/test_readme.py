"""The README's first hour, run as written, so the README cannot drift from the product.

Every ```` ```console ```` block between ``<!-- first-hour`` and ``<!-- /first-hour -->`` is taken
from README.md and each of its ``$`` commands is run in a shell, in order, on a copy of
``examples/project`` committed to a fresh git repository (the user's "own repository"). Three things
are substituted, and only these: the placeholder ``TASK-ID`` is the example's task; the folder of
``cd ~/src/your-project`` is that copy; and the real agents ``--player claude --coach codex`` are
the example's scripted Player and Coach (no model is called: the loop, the worktree, the commits,
Ctrl-C and ``--resume`` are real). The command marked ``Ctrl-C`` is interrupted in the middle of
turn 2, as a person would, and the line it prints to continue must be the README's next command.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import run_git
from .e2e_support import EXAMPLES, FIX_MARKER, GUARDKIT_STATE, REPO_ROOT, TASK_ID, clean_env, wait_until

README = REPO_ROOT / "README.md"
PLAYER = f"{sys.executable} {EXAMPLES / 'agents' / 'player.py'}"
COACH = f"{sys.executable} {EXAMPLES / 'agents' / 'coach.py'}"
#: The README's stand-ins and what this test runs in their place.
SUBSTITUTIONS = (
    ("--player claude", f"--player {shlex.quote(PLAYER)}"),
    ("--coach codex", f"--coach {shlex.quote(COACH)}"),
    ("TASK-ID", TASK_ID),
)
YOUR_PROJECT = "~/src/your-project"


def first_hour() -> str:
    text = README.read_text(encoding="utf-8")
    start, end = text.index("<!-- first-hour"), text.index("<!-- /first-hour -->")
    return text[start:end]


def command_blocks() -> list[list[str]]:
    """The ``$`` lines of each console block of the first hour, in order."""
    blocks = re.findall(r"^```console\n(.*?)^```", first_hour(), re.M | re.S)
    return [[line[2:] for line in block.splitlines() if line.startswith("$ ")] for block in blocks]


def substituted(command: str, project: Path) -> str:
    for stand_in, used in SUBSTITUTIONS:
        command = command.replace(stand_in, used)
    return command.replace(YOUR_PROJECT, shlex.quote(str(project)))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """``examples/project``, committed on ``main`` of a fresh repository."""
    root = tmp_path / "your-project"
    subprocess.run(["cp", "-r", str(EXAMPLES / "project"), str(root)], check=True)
    run_git(root, "init", "-q", "-b", "main")
    run_git(root, "add", "-A")
    run_git(root, "commit", "-q", "-m", "the project")
    return root


def environment(home: Path) -> dict[str, str]:
    """A user's shell: guardkit-state installed on PATH, their own home (no global git config)."""
    return clean_env(NO_COLOR="1", HOME=str(home), PATH=f"{GUARDKIT_STATE.parent}{os.pathsep}{os.environ['PATH']}")


def interrupted(command: str, cwd: Path, env: dict[str, str], project: Path) -> subprocess.CompletedProcess[str]:
    """Run ``command`` and press Ctrl-C once turn 2's Player has changed code and is still at work."""
    env = {**env, "DEMO_PLAYER_SLEEP": "120", "DEMO_PLAYER_SLEEP_TURN": "2"}
    proc = subprocess.Popen(["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    module = project / ".guardkit" / "worktrees" / TASK_ID / "durations.py"
    try:
        wait_until(lambda: module.is_file() and FIX_MARKER in module.read_text(encoding="utf-8"),
                   proc=proc, what="turn 2's Player at work")  # type: ignore[arg-type]
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C, as a terminal sends it: to the whole group
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def test_the_first_hour_has_the_commands_the_readme_promises() -> None:
    commands = [c for block in command_blocks() for c in block]
    assert commands[0] == f"cd {YOUR_PROJECT}"
    assert any(c.startswith("guardkit-state doctor --player claude --coach codex") for c in commands)
    runs = [c for c in commands if c.startswith("guardkit-state feature-build TASK-ID --player claude --coach codex")]
    assert len(runs) == 2 and "Ctrl-C" in runs[0] and runs[1].endswith("--resume")
    assert "git merge autobuild/TASK-ID" in commands and commands[-1] == "guardkit-state worktrees prune TASK-ID"


def test_each_command_of_the_first_hour_runs_on_the_example_project(project: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = environment(home)
    cwd = tmp_path
    commands = [c for block in command_blocks() for c in block]
    continue_with = None
    for number, written in enumerate(commands):
        command = substituted(written, project)
        if written.startswith("cd "):
            cwd = Path(os.path.expanduser(shlex.split(command)[1]))
            assert cwd == project
            continue
        if "Ctrl-C" in written:
            done = interrupted(command, cwd, env, project)
            assert done.returncode == 130, (written, done.stdout, done.stderr)
            continue_with = done.stderr.rsplit("continue with ", 1)[1].strip()
            assert shlex.split(continue_with) == shlex.split(substituted(commands[number + 1], project)), \
                "the line printed to continue is not the README's next command"
            continue
        done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=180, check=False)
        assert done.returncode == 0, (written, done.stdout, done.stderr)
        if written.endswith("--resume"):
            assert f"{TASK_ID}: approved" in done.stdout, done.stdout
    assert continue_with is not None, "no command of the first hour was interrupted"
    # The work is on main, one commit per turn, and the loop's worktree is gone.
    log = run_git(project, "log", "--format=%s", "main")
    assert f"autobuild({TASK_ID}): turn 1 feedback" in log and f"autobuild({TASK_ID}): turn 2 approve" in log
    assert not (project / ".guardkit" / "worktrees" / TASK_ID).exists()
    assert (project / "report.html").is_file()


def test_the_sample_task_file_of_the_first_hour_is_a_valid_task(tmp_path: Path) -> None:
    sample = re.search(r"^```markdown\n(.*?)^```", first_hour(), re.M | re.S)
    assert sample is not None
    task = tmp_path / "tasks" / "backlog" / f"{TASK_ID}-sample.md"
    task.parent.mkdir(parents=True)
    task.write_text(sample.group(1), encoding="utf-8")
    done = subprocess.run([str(GUARDKIT_STATE), "show", TASK_ID, "--json", "--repo", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, check=False, env=clean_env())
    assert done.returncode == 0, done.stderr
    assert '"AC-002"' in done.stdout
