"""Options every command shares, declared once so they read and behave the same everywhere."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

REPO_HELP = "the repository (default: the nearest folder above the current one with tasks/ or .git)"


def add_repo_option(parser: argparse.ArgumentParser, **overrides: Any) -> None:
    """``--repo DIR``; left unset, :func:`resolve_repo` finds the repository from the current folder."""
    options: dict[str, Any] = {"type": Path, "default": None, "metavar": "DIR", "help": REPO_HELP}
    options.update(overrides)
    parser.add_argument("--repo", **options)


def add_json_option(parser: argparse.ArgumentParser, help: str = "machine-readable output", **overrides: Any) -> None:
    parser.add_argument("--json", action="store_true", help=help, **overrides)


def resolve_repo(args: argparse.Namespace) -> None:
    """Fill in ``args.repo`` when the command has the option and it was not given."""
    if "repo" in vars(args) and args.repo is None:
        args.repo = find_repo_root(Path.cwd())


def find_repo_root(start: Path) -> Path:
    """The nearest folder from ``start`` upwards holding ``tasks/`` or ``.git``; ``start`` if none."""
    start = start.resolve()
    for candidate in (start, *start.parents):
        if (candidate / "tasks").is_dir() or (candidate / ".git").exists():
            return candidate
    return start
