"""The turn commits this loop made, recorded by id: what makes a commit a turn commit.

A commit message can be written by anyone — a Player that runs ``git commit -m "autobuild(T): turn 1
approve"`` with ``Task:``/``Turn:`` trailers, a commit-msg hook that appends a footer paragraph (git's
trailer parser then sees none), or an earlier run of the same task already merged into the base.
So a commit counts as a task's turn commit only when its id is in the task's ledger,
``<git common dir>/guardkit-state/turn-commits/TASK-ID`` — written right after the loop's own
``git commit``, under the task's lock, outside every working tree, and named to no agent — *and*
it was made since the task's run started (a fresh start writes a ``run`` line: the commits of an
earlier run, merged into the base since, are that run's), *and* it is on the branch asked about.

Each line is ``<sha> <turn> <decision> <mode>`` or ``run <timestamp>``; the newest line for a turn wins.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from guardkit_state.store.fsio import append_line
from guardkit_state.store.layout import TURN_COMMITS_IN_GIT_DIR
from guardkit_state.store.safe_paths import validate_task_id

if TYPE_CHECKING:
    from guardkit_state.git.repo import GitRepo

_LINE = re.compile(r"([0-9a-f]{40,64}) ([1-9][0-9]{0,5}) (\S+) (\S+)")
_RUN = "run "


@dataclass(frozen=True)
class ProvenTurnCommit:
    """One turn commit the loop made."""

    sha: str
    turn: int
    decision: str
    mode: str


def ledger_path(repo: GitRepo, task_id: str) -> Path:
    return repo.common_dir / TURN_COMMITS_IN_GIT_DIR / validate_task_id(task_id)


def entries(repo: GitRepo, task_id: str) -> list[ProvenTurnCommit]:
    """The task's recorded turn commits, oldest first (a damaged line is skipped, not trusted)."""
    text = ""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        text = ledger_path(repo, task_id).read_text("utf-8", "replace")
    found: list[ProvenTurnCommit] = []
    for line in text.splitlines():
        if line.startswith(_RUN):
            found.clear()  # a fresh run: what came before belongs to an earlier run of the task
            continue
        match = _LINE.fullmatch(line.strip())
        if match:
            found.append(ProvenTurnCommit(match[1], int(match[2]), match[3], match[4]))
    return found


def start_run(repo: GitRepo, task_id: str, stamp: str) -> None:
    """Mark a fresh run of the task (under its lock): earlier runs' commits no longer count for it."""
    _write(repo, task_id, f"{_RUN}{stamp}")


def record(repo: GitRepo, task_id: str, entry: ProvenTurnCommit) -> None:
    """Add ``entry`` to the task's ledger (atomically; called under the task's lock)."""
    _write(repo, task_id, f"{entry.sha} {entry.turn} {entry.decision} {entry.mode}")


def _write(repo: GitRepo, task_id: str, line: str) -> None:
    """Append ``line`` (durably; a line cut short by a kill fails the line pattern and is not trusted)."""
    append_line(ledger_path(repo, task_id), line)


def verified_turn_commit(repo: GitRepo, task_id: str, turn: int, *, rev: str = "HEAD",
                         tip: str | None = None) -> str | None:
    """The newest commit this run of the loop made for ``turn`` of ``task_id`` that is on ``rev``.

    ``tip``: ``rev``'s commit as the caller has just read it: an entry that is that very commit is on
    ``rev`` without asking git (the usual case: the approved turn's commit is its branch's tip)."""
    for entry in reversed(entries(repo, task_id)):
        if entry.turn == turn and (entry.sha == tip or _reachable(repo, entry.sha, rev)):
            return entry.sha
    return None


def _reachable(repo: GitRepo, sha: str, rev: str) -> bool:
    # Exit 1: not an ancestor; 128: an unknown revision (a ref deleted, an object gone): not on it.
    return repo.run("merge-base", "--is-ancestor", sha, rev, check=False)[0] == 0


__all__ = ["ProvenTurnCommit", "entries", "ledger_path", "record", "start_run", "verified_turn_commit"]
