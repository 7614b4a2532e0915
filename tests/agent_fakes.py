"""Faithful fake coding CLIs on PATH (``tests/fake_agents/fake_cli.py``) and a task to run them on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .e2e_support import GUARDKIT_STATE, clean_env

FAKES = Path(__file__).resolve().parent / "fake_agents"
TASK = "TASK-AG-001"
REL = f"tasks/in_progress/{TASK}-agents.md"
BODY = """\
---
id: TASK-AG-001
title: Parse durations
status: in_progress
complexity: 3
---

# Parse durations

## Acceptance Criteria

- [ ] AC-001: `parse("1h30m")` returns 5400
- [ ] AC-002: garbage raises ValueError
"""
PRESETS = ("claude", "codex", "gemini", "aider")


@pytest.fixture
def fakes(tmp_path: Path) -> Path:
    """A bin directory holding the four fake CLIs, each a real executable."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in PRESETS:
        exe = bin_dir / name
        exe.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(FAKES)!r})\n"
                       f"import fake_cli\nsys.exit(fake_cli.main({name!r}))\n")
        exe.chmod(0o755)
    return bin_dir


def run_cli(root: Path, bin_dir: Path | None, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    path = env.pop("PATH", None) or (f"{bin_dir}{os.pathsep}" if bin_dir else "") + os.environ.get("PATH", "")
    return subprocess.run([str(GUARDKIT_STATE), *args, "--repo", str(root)], capture_output=True, text=True,
                          env=clean_env(PATH=path, **env), timeout=120, check=False)
