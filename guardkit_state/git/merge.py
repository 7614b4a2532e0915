"""Merging a task's branch into its feature branch: once, with trailers, never left half-done.

A feature run merges each approved task branch (``autobuild/TASK-Y``) into the feature branch
(``autobuild/FEAT-X``) with ``git merge --no-ff`` in the feature's own worktree. The merge commit
carries trailers (``Guardkit-Feature``, ``Guardkit-Task``, ``Guardkit-Wave``), so a resumed run
finds the merges already made and never repeats one. A conflict is aborted at once: the feature
worktree is back where it was and the task's branch is untouched.

A kill can land inside ``git merge``. What it may leave is repaired before the next merge by
:func:`recover_interrupted_merge`: a stale lock, a merge in progress (aborted), or files the merge
had begun to write before it recorded ``MERGE_HEAD`` (restored, but only paths a task branch of the
feature changes; anything else is someone's edit and stops the run instead).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from guardkit_state.errors import GitError, InputError, first_few, one_line
from guardkit_state.git.repo import UNREAD, GitRepo, Unread
from guardkit_state.git.runner import git_error
from guardkit_state.model import Fields

log = logging.getLogger("guardkit_state.git.merge")

TRAILER_FEATURE = "Guardkit-Feature"
TRAILER_TASK = "Guardkit-Task"
TRAILER_WAVE = "Guardkit-Wave"
#: Paths are taken literally (a file named ``:(glob)*`` is just a file).
_LITERAL = ("--literal-pathspecs",)
#: The refs and files a merge writes in its worktree's git directory (each through a ``.lock``).
_MERGE_REFS = ("ORIG_HEAD", "MERGE_HEAD", "AUTO_MERGE", "MERGE_MSG", "MERGE_MODE", "MERGE_RR")


@dataclass(frozen=True)
class MergeResult(Fields):
    """What a merge did: ``sha`` of the merge commit, or the conflicting paths, or why git refused.

    ``already`` is True when the branch was already part of the target (nothing was merged).
    """

    sha: str | None
    conflicts: tuple[str, ...] = ()
    error: str | None = None
    already: bool = False

    @property
    def merged(self) -> bool:
        return self.sha is not None and not self.conflicts and self.error is None


def merge_message(feature_id: str, task_id: str, *, branch: str, target: str, wave: int | None = None,
                  summary: str | None = None) -> str:
    """The merge commit message: subject, an optional line, then one trailer block git can parse.

    Raises:
        InputError: an id or branch name with a line break (it would forge a trailer).
    """
    trailers = {TRAILER_FEATURE: feature_id, TRAILER_TASK: task_id}
    if wave is not None:
        trailers[TRAILER_WAVE] = str(wave)
    for value in (*trailers.values(), branch, target):
        if not value or "\n" in value or "\r" in value:
            raise InputError(f"invalid value for a merge message: {value!r}", task_id=task_id,
                             expected="a non-empty single-line value")
    body = f"\n\n{' '.join(summary.split())}" if summary and summary.strip() else ""
    block = "\n".join(f"{key}: {value}" for key, value in trailers.items())
    return f"Merge {branch} into {target}{body}\n\n{block}\n"


def is_ancestor(repo: GitRepo, commit: str, of: str) -> bool:
    """True when ``commit`` is reachable from ``of`` (already merged into it, or where it started).

    Raises:
        GitError: either revision is unknown.
    """
    status, _, stderr = repo.run("merge-base", "--is-ancestor", commit, of, check=False)
    if status in (0, 1):
        return status == 0
    raise git_error(["git", "merge-base", "--is-ancestor", commit, of], status, stderr, repo.root)


def unmerged_tip(repo: GitRepo, branch: str, into: str) -> str | None:
    """The tip of the local ``branch`` when ``into`` does not reach it (what :func:`is_ancestor` of
    the two answers False for), in one git call; None when it does, or either is unknown."""
    ref = f"refs/heads/{branch}"
    return unmerged_tips(repo, ref, into).get(ref)  # (the pattern matches refs below it too)


def unmerged_tips(repo: GitRepo, pattern: str, into: str) -> dict[str, str]:
    """The refs ``pattern`` names (``refs/heads/autobuild/``: all below it) that ``into`` does not
    reach, with their tips (ref -> sha), in one git call; none when either is unknown."""
    return {ref[0]: ref[1] for ref in repo.refs(("refname", "objectname"), f"--no-merged={into}", pattern) or ()}


def find_task_merge(repo: GitRepo, task_id: str, rev: str) -> str | None:
    """The newest merge commit on ``rev``'s first-parent line whose message has the line
    ``Guardkit-Task: task_id``.

    Matched as a line, not through git's trailer parser: a commit-msg hook that appends a footer
    paragraph hides the trailer block from that parser. Only the feature run makes first-parent
    merges on the feature branch (a task's own commits come in as second parents).
    None when there is none, or when ``rev`` does not exist.
    """
    status, out, stderr = repo.run("log", "--first-parent", "--merges", "-E", "--max-count=1",
                                   f"--grep=^{TRAILER_TASK}: {re.escape(task_id)}$", "--format=%H",
                                   rev, "--", check=False)
    if status != 0:
        if "unknown revision" in stderr or "bad revision" in stderr or "does not have any commits" in stderr:
            return None
        raise git_error(["git", "log", "--first-parent", rev], status, stderr, repo.root)
    return out.decode("utf-8", "replace").strip() or None


def task_merges(repo: GitRepo, rev: str) -> dict[str, str]:
    """What :func:`find_task_merge` finds on ``rev`` for every task at once (task id -> the newest
    merge commit with its ``Guardkit-Task`` line), in one git call; empty when ``rev`` does not exist."""
    # -z: each commit ends with a NUL, which no message holds (git reads a message up to one, as
    # --grep does); any other separator a hook's footer or a hand-written message may carry.
    status, out, _ = repo.run("log", "-z", "--first-parent", "--merges", "--format=%H%n%B", rev, "--", check=False)
    if status != 0:
        return {}
    prefix = f"{TRAILER_TASK}: "
    merges: dict[str, str] = {}
    for record in out.decode("utf-8", "replace").split("\0"):
        sha, _, message = record.partition("\n")
        for line in message.split("\n"):  # a line, as --grep='^Guardkit-Task: ID$' matches it
            if line.startswith(prefix) and line != prefix:
                merges.setdefault(line[len(prefix):], sha)  # newest first
    return merges


def merged_task_ids(repo: GitRepo, rev: str) -> frozenset[str]:
    """Every task id :func:`find_task_merge` finds on ``rev`` (see :func:`task_merges`)."""
    return frozenset(task_merges(repo, rev))


def merge_in_progress(repo: GitRepo) -> bool:
    """True when the working tree is inside a merge (``MERGE_HEAD`` exists)."""
    return repo.ok("rev-parse", "-q", "--verify", "MERGE_HEAD")


def merge_branch(repo: GitRepo, branch: str, message: str, *, head: str | Unread | None = UNREAD) -> MergeResult:
    """``git merge --no-ff`` of ``branch`` into the branch checked out in ``repo``; never left half-done.

    A conflict is aborted at once (the working tree is back at its HEAD) and returned with the
    conflicting paths; any other refusal (a hook, files in the way) is returned in ``error``. A
    branch already reachable from HEAD is not merged again (``already``). ``head``: the commit HEAD
    is at as the caller knows it (what it checked out, or the last merge it made; None: unborn), so
    it is not asked again.

    Raises:
        GitError: git itself cannot run, ``branch`` is unknown (HEAD being born), or the abort after a
            failed merge fails.
    """
    before = repo.head_sha() if isinstance(head, Unread) else head
    # Whether the branch is in HEAD already is not asked first: git merge answers it itself ("Already
    # up to date": exit 0, no commit even with --no-ff, no hook run, HEAD where it was). It is asked only
    # where HEAD did not move or the merge failed: there it decides, as it did when asked first.
    # --no-log: git's shortlog would follow the trailers and hide them from trailer parsing.
    status, _, stderr = repo.run("merge", "--no-ff", "--no-log", "--no-edit", "-q", "-m", message, branch,
                                 check=False, pre=repo.identity_args())
    if status == 0:
        sha = repo.head_sha()
        if sha is not None and sha == before and _already_in_head(repo, branch, before):
            return MergeResult(sha, already=True)
        log.info("merged %s into %s: %s", branch, repo.root, sha)
        return MergeResult(sha)
    if _already_in_head(repo, branch, before):  # (git refused before looking: a merge left unconcluded ...)
        return MergeResult(before, already=True)
    conflicts = unmerged_paths(repo)
    if merge_in_progress(repo):
        repo.run("merge", "--abort")
    if conflicts:
        log.info("merge of %s into %s conflicts in %s; aborted", branch, repo.root, ", ".join(conflicts))
        return MergeResult(None, tuple(conflicts))
    failure = git_error(["git", "merge", "--no-ff", branch], status, stderr, repo.root)
    return MergeResult(None, error=one_line(failure) + _merge_advice(repo, stderr))


def _already_in_head(repo: GitRepo, branch: str, head: str | None) -> bool:
    """True when ``branch`` is reachable from HEAD (``head``, None: unborn, where nothing is).

    Raises:
        GitError: ``branch`` is unknown (HEAD being born).
    """
    try:
        return is_ancestor(repo, branch, "HEAD")
    except GitError:
        if head is not None:
            raise  # an unknown branch; on an unborn HEAD there is nothing it could already be part of
        return False


def _merge_advice(repo: GitRepo, stderr: str) -> str:
    """What to do about a refusal git explains only by its own words."""
    if "does not have a GPG signature" in stderr or "has an untrusted GPG signature" in stderr or (
            "signature" in stderr and repo.run("config", "--bool", "merge.verifySignatures", check=False)[1]
            .strip() == b"true"):
        return (" — merge.verifySignatures is set, and the task's turn commits are not signed by a trusted key: "
                "sign them (commit.gpgsign with a key), or merge the branch by hand, then --resume")
    return ""


def unmerged_paths(repo: GitRepo) -> list[str]:
    """The paths git left unmerged (conflicts) in the working tree, sorted."""
    out = repo.run("diff", "--name-only", "--diff-filter=U", "-z", check=False)[1]
    return sorted({p for p in out.decode("utf-8", "surrogateescape").split("\0") if p})


def changed_paths(repo: GitRepo, revs: Iterable[str]) -> set[str]:
    """Every path that differs between HEAD and any of ``revs`` (unknown revisions are skipped)."""
    paths: set[str] = set()
    for rev in revs:
        status, out, _ = repo.run("diff", "--name-only", "-z", "--no-renames", "HEAD", rev, "--", check=False)
        if status == 0:
            paths.update(p for p in out.decode("utf-8", "surrogateescape").split("\0") if p)
    return paths


def recover_interrupted_merge(repo: GitRepo, merged_from: Callable[[], Iterable[str]]) -> list[str]:
    """Undo what a killed merge left in the worktree ``repo``; return one note per repair.

    ``merged_from`` names the branches a merge in this worktree can have come from (called only
    when the worktree is dirty). A stale git lock is removed, a merge in progress is aborted, and
    files differing from HEAD are restored when every one of them is a path those branches change.

    Raises:
        GitError: the worktree holds changes no merge made (named: nothing is touched).
    """
    # A killed merge leaves the locks of its own refs too (ORIG_HEAD, MERGE_HEAD ...): the next would fail on them.
    removed = repo.remove_stale_index_lock(refs=_MERGE_REFS)
    notes = [f"removed stale git lock {lock} (no git process held it)" for lock in removed]
    if merge_in_progress(repo):
        repo.run("merge", "--abort")
        notes.append(f"aborted a merge an interrupted run left in progress in {repo.root}")
    dirty = repo.status()
    if not dirty:
        return notes
    paths = {entry.path for entry in dirty} | {entry.orig_path for entry in dirty if entry.orig_path}
    foreign = sorted(paths - changed_paths(repo, merged_from()))
    if foreign:
        raise GitError(f"the feature worktree {repo.root} has changes no merge made: {first_few(foreign)}; "
                       "commit or discard them there, then run again", path=repo.root)
    _restore(repo, sorted(paths))
    notes.append(f"restored {len(paths)} file(s) an interrupted merge had begun to write in {repo.root}")
    return notes


def _restore(repo: GitRepo, paths: list[str]) -> None:
    """Make ``paths`` (and the index) match HEAD again: tracked ones checked out, the others removed."""
    tracked = set(repo.run("ls-tree", "-r", "-z", "--name-only", "HEAD", "--", *paths, pre=_LITERAL)[1]
                  .decode("utf-8", "surrogateescape").split("\0")) - {""}
    repo.run("reset", "-q", "HEAD", "--", *paths, pre=_LITERAL, check=False)
    if tracked:
        repo.run("checkout", "-q", "HEAD", "--", *sorted(tracked), pre=_LITERAL)
    for rel in paths:
        if rel not in tracked:
            target = Path(repo.root) / rel
            if target.is_file() or target.is_symlink():
                target.unlink()


__all__ = [
    "TRAILER_FEATURE",
    "TRAILER_TASK",
    "TRAILER_WAVE",
    "MergeResult",
    "changed_paths",
    "find_task_merge",
    "is_ancestor",
    "merge_branch",
    "merge_in_progress",
    "merge_message",
    "merged_task_ids",
    "recover_interrupted_merge",
    "task_merges",
    "unmerged_paths",
    "unmerged_tip",
    "unmerged_tips",
]
