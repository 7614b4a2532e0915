"""Running git: the one place the git CLI is executed, and its failures turned into advice.

git runs through GitPython's command wrapper (it honours hooks and the user's config; GitPython's
index API is 4x slower and is not used). GitPython is imported lazily: importing it fails when
the git executable is missing, and most commands never need it.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from guardkit_state.errors import GitError

ADVICE = "Is git installed, and is this a git repository?"


def execute(cwd: Path, command: Sequence[str], *, stdin: bytes | None = None,
            path: Path | None = None) -> tuple[int, bytes, str]:
    """Run ``command`` (``["git", ...]``) in ``cwd``: (exit status, stdout bytes, stderr text).

    A failing command is returned, not raised; a missing git or an OS failure raises
    :class:`GitError` (naming ``path``, the working tree, when given).
    """
    gitmod = git_module()
    try:
        with contextlib.ExitStack() as stack:
            istream = None
            if stdin is not None:
                istream = stack.enter_context(tempfile.TemporaryFile())
                istream.write(stdin)
                istream.seek(0)
            status, out, err = gitmod.cmd.Git(str(cwd)).execute(
                list(command), istream=istream, with_extended_output=True, with_exceptions=False,
                stdout_as_string=False, strip_newline_in_stdout=False,
            )
    except gitmod.exc.GitCommandNotFound as exc:
        raise GitError(f"git is not installed or not on PATH. {ADVICE}", command=list(command)) from exc
    except OSError as exc:
        raise GitError(f"cannot run git: {exc}", command=list(command), path=path) from exc
    stderr = err.decode("utf-8", "replace") if isinstance(err, bytes) else str(err or "")
    stdout = out if isinstance(out, bytes) else str(out or "").encode()
    return status, stdout, stderr


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


def one_line(exc: GitError) -> str:
    return " ".join(str(exc).split())


_GIT_MODULE: Any = None


def git_module() -> Any:
    """Import GitPython lazily; a missing git executable becomes a :class:`GitError`."""
    global _GIT_MODULE
    if _GIT_MODULE is None:
        try:
            import git  # lazy: importing fails when the git executable is missing
        except ImportError as exc:
            raise GitError(f"git is not available ({str(exc).splitlines()[0]}). {ADVICE}") from exc
        _GIT_MODULE = git
    return _GIT_MODULE


__all__ = ["ADVICE", "execute", "git_error", "git_module", "nothing_to_commit", "one_line"]
