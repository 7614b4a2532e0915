"""Options shared by every command: --repo found from the current folder; quiet on a closed pipe."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from guardkit_state.cli.app import run
from guardkit_state.turns.lifecycle import record_turn

from .helpers import coach_decision, make_task_repo, player_report

CLI = str(Path(sys.executable).parent / "guardkit-state")


def test_repo_defaults_to_the_enclosing_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    make_task_repo(tmp_path)
    record_turn(tmp_path, "TASK-AUTH-001", player_report(1), coach_decision(1, "feedback", feedback="more"))
    monkeypatch.chdir(tmp_path / "tasks" / "backlog")
    assert run(["show", "TASK-AUTH-001", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["path"] == str(tmp_path.resolve() / "tasks/backlog/TASK-AUTH-001-jwt-auth.md")
    assert [t["turn"] for t in shown["turns"]] == [1]


def test_explicit_repo_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    make_task_repo(tmp_path / "a")
    (tmp_path / "b" / "tasks").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "b")
    assert run(["status", "--json", "--repo", str(tmp_path / "a")]) == 0
    assert json.loads(capsys.readouterr().out) == []  # a's task has no loop state yet
    assert run(["show", "TASK-AUTH-001"]) == 2  # b has no such task
    assert "no task file for TASK-AUTH-001" in capsys.readouterr().err


def test_a_closed_pipe_is_not_an_error(tmp_path: Path) -> None:
    """Guards the closed-pipe handler in ``cli/app.py`` (``except BrokenPipeError``): without it the
    command fails with "unexpected BrokenPipeError" and exit 1. The reader is gone before the command
    writes a byte (like ``| head -0``), so every write meets a closed pipe: reading one line and then
    closing, as before, let a short output fit in the pipe's buffer and pass without the handler.
    Without PYTHONUNBUFFERED (a user's shell), a short output is written only as the program ends:
    that write meets the closed pipe too, and is as quiet (it was Python's exit 120 and its complaint)."""
    make_task_repo(tmp_path)
    for n in range(1, 4):
        record_turn(tmp_path, "TASK-AUTH-001", player_report(n), coach_decision(n, "feedback", feedback=f"f{n}"),
                    max_turns=10)
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    try:
        procs = [subprocess.run([CLI, *command, "--repo", str(tmp_path)], stdout=write_end,
                                stderr=subprocess.PIPE, env=env if buffered else None, timeout=60, check=False)
                 for command in (["show", "TASK-AUTH-001"], ["status"]) for buffered in (False, True)]
    finally:
        os.close(write_end)
    assert [(proc.returncode, proc.stderr) for proc in procs] == [(0, b"")] * 4


def test_in_process_runs_leave_no_handler_on_the_librarys_log(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    # Tests and scripts call run() many times in one process: each run added a NullHandler, and
    # --verbose's handler stayed, writing the next runs' log to the stderr of a run long gone.
    make_task_repo(tmp_path)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    library = logging.getLogger("guardkit_state")
    before = list(library.handlers)
    for _ in range(3):
        run(["feature-build", "TASK-AUTH-001", "--repo", str(tmp_path), "--no-worktree", "--player", "exit 3",
             "--coach", "exit 3", "--max-turns", "1", "-v"])
    capsys.readouterr()
    added = [handler for handler in library.handlers if handler not in before]
    assert all(isinstance(handler, logging.NullHandler) for handler in added), added
    assert sum(isinstance(handler, logging.NullHandler) for handler in library.handlers) == 1
