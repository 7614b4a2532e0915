"""Running one command builds the parser with that command alone: only its module is imported.

Every command module brings its part of the library (the loop, git, the index ...); importing
all fourteen was ~50 ms of every run, a sixth of a warm ``status``. ``--help`` and a mistyped
command still see every command, and print what the full parser would: the top-level help asked
for before a command name, and a dash-led word argparse reads as the command ('--', '-', '-1')
ahead of a command name, whose "invalid choice" error lists every command.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from guardkit_state.cli.app import COMMAND_MODULES, build_parser, command_named


@pytest.mark.parametrize(("argv", "expected"), [
    (["status", "--json"], "status"),
    (["--debug", "show", "TASK-1"], "show"),
    (["feature-build", "FEAT-1", "--resume"], "feature-build"),
    (["suggest-mode", "TASK-1"], "suggest_mode"),  # the entry is the module's name
    (["suggest_mode"], None),  # not a command's name: argparse lists the real ones
    (["statu"], None),
    (["--help"], None),
    ([], None),
    (["--deb", "status"], "status"),  # --debug cut short, as argparse takes it
    (["-h", "status"], None),  # the top-level help: every command listed
    (["--", "status"], None),  # argparse reads '--' as the command: refused, every command listed
    (["-1", "show", "TASK-1"], None),
])
def test_the_command_an_argv_runs(argv: list[str], expected: str | None) -> None:
    assert command_named(argv) == expected


def test_a_parser_for_one_command_parses_it_as_the_full_parser_does() -> None:
    argv = ["show", "TASK-1", "--json"]
    alone, full = build_parser(command_named(argv)).parse_args(argv), build_parser().parse_args(argv)
    assert {k: v for k, v in vars(alone).items() if k != "handler"} == \
        {k: v for k, v in vars(full).items() if k != "handler"}
    assert alone.handler is full.handler


def _modules_loaded_by(argv: list[str], cwd: Path) -> set[str]:
    code = ("import sys\nfrom guardkit_state.cli.app import run\nrun(sys.argv[1:])\n"
            "print(' '.join(m for m in sys.modules if m.startswith('guardkit_state.cli.cmd_')))")
    done = subprocess.run([sys.executable, "-c", code, *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return set(done.stdout.splitlines()[-1].split())  # the last line: after the command's output


def test_running_status_imports_the_status_command_alone(tmp_path: Path) -> None:
    (tmp_path / "tasks").mkdir()
    loaded = _modules_loaded_by(["status", "--json"], tmp_path)
    assert loaded == {"guardkit_state.cli.cmd_status"}


def test_a_mistyped_command_is_refused_with_every_command_listed(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "guardkit_state", "statu"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert all(f"'{name.replace('_', '-')}'" in done.stderr for name in COMMAND_MODULES), done.stderr


def _cli(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    (cwd / "tasks").mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "guardkit_state", *argv], cwd=cwd, capture_output=True,
                          text=True, timeout=120, check=False, env={**os.environ, "NO_COLOR": "1", "COLUMNS": "100"})


@pytest.mark.parametrize("argv", [
    ["--help", "status"],
    ["-h", "show", "TASK-1"],
    ["--debug", "-h", "record"],
    ["--he", "suggest-mode"],  # an abbreviation of --help is --help
])
def test_top_level_help_before_a_command_lists_every_command(argv: list[str], tmp_path: Path) -> None:
    full = _cli(["--help"], tmp_path)
    done = _cli(argv, tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (full.returncode, full.stdout, full.stderr)


@pytest.mark.parametrize("argv", [["--", "status"], ["-", "status"], ["-1", "show", "TASK-1"],
                                  ["--debug", "--", "log", "TASK-1"]])
def test_a_dash_word_read_as_the_command_is_refused_with_every_command_listed(argv: list[str],
                                                                               tmp_path: Path) -> None:
    done = _cli(argv, tmp_path)
    assert done.returncode == 2
    assert "invalid choice" in done.stderr, done.stderr
    assert all(f"'{name.replace('_', '-')}'" in done.stderr for name in COMMAND_MODULES), done.stderr
