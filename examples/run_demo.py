"""The guardkit-state demo (``make demo``): a Player/Coach loop that is interrupted and resumed.

Copies ``examples/project`` to a fresh git repository, runs ``guardkit-state feature-build`` with the
scripted Player and Coach from ``examples/agents``, presses Ctrl-C while turn 2's Player is at work,
resumes with ``--resume``, and shows the result with ``show``, ``log`` and ``diff``. Stdlib only;
run it with the Python that has guardkit-state installed.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
TASK_ID = "TASK-DEMO-001"
MODULE = "durations.py"
FIX_MARKER = "_WHOLE.fullmatch"  # what turn 2's Player writes into durations.py before it sleeps
PLAYER_SLEEP_SECONDS = 120  # long enough to be interrupted; the demo never waits for it to pass
WAIT_LIMIT_SECONDS = 300  # give up if turn 2 never starts (a broken loop must not hang the demo)


class Console:
    """Headed sections and indented command output; bold only on a terminal without NO_COLOR."""

    def __init__(self) -> None:
        self.color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        self.step = 0

    def _bold(self, text: str) -> str:
        return f"\033[1m{text}\033[0m" if self.color else text

    def section(self, title: str, explanation: str) -> None:
        self.step += 1
        print(f"\n{self._bold(f'{self.step}. {title}')}\n   {explanation}", flush=True)

    def command(self, argv: Sequence[str]) -> None:
        print(f"   $ {display(argv)}", flush=True)

    def output(self, line: str) -> None:
        print(f"   │ {line.rstrip()}", flush=True)

    def note(self, text: str) -> None:
        print(f"   → {text}", flush=True)


def display(argv: Sequence[str]) -> str:
    """The command as a person would type it: the tool and Python by name, paths relative."""
    words = []
    for word in argv:
        word = word.replace(sys.executable, "python").replace(str(HERE.parent) + os.sep, "")
        words.append(word)
    words[0] = Path(words[0]).name
    return shlex.join(words)


def guardkit_state() -> list[str]:
    """The ``guardkit-state`` executable next to this Python, else ``python -m guardkit_state``."""
    exe = Path(sys.executable).with_name("guardkit-state")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "guardkit_state"]


def git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)


def make_project(root: Path, template: str = "project", name: str = "durations",
                 message: str = "durations: project skeleton and TASK-DEMO-001") -> Path:
    """Copy ``examples/<template>`` into ``root/<name>`` and commit it on ``main``."""
    project = root / name
    shutil.copytree(HERE / template, project, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    git(project, "init", "-q", "-b", "main").check_returncode()
    # A machine without a git identity still runs the demo: set one locally for this repo only.
    if not git(project, "config", "user.email").stdout.strip():
        git(project, "config", "user.email", "demo@example.com")
        git(project, "config", "user.name", "guardkit-state demo")
    git(project, "add", "-A").check_returncode()
    git(project, "commit", "-q", "-m", message).check_returncode()
    return project


def start(
    console: Console, argv: list[str], cwd: Path, env: dict[str, str]
) -> tuple[subprocess.Popen[str], threading.Thread]:
    """Start ``argv`` in its own process group, echoing its output indented as it arrives."""
    console.command(argv)
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, encoding="utf-8", errors="replace", start_new_session=True)

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            console.output(line)

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return proc, thread


def finish(proc: subprocess.Popen[str], thread: threading.Thread) -> int:
    code = proc.wait()
    thread.join(timeout=10)
    return code


def run(console: Console, argv: list[str], cwd: Path, env: dict[str, str]) -> int:
    proc, thread = start(console, argv, cwd, env)
    try:
        return finish(proc, thread)
    finally:
        stop(proc)


def wait_until(condition: Callable[[], bool], proc: subprocess.Popen[str]) -> bool:
    """Poll ``condition`` until it holds (True) or ``proc`` exits / the wait limit passes (False)."""
    deadline = time.monotonic() + WAIT_LIMIT_SECONDS
    while time.monotonic() < deadline:
        if condition():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.1)
    return False


def interrupt(proc: subprocess.Popen[str]) -> None:
    """Ctrl-C as a terminal sends it: SIGINT to the loop's whole process group (loop and agents)."""
    try:
        os.killpg(proc.pid, signal.SIGINT)
    except ProcessLookupError:
        pass


def stop(proc: subprocess.Popen[str]) -> None:
    """Make sure nothing the demo started outlives it."""
    if proc.poll() is None:
        interrupt(proc)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def demo(workdir: Path, console: Console) -> int:
    """Run every step; return 0 when each behaved as the demo expects."""
    problems: list[str] = []
    tool = guardkit_state()
    player = f"{shlex.quote(sys.executable)} {shlex.quote(str(HERE / 'agents' / 'player.py'))}"
    coach = f"{shlex.quote(sys.executable)} {shlex.quote(str(HERE / 'agents' / 'coach.py'))}"
    build = [*tool, "feature-build", TASK_ID, "--player", player, "--coach", coach, "--max-turns", "5"]
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("DEMO_PLAYER_")}

    console.section("A tiny project with one task",
                    "durations.py does not exist yet; the task's 4 acceptance criteria are checked by unit tests.")
    project = make_project(workdir)
    console.note(f"git repository at {project}")
    task_file = next(project.glob(f"tasks/backlog/{TASK_ID}-*.md"))
    console.note(f"task file: {task_file.relative_to(project)}")

    console.section("Run the loop, and press Ctrl-C in the middle of turn 2",
                    "Turn 1's Player forgets input validation (AC-003); the Coach's tests catch it.")
    env = dict(base_env, DEMO_PLAYER_SLEEP=str(PLAYER_SLEEP_SECONDS), DEMO_PLAYER_SLEEP_TURN="2")
    proc, thread = start(console, build, project, env)
    module = project / ".guardkit" / "worktrees" / TASK_ID / MODULE
    try:
        def turn_2_player_at_work() -> bool:
            try:
                return FIX_MARKER in module.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                return False

        if wait_until(turn_2_player_at_work, proc):
            console.note("turn 2's Player has edited durations.py and is still working: Ctrl-C now")
            interrupt(proc)
        else:
            problems.append("turn 2's Player never started (see the loop's output above)")
            stop(proc)
        code = finish(proc, thread)
    finally:
        stop(proc)
    console.note(f"exit code {code}" + (" (interrupted)" if code == 130 else ""))
    if code != 130:
        problems.append(f"the interrupted run exited {code}, expected 130")

    console.section("What the interruption left behind",
                    "Turn 1 is recorded; turn 2 has an edit but no reports, so it is unfinished.")
    artifacts = project / ".guardkit" / "worktrees" / TASK_ID / ".guardkit" / "autobuild" / TASK_ID
    names = sorted(p.name for p in artifacts.glob("*.json")) if artifacts.is_dir() else []
    console.note(f"reports in the worktree: {', '.join(names) or 'none'}")
    status = git(module.parent, "status", "--short").stdout.strip() if module.parent.is_dir() else ""
    console.note(f"uncommitted in the worktree: {status or 'nothing'}")

    console.section("Resume", "--resume rolls forward: turn 1 is kept, turn 2 is re-run and the Coach approves.")
    code = run(console, [*build, "--resume"], project, base_env)
    console.note(f"exit code {code}" + (" (approved)" if code == 0 else ""))
    if code != 0:
        problems.append(f"the resumed run exited {code}, expected 0 (approved)")

    console.section("What turn 2's Player learned from turn 1",
                    "Nothing but the continuation context told it which criterion failed; its report says:")
    try:
        report = json.loads((artifacts / "player_turn_2.json").read_text(encoding="utf-8"))
        for line in textwrap.wrap(str(report.get("implementation_notes", "")), width=96):
            console.output(line)
    except (OSError, ValueError) as exc:
        problems.append(f"turn 2's Player report is not readable: {exc}")

    for title, explanation, argv in (
        ("The task, as the files record it", "Status, criteria and turns come from the task file.",
         [*tool, "show", TASK_ID]),
        ("The turns", "One line per turn: mode, decision, feedback and its commit.",
         [*tool, "log", TASK_ID]),
        ("What turn 2 changed", "Each turn is one commit: the Player's code and the turn's state files.",
         [*tool, "diff", TASK_ID, "--turn", "2", "--stat"]),
    ):
        console.section(title, explanation)
        code = run(console, argv, project, base_env)
        if code != 0:
            problems.append(f"'{display(argv)}' exited {code}")

    return conclude(problems, "Done: turn 2 learned from turn 1's feedback, survived Ctrl-C, and was approved on "
                    "resume.", project, f"git log --stat autobuild/{TASK_ID}")


def conclude(problems: list[str], done: str, project: Path, try_next: str) -> int:
    """The demo's last lines: what went wrong, or ``done``; where the project is kept. The exit code."""
    print()
    if problems:
        print("The demo did not go as expected:")
        for problem in problems:
            print(f"  - {problem}")
    else:
        print(done)
    print(f"The project is kept at {project}; try '{try_next}' there.")
    return 1 if problems else 0


def run_main(argv: Sequence[str] | None, description: str, prefix: str,
             demo_in: Callable[[Path, Console], int]) -> int:
    """The command line both demos share: ``--workdir``, then the demo, with one-line failures."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--workdir", type=Path,
                        help="directory to create the demo project in (default: a new temp directory)")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix=prefix))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        return demo_in(workdir.resolve(), Console())
    except KeyboardInterrupt:
        print("\ndemo interrupted", file=sys.stderr)
        return 130
    except subprocess.CalledProcessError as exc:
        print(f"demo setup failed: {exc} {exc.stderr or ''}", file=sys.stderr)
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(argv, (__doc__ or "").splitlines()[0], "guardkit-demo-", demo)


if __name__ == "__main__":
    sys.exit(main())
