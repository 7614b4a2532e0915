"""A task's recorded turns as one checkout's files tell them: the read side of the turn lifecycle.

:class:`TurnView` reads (the recorded turns, the ledger, the stall window, the continuation
context, a turn completable from its files); :class:`~guardkit_state.turns.lifecycle.TurnLifecycle`
adds the writing on top.
"""

from __future__ import annotations

from pathlib import Path

from guardkit_state.errors import InputError
from guardkit_state.model import TurnState
from guardkit_state.store.turn_files import TurnStore, artifacts_dir
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.turns.checks import check_turn_history, turn_budget
from guardkit_state.turns.context import render_continuation_context
from guardkit_state.turns.history import TaskHistory
from guardkit_state.turns.ledger import CriteriaLedger
from guardkit_state.turns.resume import resume_point
from guardkit_state.turns.sent_back import sent_back_after


class TurnView:
    """One task's turns in one checkout (the main one or a worktree), read from its files."""

    def __init__(self, task: TaskFile, *, root: Path, max_turns: int | None = None) -> None:
        if task.task_id is None:
            raise InputError("task file has no id", path=task.path, expected="an 'id' key or TASK-ID file name")
        check_turn_history(task)
        self.task = task
        self.root = Path(root)
        self.task_id = task.task_id
        self.store = TurnStore(artifacts_dir(self.root, self.task_id), self.task_id)
        self.max_turns = turn_budget(task, max_turns)

    # -- reading ---------------------------------------------------------------------------
    @property
    def recorded_turns(self) -> int:
        return len(self.task.state.turns) if self.task.state else 0

    @property
    def history(self) -> TaskHistory:
        """The recorded turns as the files know them (turn-state files, else frontmatter entries)."""
        return TaskHistory(self.task, self.store)

    def previous_turn_state(self, turn: int | None = None) -> TurnState | None:
        """The turn state of ``turn - 1`` (default: the last recorded turn).

        A turn GuardKit's own loop recorded only in the frontmatter counts too: its decision,
        feedback and summary, as listed there.
        """
        return self.history.turn_state((turn or self.recorded_turns + 1) - 1)

    def ledger(self) -> CriteriaLedger:
        """The cumulative ledger after the last recorded turn."""
        return self.history.ledger()

    def context_for(self, turn: int | None = None, *, role_section: str | None = None) -> str:
        """The continuation context for ``turn`` (default: the next one)."""
        turn = turn or self.recorded_turns + 1
        previous = self.previous_turn_state(turn)
        ledger = self.history.ledger_before(turn) if previous is not None else None
        # An approval the merge queue sent back speaks to the turn after it.
        sent_back = sent_back_after(self.task.state, turn - 1)
        return render_continuation_context(previous, turn=turn, criteria=self.task.criteria,
                                           statuses=ledger.statuses() if ledger is not None else None,
                                           implied=ledger.implied() if ledger is not None else (),
                                           role_section=role_section, sent_back=sent_back)

    def completable_turn(self) -> int | None:
        """The next, unrecorded turn if both its reports are on disk and valid, else ``None``.

        That is a turn interrupted between the Coach's report and the frontmatter append (or one
        whose entry a stale editor save dropped): it is completed from its files, never re-run.
        """
        # The files alone decide (reopen=True): whether the loop may go on is the caller's check.
        point = resume_point(self.task, self.store, reopen=True)
        return point.next_turn if point.action == "complete_from_reports" else None


__all__ = ["TurnView"]
