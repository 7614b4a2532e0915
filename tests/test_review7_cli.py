"""Building the parser with only the command being run must not change what the CLI prints.

The command is picked as the first argv word not starting with '-'. Two argv shapes show what the
full parser would have printed, and the one-command parser prints less: the top-level help asked
for before a command name, and a dash-led word argparse reads as the command ('--', '-', '-1')
ahead of a command name, whose "invalid choice" error should list every command.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from guardkit_state.cli.app import COMMAND_MODULES


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
