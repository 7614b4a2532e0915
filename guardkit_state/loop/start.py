"""Where a loop starts: the task's copy it continues, read once, and every refusal in one check.

:func:`find_start` reads the copy the loop would continue (its worktree's when that exists, else the
main checkout's) once, before any lock, worktree, branch or log exists. :func:`check_start` is the
one place a loop's start is refused; it runs on that reading and its resume point then, and again
under the task's lock on the copy the loop holds (a worktree re-created from its branch may say
otherwise than the main checkout did). The reading is confirmed under the lock by the file's
identity, not read again, when the loop works in that very copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from guardkit_state.errors import ResumeError
from guardkit_state.store.turn_files import TurnStore, artifacts_dir
from guardkit_state.taskfile.document import TaskFile, read_task_settled
from guardkit_state.taskfile.frontmatter import check_line_endings
from guardkit_state.taskfile.locate import locate_task
from guardkit_state.taskfile.read_scope import listing_scope
from guardkit_state.taskfile.resolve import find_task
from guardkit_state.turns.checks import check_may_continue, check_turn_history
from guardkit_state.turns.resume import ResumePoint


@dataclass(frozen=True)
class Start:
    """The copy of the task a loop continues, as read before its lock, and the main checkout's file.

    ``own``: the copy is in the checkout the loop works in (its worktree, or the checkout itself
    without one); else the loop's worktree is still to be made (or found again from its branch).
    """

    task: TaskFile
    store: TurnStore
    main_path: Path
    own: bool


def find_start(repo_root: Path, task_id: str, *, worktree: bool) -> Start:
    """Read the copy of ``task_id`` a loop would continue (``worktree``: the loop runs in one), once.

    One read, nothing written before it ends: the ``tasks/`` folders are listed, and git asked where a
    feature run left the task (the ``autobuild/`` branches, the repository), once for all its lookups."""
    with listing_scope():
        return _find_start(repo_root, task_id, worktree=worktree)


def _find_start(repo_root: Path, task_id: str, *, worktree: bool) -> Start:
    main_path = find_task(repo_root, task_id)
    location = locate_task(repo_root, task_id) if worktree else None
    own = location is not None and location.in_worktree
    path, checkout = (location.task_path, location.checkout) if location is not None and own else \
        (main_path, repo_root)
    store = TurnStore(artifacts_dir(checkout, task_id), task_id)
    # Settled (never half-saved); confirmed, not read again, under the lock (TaskFile.confirmed).
    return Start(read_task_settled(path, store, confirm=False), store, main_path, own or not worktree)


def check_start(task: TaskFile, point: ResumePoint, *, own: bool, resume: bool, reopen: bool,
                max_turns: int | None) -> None:
    """Refuse the start the options ask for, on ``task`` (the copy the loop continues) and ``point``.

    A hand-edited history, a file the loop could not write, a closed task (without ``reopen``), a
    turn beyond the budget, a fresh start over recorded turns, ``resume`` with nothing to resume.
    ``own`` is False for a copy outside the loop's worktree still to be made: what ``resume`` finds
    there is said under the lock.
    """
    check_line_endings(task.text, task.path)
    task.check_writable()  # a repeated key: the loop would write to this file, so ask first
    check_turn_history(task)
    finished_here = point.action == "finished" and resume and own  # --resume reports it (and commits a turn)
    if point.action in ("closed", "out_of_turns", "finished") and not finished_here:
        check_may_continue(task, point.next_turn, reopen=reopen, max_turns=max_turns, to="run more turns")
    if resume and own and point.action == "start":
        raise nothing_to_resume(task.task_id)
    if not resume and (point.recorded_turns > 0 or point.action in ("complete_from_reports", "rerun_coach")):
        raise ResumeError(f"{task.task_id} already has {point.recorded_turns} recorded turn(s); continue it with "
                          f"'guardkit-state feature-build {task.task_id} ... --resume'", task_id=task.task_id)


def nothing_to_resume(task_id: str) -> ResumeError:
    return ResumeError(f"{task_id} has no loop state to resume; start it with "
                       f"'guardkit-state feature-build {task_id} --player CMD --coach CMD'", task_id=task_id)


__all__ = ["Start", "check_start", "find_start", "nothing_to_resume"]
