"""A worktree held while an agent that must only read it runs (the Coach), and put back exactly after.

"The worktree after the Player is the turn's truth" (docs/git.md). Before the Coach runs, the loop
takes a snapshot of its worktree — tracked, untracked and ignored files, outside the caches tests
leave behind (:func:`is_cache`) and the loop's own runtime folders (:data:`RUNTIME_DIRS`) — as a git
tree held under a ref of the loop's own (``refs/guardkit/snapshots/TASK``), written through an index
of its own in git's admin folder (``GIT_INDEX_FILE`` passed deliberately: the worktree's own index is
never touched). After the Coach the worktree is put back to that tree whatever the Coach did in git
(stash, clean, checkout, reset, commit, a branch switch, ignored files written), HEAD and the branch
to where they were, and the worktree's index to the bytes it had; what had changed is returned, for
the turn to be flagged.

Ignored files are kept by their bytes, the most recently written first, up to :data:`IGNORED_BYTES`
and :data:`IGNORED_FILES` in all; those beyond are watched by ``lstat`` only, so a change to one is
named but cannot be undone.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guardkit_state.errors import GitError
from guardkit_state.git.checkouts import repair_worktree_link
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.stale_locks import remove_stale_locks
from guardkit_state.model import Fields
from guardkit_state.store.layout import RUNTIME_DIRS, RUNTIME_GLOBS

# The loop's own folders (RUNTIME_DIRS, RUNTIME_GLOBS) change while the Coach runs, by design: other loops'
# worktrees (a main checkout's), the search index, caches, the log, the live report, the agents' scratch
# (their prompts, incoming reports, pid files) and the plans' lock files.

#: What running a project's tests or linters leaves behind (a Coach runs them): not a change of the
#: work. A folder named so anywhere in a path, or a file with one of these names or suffixes.
CACHE_DIRS = frozenset(("__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis", ".tox",
                        ".nox", ".cache", ".coverage_html", "htmlcov"))
CACHE_FILES = frozenset((".coverage", "coverage.xml"))
CACHE_SUFFIXES = (".pyc", ".pyo")


#: Ignored files kept by their bytes in a snapshot, the most recently written first, in bytes and in
#: files (they are read and hashed at every snapshot; git writes each object once).
IGNORED_BYTES = 8 * 1024 * 1024
IGNORED_FILES = 1000
#: Where the snapshots are held: a ref per task, never fetched or pushed by the loop.
SNAPSHOT_REFS = "refs/guardkit/snapshots"
_SUBJECT = "guardkit-state: the worktree as the Player left it"
#: The snapshot commit's identity (never a user's: it is no commit of the work, and never pushed).
_IDENTITY = ("-c", "user.name=guardkit-state", "-c", "user.email=autobuild@localhost")


def is_cache(path: str) -> bool:
    """True for a path that tests or linters write (``docs/agents.md``): not the agent's work."""
    parts = path.rstrip("/").split("/")
    return (any(part in CACHE_DIRS for part in parts[:-1]) or parts[-1] in CACHE_DIRS
            or parts[-1] in CACHE_FILES or parts[-1].startswith(".coverage.") or parts[-1].endswith(CACHE_SUFFIXES))


def _pathspecs() -> tuple[str, ...]:
    """The whole worktree but the loop's :data:`RUNTIME_DIRS`, as git pathspecs. (The caches of
    :func:`is_cache` are left out in Python: thirty glob pathspecs cost git more than the walk.)"""
    specs = [f":(exclude){path}" for path in RUNTIME_DIRS]
    specs += [f":(exclude,glob){pattern}" for pattern in RUNTIME_GLOBS]
    return (".", *specs)


PATHSPECS = _pathspecs()
#: git's refusal to add a repository whose HEAD has no commit yet, and how many such are left out.
_NO_COMMIT = re.compile(r"error: '(.+?)/?' does not have a commit checked out")
_MAX_EMPTY_REPOS = 100


@dataclass(frozen=True)
class Snapshot(Fields):
    """A worktree as it was: its files' tree, HEAD's commit and branch, ignored files watched by lstat."""

    tree: str
    head: str | None
    #: The branch HEAD was on (``refs/heads/...``); None when detached.
    branch: str | None
    #: Ignored files beyond :data:`IGNORED_BYTES` or :data:`IGNORED_FILES` -> their lstat (mode, size,
    #: mtime, inode).
    watched: dict[str, list[int]]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Snapshot:
        return cls(str(data["tree"]), data.get("head"), data.get("branch"), dict(data.get("watched") or {}))


@dataclass(frozen=True)
class Restoration:
    """What an agent had changed in the worktree, now put back."""

    #: Files put back to their bytes, or removed (the agent created them).
    files: tuple[str, ...] = ()
    #: How HEAD had moved, in words; None when it had not.
    head: str | None = None
    #: Ignored files watched by lstat only that changed: named, not undone.
    not_restored: tuple[str, ...] = ()
    #: Other repairs made on the way (a ``.git`` link put back).
    notes: tuple[str, ...] = ()
    #: HEAD's commit and branch ref (None: detached) as the restore left them, exactly the snapshot's;
    #: None on an unborn branch (nothing to point HEAD back at). Read by the turn's commit, not asked again.
    head_now: tuple[str, str | None] | None = None

    @property
    def changed(self) -> bool:
        return bool(self.files or self.head or self.not_restored)


class WorktreeSnapshots:
    """The snapshots of one worktree for one task (``name``): take one, put it back, drop it."""

    def __init__(self, git: GitRepo, name: str, *, ignored_bytes: int = IGNORED_BYTES) -> None:
        self.git = git
        self.ref = f"{SNAPSHOT_REFS}/{name}"
        self.folder = git.git_dir / "guardkit-state" / "snapshots" / name
        self.ignored_bytes = ignored_bytes
        self._index = self.folder / "index"  # the loop's own
        self._own_index_copy = self.folder / "worktree-index"
        #: What :meth:`take` repaired on the way (a ``.git`` link put back), in words.
        self.repairs: list[str] = []

    # -- taking ------------------------------------------------------------------------------
    def take(self) -> Snapshot:
        """Snapshot the worktree as it is now, under :attr:`ref`; raises :class:`GitError`.

        A linked worktree's ``.git`` link an agent removed or rewrote is put back first (without it,
        git run there would act on the repository above), said in :attr:`repairs`."""
        self.repairs = self._repair_link()
        self._clear_stale_locks()
        head, branch = self.git.head()
        own = self._own_index()
        self._index.unlink(missing_ok=True)
        if own.is_file():
            shutil.copy2(own, self._own_index_copy)
            # The loop's index starts as a copy of the worktree's: git's stat data spares re-reading
            # unchanged tracked files, and the ignored files kept never add up past the budget.
            shutil.copy2(own, self._index)
        watched = self._add_worktree(self._index)
        snapshot = Snapshot(self._write_tree(self._index), head, branch, watched)
        # A commit of the tree, its message the rest of the snapshot, under the ref: a `git gc` meanwhile
        # keeps its objects, and a resumed run finds all it needs in git (no file of ours to write).
        message = f"{_SUBJECT}\n\n{json.dumps(snapshot.to_dict())}\n".encode()
        commit = self.git.run("commit-tree", "--no-gpg-sign", snapshot.tree, stdin=message, pre=_IDENTITY)[1]
        self.git.run("update-ref", self.ref, commit.decode("ascii").strip())
        return snapshot

    def pending(self) -> Snapshot | None:
        """The snapshot an interrupted run left under :attr:`ref` (not put back, not dropped), or None."""
        status, out, _ = self.git.run("cat-file", "commit", self.ref, check=False)
        _, _, body = out.decode("utf-8", "surrogateescape").partition(f"\n\n{_SUBJECT}\n\n")
        try:
            return Snapshot.from_dict(json.loads(body)) if status == 0 and body else None
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def _add_worktree(self, index: Path) -> dict[str, list[int]]:
        """Everything in the worktree into ``index`` (ignored files within the budget included); the
        ignored files left out, and git repositories with no commit yet, watched by lstat."""
        empty_repos = self._add_all(index)
        kept, watched = self._ignored_files(index)
        if kept:
            self.git.run("add", "-f", "--pathspec-from-file=-", "--pathspec-file-nul", index_file=index,
                         stdin=_nul_joined(kept), pre=("--literal-pathspecs",))
        for path in empty_repos:
            with contextlib.suppress(OSError):
                watched[path] = _lstat_key(os.lstat(self.git.root / path))
        return watched

    def _add_all(self, index: Path) -> list[str]:
        """``git add -A`` into ``index``; returns the git repositories with no commit (a Player's `git init
        sub`) it had to leave out: git refuses to add one, and no turn commit can hold it either."""
        left_out: list[str] = []
        while True:
            excluded = [f":(exclude,literal){path}" for path in left_out]
            status, _, err = self.git.run("add", "-A", "--", *PATHSPECS, *excluded, index_file=index, check=False)
            if status == 0:
                return left_out
            found = _NO_COMMIT.search(err)
            if found is None or found.group(1) in left_out or len(left_out) >= _MAX_EMPTY_REPOS:
                self.git.run("add", "-A", "--", *PATHSPECS, *excluded, index_file=index)  # raises git's error
                return left_out
            left_out.append(found.group(1))

    def _ignored_files(self, index: Path) -> tuple[list[str], dict[str, list[int]]]:
        """Ignored files ``index`` does not hold: those kept by bytes (the most recently written first,
        within the budget), and the others with their lstat."""
        listed = self._list_ignored(index)
        stats: list[tuple[int, str, os.stat_result]] = []
        for path in listed:
            if is_cache(path):
                continue
            with contextlib.suppress(OSError):
                info = os.lstat(self.git.root / path)
                stats.append((info.st_size, path, info))
        kept: list[str] = []
        watched: dict[str, list[int]] = {}
        budget = self.ignored_bytes
        # The most recently written first: the Player's build output before a virtualenv made last week.
        for size, path, info in sorted(stats, key=lambda row: (-row[2].st_mtime_ns, row[1])):
            if size <= budget and len(kept) < IGNORED_FILES and (stat.S_ISREG(info.st_mode)
                                                                 or stat.S_ISLNK(info.st_mode)):
                kept.append(path)
                budget -= size
            else:
                watched[path] = _lstat_key(info)
        return kept, watched

    def _ignored_of(self, paths: list[str], index: Path) -> set[str]:
        """Those of ``paths`` (not in ``index``) that a ``.gitignore`` rule ignores."""
        if not paths:
            return set()
        out = self.git.run("check-ignore", "-z", "--stdin", stdin=_nul_joined(paths), index_file=index,
                           check=False)[1]  # exit 1: none of them is ignored
        return {p for p in out.decode("utf-8", "surrogateescape").split("\0") if p}

    def _list_ignored(self, index: Path) -> list[str]:
        out = self.git.run("ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--", *PATHSPECS,
                           index_file=index)[1]
        return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]

    # -- putting back ------------------------------------------------------------------------
    def restore(self, snapshot: Snapshot) -> Restoration:
        """Put the worktree, HEAD, its branch and its index back as ``snapshot`` holds them; what had
        changed. Raises :class:`GitError` when git cannot."""
        notes = self._repair_link()
        self._clear_stale_locks()
        head, branch = self.git.head()
        # The agent has exited: a lock a git of its left (killed mid-write, or written by hand) would stop
        # the index or the branch being put back.
        notes += [f"removed stale git lock {lock} (left while the agent ran; no git process held it)"
                  for lock in remove_stale_locks(self.git.root, self.git.git_dir, self.git.common_dir,
                                                 branch.removeprefix("refs/heads/") if branch else None)]
        # The loop's index holds the snapshot exactly: what differs from it in the worktree (changed or
        # deleted, and every file it does not hold, ignored or not) is what changed since, stat data and
        # git's racy-file check deciding: one listing. (`ls-files`, not `status`: status would also compare
        # the index with HEAD, which costs as much again where many ignored files are kept, and says
        # nothing here.)
        check = self.folder / "check-index"
        try:
            if self._index.is_file():
                shutil.copy2(self._index, check)
            else:  # gone with its folder: the tree alone (no stat data, so every file's bytes are compared)
                self.git.run("read-tree", snapshot.tree, index_file=check)
            out = self.git.run("ls-files", "-z", "-t", "-m", "-d", "-o", "--", *PATHSPECS, index_file=check)[1]
            tagged = [(item[:1], item[2:]) for item in out.decode("utf-8", "surrogateescape").split("\0") if item]
            # Whether a file is ignored tells only for a cache: an ignored one is left (below). Asked of
            # those alone, so a Coach that runs no tests costs no second walk of the worktree.
            ignored = self._ignored_of([path for tag, path in tagged if tag == "?" and is_cache(path)], check)
        finally:
            check.unlink(missing_ok=True)
        # A file watched by lstat is never removed, even when a changed .gitignore now shows it. Caches
        # git does not ignore are put back too (a turn would commit them), but are no change to name:
        # the Coach runs the tests. Ignored ones are never committed, and are left.
        created = [path for tag, path in tagged
                   if tag == "?" and path.rstrip("/") not in snapshot.watched and path not in ignored]
        put_back = sorted({path for tag, path in tagged if tag in ("C", "R")})
        for path in created:
            _remove(self.git.root / path)
        if put_back:
            self._check_out(snapshot.tree, put_back)
        moved = _moved(snapshot, head, branch)
        if moved is not None:
            self._move_head_back(snapshot)
        self._restore_own_index()
        files = sorted({path.rstrip("/") for path in (*created, *put_back) if not is_cache(path)})
        return Restoration(tuple(files), moved, tuple(_changed_watched(self.git.root, snapshot.watched)),
                           tuple(notes), None if snapshot.head is None else (snapshot.head, snapshot.branch))

    def _check_out(self, tree: str, paths: list[str]) -> None:
        """Write ``paths`` as ``tree`` holds them (whatever stands there now: a file, a folder)."""
        scratch = self.folder / "restore-index"
        try:
            self.git.run("read-tree", tree, index_file=scratch)
            self.git.run("checkout-index", "-f", "-q", "-z", "--stdin", stdin=_nul_joined(paths), index_file=scratch)
        finally:
            scratch.unlink(missing_ok=True)

    def _move_head_back(self, snapshot: Snapshot) -> None:
        if snapshot.head is None:
            return  # an unborn branch: nothing to point back at
        if snapshot.branch is not None:
            self.git.run("update-ref", snapshot.branch, snapshot.head)
            self.git.run("symbolic-ref", "HEAD", snapshot.branch)
        else:
            self.git.run("update-ref", "--no-deref", "HEAD", snapshot.head)

    def _restore_own_index(self) -> None:
        """The worktree's index as it was (the Player's staging): a stash or reset rewrote it. Written as
        git writes it, through ``index.lock`` (a git command running meanwhile is not raced)."""
        if not self._own_index_copy.is_file():
            return
        saved = self._own_index_copy.read_bytes()
        own = self._own_index()
        with contextlib.suppress(OSError):
            if own.read_bytes() == saved:
                return
        lock = own.with_name(own.name + ".lock")
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            raise GitError(f"cannot put back the index of {self.git.root}: {lock} exists (a git command "
                           "is running, or a killed one left it)", path=self.git.root) from None
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(saved)
            os.replace(lock, own)
        except BaseException:
            lock.unlink(missing_ok=True)
            raise

    def _clear_stale_locks(self) -> None:
        """Make the folder; remove the lock files of its indexes a killed git left. The folder is this
        task's alone and the loop holds the task's lock, so no live git process is using them."""
        self.folder.mkdir(parents=True, exist_ok=True)
        for lock in self.folder.glob("*.lock"):
            lock.unlink(missing_ok=True)

    def _repair_link(self) -> list[str]:
        """A linked worktree's ``.git`` link an agent removed is put back first (git needs it)."""
        if self.git.git_dir == self.git.common_dir:
            return []
        text = repair_worktree_link(self.git.common_dir, self.git.root)
        return [text] if text else []

    def drop(self) -> None:
        """Forget the snapshot (its ref and files). Raises :class:`GitError` when the ref cannot be
        deleted: a stale snapshot left under it would be put back over later work on ``--resume``."""
        self.git.run("update-ref", "-d", self.ref)
        for path in (self._index, self._own_index_copy):
            path.unlink(missing_ok=True)

    # -- git ---------------------------------------------------------------------------------
    def _own_index(self) -> Path:
        return self.git.git_dir / "index"

    def _write_tree(self, index: Path) -> str:
        return self.git.run("write-tree", index_file=index)[1].decode("ascii").strip()


def _nul_joined(paths: list[str]) -> bytes:
    return b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths)


def _lstat_key(info: os.stat_result) -> list[int]:
    return [info.st_mode, info.st_size, info.st_mtime_ns, info.st_ino]


def _changed_watched(root: Path, watched: dict[str, list[int]]) -> list[str]:
    """Watched ignored files that are gone or whose lstat changed."""
    changed: list[str] = []
    for path, key in sorted(watched.items()):
        try:
            now = _lstat_key(os.lstat(root / path))
        except OSError:
            changed.append(path)
            continue
        if now != key:
            changed.append(path)
    return changed


def _remove(path: Path) -> None:
    """Remove what an agent created at ``path`` (a file, a link, or a folder a gitlink names)."""
    with contextlib.suppress(FileNotFoundError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def _moved(snapshot: Snapshot, head: str | None, branch: str | None) -> str | None:
    """How HEAD moved since ``snapshot``, in words; None when it did not."""
    if (head, branch) == (snapshot.head, snapshot.branch):
        return None

    def where(sha: str | None, ref: str | None) -> str:
        name = ref.removeprefix("refs/heads/") if ref else "a detached HEAD"
        return f"{name} at {sha[:10] if sha else 'no commit'}"

    return f"HEAD was {where(snapshot.head, snapshot.branch)}, is {where(head, branch)}"


__all__ = ["CACHE_DIRS", "CACHE_FILES", "CACHE_SUFFIXES", "IGNORED_BYTES", "IGNORED_FILES", "PATHSPECS",
           "RUNTIME_DIRS", "SNAPSHOT_REFS", "Restoration", "Snapshot", "WorktreeSnapshots", "is_cache"]
