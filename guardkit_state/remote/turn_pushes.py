"""A held task's turns pushed to its branch on the remote, and what a branch moved there under a turn does.

After each turn's commit the worker pushes the task branch with a lease on the sha it pushed last
(:meth:`RemoteBranches.push`). When that push is refused because the branch moved on the remote
while the worker still holds the task's claim, no worker moved it (only a claim's holder pushes a
task branch): a person did, or a tool (an edit pushed, a force push). The turn is never dropped:

* the remote's new commits continue what this worker pushed, the task file's acceptance criteria
  are as they were, and they merge with the turn (``git merge``, the loop-state merge driver where
  it is registered): they are merged under the turn (a merge commit on the task branch) and the
  branch is pushed;
* otherwise (the history rewritten, the branch deleted, the criteria changed, a conflict): the
  turn is kept on a ref of its own (``refs/guardkit/kept/FEAT/TASK/<sha>``, in this clone and on
  the remote), this clone's branch is set to the remote's, and the task's run stops with one line
  naming the ref and what to do with it. The task then runs again from the remote's branch (a
  turn judged against criteria that changed is run again).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from guardkit_state.errors import BranchMovedError, GuardkitStateError
from guardkit_state.git.merge import merge_branch
from guardkit_state.git.repo import GitRepo
from guardkit_state.remote.alignment import CloneAlignment
from guardkit_state.remote.branches import RemoteBranches
from guardkit_state.remote.ledgers import RemoteLedgers
from guardkit_state.store.layout import branch_for
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.taskfile.resolve import resolve_task

#: How many times in a row the branch may move under one push (each move merged) before the turn is kept.
MOVES = 3

#: A step on the remote, retried while it is unreachable (the worker's ``_remote``).
RemoteCall = Callable[[Callable[[], object], str], object]


@dataclass
class TurnPushes:
    """The pushes of one task's branch by the worker holding its claim.

    ``pushed`` is the sha the remote's branch was at when this worker last pushed it or found it
    (None: not on the remote); ``turn`` the last turn recorded (for the notes); ``claim_held``
    says whether the claim on the remote is still this worker's.
    """

    repo: GitRepo
    branches: RemoteBranches
    ledgers: RemoteLedgers
    alignment: CloneAlignment
    task: str
    remote_call: RemoteCall
    claim_held: Callable[[], bool]
    note: Callable[[str], None]
    pushed: str | None = None
    turn: int | None = None

    @property
    def branch(self) -> str:
        return branch_for(self.task)

    def push(self, tip: str | None = None) -> None:
        """Push the task branch when it holds commits the remote's lacks (``tip``: its sha as the loop's
        turn commit just left it, not asked of git again).

        Raises:
            BranchMovedError: the claim is lost (another worker pushed), or the branch moved under
                the turn in a way that is not merged: the turn is kept (the message names the ref).
        """
        for _ in range(MOVES):
            local, tip = tip or self.repo.resolve(f"refs/heads/{self.branch}"), None
            if local is None or local == self.pushed:
                return
            try:
                self.pushed = str(self.remote_call(functools.partial(self._push, local), f"{self.task}: push"))
                return
            except BranchMovedError:
                if not self.claim_held():
                    raise  # another worker holds the task now: its turns are the remote's
                self._moved(local)
        local = self.repo.resolve(f"refs/heads/{self.branch}")
        assert local is not None
        self._keep(local, self._fetch(), f"it moved {MOVES} times while this worker merged it")

    def _push(self, local: str) -> str:
        # ``local`` as just read: the branch is not asked again, and its ledger is of the very commit pushed.
        return self.branches.push(self.branch, self.pushed, also=(self.ledgers.refspec(self.task, local),), sha=local)

    def _moved(self, local: str) -> None:
        """The branch moved on the remote under the turn (the claim still held): the remote's commits
        merged under it (``pushed`` is then their tip), else the turn kept and the run stopped."""
        tip = self._fetch()
        why = self._why_not_merged(local, tip)
        if why is None:
            assert tip is not None
            worktree = self.alignment.checked_out(self.task, self.branch)
            if worktree is None:
                why = "the task's worktree is not there to merge in"
            else:
                merged = merge_branch(worktree, tip, f"guardkit: {self.task}: merge {self.branch} as pushed to "
                                                     f"{self.branches.remote!r} under turn {self.turn}")
                if merged.merged:
                    count = self.repo.text("rev-list", "--count", f"{self.pushed}..{tip}") if self.pushed else "?"
                    self.note(f"{self.task}: {self.branch} moved on the remote under turn {self.turn} ({count} "
                              f"commit(s) not from a worker, up to {tip[:10]}); merged under the turn")
                    self.pushed = tip
                    return
                why = (f"it conflicts with turn {self.turn} in {', '.join(merged.conflicts)}" if merged.conflicts
                       else f"it does not merge with turn {self.turn}: {merged.error}")
        self._keep(local, tip, why)

    def _fetch(self) -> str | None:
        tip = self.remote_call(lambda: self.branches.fetch_branch(self.branch), f"{self.task}: fetch")
        return tip if isinstance(tip, str) else None

    def _why_not_merged(self, local: str, tip: str | None) -> str | None:
        """Why the remote's ``tip`` is not merged under the turn at ``local``; None when it is."""
        if tip is None:
            return "it was deleted there"
        base = self.pushed or self._merge_base(local, tip)
        if base is None or not self.repo.ok("merge-base", "--is-ancestor", base, tip):
            return "its history was rewritten (a force push)"
        if self._criteria(base) != self._criteria(tip):
            return "the task file's acceptance criteria changed"
        return None

    def _merge_base(self, one: str, two: str) -> str | None:
        status, out, _ = self.repo.run("merge-base", one, two, check=False)
        return (out.decode().strip() or None) if status == 0 else None

    def _criteria(self, rev: str) -> list[tuple[str, str]] | None:
        """The task's acceptance criteria (ids and texts) as ``rev`` holds its file (None: unreadable, or
        over the cap a file on disk is read under: never read, and never merged under a turn)."""
        try:
            path = resolve_task(self.repo.root, self.task).path
            raw = self.repo.blob(rev, path.relative_to(self.repo.root).as_posix())
            if raw is None:
                return None
            return [(c.id, c.text_hash) for c in TaskFile.from_bytes(raw, path, warn=False).criteria]
        except (GuardkitStateError, ValueError):
            return None

    def _keep(self, local: str, tip: str | None, why: str) -> None:
        """The turn kept on its ref (here and on the remote), the clone's branch set to the remote's;
        raises the one line that stops the task's run."""
        remote = self.branches.remote
        if tip is not None:
            ref = self.alignment.set_to_remote(self.task, self.branch, local, tip) or self.alignment.keep(
                self.task, local)
        else:
            ref = self.alignment.keep(self.task, local)
        self.remote_call(lambda: self.branches.push_ref(local, ref), f"{self.task}: push")
        turn = f"turn {self.turn}" if self.turn is not None else "its last turn"
        source = "the remote's branch" if tip is not None else "this clone's branch"
        raise BranchMovedError(
            f"{self.branch} moved on the remote under {turn} and {why}: {turn} is kept as {ref} (here and on "
            f"{remote!r}), and the task runs again from {source}; to take it back, git merge {ref} "
            f"on the task branch, or drop it: git push {remote} :{ref}", path=self.repo.root)


__all__ = ["MOVES", "TurnPushes"]
