"""The one-line registrations of ``guardkit-state mcp`` in docs/mcp.md and the README, read as each
agent's CLI reads its ``mcp add`` (the grammar its own documentation and source give), must give
the command ``guardkit-state`` and arguments ``guardkit-state`` itself parses as ``mcp``."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from guardkit_state.cli.app import build_parser

ROOT = Path(__file__).resolve().parent.parent
AGENTS = ("claude", "codex", "gemini")


def command_after_separator(words: list[str]) -> tuple[str, list[str]]:
    """Claude Code (``add [options] <name> -- <command> [args...]``) and Codex CLI
    (``add [OPTIONS] <NAME> -- <COMMAND>...``): the whole command follows ``--``."""
    name, separator, command, *args = words
    assert (name, separator) == ("guardkit-state", "--")
    return command, args


def gemini_add(words: list[str]) -> tuple[str, list[str]]:
    """Gemini CLI (``add <name> <commandOrUrl> [args...]``, yargs with ``populate--``): the two
    positionals come before any ``--``; what follows it is only appended to the arguments."""
    before, after = (words[:words.index("--")], words[words.index("--") + 1:]) if "--" in words else (words, [])
    assert len(before) >= 2, "Not enough non-option arguments: the command is missing"
    name, command, *args = before
    assert name == "guardkit-state"
    return command, args + after


READERS = {"claude": command_after_separator, "codex": command_after_separator, "gemini": gemini_add}


@pytest.mark.parametrize("page", ["docs/mcp.md", "README.md"])
def test_each_registration_line_gives_the_mcp_command(page: str, tmp_path: Path) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    found = set()
    for agent in AGENTS:
        for line in re.findall(rf"^.*?({agent} mcp add [^`#\n]*)", text, re.M):
            found.add(agent)
            words = shlex.split(line)
            command, args = READERS[agent](words[3:])
            assert command == "guardkit-state", line
            # The placeholder made a real folder: --repo must name one.
            parsed = build_parser("mcp").parse_args([str(tmp_path) if a == "/path/to/repo" else a for a in args])
            assert (parsed.command, Path(parsed.repo)) == ("mcp", tmp_path), line
    assert found == set(AGENTS)
