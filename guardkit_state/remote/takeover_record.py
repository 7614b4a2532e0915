"""A takeover written in the task's history: an entry of ``autobuild_state.takeovers`` in its task file.

A worker of ``feature-build --remote`` that takes over a stale claim commits the entry (who took over
from whom, when, the old claim and its lease) on the task's branch, alone, before the task resumes.
"""

from __future__ import annotations

from collections.abc import Callable

from guardkit_state.errors import GuardkitStateError
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.stale_locks import remove_stale_locks
from guardkit_state.git.worktrees import WorktreeManager
from guardkit_state.remote.claim_record import Claim, utc_text
from guardkit_state.store.layout import branch_for
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.taskfile.resolve import resolve_task
from guardkit_state.taskfile.splice import StateUpdate
from guardkit_state.turns.clock import utc_now


def write_takeover(repo_root: GitRepo, task: str, feature_branch: str, *, by: str, old: Claim,
                   note: Callable[[str], None], more: dict[str, object] | None = None) -> None:
    """The takeover written into the task's history: an entry of ``autobuild_state.takeovers``
    in its task file (who took over from whom, when, the old claim and its lease, and ``more``),
    committed on the task's branch (the caller pushes it before the task resumes), so ``show`` and
    ``log`` tell it."""
    worktree = WorktreeManager(repo_root).create(task, feature_branch)  # the loop resumes in it
    repo = worktree.repo()
    path = resolve_task(worktree.path, task).path
    relative = str(path.relative_to(worktree.path))
    # On the clone of a killed worker, its turn's leftovers are still here: the entry is written
    # on the task file as committed (an agent's edit of it is not ours to commit), and the commit
    # takes that file alone, not whatever the killed turn staged. The file as the killed turn left
    # it (its agent's edits, a turn the loop recorded and did not commit) is then put back with
    # the entry, for the resumed loop to go on from, as a resume on one machine does.
    left = path.read_bytes() if path.is_file() else None
    remove_stale_locks(repo.root, repo.git_dir, repo.common_dir, branch_for(task))  # the killed worker's git
    repo.run("checkout", "HEAD", "--", relative)
    committed = path.read_bytes()
    copy = TaskFile.load(path)
    entry = {"at": utc_now(), "by": by, "from": old.worker, "claim": old.sha,
             "lease_until": utc_text(old.lease_until), "turns_done": len(copy.state.turns) if copy.state else 0,
             **(more or {})}
    add_takeover(copy, entry)
    message = (f"guardkit: {task} taken over by {by} from {old.worker}\n\n"
               f"The claim's lease had ended and its heartbeat stood still; the task resumes from "
               f"its last pushed turn.\n\nGuardkit-Takeover: {old.worker}\n")
    repo.run("commit", "-q", "--no-verify", "-m", message, "--only", "--", relative, pre=repo.identity_args())
    if left is not None and left != committed:
        written = path.read_bytes()
        path.write_bytes(left)
        try:
            add_takeover(TaskFile.load(path), entry)
        except GuardkitStateError as exc:  # the killed turn left it unreadable: as committed
            path.write_bytes(written)
            note(f"{task}: the task file the killed turn left cannot be read ({exc.message}); "
                      f"it resumes from the file as committed")


def add_takeover(copy: TaskFile, entry: dict[str, object]) -> None:
    """``entry`` appended to the task file's ``autobuild_state.takeovers`` (written)."""
    earlier = copy.state.extra.get("takeovers") if copy.state is not None else None
    copy.apply(StateUpdate(block_scalars={"takeovers": [*(earlier if isinstance(earlier, list) else []), entry]}))


__all__ = ["add_takeover", "write_takeover"]
