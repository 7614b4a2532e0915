"""The crash log: what an unexpected error (a fault of guardkit-state itself) leaves behind.

As pre-commit's error handler does, the command prints one line naming the log, and the log holds
what a bug report needs: the versions (guardkit-state, Python, the platform, git), the command line
and the traceback. It is written under ``.guardkit/logs/`` where the repository already has a
``.guardkit`` folder, else in the user's cache folder (``$XDG_CACHE_HOME/guardkit-state``, by default
``~/.cache/guardkit-state``); each crash replaces the last one's log.
"""

from __future__ import annotations

import os
import platform
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from guardkit_state import __version__
from guardkit_state.store.layout import CRASH_LOG_FILE, GUARDKIT_DIR


def crash_log_path(repo: Path | str | None) -> Path:
    """Where a crash in ``repo`` is logged (see the module)."""
    home = Path(repo or ".") / GUARDKIT_DIR
    if home.is_dir() and not home.is_symlink():
        return Path(repo or ".") / CRASH_LOG_FILE
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "guardkit-state" / CRASH_LOG_FILE.name


def write_crash_log(error: BaseException, argv: Sequence[str], repo: Path | str | None) -> Path | None:
    """Write the crash log of ``error`` (raised by the command ``argv``); its path, or None when it
    could not be written (the error is then shown on its own)."""
    path = crash_log_path(repo)
    lines = ["### version information", "", "```", f"guardkit-state: {__version__}", f"git: {_git_version()}",
             f"python: {sys.version.split()[0]} ({sys.executable})", f"platform: {platform.platform()}", "```", "",
             "### error information", "", "```", f"guardkit-state {' '.join(argv)}", f"cwd: {Path.cwd()}", "",
             *traceback.format_exception(error), "```", ""]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(line.rstrip("\n") for line in lines), encoding="utf-8")
    except OSError:
        return None
    return path


def _git_version() -> str:
    from guardkit_state.errors import GitError
    from guardkit_state.git.runner import execute

    try:
        status, out, _ = execute(Path.cwd(), ["git", "--version"], timeout=10)
    except GitError as exc:
        return f"unknown ({exc.message})"
    return out.decode("utf-8", "replace").strip() if status == 0 else f"unknown (exit {status})"


__all__ = ["crash_log_path", "write_crash_log"]
