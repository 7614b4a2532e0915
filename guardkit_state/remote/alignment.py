"""This clone's copies of the remote's loop branches, made the remote's where they do not continue it.

The remote is the truth for a worker of ``feature-build --remote``: a clone's task branch apart from
(or behind) the remote's holds turns of a holder ousted before its push (or a turn run while a
person pushed to the branch), and its feature branch ahead of the remote's holds merges a merger
killed before its push made. :class:`CloneAlignment` sets them to the remote's (files and locks of
a worktree included) before the worker reads or runs a task from them, and says so. A task
branch's own commits are never dropped: they are kept on a ref of their own
(:func:`kept_ref`) first.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from guardkit_state.features.progress import FeatureGit
from guardkit_state.git.repo import UNREAD, GitRepo, Unread
from guardkit_state.git.stale_locks import remove_stale_locks
from guardkit_state.remote.branches import RemoteBranches
from guardkit_state.store.layout import WORK_DIR, artifacts_dir
from guardkit_state.store.safe_paths import validate_task_id

#: Where a task branch's commits that the remote's branch does not hold are kept, per feature and
#: task (``<prefix>/FEAT/TASK/<sha>``): in this clone, and on the remote for a turn a worker ran.
KEPT_PREFIX = "refs/guardkit/kept"


def kept_ref(feature: str, task: str, sha: str) -> str:
    """The ref keeping commit ``sha`` of ``task``'s branch (named by it: keeping it twice is one ref)."""
    return f"{KEPT_PREFIX}/{validate_task_id(feature)}/{validate_task_id(task)}/{sha[:12]}"


@dataclass
class CloneAlignment:
    """One worker's clone (``repo``) against the remote its ``branches`` fetch from."""

    repo: GitRepo
    branches: RemoteBranches
    fgit: FeatureGit
    feature_id: str
    feature_branch: str
    note: Callable[[str], None]

    def feature(self, tip: str | None) -> None:
        """The clone's feature branch made the remote's. Only a merger holding the merge claim moves
        it, and pushes it at once: one ahead of (or apart from) the remote's holds merges a merger
        killed before its push made, which no other worker saw. Read as merged, they let the next
        wave start from them, and the remote's feature branch never got that wave's merges."""
        local = self.repo.resolve(f"refs/heads/{self.feature_branch}")
        if tip is None or local is None or local == tip:
            return
        worktree = self.checked_out(self.feature_id, self.feature_branch)
        if worktree is not None:
            remove_stale_locks(worktree.root, worktree.git_dir, worktree.common_dir, self.feature_branch)
            worktree.run("reset", "--hard", "--quiet", tip)
        elif self.feature_branch in self.branches.checked_out():
            return  # checked out elsewhere (the user's own checkout): theirs to move
        else:
            self.repo.run("update-ref", f"refs/heads/{self.feature_branch}", tip, local)
        self.note(f"{self.feature_branch} here ({local[:10]}) set to the remote's ({tip[:10]})")

    def task(self, task: str, branch: str, remote_tip: str | None, *, taken_over: bool,
             local: str | Unread | None = UNREAD) -> bool:
        """This clone's branch of ``task`` made the remote's when it does not continue it; True when
        it was. The remote is the truth: a branch apart from it holds the turns of a holder ousted
        before its push, or one behind it (a killed turn's files in the way of the fast-forward) a
        turn begun on old history; a turn pushed from either would overwrite the remote's turns.
        A branch ahead of the remote (a turn committed, not pushed) is kept, to be pushed next, but
        under a takeover, which commits on the remote's tip: that turn is then recorded again.
        ``local``: the branch's sha here as the caller has just read it (None: no branch)."""
        if isinstance(local, Unread):
            local = self.repo.resolve(f"refs/heads/{branch}")
        if local is None or local == remote_tip:
            return False
        worktree = self.checked_out(task, branch)
        ahead = remote_tip is None or self.repo.ok("merge-base", "--is-ancestor", remote_tip, local)
        if ahead:
            if not taken_over or worktree is None:
                return False
            # Taken over on the clone of the killed holder: its turn committed here, never pushed
            # (killed before its push, or before its ledger listed the commit) is undone, its files
            # kept. The takeover commit goes on the remote's tip (or where the branch left the
            # feature branch) and the loop records that turn again from its reports: above the
            # takeover commit, an unlisted commit is never adopted.
            feature = self.repo.resolve(self.branches.tracking(self.feature_branch)) or self.feature_branch
            base = remote_tip or self.repo.text("merge-base", local, feature)
            if base == local:
                return False
            remove_stale_locks(worktree.root, worktree.git_dir, worktree.common_dir, branch)
            worktree.run("reset", "--soft", "--quiet", base)
            self.note(f"{task}: its turn committed on this clone and never pushed ({local[:10]}) is recorded again")
            return True
        assert remote_tip is not None
        kept = self.set_to_remote(task, branch, local, remote_tip)
        self.note(f"{task}: this clone's {branch} ({local[:10]}) did not continue the remote's ({remote_tip[:10]}); "
                  f"set to the remote's" + (f", its own commits kept as {kept}" if kept else ""))
        return True

    def set_to_remote(self, task: str, branch: str, local: str, remote_tip: str) -> str | None:
        """The clone's ``branch`` (at ``local``) set to ``remote_tip``, files of its worktree included,
        after the commits of its own are kept on their ref (:meth:`keep`: returned; None when the
        remote's branch holds them all)."""
        behind = self.repo.ok("merge-base", "--is-ancestor", local, remote_tip)
        kept = None if behind else self.keep(task, local)
        worktree = self.checked_out(task, branch)
        if worktree is not None:  # its files too: what is left there was made on the other history
            # A worker killed in a git command there left its lock: no git process holds it now.
            remove_stale_locks(worktree.root, worktree.git_dir, worktree.common_dir, branch)
            worktree.run("reset", "--hard", "--quiet", remote_tip)
            worktree.run("clean", "-fdq")
            drop_agent_reports(worktree.root, task)
        else:
            self.repo.run("update-ref", f"refs/heads/{branch}", remote_tip, local)
        return kept

    def keep(self, task: str, sha: str) -> str:
        """``sha`` (a task branch's tip the remote does not hold) kept on its ref in this clone."""
        ref = kept_ref(self.feature_id, task, sha)
        self.repo.run("update-ref", ref, sha)
        return ref

    def checked_out(self, task: str, branch: str) -> GitRepo | None:
        """The task's worktree when it is one, with ``branch`` checked out: git run in a folder that
        is not (its ``.git`` removed) would find this clone's own checkout and reset the user's."""
        path = self.fgit.task_worktree(task)
        found = GitRepo.discover(path) if path.is_dir() else None
        if found is None or found.root.resolve() != path.resolve() or found.current_branch() != branch:
            return None
        return found


def drop_agent_reports(checkout: Path, task: str) -> None:
    """Remove the agents' own report files from the task's scratch (``.work``): made on a history
    the branch no longer holds, they would be taken on resume as the reports of the turn run
    again there (the loop adopts the report of an agent that finished before an interruption)."""
    work = artifacts_dir(checkout, task) / WORK_DIR
    for pattern in ("player_report_*.json", "coach_report_*.json"):
        for path in work.glob(pattern):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


__all__ = ["KEPT_PREFIX", "CloneAlignment", "drop_agent_reports", "kept_ref"]
