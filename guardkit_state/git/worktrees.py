"""One git worktree per loop: ``.guardkit/worktrees/TASK-ID`` on branch ``autobuild/TASK-ID``.

The manager creates, finds (and restores), lists and prunes them. Worktrees are kept when a loop
fails and are never deleted while they hold unmerged or uncommitted work unless forced. A
``.gitignore`` containing ``*`` inside ``.guardkit/worktrees/`` keeps them out of the main
checkout's ``git status``.
"""

from __future__ import annotations

import builtins
import filecmp
import logging
import os
import shutil
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from guardkit_state.errors import GitError, InputError, first_few
from guardkit_state.git.checkouts import main_checkout_root, repair_worktree_link, worktree_records
from guardkit_state.git.commits import turn_commits
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.stale_locks import remove_stale_locks
from guardkit_state.store import layout
from guardkit_state.store.fsio import TEMP_PREFIX, ensure_private_dir
from guardkit_state.store.layout import branch_for
from guardkit_state.store.safe_paths import validate_task_id

log = logging.getLogger("guardkit_state.git.worktrees")

_BRANCH_REF_PREFIX = f"refs/heads/{layout.BRANCH_PREFIX}"
#: Ignored directories whose files tools regenerate at will: never a reason to keep a worktree.
REGENERATED_DIRS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})


@dataclass(frozen=True)
class Worktree:
    """A loop's worktree, as created or found; ``notes`` say what was reused or repaired."""

    task_id: str
    path: Path
    branch: str
    base_branch: str | None
    notes: tuple[str, ...] = ()

    def repo(self) -> GitRepo:
        """The worktree as a :class:`GitRepo` (for :func:`~guardkit_state.git.commits.commit_turn`)."""
        found = GitRepo.discover(self.path)
        if found is None:
            raise GitError(f"worktree {self.path} is not a git working tree", path=self.path, task_id=self.task_id)
        return found


@dataclass(frozen=True)
class WorktreeInfo:
    """One managed worktree in :meth:`WorktreeManager.list`."""

    task_id: str
    path: Path
    branch: str | None
    head: str | None
    base_branch: str | None
    ahead: int | None
    behind: int | None
    merged: bool
    dirty: bool
    missing: bool

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["path"] = str(self.path)
        return data


@dataclass
class PruneResult:
    """What :meth:`WorktreeManager.prune` removed (or would remove) and what it kept, with reasons."""

    removed: list[WorktreeInfo] = field(default_factory=list)
    kept: list[tuple[WorktreeInfo, str]] = field(default_factory=list)
    dry_run: bool = False
    notes: list[str] = field(default_factory=list)
    #: Per kept task id: the files that exist only in its worktree (uncommitted, or ignored).
    kept_files: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "removed": [w.to_dict() for w in self.removed],
            "kept": [{**w.to_dict(), "reason": why, "files": self.kept_files.get(w.task_id, [])}
                     for w, why in self.kept],
            "notes": self.notes,
        }


class WorktreeManager:
    """Creates and tracks loop worktrees of one repository (any of its working trees may be given)."""

    def __init__(self, repo: GitRepo) -> None:
        self.repo = repo
        self.root = main_checkout_root(repo)
        self.main = repo if repo.root == self.root else GitRepo(self.root, repo.common_dir, repo.common_dir)

    def path_for(self, task_id: str) -> Path:
        """The conventional worktree path of a task."""
        return layout.worktree_path(self.root, validate_task_id(task_id))

    # -- create / find ---------------------------------------------------------------------

    def create(self, task_id: str, base_branch: str | None = None) -> Worktree:
        """Create (or reuse) the worktree of ``task_id`` on branch ``autobuild/TASK-ID``.

        The base defaults to the branch checked out in the checkout this manager was given (the
        user's), or its HEAD commit when detached. An existing branch is reused (its turns
        continue; nothing is reset) and a worktree that is already there is returned as is;
        ``notes`` say which. A branch or worktree another process created meanwhile is reused
        when it starts where this one would have. Raises :class:`InputError` for a base that
        names no commit (before anything is created) and :class:`GitError` when git refuses.
        """
        base_is_branch = self._checked_base(base_branch)
        path = self.path_for(task_id)
        branch = branch_for(task_id)
        found, note, branch_exists = self._find(task_id, None, restore=False)
        if found is not None:
            return found
        notes: list[str] = [n for n in note.split("; ") if "deleted by hand" in n]
        current = self.repo.current_branch()
        notes += self._checkout_notes(base_branch, current)
        if branch_exists:
            return self._add_from_branch(task_id, notes)
        base, start, track = self._branch_start(task_id, base_branch, base_is_branch, current, notes)
        self._ensure_ignored()
        try:
            # --track records the base as the branch's upstream, so list/prune know where it merges.
            self._add_worktree(branch, *track, "-b", branch, str(path), start)
        except GitError:
            raced = self._created_meanwhile(task_id, start, notes)
            if raced is None:
                raise
            return raced
        log.info("created worktree %s on %s from %s", path, branch, start)
        return Worktree(task_id, path, branch, base if track else None, tuple(notes))

    def create_branch(self, task_id: str, base_branch: str | None = None) -> Worktree:
        """Make only the new branch :meth:`create` would check out, from the same start.

        Returns the worktree to be: its path does not exist until :meth:`check_out` makes it (a
        feature run starts its first tasks from the feature branch while its own worktree is
        checked out). Its ``notes`` (the checkout's uncommitted changes among them) are taken now,
        before the caller writes anything there. Raises :class:`InputError` for a base that names
        no commit and :class:`GitError` when git refuses (the branch exists) or something is at
        the worktree's path, before the branch is made.
        """
        base_is_branch = self._checked_base(base_branch)
        path = self.path_for(task_id)
        if os.path.lexists(path) and not (path.is_dir() and not any(path.iterdir())):
            # git would refuse the checkout only later, once the caller's tasks are under way.
            raise GitError(f"{path} already exists and is not a worktree of {branch_for(task_id)}; move it away "
                           "and start again (nothing was made)", path=path, task_id=task_id)
        current = self.repo.current_branch()
        notes = self._checkout_notes(base_branch, current)
        base, start, track = self._branch_start(task_id, base_branch, base_is_branch, current, notes)
        branch = branch_for(task_id)
        self.main.run("branch", *track, branch, start)
        log.info("created branch %s from %s", branch, start)
        return Worktree(task_id, path, branch, base if track else None, tuple(notes))

    def check_out(self, made: Worktree) -> Worktree:
        """The worktree of the branch :meth:`create_branch` made (``made``, notes included)."""
        self._ensure_ignored()
        self._add_worktree(made.branch, str(made.path), made.branch)
        log.info("created worktree %s on %s", made.path, made.branch)
        return made

    def _add_worktree(self, branch: str, *args: str) -> None:
        """``git worktree add -q ARGS`` for ``branch``. A git killed while it held the branch's ref lock
        (a loop killed as its worktree was made) leaves the lock behind and every later add fails on
        it: a lock no live git process holds is removed, and the add made once more."""
        try:
            self.main.run("worktree", "add", "-q", *args)
        except GitError as exc:
            if ".lock" not in exc.stderr or not remove_stale_locks(self.root, self.main.git_dir,
                                                                    self.main.common_dir, branch):
                raise
            self.main.run("worktree", "add", "-q", *args)

    def _checked_base(self, base_branch: str | None) -> bool:
        """Whether ``base_branch`` is a local branch; another revision must name a commit (InputError)."""
        # A base that is a branch is known to exist: only another revision needs resolving.
        base_is_branch = base_branch is not None and self.repo.branch_exists(base_branch)
        if base_branch is not None and not base_is_branch:
            check_base_branch(self.repo, base_branch)
        return base_is_branch

    def _checkout_notes(self, base_branch: str | None, current: str | None) -> list[str]:
        # Only news when the worktree starts from the user's own checkout: a feature's task starts
        # from the feature branch, whatever the checkout holds (the plan the run itself updates).
        if (base_branch is None or base_branch == current) and self.repo.is_dirty():
            return ["your checkout has uncommitted changes; they are not part of the worktree"]
        return []

    def _branch_start(self, task_id: str, base_branch: str | None, base_is_branch: bool, current: str | None,
                      notes: list[str]) -> tuple[str | None, str, list[str]]:
        """(the base, the revision a new branch starts at, ``--track`` or nothing) for :meth:`create`."""
        base: str | None = base_branch
        if base_branch is not None:
            start = base_branch if base_is_branch else self._resolved(base_branch)
        else:
            base, start, base_is_branch = self._start_point(task_id, current, notes)
        return base, start, ["--track"] if base_is_branch else []

    def _resolved(self, revision: str) -> str:
        # git runs in the main checkout: a revision like HEAD~1 must mean the user's, so it is
        # resolved here; a branch name means the same everywhere (a worktree's branches are the
        # main checkout's).
        return self.repo.resolve(revision) or revision

    def _start_point(self, task_id: str, current: str | None, notes: list[str]) -> tuple[str | None, str, bool]:
        """(base branch or None when detached, the revision to branch from, whether the base is a
        local branch) for a new loop branch started from the checkout's ``current`` branch."""
        if current is not None:
            if self.repo.branch_exists(current):
                return current, current, True
            return current, self._resolved(current), False  # an unborn branch: git says so
        head = self.repo.head_sha()
        if head is None:
            raise GitError("the repository has no commits yet; make a first commit before a loop",
                           path=self.root, task_id=task_id, fix="git commit --allow-empty -m 'first commit'")
        notes.append(f"HEAD is detached; branching from commit {head[:12]}")
        return None, head, False

    def _created_meanwhile(self, task_id: str, start: str, notes: list[str]) -> Worktree | None:
        """The worktree or branch another process created since :meth:`create` looked, if reusable.

        A branch that appeared is taken over only if it is still where this one would have
        started: one that points elsewhere holds someone's work and is left to the user.
        """
        found, _ = self.find(task_id, restore=False)
        if found is not None:
            return found
        branch = branch_for(task_id)
        if self.main.resolve(branch) is None or self.main.resolve(branch) != self.main.resolve(start):
            return None
        log.info("branch %s was created by another process meanwhile; reusing it", branch)
        return self._add_from_branch(task_id, notes)

    def find(self, task_id: str, recorded_path: str | Path | None = None, *,
             restore: bool = True) -> tuple[Worktree | None, str]:
        """Locate the worktree of ``task_id``; return it (or None) and a note saying how.

        ``recorded_path`` is the task's ``autobuild_state.worktree_path``: relative to the repo
        root, or absolute (possibly from another machine). When it does not exist here, the
        conventional path is used and the note says so. A worktree deleted by hand is pruned
        from git's records and, with ``restore``, re-created from its branch.
        """
        found, note, _ = self._find(task_id, recorded_path, restore=restore)
        return found, note

    def _find(self, task_id: str, recorded_path: str | Path | None, *,
              restore: bool) -> tuple[Worktree | None, str, bool]:
        """:meth:`find`, and whether the branch exists (when no worktree was found; True otherwise)."""
        branch = branch_for(validate_task_id(task_id))
        notes: list[str] = []
        registered = {Path(w["worktree"]): w for w in self._worktree_records()}
        if self.path_for(task_id) in registered:
            # A worktree whose .git link an agent removed is repaired, not pruned and added over.
            repaired = repair_worktree_link(self.repo.common_dir, self.path_for(task_id))
            if repaired:
                notes.append(repaired)
                registered = {Path(w["worktree"]): w for w in self._worktree_records()}
        candidates: list[Path] = []
        if recorded_path:
            recorded = Path(recorded_path)
            recorded = recorded if recorded.is_absolute() else self.root / recorded
            candidates.append(recorded)
            parts = recorded.parts
            if layout.GUARDKIT_DIR in parts and not recorded.exists():
                # A path from another machine: keep its tail (.guardkit/worktrees/NAME) under our root.
                i = len(parts) - 1 - parts[::-1].index(layout.GUARDKIT_DIR)
                candidates.append(self.root.joinpath(*parts[i:]))
        conventional = self.path_for(task_id)
        candidates.append(conventional)
        for candidate in candidates:
            record = registered.get(candidate)
            if record is not None and candidate.is_dir() and "prunable" not in record:
                # git marks a worktree "locked: initializing" until `worktree add` has checked it out.
                if "initializing" in record.get("locked", "") or not self.main.ok(
                        "rev-parse", "-q", "--verify", "HEAD^{commit}", cwd=candidate):
                    notes.append(self._discard_half_created(candidate))
                    registered.pop(candidate, None)
                    continue
                if recorded_path and candidate != candidates[0]:
                    notes.append(f"recorded worktree path {recorded_path} does not exist here; using {candidate}")
                base = self.main.upstream_of(branch)
                return Worktree(task_id, candidate, _short(record.get("branch")) or branch, base,
                                tuple(notes)), "; ".join(notes) or f"worktree at {candidate}", True
        if recorded_path and not candidates[0].exists():
            notes.append(f"recorded worktree path {recorded_path} does not exist here; looked at {conventional}")
        stale = [p for p, w in registered.items() if "prunable" in w or (p == conventional and not p.exists())]
        if stale:
            self.main.run("worktree", "prune")
            notes.append(f"worktree {', '.join(map(str, stale))} was deleted by hand; pruned git's record of it")
        if not self.main.branch_exists(branch):
            notes.append(f"no worktree and no branch {branch} for {task_id}")
            return None, "; ".join(notes), False
        if not restore:
            notes.append(f"branch {branch} exists; resuming re-creates the worktree from it")
            return None, "; ".join(notes), True
        worktree = self._add_from_branch(task_id, notes)
        return worktree, "; ".join(worktree.notes), True

    def _discard_half_created(self, path: Path) -> str:
        """Remove a worktree whose ``git worktree add`` was killed before it set HEAD.

        Nothing can have been recorded in it (a loop starts only once the worktree exists), so
        its files are a partial checkout of the branch; the branch itself is kept and re-used.
        """
        self.main.run("worktree", "unlock", str(path), check=False)  # prune skips locked records
        shutil.rmtree(path, ignore_errors=True)
        self.main.run("worktree", "prune")
        log.warning("removed half-created worktree %s (its creation was interrupted)", path)
        return f"worktree {path} was left half-created by an interrupted run; removed it to re-create it"

    def _add_from_branch(self, task_id: str, notes: list[str]) -> Worktree:
        """Check out the existing ``autobuild/TASK-ID`` at the conventional path (resume: nothing reset)."""
        path, branch = self.path_for(task_id), branch_for(task_id)
        self._ensure_ignored()
        count = len(turn_commits(self.main, task_id, rev=branch))
        self._add_worktree(branch, str(path), branch)
        notes.append(f"branch {branch} already exists ({count} turn commit(s)); "
                     f"reusing it in a re-created worktree {path}")
        log.info("re-created worktree %s from existing branch %s", path, branch)
        return Worktree(task_id, path, branch, self.main.upstream_of(branch), tuple(notes))

    # -- list / prune ----------------------------------------------------------------------

    def list(self) -> list[WorktreeInfo]:
        """Every loop worktree (branch ``autobuild/*`` or under ``.guardkit/worktrees/``)."""
        infos: list[WorktreeInfo] = []
        managed_dir = layout.worktrees_dir(self.root)
        default_base = self.main.current_branch()
        for record in self._worktree_records():
            path = Path(record["worktree"])
            ref = record.get("branch")
            if not ((ref or "").startswith(_BRANCH_REF_PREFIX) or path.parent == managed_dir):
                continue
            branch = _short(ref)
            task_id = layout.task_of_branch(branch) or path.name
            missing = not path.is_dir()
            base = (self.main.upstream_of(branch) if branch else None) or default_base
            ahead = behind = None
            merged = False
            if branch and base and self.main.resolve(base):
                behind_s, ahead_s = self.main.text("rev-list", "--left-right", "--count",
                                                   f"{base}...{branch}").split()
                ahead, behind = int(ahead_s), int(behind_s)
                # Finished = its turn commits are all in the base (a fresh branch has none yet).
                merged = ahead == 0 and bool(turn_commits(self.main, task_id, rev=branch, depth=1))
            dirty = False if missing else self.main.is_dirty(cwd=path)
            infos.append(WorktreeInfo(task_id, path, branch, record.get("HEAD"), base, ahead, behind,
                                      merged, dirty, missing))
        return sorted(infos, key=lambda w: w.task_id)

    def prune(self, force: bool = False, *, dry_run: bool = False, only: Collection[str] | None = None) -> PruneResult:
        """Remove finished worktrees (merged into their base and clean) and their merged branches.

        Kept unless ``force`` (which discards their work): unmerged worktrees, and those holding
        files that exist nowhere else — uncommitted changes, or ignored files no commit and no
        main-checkout copy has (a loop whose ``.gitignore`` hid its reports). The reason names them.
        Even with ``force`` a branch holding merges no other branch holds (a feature branch with
        its tasks' work merged in) is kept, and said so. ``only``: the task (or feature) ids whose
        worktrees to consider; the others are left alone. Worktrees deleted by hand are dropped
        from git's records. ``dry_run`` only reports.
        """
        result = PruneResult(dry_run=dry_run)
        for info in self.list():
            if only is not None and info.task_id not in only:
                continue
            reason = None if force else self._keep_reason(info, result)
            if reason:
                result.kept.append((info, reason))
                continue
            result.removed.append(info)
            if dry_run:
                continue
            if not info.missing:
                self.main.run("worktree", "remove", *(["--force"] if force else []), str(info.path))
            merges = self._merges_only_on(info.branch) if info.branch and force else []
            if merges:
                result.notes.append(
                    f"kept branch {info.branch}: it holds {len(merges)} merge(s) of task work no other branch has "
                    f"(newest {merges[0][:10]}); merge it, or delete it yourself with 'git branch -D {info.branch}'")
            elif info.branch:
                deleted = self.main.run("branch", "-D" if force else "-d", "-q", info.branch, check=False)
                if deleted[0] != 0:
                    result.notes.append(f"kept branch {info.branch}: {deleted[2].strip()}")
        if not dry_run:
            self.main.run("worktree", "prune")
        return result

    def _merges_only_on(self, branch: str) -> builtins.list[str]:
        """The merge commits on ``branch`` that no other local branch (and no tag) holds, newest first."""
        status, out, _ = self.main.run("rev-list", "--merges", f"refs/heads/{branch}", "--not",
                                       f"--exclude={branch}", "--branches", "--tags", check=False)
        return out.decode().split() if status == 0 else []

    def _keep_reason(self, info: WorktreeInfo, result: PruneResult) -> str | None:
        """Why ``info`` must stay (recording the files concerned in ``result``), or None."""
        if info.dirty:
            files = [entry.path for entry in self.main.status(cwd=info.path)]
            result.kept_files[info.task_id] = files
            return f"has uncommitted changes: {first_few(files)}; commit them, or prune --force to discard them"
        if not info.merged:
            return ("not merged into " + (info.base_branch or "its base")
                    + (f" ({info.ahead} commit(s) ahead)" if info.ahead else " (no turn commits yet)"))
        only_here = [] if info.missing else self._only_in_worktree(info.path)
        if only_here:
            result.kept_files[info.task_id] = only_here
            return (f"holds ignored files that exist nowhere else: {first_few(only_here)}; copy them out, or "
                    "prune --force to discard them")
        return None

    def _only_in_worktree(self, path: Path) -> builtins.list[str]:
        """Ignored, untracked files of the worktree at ``path`` that no commit and no main-checkout copy has.

        Regenerated caches and guardkit-state's own scratch (``.work/``, the local index, temp
        files) are not counted: losing them loses nothing.
        """
        out = self.main.run("ls-files", "-z", "--others", "--ignored", "--exclude-standard", cwd=path)[1]
        only: builtins.list[str] = []
        for rel in out.decode("utf-8", "surrogateescape").split("\0"):
            parts = rel.split("/")
            if not rel or REGENERATED_DIRS.intersection(parts) or parts[-1].startswith(TEMP_PREFIX):
                continue
            if layout.is_local_scratch(rel):
                continue
            twin = self.root / rel
            if twin.is_file() and filecmp.cmp(path / rel, twin, shallow=False):
                continue
            only.append(rel)
        return sorted(only)

    # -- helpers ---------------------------------------------------------------------------

    def _worktree_records(self) -> builtins.list[dict[str, str]]:
        return worktree_records(self.repo)

    def _ensure_ignored(self) -> None:
        """``.guardkit/worktrees/.gitignore`` = ``*``: worktrees never show in the main ``git status``
        (made as every private folder is, so the temp file a kill inside its write left goes too)."""
        ensure_private_dir(layout.worktrees_dir(self.root),
                           marker="# managed by guardkit-state: loop worktrees are not part of this checkout\n*\n")


def check_base_branch(repo: GitRepo, base: str) -> str:
    """Return the commit ``base`` names in ``repo``; raise :class:`InputError` (a usage error) if none."""
    sha = repo.resolve(base) if base and not base.startswith("-") else None
    if sha is None:
        raise InputError(f"unknown base branch {base!r}: not a branch or commit in {repo.root}")
    return sha


def _short(ref: str | None) -> str | None:
    return ref[len("refs/heads/"):] if ref and ref.startswith("refs/heads/") else ref
