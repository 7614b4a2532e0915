"""Running git: the one place the git CLI is executed, and its failures turned into advice.

git runs as the command line (it honours hooks and the user's config; GitPython's index API is 4x
slower and is not used), in the clean environment of :mod:`guardkit_state.git.environment`, by
``subprocess`` (GitPython's ``Git.execute`` cannot remove an inherited variable, and importing
GitPython costs ~0.3 s a command).
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from guardkit_state.errors import GitError
from guardkit_state.git.environment import clean_environment

ADVICE = "Is git installed, and is this a git repository?"


def execute(cwd: Path, command: Sequence[str], *, stdin: bytes | None = None,
            path: Path | None = None) -> tuple[int, bytes, str]:
    """Run ``command`` (``["git", ...]``) in ``cwd``: (exit status, stdout bytes, stderr text).

    git runs in :func:`~guardkit_state.git.environment.clean_environment`: an inherited
    ``GIT_DIR`` or ``GIT_INDEX_FILE`` never redirects it. A failing command is returned, not
    raised; a missing git or an OS failure raises :class:`GitError` (naming ``path``, the working
    tree, when given).
    """
    try:
        # Not GitPython's Git.execute: it merges its env= into a copy of os.environ, so it can add
        # variables but never remove an inherited GIT_DIR. LC_ALL/LANGUAGE=C as GitPython sets them:
        # git's messages ("nothing to commit", "unknown revision") are matched in English.
        streams: dict[str, Any] = {"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}
        proc = subprocess.run(list(command), cwd=str(cwd), capture_output=True, check=False,
                              env={**clean_environment(), "LANGUAGE": "C", "LC_ALL": "C"}, **streams)
    except FileNotFoundError as exc:
        if exc.filename == command[0]:
            raise GitError(f"git is not installed or not on PATH. {ADVICE}", command=list(command)) from exc
        raise GitError(f"cannot run git: {exc}", command=list(command), path=path) from exc
    except OSError as exc:
        raise GitError(f"cannot run git: {exc}", command=list(command), path=path) from exc
    return proc.returncode, proc.stdout, proc.stderr.decode("utf-8", "replace")


def git_error(command: list[str], status: int, stderr: str, root: Path) -> GitError:
    """The :class:`GitError` of a failed command: its first ``fatal:``/``error:`` line, and advice."""
    detail = stderr.strip().splitlines()
    first = next((line for line in detail if line.startswith(("fatal:", "error:"))), detail[-1] if detail else "")
    shown = " ".join(command[:4])
    message = f"'{shown}' failed (exit {status})" + (f": {first}" if first else "")
    if "index.lock" in stderr:
        message += " — another git process is running, or a killed one left a lock behind"
    return GitError(message, command=command, returncode=status, stderr=stderr, path=root)


def nothing_to_commit(exc: GitError) -> bool:
    """True when a commit failed only because there was nothing to commit."""
    text = (exc.stderr or "") + " " + exc.message
    return "nothing to commit" in text or "no changes added to commit" in text or "nothing added to commit" in text


__all__ = ["ADVICE", "execute", "git_error", "nothing_to_commit"]
