"""Running git: the one place the git CLI is executed, and its failures turned into advice.

git runs as the command line (it honours hooks and the user's config; GitPython's index API is 4x
slower and is not used), in the clean environment of :mod:`guardkit_state.git.environment`, by
``subprocess`` (GitPython's ``Git.execute`` cannot remove an inherited variable, and importing
GitPython costs ~0.3 s a command).
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Sequence
from pathlib import Path

from guardkit_state.errors import GitError
from guardkit_state.git.environment import clean_environment

ADVICE = "Is git installed, and is this a git repository?"


#: The exit status :func:`execute` returns for a command stopped at its ``timeout`` (as timeout(1)).
TIMED_OUT = 124


def execute(cwd: Path, command: Sequence[str], *, stdin: bytes | None = None,
            path: Path | None = None, timeout: float | None = None,
            index_file: Path | None = None) -> tuple[int, bytes, str]:
    """Run ``command`` (``["git", ...]``) in ``cwd``: (exit status, stdout bytes, stderr text).

    git runs in :func:`~guardkit_state.git.environment.clean_environment`: an inherited
    ``GIT_DIR`` or ``GIT_INDEX_FILE`` never redirects it. A failing command is returned, not
    raised; a missing git or an OS failure raises :class:`GitError` (naming ``path``, the working
    tree, when given). With ``timeout`` (seconds), a command still running then is stopped and
    returned as :data:`TIMED_OUT`: a remote that takes the connection and never answers would
    otherwise hold its caller for good. git stays in this process group (a signal to the group, a
    terminal's or a killed machine's, reaches it), and is stopped when this process is interrupted.
    ``index_file`` is the one ``GIT_INDEX_FILE`` git ever gets: an index of guardkit-state's own
    (the worktree snapshot's), passed deliberately, never inherited.
    """
    try:
        # Not GitPython's Git.execute: it merges its env= into a copy of os.environ, so it can add
        # variables but never remove an inherited GIT_DIR. LC_ALL/LANGUAGE=C as GitPython sets them:
        # git's messages ("nothing to commit", "unknown revision") are matched in English.
        environment = {**clean_environment(), "LANGUAGE": "C", "LC_ALL": "C"}
        if index_file is not None:
            environment["GIT_INDEX_FILE"] = str(index_file)
        proc = subprocess.Popen(list(command), cwd=str(cwd), env=environment,
                                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError as exc:
        if exc.filename == command[0]:
            raise GitError(f"git is not installed or not on PATH. {ADVICE}", command=list(command)) from exc
        raise GitError(f"cannot run git: {exc}", command=list(command), path=path) from exc
    except OSError as exc:
        raise GitError(f"cannot run git: {exc}", command=list(command), path=path) from exc
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(proc)
        return TIMED_OUT, b"", f"fatal: no answer in {timeout:g} s ('git {' '.join(command[1:2])}' stopped)"
    except BaseException:
        _stop(proc)
        raise
    return proc.returncode, out, err.decode("utf-8", "replace")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Kill git; its helpers (ssh, git-remote-https) end when their pipe to it closes. A helper
    still holding the output pipes a while longer is not waited for."""
    proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=5)


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
