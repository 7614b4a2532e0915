"""What an agent did to the worktree, read from git rather than from the agent's own claims.

Two questions, each answered by ``git status``/``git diff`` in the checkout, leaving the loop's own
files (``.guardkit/``) and the caches tests leave (:func:`~guardkit_state.git.snapshot.is_cache`)
out: which files the Player changed this turn (since the last commit), and the turn's diff for the
Coach. Whether the Coach changed anything is the worktree snapshot's to say
(:mod:`guardkit_state.git.snapshot`); without git, the loop's records are fingerprinted here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guardkit_state.git.parse import StatusEntry
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.snapshot import is_cache

#: The loop's own directory: its files change during a turn by design.
OWN_DIR = ".guardkit/"


def worktree_changes(git: GitRepo, cwd: Path) -> list[StatusEntry]:
    """``git status`` of ``cwd``'s checkout, outside ``.guardkit/`` and the caches of :func:`is_cache`:
    asked once after the Player, for its files and for the Coach's diff alike."""
    return [e for e in git.status(cwd=cwd) if not e.path.startswith(OWN_DIR) and not is_cache(e.path)]


@dataclass(frozen=True)
class ChangedFiles:
    """Files changed since the last commit: created (untracked or added) and modified (or deleted)."""

    created: list[str]
    modified: list[str]


def changed_files(changes: list[StatusEntry], *, exclude: Collection[str] = ()) -> ChangedFiles:
    """The files of ``changes`` (:func:`worktree_changes`) changed since HEAD, ``exclude`` left out."""
    created: list[str] = []
    modified: list[str] = []
    for entry in changes:
        if entry.path in exclude:
            continue
        (created if entry.code.strip() in ("??", "A", "AM") else modified).append(entry.path)
    return ChangedFiles(sorted(created), sorted(modified))


def with_files_from_git(report: dict[str, Any], changes: list[StatusEntry], *,
                        exclude: Collection[str] = ()) -> dict[str, Any]:
    """A Player's report with its files as git sees them (``changes``: :func:`worktree_changes`); what it
    claimed is kept as ``claimed_files`` when it differs (a report that is not an object is left for the
    schema to refuse). ``exclude``: paths the loop itself wrote (the task file copied into a worktree)."""
    if not isinstance(report, dict):
        return report
    truth = changed_files(changes, exclude=exclude)
    seen = {"files_created": truth.created, "files_modified": truth.modified}
    claimed = {"files_created": report.get("files_created"), "files_modified": report.get("files_modified")}
    out = {**report, **seen}
    if claimed != seen:
        out["claimed_files"] = claimed
    return out


def turn_diff(git: GitRepo, cwd: Path, changes: list[StatusEntry] | None = None) -> str:
    """The worktree's changes since HEAD as one diff: tracked files, then each new file in full
    (``changes``: :func:`worktree_changes` when the Player's turn asked it already)."""
    exclude = f":(exclude){OWN_DIR}"
    status, out, _ = git.run("diff", "--no-color", "--no-ext-diff", "HEAD", "--", ".", exclude, cwd=cwd, check=False)
    parts = [out.decode("utf-8", "replace")] if status == 0 else []
    for entry in worktree_changes(git, cwd) if changes is None else changes:
        if entry.code.strip() == "??":
            _, new, _ = git.run("diff", "--no-color", "--no-index", "--", "/dev/null", entry.path, cwd=cwd,
                                check=False)  # exit 1 means "differs", as it always does here
            parts.append(new.decode("utf-8", "replace"))
    return "".join(parts)


def records_fingerprint(records: Path, *, scratch: str = ".work") -> dict[str, str]:
    """Each file of a task's records (``.guardkit/autobuild/TASK``, its scratch left out) -> its hash."""
    prints: dict[str, str] = {}
    for path in sorted(records.rglob("*")) if records.is_dir() else ():
        relative = path.relative_to(records)
        if relative.parts[0] == scratch or not path.is_file():
            continue
        try:
            prints[str(records.name / relative)] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            prints[str(records.name / relative)] = "?"
    return prints


def changed_between(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The paths whose fingerprint differs (created, changed again, reverted or deleted)."""
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


__all__ = ["OWN_DIR", "ChangedFiles", "changed_between", "changed_files", "is_cache", "records_fingerprint",
           "turn_diff", "with_files_from_git", "worktree_changes"]
