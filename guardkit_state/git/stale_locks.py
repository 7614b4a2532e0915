"""Stale git lock files: find the ones a killed git command left behind, and remove only those.

Kept apart from :mod:`guardkit_state.git.repo` (whose turn commit calls it when it meets a lock)
because it is about processes, not git: a lock is stale when no live git process works in the repository.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from pathlib import Path

log = logging.getLogger("guardkit_state.git.stale_locks")

#: Without /proc a lock older than this is considered abandoned.
STALE_LOCK_SECONDS = 300.0


def remove_stale_locks(root: Path, git_dir: Path, common_dir: Path, branch: str | None, *,
                       refs: tuple[str, ...] = ()) -> list[Path]:
    """Remove ``index.lock``/``HEAD.lock`` of ``git_dir`` (and the locks of its ``refs``, such as a
    merge's ``MERGE_HEAD``), ``packed-refs.lock``, ``branch``'s ref lock and the locks of the refs this package keeps
    (``refs/guardkit/...``: snapshots, kept turns, claims) if stale.

    A lock is stale when no live git process works in ``root`` or ``common_dir`` (checked through
    /proc); without /proc, when it is older than :data:`STALE_LOCK_SECONDS`. Returns what was removed.
    """
    # (packed-refs.lock: a git killed deleting a ref, a snapshot dropped, holds it; every later
    # update-ref -d then fails on it.)
    candidates = [git_dir / f"{name}.lock" for name in ("index", "HEAD", *refs)] + [common_dir / "packed-refs.lock"]
    if branch:
        candidates.append(common_dir / "refs" / "heads" / f"{branch}.lock")
    own_refs = common_dir / "refs" / "guardkit"
    if own_refs.is_dir():  # a git killed while it moved one of ours (a snapshot taken or dropped)
        candidates.extend(sorted(own_refs.rglob("*.lock")))
    present = [p for p in candidates if p.exists()]
    if not present or live_git_process_in(root, common_dir):
        return []
    removed: list[Path] = []
    for lock in present:
        if not Path("/proc/self").exists():
            with contextlib.suppress(OSError):
                if time.time() - lock.stat().st_mtime < STALE_LOCK_SECONDS:
                    continue
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()
            removed.append(lock)
            log.warning("removed stale git lock %s (no git process holds it)", lock)
    return removed


#: The lock file git names when it cannot take one: ``Unable to create '<path>.lock': File exists``.
_NAMED_LOCK = re.compile(r"Unable to create '([^']+\.lock)': File exists")


def remove_named_stale_lock(root: Path, common_dir: Path, stderr: str, *, min_age: float = 0.0) -> Path | None:
    """Remove the lock file git's ``stderr`` says is in its way, when it is inside ``common_dir`` (a
    ref's lock, ``packed-refs.lock``: a git killed in a fetch leaves them, and every later fetch
    fails on them) and stale (as :func:`remove_stale_locks` judges, and at least ``min_age`` seconds
    old: for a repository other machines may write too, whose processes /proc cannot show); the
    lock removed, or None."""
    match = _NAMED_LOCK.search(stderr)
    if match is None:
        return None
    lock = Path(match.group(1))
    inside = os.path.realpath(common_dir)
    if not os.path.realpath(lock).startswith(inside + os.sep) or not lock.exists():
        return None
    if live_git_process_in(root, common_dir):
        return None
    least = max(min_age, 0.0 if Path("/proc/self").exists() else STALE_LOCK_SECONDS)
    try:
        if time.time() - lock.stat().st_mtime < least:
            return None
    except OSError:
        return None
    with contextlib.suppress(FileNotFoundError):
        lock.unlink()
        log.warning("removed stale git lock %s (no git process holds it)", lock)
        return lock
    return None


def live_git_process_in(root: Path, common_dir: Path) -> bool:
    """True when a running git process has its cwd inside ``root``, ``common_dir`` or any worktree
    of the repository (Linux /proc).

    The refs and ``packed-refs`` live in ``common_dir``, shared by every worktree: a git moving a
    ref from another worktree holds its lock too (a feature's parallel loops each move their own
    snapshot ref), and a lock taken from under it fails that git ("couldn't set" the ref)."""
    proc = Path("/proc")
    if not (proc / "self").exists():
        return False
    roots = [os.path.realpath(path) for path in (root, common_dir, *_worktree_roots(common_dir))]
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv0 = (entry / "cmdline").read_bytes().split(b"\0", 1)[0].decode("utf-8", "replace")
            if os.path.basename(argv0) != "git" and not os.path.basename(argv0).startswith("git-"):
                continue
            cwd = os.path.realpath(os.readlink(entry / "cwd"))
        except OSError:
            continue
        if any(cwd == r or cwd.startswith(r + os.sep) for r in roots):
            return True
    return False


def _worktree_roots(common_dir: Path) -> list[Path]:
    """The repository's checkouts: the main one (above a ``.git`` folder) and each linked worktree
    (``worktrees/*/gitdir`` names its ``.git`` file)."""
    roots = [common_dir.parent] if common_dir.name == ".git" else []
    for pointer in (common_dir / "worktrees").glob("*/gitdir"):
        with contextlib.suppress(OSError):
            roots.append(Path(pointer.read_text("utf-8", "replace").strip()).parent)
    return roots
