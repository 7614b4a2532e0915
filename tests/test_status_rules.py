"""Status rules: a terminal status, an approved outcome and the turn budget are never overridden silently.

``completed``, ``cancelled`` and ``archived`` tasks, and approved ones, are changed only with an explicit
``--reopen`` (``reopen=True`` in Python); a turn beyond ``max_turns`` only with a ``--max-turns`` that
allows it. Every refusal is one line, exit 2, before anything exists (no lock, worktree or ``.guardkit/``).
Real task files in real git repositories, the real CLI in subprocesses, scripted agents.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from guardkit_state import LoopOptions, record_turn, run_task_loop
from guardkit_state.agents.protocol import CallableAgent
from guardkit_state.cli.app import run as cli_run
from guardkit_state.errors import GuardkitStateError, InputError, UnwritableFileError
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.turns.checks import closed_reason, turn_budget

from .conftest import writable_copy
from .e2e_support import git, run_cli
from .reliability.harness import agent_command

TASK_ID = "TASK-STAT-001"
TERMINAL = ("completed", "cancelled", "archived")


# -- fixtures of our own -------------------------------------------------------------------------
def _state(turns: int, *, last: str = "feedback", max_turns: int = 5, outcome: str | None = None) -> str:
    lines = ["autobuild_state:", f"  current_turn: {turns}", f"  max_turns: {max_turns}"]
    if outcome:
        lines.append(f"  outcome: {outcome}")
    lines.append("  turns:" if turns else "  turns: []")
    for n in range(1, turns + 1):
        decision = last if n == turns else "feedback"
        lines += [f"  - turn: {n}", f"    decision: {decision}",
                  "    feedback: null" if decision == "approve" else f"    feedback: Turn {n} left AC-002 open",
                  f"    timestamp: '2026-02-01T00:{n:02d}:00+00:00'", "    player_success: true",
                  "    coach_success: true"]
    return "\n".join(lines) + "\n"


def _task_text(status: str, state: str = "") -> str:
    return (f"---\nid: {TASK_ID}\ntitle: Status rules\nstatus: {status}\ntask_type: feature\n{state}---\n\n"
            f"# {TASK_ID}: Status rules\n\n## Acceptance Criteria\n\n- [ ] First thing works\n"
            "- [ ] Second thing works\n- [ ] Third thing works\n")  # the scripted Coach judges AC-001..AC-003


def make_repo(root: Path, status: str, state: str = "", folder: str | None = None) -> Path:
    """A git repository with one committed task file in ``tasks/<folder>/`` (default: its status)."""
    task = root / "tasks" / (folder or status) / f"{TASK_ID}-status-rules.md"
    task.parent.mkdir(parents=True)
    task.write_text(_task_text(status, state), encoding="utf-8")
    (root / "src").mkdir()
    (root / "src" / "work.txt").write_text("start\n", encoding="utf-8")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "initial")
    return task


def _reports(where: Path, turn: int) -> tuple[Path, Path]:
    where.mkdir(parents=True, exist_ok=True)
    player, coach = where / "player.json", where / "coach.json"
    player.write_text(json.dumps({"turn": turn, "files_modified": ["src/work.txt"], "implementation_notes": "Did it.",
                                  "tests_run": True, "tests_passed": True}), encoding="utf-8")
    coach.write_text(json.dumps({"turn": turn, "decision": "feedback", "rationale": "AC-002 open",
                                 "feedback": f"Turn {turn}: AC-002 still open"}), encoding="utf-8")
    return player, coach


def _record(root: Path, turn: int, *extra: str) -> subprocess.CompletedProcess[str]:
    player, coach = _reports(root.parent / f"reports-{turn}", turn)
    return run_cli(root, "record", TASK_ID, "--player", str(player), "--coach", str(coach), *extra)


def _snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root``, the git directory included (the task's lock would live there)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _refusal(run: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert run.returncode == 2, run.stdout + run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), run.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def _build(root: Path, *extra: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_cli(root, "feature-build", TASK_ID, "--player", agent_command("player.py"),
                "--coach", agent_command("coach.py"), *extra, **env)


def _status(task: Path) -> str | None:
    return TaskFile.load(task).status


# -- record ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("status", TERMINAL)
def test_record_refuses_a_terminal_status_before_anything_exists(tmp_path: Path, status: str) -> None:
    root = tmp_path / "repo"
    make_repo(root, status, _state(2))
    before = _snapshot(root)
    run = _record(root, 3)
    _refusal(run, f"{TASK_ID} is {status}", "pass --reopen")
    assert _snapshot(root) == before  # no lock file, no turn files, no .guardkit/
    assert not (root / ".guardkit").exists()


def test_record_with_reopen_continues_a_completed_task(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    task = make_repo(root, "completed", _state(2))
    run = _record(root, 3, "--reopen")
    assert run.returncode == 0, run.stderr
    assert _status(task) == "in_progress"
    assert [t.turn for t in TaskFile.load(task).state.turns] == [1, 2, 3]  # type: ignore[union-attr]


@pytest.mark.parametrize("state", [_state(1, last="approve", max_turns=15),
                                   _state(2, last="approve", outcome="approved")],
                         ids=["in_review-after-approve", "outcome-approved"])
def test_record_refuses_an_approved_task(tmp_path: Path, state: str) -> None:
    root = tmp_path / "repo"
    task = make_repo(root, "in_review", state)
    before = _snapshot(root)
    _refusal(_record(root, len(TaskFile.load(task).state.turns) + 1),  # type: ignore[union-attr]
             f"{TASK_ID} was approved", "pass --reopen")
    assert _snapshot(root) == before
    assert _status(task) == "in_review"


def test_record_with_reopen_continues_an_approved_task(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    task = make_repo(root, "in_review", _state(1, last="approve", max_turns=15))
    run = _record(root, 2, "--reopen")
    assert run.returncode == 0, run.stderr
    assert _status(task) == "in_progress"


def test_record_beyond_max_turns_is_refused_unless_max_turns_raises_it(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    task = make_repo(root, "blocked", _state(5, max_turns=5, outcome="max_turns_exceeded"), folder="in_progress")
    before = _snapshot(root)
    _refusal(_record(root, 6), f"{TASK_ID} has used all 5 of its turns", "--max-turns")
    assert _snapshot(root) == before
    _refusal(_record(root, 6, "--max-turns", "5"), "--max-turns")  # not raised: still refused
    assert _snapshot(root) == before
    run = _record(root, 6, "--max-turns", "7")
    assert run.returncode == 0, run.stderr
    state = TaskFile.load(task).state
    assert state is not None and state.max_turns == 7 and len(state.turns) == 6
    assert _status(task) == "in_progress"


def test_record_within_max_turns_is_unchanged(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    task = make_repo(root, "in_progress", _state(4, max_turns=5))
    run = _record(root, 5)
    assert run.returncode == 0, run.stderr
    assert "max_turns_exceeded" in run.stdout and _status(task) == "blocked"


def test_record_python_twin_takes_reopen(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    task = make_repo(root, "cancelled", _state(1))
    player = {"files_modified": [], "implementation_notes": "n", "tests_run": True, "tests_passed": True}
    coach = {"decision": "feedback", "rationale": "r", "feedback": "more"}
    with pytest.raises(InputError, match="is cancelled; pass --reopen"):
        record_turn(root, TASK_ID, player, coach)
    assert not (root / ".guardkit").exists()
    record = record_turn(root, TASK_ID, player, coach, reopen=True)
    assert record.turn_state.turn_number == 2 and _status(task) == "in_progress"


# -- feature-build ------------------------------------------------------------------------------------
@pytest.mark.parametrize("status", TERMINAL)
def test_feature_build_refuses_a_terminal_status_before_any_worktree(tmp_path: Path, status: str) -> None:
    root = tmp_path / "repo"
    make_repo(root, status)
    before = _snapshot(root)
    _refusal(_build(root), f"{TASK_ID} is {status}", "pass --reopen")
    assert _snapshot(root) == before
    assert not (root / ".guardkit").exists()
    assert "autobuild/" not in git(root, "branch", "--list")


def test_resume_of_a_cancelled_task_leaves_it_cancelled(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    task = make_repo(root, "cancelled", _state(25, max_turns=25))
    before = _snapshot(root)
    _refusal(_build(root, "--resume"), f"{TASK_ID} is cancelled", "pass --reopen")
    assert _snapshot(root) == before and _status(task) == "cancelled"
    assert not (root / ".guardkit").exists()


def test_resume_at_max_turns_is_refused_before_any_worktree(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    task = make_repo(root, "blocked", _state(3, max_turns=3, outcome="max_turns_exceeded"), folder="in_progress")
    before = _snapshot(root)
    _refusal(_build(root, "--resume"), f"{TASK_ID} has used all 3 of its turns", "--max-turns")
    assert _snapshot(root) == before and not (root / ".guardkit").exists()
    run = _build(root, "--resume", "--max-turns", "4", RELIABILITY_APPROVE_AT="4")
    assert run.returncode == 0, run.stderr
    state = TaskFile.load(root / ".guardkit" / "worktrees" / TASK_ID / task.relative_to(root)).state
    assert state is not None and len(state.turns) == 4 and state.max_turns == 4


def test_fresh_start_over_recorded_turns_is_refused_before_any_worktree(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    make_repo(root, "in_progress", _state(2))
    before = _snapshot(root)
    _refusal(_build(root), "already has 2 recorded turn(s)", "--resume")
    assert _snapshot(root) == before and not (root / ".guardkit").exists()


def test_feature_build_with_reopen_continues_an_approved_task(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    task = make_repo(root, "in_review", _state(1, last="approve", max_turns=5))
    before = _snapshot(root)
    _refusal(_build(root, "--resume"), f"{TASK_ID} was approved", "pass --reopen")
    assert _snapshot(root) == before
    run = _build(root, "--resume", "--reopen", RELIABILITY_APPROVE_AT="3")
    assert run.returncode == 0, run.stderr
    copy = root / ".guardkit" / "worktrees" / TASK_ID / task.relative_to(root)
    state = TaskFile.load(copy).state
    assert state is not None and [t.decision for t in state.turns] == ["approve", "feedback", "approve"]
    assert TaskFile.load(copy).status == "in_review"


def test_feature_build_python_twin_takes_reopen(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    task = make_repo(root, "completed")

    def player(request: object) -> dict[str, object]:
        return {"files_modified": [], "implementation_notes": "n", "tests_run": True, "tests_passed": True}

    def coach(request: object) -> dict[str, object]:
        return {"decision": "approve", "rationale": "fine"}

    with pytest.raises(InputError, match="is completed; pass --reopen"):
        run_task_loop(root, TASK_ID, CallableAgent(player), CallableAgent(coach), LoopOptions(use_worktree=False))
    assert not (root / ".guardkit").exists()
    result = run_task_loop(root, TASK_ID, CallableAgent(player), CallableAgent(coach),
                           LoopOptions(use_worktree=False, reopen=True))
    assert result.exit_code == 0 and _status(task) == "in_review"


# -- show's next line ------------------------------------------------------------------------------
@pytest.mark.parametrize(("status", "state", "expected"), [
    ("cancelled", _state(25, max_turns=25), f"{TASK_ID} is cancelled: nothing to run (pass --reopen"),
    ("completed", _state(3), f"{TASK_ID} is completed: nothing to run (pass --reopen"),
    ("in_review", _state(1, last="approve", max_turns=15), "the loop already ended (approved) after turn 1"),
    ("blocked", _state(5, max_turns=5), "all 5 turns used (max_turns 5): pass --max-turns"),
], ids=["cancelled", "completed", "approved", "max-turns"])
def test_show_next_line_respects_status_outcome_and_max_turns(tmp_path: Path, status: str, state: str,
                                                              expected: str) -> None:
    root = tmp_path / "repo"
    make_repo(root, status, state)
    run = run_cli(root, "show", TASK_ID)
    assert run.returncode == 0, run.stderr
    next_line = next(line for line in run.stdout.splitlines() if line.startswith("next: "))
    assert expected in next_line, next_line
    assert "run turn" not in next_line


def test_show_next_line_says_how_a_stalled_loop_ended(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    make_repo(root, "blocked", _state(3, max_turns=9, outcome="unrecoverable_stall"), folder="in_progress")
    run = run_cli(root, "show", TASK_ID)
    assert run.returncode == 0, run.stderr
    assert ("next: the loop ended (unrecoverable_stall) after turn 3 and may go on: 3 turn(s) recorded: "
            "run turn 4 (continuing_work)") in run.stdout


# -- a task file the file system will not let us write ----------------------------------------------
@pytest.fixture
def locked_task(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A repository whose task file is immutable (``chattr +i``), else read-only."""
    root = tmp_path / "repo"
    task = make_repo(root, "in_progress", _state(1), folder="in_progress")
    immutable = shutil.which("chattr") is not None and subprocess.run(
        ["chattr", "+i", str(task)], capture_output=True, check=False).returncode == 0
    if not immutable:
        task.chmod(0o444)
    try:
        yield root, task
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(task)], capture_output=True, check=False)
        task.chmod(0o644)


def test_record_into_an_unwritable_task_file_exits_2_and_writes_nothing(locked_task: tuple[Path, Path]) -> None:
    root, task = locked_task
    before = _snapshot(root)
    run = _record(root, 2)
    _refusal(run, task.name)
    assert _snapshot(root) == before  # no player_turn_2.json, coach_turn_2.json, turn_state_turn_2.json, lock
    assert not (root / ".guardkit").exists()


def test_a_task_file_write_failing_after_the_turn_files_removes_them(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "repo"
    task = make_repo(root, "in_progress", _state(1), folder="in_progress")
    original = task.read_bytes()

    def refuse(self: TaskFile, update: object) -> None:
        raise UnwritableFileError("read-only file system", path=self.path)

    monkeypatch.setattr(TaskFile, "apply", refuse)
    player = {"files_modified": [], "implementation_notes": "n", "tests_run": True, "tests_passed": True}
    with pytest.raises(UnwritableFileError):
        record_turn(root, TASK_ID, player, {"decision": "feedback", "rationale": "r", "feedback": "more"})
    store = root / ".guardkit" / "autobuild" / TASK_ID
    assert sorted(p.name for p in store.glob("*turn_2.json")) == []
    assert task.read_bytes() == original


# -- the real GuardKit corpus ----------------------------------------------------------------------
@pytest.mark.corpus
def test_real_closed_tasks_are_refused_and_show_proposes_no_turn(corpus_dir: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Every real task with loop state: ``show`` proposes a turn only when ``record`` would take one."""
    seen: Counter[str] = Counter()
    for index, source in enumerate(sorted((corpus_dir / "tasks").rglob("*.md"))):
        try:
            task = TaskFile.load(source)
        except GuardkitStateError:
            continue
        if task.state is None or task.task_id is None:
            continue
        repo = tmp_path / f"r{index}"
        target = writable_copy(source, repo / source.relative_to(corpus_dir))
        number = len(task.state.turns) + 1
        closed = closed_reason(task)
        over = number > turn_budget(task)
        capsys.readouterr()
        assert cli_run(["show", task.task_id, "--repo", str(repo), "--json"]) == 0, source
        action = json.loads(capsys.readouterr().out)["resume"]["action"]
        player, coach = _reports(repo / "reports", number)
        before = target.read_bytes()
        code = cli_run(["record", task.task_id, "--player", str(player), "--coach", str(coach), "--repo", str(repo)])
        err = capsys.readouterr().err
        repeated = task._parsed is not None and bool(task._parsed.duplicates)
        if closed is not None or over or repeated:
            seen["refused"] += 1
            assert code == 2 and target.read_bytes() == before, (source, err)
            # A file repeating a key is read but never written: that refusal comes first.
            assert ("duplicate key" if repeated else "--reopen" if closed else "--max-turns") in err, (source, err)
            assert action in ("closed", "finished", "out_of_turns"), (source, action)
        else:
            seen["recorded"] += 1
            assert code == 0, (source, err)
            assert action in ("start", "run_turn"), (source, action)
    assert seen["refused"] >= 100 and seen["recorded"] >= 1, seen
