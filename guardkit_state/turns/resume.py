"""Where to resume a loop, from the files alone (``docs/resume.md``: roll forward, not back).

The frontmatter append is the commit point: a turn listed in ``turns`` is finished. For the first
unrecorded turn N the files say how much of it can be reused: both reports valid → complete N without
calling an agent; only the Player's → re-run only the Coach; otherwise re-run N in mode
``recovering_state``. Finished turns are never redone or renumbered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from guardkit_state.errors import GuardkitStateError
from guardkit_state.model import Fields, TurnMode
from guardkit_state.store.turn_files import TurnStore
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.turns.checks import closed_reason, turn_budget
from guardkit_state.turns.sent_back import pending_send_back

Action = Literal["start", "run_turn", "complete_from_reports", "rerun_coach", "rerun_turn", "finished", "closed",
                 "out_of_turns"]
#: Actions that would run an agent (and so count against the turn budget).
_RUNS_AGENTS = ("start", "run_turn", "rerun_coach", "rerun_turn")


@dataclass
class ResumePoint(Fields):
    """The next step of a task's loop."""

    task_id: str
    next_turn: int
    mode: TurnMode
    action: Action
    recorded_turns: int
    last_feedback: str | None = None
    last_decision: str | None = None
    worktree_path: str | None = None
    outcome: str | None = None
    reusable: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    status: str | None = None
    max_turns: int | None = None

    def describe(self) -> str:
        """One sentence for people: what ``--resume`` will do."""
        what = {
            "start": f"no turns recorded: start turn 1 ({self.mode.value})",
            "run_turn": f"{self.recorded_turns} turn(s) recorded: run turn {self.next_turn} ({self.mode.value})",
            "complete_from_reports": f"turn {self.next_turn} has both reports: complete it without calling an agent",
            "rerun_coach": f"turn {self.next_turn} has the Player's report: re-run only the Coach",
            "rerun_turn": f"turn {self.next_turn} was interrupted: re-run it ({self.mode.value})",
            "finished": f"the loop already ended ({self.outcome}) after turn {self.recorded_turns}",
            "closed": f"{self.task_id} is {self.status}: nothing to run (pass --reopen to continue it)",
            "out_of_turns": f"all {self.max_turns} turns used (max_turns {self.max_turns}): pass --max-turns "
                            f"{self.next_turn} or more to continue",
        }[self.action]
        if self.outcome and self.action in _RUNS_AGENTS:
            # A loop that ended without approval (a stall) may go on; say how it ended first.
            what = f"the loop ended ({self.outcome}) after turn {self.recorded_turns} and may go on: {what}"
        return what

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "description": self.describe()}


def resume_point(task: TaskFile, store: TurnStore, *, max_turns: int | None = None,
                 reopen: bool = False) -> ResumePoint:
    """Compute the resume point of ``task`` from its frontmatter, its turn files and its status.

    A terminal status gives ``closed`` and an approval ``finished`` unless ``reopen`` (then only the
    files decide); a turn an agent would run beyond the budget (``max_turns``, else the task's)
    gives ``out_of_turns``. A turn complete in its files is never beyond it: it already ran.
    """
    point = _point_from_files(task, store, reopen=reopen)
    point.status, point.max_turns = task.status, turn_budget(task, max_turns)
    closed = None if reopen else closed_reason(task)
    if closed is not None and closed.startswith("is "):
        point.action = "closed"
    elif closed is not None:
        point.action, point.outcome = "finished", "approved"
    elif point.action in _RUNS_AGENTS and point.next_turn > point.max_turns:
        point.action = "out_of_turns"
    return point


def _point_from_files(task: TaskFile, store: TurnStore, *, reopen: bool) -> ResumePoint:
    state = task.state
    recorded = len(state.turns) if state else 0
    number = recorded + 1
    last = state.turns[-1] if state and state.turns else None
    point = ResumePoint(
        task_id=store.task_id, next_turn=number, mode=TurnMode.RECOVERING_STATE, action="rerun_turn",
        recorded_turns=recorded, last_feedback=last.feedback if last else None,
        last_decision=last.decision if last else None,
        worktree_path=state.worktree_path if state else None,
        outcome=(state.extra.get("outcome") if state else None),
    )
    if last is not None and last.decision == "approve" and not reopen and pending_send_back(state) is None:
        point.action, point.outcome = "finished", point.outcome or "approved"
        return point

    player_ok = _valid(store, "player_turn", number, point)
    coach_ok = player_ok and _valid(store, "coach_turn", number, point)
    if player_ok and coach_ok:
        point.action = "complete_from_reports"
        point.reusable = [store.path("player_turn", number).name, store.path("coach_turn", number).name]
    elif player_ok:
        point.action = "rerun_coach"
        point.reusable = [store.path("player_turn", number).name]
    elif not store.exists("player_turn", number) and not store.exists("coach_turn", number) \
            and not store.context_path(number).exists():
        # Nothing of turn N was begun: a clean boundary between turns.
        point.action = "start" if recorded == 0 else "run_turn"
        point.mode = TurnMode.FRESH_START if recorded == 0 else TurnMode.CONTINUING_WORK
    return point


def _valid(store: TurnStore, kind: str, number: int, point: ResumePoint) -> bool:
    if not store.exists(kind, number):
        return False
    try:
        store.read(kind, number)
    except GuardkitStateError as exc:
        point.notes.append(f"{store.path(kind, number).name} is not usable ({exc.message}); it will be redone")
        return False
    return True
