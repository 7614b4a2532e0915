"""Error paths of the read commands, through the real CLI: an unknown task is exit 2 everywhere,
a missing ``--repo`` is named, a read creates no file, ``--turn`` out of range is an error, and
``validate`` warns about duplicate task ids."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import run_git
from .helpers import coach_decision, player_report
from .test_resolve import PLANNING, WORKING, task_text, write

CLI = Path(sys.executable).parent / "guardkit-state"


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | {"NO_COLOR": "1"}
    return subprocess.run([str(CLI), *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=120, check=False)


def tree(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if ".git" not in p.parts)


@pytest.fixture
def repo(git_repo: Path) -> Path:
    write(git_repo / "tasks/in_review/TASK-DUR-001-parse-durations.md",
          task_text("TASK-DUR-001", "in_review", turns=2))
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-q", "-m", "task")
    return git_repo


UNKNOWN_TASK_COMMANDS = [
    ["show", "TASK-NOPE-9"],
    ["context", "TASK-NOPE-9"],
    ["log", "TASK-NOPE-9"],
    ["log", "TASK-NOPE-9", "--json"],
    ["diff", "TASK-NOPE-9", "--turn", "1"],
    ["suggest-mode", "TASK-NOPE-9"],
    ["record", "TASK-NOPE-9", "--player", "{reports}/p.json", "--coach", "{reports}/c.json"],
    ["feature-build", "TASK-NOPE-9", "--player", "true", "--coach", "true"],
]


@pytest.mark.parametrize("command", UNKNOWN_TASK_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_an_unknown_task_exits_2_in_every_command(repo: Path, tmp_path: Path, command: list[str]) -> None:
    reports = tmp_path / "reports"
    write(reports / "p.json", json.dumps(player_report(1, task_id="TASK-NOPE-9")))
    write(reports / "c.json", json.dumps(coach_decision(1, "feedback", task_id="TASK-NOPE-9", feedback="again")))
    before = tree(repo)
    result = cli(repo, *[arg.format(reports=reports) for arg in command])
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "TASK-NOPE-9" in result.stderr and "no turns recorded" not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr and "unexpected" not in result.stderr
    assert tree(repo) == before


def test_diff_of_an_unknown_task_outside_git_names_the_task(tmp_path: Path) -> None:
    write(tmp_path / "tasks/backlog/TASK-A-1.md", task_text("TASK-A-1", "backlog"))
    result = cli(tmp_path, "diff", "TASK-NOPE-9", "--turn", "1")
    assert result.returncode == 2 and "no task file for TASK-NOPE-9" in result.stderr


@pytest.mark.parametrize("command", [["status"], ["show", "TASK-DUR-001"], ["log", "TASK-DUR-001"],
                                     ["search", "x"], ["graphiti", "status"], ["config", "show"]])
def test_a_missing_repo_is_named(tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "nonexistent"
    result = cli(tmp_path, *command, "--repo", str(missing))
    assert result.returncode == 2
    assert f"no such directory: {missing}" in result.stderr
    assert not missing.exists()


READ_COMMANDS = [
    ["status"], ["status", "--json"], ["search", "feedback"], ["graphiti", "status"],
    ["graphiti", "status", "--json"], ["graphiti", "search", "feedback"], ["config", "show"],
]


@pytest.mark.parametrize("command", READ_COMMANDS, ids=" ".join)
def test_read_commands_outside_a_repository_create_nothing(tmp_path: Path, command: list[str]) -> None:
    cli(tmp_path, *command)
    assert tree(tmp_path) == []


@pytest.mark.parametrize("command", [["graphiti", "status"], ["graphiti", "search", "feedback"],
                                     ["show", "TASK-DUR-001"], ["context", "TASK-DUR-001"],
                                     ["log", "TASK-DUR-001"]], ids=" ".join)
def test_read_commands_in_a_repository_create_nothing(repo: Path, command: list[str]) -> None:
    before = tree(repo)
    result = cli(repo, *command)
    assert result.returncode == 0, result.stderr
    assert tree(repo) == before


def test_search_in_a_repository_creates_only_its_cache(repo: Path) -> None:
    """Like ``status``, the file scan keeps a rebuildable cache in ``.guardkit/cache/``, nothing else."""
    before = tree(repo)
    result = cli(repo, "search", "feedback")
    assert result.returncode == 0, result.stderr
    added = sorted(set(tree(repo)) - set(before))
    assert set(tree(repo)) >= set(before)
    assert [p for p in added if not p.startswith(".guardkit/cache")] in ([], [".guardkit"])
    assert ".guardkit/cache/search.json" in added


def test_graphiti_status_of_an_unbuilt_index_says_so(repo: Path) -> None:
    # Only a missing extra is a reason to skip (make test installs it); a failing command is a failure.
    pytest.importorskip("graphiti_core", reason="the graphiti extra is not installed (pip install '.[graphiti]')")
    result = cli(repo, "graphiti", "status", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["groups"] == {} and any("no index built yet" in n for n in data["notes"])


@pytest.mark.parametrize("turn", ["0", "-1", "4", "99"])
def test_context_turn_out_of_range_is_an_error(repo: Path, turn: str) -> None:
    result = cli(repo, "context", "TASK-DUR-001", "--turn", turn)
    assert result.returncode == 2, result.stdout
    assert f"turn {turn} is out of range" in result.stderr and "1..3" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("turn", ["1", "3"])
def test_context_turn_in_range_still_works(repo: Path, turn: str) -> None:
    result = cli(repo, "context", "TASK-DUR-001", "--turn", turn, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["turn"] == int(turn)


def test_validate_warns_about_duplicate_task_ids(git_repo: Path) -> None:
    write(git_repo / PLANNING, task_text("TASK-DUR-001", "backlog"))
    write(git_repo / WORKING, task_text("TASK-DUR-001", "in_review", turns=3))
    write(git_repo / "tasks/backlog/TASK-DUR-002-format.md", task_text("TASK-DUR-002", "backlog"))
    result = cli(git_repo, "validate", "tasks", "--json")
    assert result.returncode == 0, result.stdout  # warnings never change the exit code
    report = json.loads(result.stdout)
    assert all(f["warnings"] == [] for f in report["files"])  # one entry per id, not per file
    assert report["duplicate_ids"] == [{"task_id": "TASK-DUR-001", "copies": sorted([PLANNING, WORKING]),
                                        "read": WORKING, "reason": "holds loop state"}]
    text = cli(git_repo, "validate", "tasks")
    assert text.returncode == 0 and text.stdout.count("warning:") == 1
    assert (f"warning: duplicate task id TASK-DUR-001: 2 copies; commands read {WORKING} (holds loop state); "
            f"also {PLANNING}") in text.stdout
