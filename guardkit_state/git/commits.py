"""Turn commits: the one commit of each completed turn, and reading them back by their trailers.

A turn commit (:func:`commit_turn`) never raises for a git failure: the turn's files are already
written when it is called, so a failing hook or a locked index is *returned* in
:class:`CommitResult` for the caller to report. Its message carries ``Task:``/``Turn:``/
``Decision:``/``Mode:`` trailers, which is how :func:`turn_commits` finds it again for reading
(``log``, ``diff``); whether a turn *is* committed is asked of the ledger of commits the loop made
(:mod:`guardkit_state.git.turn_ledger`), never of a message anyone could have written.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from guardkit_state.errors import GitError, InputError, one_line
from guardkit_state.git import turn_ledger
from guardkit_state.git.parse import LOG_FORMAT, TurnCommit, log_format, parse_log, parse_turn_log
from guardkit_state.git.repo import FALLBACK_EMAIL, FALLBACK_NAME, UNREAD, Unread
from guardkit_state.git.runner import git_error, nothing_to_commit
from guardkit_state.model import Fields
from guardkit_state.store.fsio import crash_point
from guardkit_state.store.safe_paths import validate_task_id

if TYPE_CHECKING:
    from guardkit_state.git.repo import GitRepo

log = logging.getLogger("guardkit_state.git.commits")


@dataclass(frozen=True)
class CommitResult(Fields):
    """What a turn commit did: ``sha`` when committed, else ``skipped`` or ``error`` says why."""

    sha: str | None
    error: str | None = None
    skipped: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def committed(self) -> bool:
        return self.sha is not None and self.skipped is None and self.error is None


def turn_commits(repo: GitRepo, task_id: str, *, rev: str = "HEAD", depth: int | None = None) -> list[TurnCommit]:
    """Turn commits of ``task_id`` reachable from ``rev``, newest first (by trailers).

    ``depth`` looks only at the newest ``depth`` commits (git's ``--grep`` with
    ``--max-count`` would still walk the whole history when nothing matches).
    """
    args = ["log", f"--format={LOG_FORMAT}"]
    if depth is None:
        args += ["-E", f"--grep=^Task: {re.escape(task_id)}$"]
    else:
        args.append(f"--max-count={depth}")
    status, out, stderr = repo.run(*args, rev, "--", check=False)
    if status != 0:
        if "unknown revision" in stderr or "bad revision" in stderr or "does not have any commits" in stderr:
            return []
        raise git_error(["git", *args, rev], status, stderr, repo.root)
    found = [c for c in parse_turn_log(out.decode("utf-8", "replace")) if c.task_id == task_id]
    return _with_recorded(repo, task_id, rev, found)


def _with_recorded(repo: GitRepo, task_id: str, rev: str, found: list[TurnCommit]) -> list[TurnCommit]:
    """``found`` (by trailers) plus the ledger's commits on ``rev`` whose trailers git cannot see (a
    commit-msg hook appended a paragraph after them), newest first."""
    known = {c.sha for c in found}
    missing = [e for e in turn_ledger.entries(repo, task_id) if e.sha not in known]
    if not missing:
        return found
    on_rev = [e for e in missing if repo.run("merge-base", "--is-ancestor", e.sha, rev, check=False)[0] == 0]
    if not on_rev:
        return found
    fields = ("%H", "%cI", "%s")
    out = repo.run("log", "--no-walk=sorted", f"--format={log_format(fields)}", *(e.sha for e in on_rev))[1]
    heads = {sha: (date, subject) for sha, date, subject in parse_log(out.decode("utf-8", "replace"), len(fields))}
    extra = [TurnCommit(e.sha, heads[e.sha][0], heads[e.sha][1], task_id, e.turn, e.decision, e.mode)
             for e in on_rev if e.sha in heads]
    return sorted([*found, *extra], key=lambda c: c.date, reverse=True)


def find_turn_commit(repo: GitRepo, task_id: str, turn: int, *, rev: str = "HEAD",
                     tip: str | None = None) -> str | None:
    """The turn commit of ``turn`` this run of the loop made, on ``rev`` (``tip``: its commit, as the
    caller has just read it); see :mod:`guardkit_state.git.turn_ledger`. A look-alike message is not one."""
    return turn_ledger.verified_turn_commit(repo, task_id, turn, rev=rev, tip=tip)


def commit_turn(
    repo: GitRepo | None,
    *,
    task_id: str,
    turn: int,
    decision: str | Enum,
    mode: str | Enum,
    paths: Sequence[str | Path] | None = None,
    managed_worktree: bool,
    force_paths: Sequence[str | Path] = (),
    trailers: Mapping[str, str] | None = None,
    head: str | Unread | None = UNREAD,
) -> CommitResult:
    """Make the one commit of a completed turn; never raises for a git failure.

    In a managed worktree (``managed_worktree=True``) every change is committed, untracked files
    included; elsewhere only ``paths`` (required) are. ``force_paths`` (exact files: the turn's own
    reports) are committed even where a ``.gitignore`` rule hides them. The message is
    ``autobuild(TASK): turn N <decision>`` with ``Task:``/``Turn:``/``Decision:``/``Mode:``
    trailers (and ``trailers``, when given). If this run of the loop already made the commit of
    this Task and Turn on HEAD (resume after a kill), nothing is committed and ``skipped`` says
    so. A commit made is recorded in the task's ledger (:mod:`guardkit_state.git.turn_ledger`). A
    stale ``index.lock`` is removed and the commit retried once. ``head``: HEAD's commit in a managed
    worktree as the caller just read it (:meth:`~guardkit_state.git.repo.GitRepo.head`). Raises :class:`InputError` only
    for misuse (bad id, no paths outside a worktree).
    """
    validate_task_id(task_id)
    if repo is None:
        return CommitResult(None, skipped="not a git repository (or git is not installed): turn not committed")
    if not managed_worktree and not paths:
        raise InputError("outside a managed worktree the paths to commit must be given",
                         task_id=task_id, turn=turn, expected="paths=[...]")
    message = turn_message(task_id, turn, _value(decision), _value(mode), trailers)
    notes: list[str] = []
    try:
        existing = find_turn_commit(repo, task_id, turn)
        if existing:
            return CommitResult(existing, skipped=f"turn {turn} of {task_id} is already committed as {existing[:12]}")
        sha = _commit_retrying_a_stale_lock(repo, message, None if managed_worktree else list(paths or []),
                                            force_paths, notes, head)
    except GitError as exc:
        log.warning("turn %s of %s not committed: %s", turn, task_id, exc)
        return CommitResult(None, error=one_line(exc), notes=tuple(notes))
    if sha is None:
        adopted = _adopt_head(repo, message)
        if adopted is None:
            return CommitResult(None, skipped="nothing to commit", notes=tuple(notes))
        # A kill between the loop's `git commit` and its ledger line: the turn's files are all
        # committed (nothing is left to commit, and they are written only after both agents ran),
        # and HEAD carries the loop's exact message. It is that commit.
        turn_ledger.record(repo, task_id, turn_ledger.ProvenTurnCommit(adopted, turn, _value(decision), _value(mode)))
        return CommitResult(adopted, skipped=f"turn {turn} of {task_id} is already committed as {adopted[:12]}")
    crash_point("git.after_commit")  # committed, not yet in the ledger: --resume adopts HEAD
    turn_ledger.record(repo, task_id, turn_ledger.ProvenTurnCommit(sha, turn, _value(decision), _value(mode)))
    if repo.identity_args():
        notes.append(f"no git identity configured; committed as {FALLBACK_NAME} <{FALLBACK_EMAIL}>")
    return CommitResult(sha, notes=tuple(notes))


def _commit_retrying_a_stale_lock(repo: GitRepo, message: str, paths: list[str | Path] | None,
                                  force_paths: Sequence[str | Path], notes: list[str],
                                  head: str | Unread | None = UNREAD) -> str | None:
    """Commit everything (``paths`` None: a managed worktree) or exactly ``paths``; the sha, or None
    when there was nothing to commit. A lock a killed git left behind is removed, then one retry."""
    for attempt in (1, 2):
        try:
            return (repo.commit_all(message, force=force_paths, head=head) if paths is None
                    else repo.commit_paths(paths, message, force=force_paths))
        except GitError as exc:
            if attempt == 1 and ".lock': File exists" in exc.stderr:
                removed = repo.remove_stale_index_lock()
                if removed:
                    notes.append("removed stale git lock " + ", ".join(str(p) for p in removed))
                    continue
            if nothing_to_commit(exc):
                return None
            raise
    raise AssertionError("unreachable: the second attempt returns or raises")


def _adopt_head(repo: GitRepo, message: str) -> str | None:
    """HEAD's sha when its message begins with ``message`` (a hook may have appended to it)."""
    status, out, _ = repo.run("log", "-1", "--format=%H%n%B", "HEAD", check=False)
    sha, _, body = out.decode("utf-8", "replace").partition("\n")
    return sha.strip() if status == 0 and body.startswith(message.rstrip("\n")) else None


def turn_message(task_id: str, turn: int, decision: str, mode: str,
                 extra: Mapping[str, str] | None = None) -> str:
    """The commit message of a turn: subject, blank line, one trailer block git can parse.

    ``extra`` trailers follow the four of every turn (``History-Restored``: an agent's edit to
    the recorded history was undone in this turn)."""
    trailers = {"Task": task_id, "Turn": str(turn), "Decision": decision, "Mode": mode, **(extra or {})}
    for key, value in trailers.items():
        if not value or "\n" in value or "\r" in value:
            raise InputError(f"invalid trailer value for {key}: {value!r}", task_id=task_id, turn=turn,
                             expected="a non-empty single-line value")
    block = "\n".join(f"{k}: {v}" for k, v in trailers.items())
    return f"autobuild({task_id}): turn {turn} {decision}\n\n{block}\n"


def _value(v: str | Enum) -> str:
    return str(v.value) if isinstance(v, Enum) else str(v)


__all__ = ["CommitResult", "commit_turn", "find_turn_commit",
           "turn_commits", "turn_message"]
