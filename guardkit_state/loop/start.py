"""What a loop refuses before it starts: checked from the task's files alone, before any lock, worktree,
branch or log exists.
"""

from __future__ import annotations

from pathlib import Path

from guardkit_state.errors import ResumeError
from guardkit_state.git.repo import GitRepo
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.taskfile.frontmatter import check_line_endings
from guardkit_state.taskfile.locate import locate_task
from guardkit_state.taskfile.resolve import find_task
from guardkit_state.turns.checks import check_may_continue, check_turn_history, closed_reason


def preflight(repo_root: Path, task_id: str, *, reopen: bool, resume: bool, use_worktree: bool,
              max_turns: int | None) -> None:
    """Every refusal the task's files allow, before a lock, worktree, branch or log exists.

    Read from the copy the loop would continue: its worktree's when that exists, else the main
    checkout's. A hand-edited history (a gap, a repeated turn) is refused here too.
    """
    main_path = find_task(repo_root, task_id)
    check_line_endings(main_path.read_bytes().decode("utf-8", "replace"), main_path)
    task = TaskFile.load(main_path)
    task.check_writable()  # a repeated key: the loop would write to this file, so ask first
    check_turn_history(task)
    location = locate_task(repo_root, task_id) if use_worktree else None
    in_worktree = location is not None and location.in_worktree
    if location is not None and in_worktree:
        task = TaskFile.load(location.task_path)
        task.check_writable()
        check_turn_history(task)
    recorded = len(task.state.turns) if task.state else 0
    closed = None if reopen else closed_reason(task)
    if closed == "was approved" and resume and (
            in_worktree or not use_worktree or GitRepo.discover(repo_root) is None):
        return  # the loop's own checkout: --resume reports it finished (and commits a pending turn)
    if closed is not None or resume:
        check_may_continue(task, recorded + 1, reopen=reopen, max_turns=max_turns,
                           to="run more turns")
    elif recorded > 0:
        raise fresh_start_refused(task_id, recorded)


def fresh_start_refused(task_id: str, recorded: int) -> ResumeError:
    return ResumeError(f"{task_id} already has {recorded} recorded turn(s); continue it with "
                       f"'guardkit-state feature-build {task_id} ... --resume'", task_id=task_id)
