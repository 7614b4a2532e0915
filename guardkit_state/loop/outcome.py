"""How a run of the loop ends: a :class:`LoopResult`, or :class:`LoopInterrupted` raised."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guardkit_state.loop.command_line import build_argv, rerun_command
from guardkit_state.model import Outcome

if TYPE_CHECKING:
    from guardkit_state.git.commits import CommitResult
    from guardkit_state.turns.lifecycle import TurnRecord
    from guardkit_state.turns.resume import ResumePoint


@dataclass
class LoopResult:
    """How a run of the loop ended."""

    task_id: str
    outcome: Outcome | None
    reason: str
    turns: list[TurnRecord] = field(default_factory=list)
    commits: list[CommitResult] = field(default_factory=list)
    resumed_from: ResumePoint | None = None
    checkout: Path | None = None
    notes: list[str] = field(default_factory=list)
    #: Why the approved turn's commit is not on the branch (git's reason); exit 0 needs it None.
    commit_error: str | None = None

    @property
    def exit_code(self) -> int:
        return 0 if self.outcome is Outcome.APPROVED and self.commit_error is None else 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "outcome": self.outcome.value if self.outcome else None,
            "reason": self.reason,
            "exit_code": self.exit_code,
            "commit_error": self.commit_error,
            "checkout": str(self.checkout) if self.checkout else None,
            "resumed_from": self.resumed_from.to_dict() if self.resumed_from else None,
            "turns": [t.to_dict() for t in self.turns],
            "commits": [c.to_dict() for c in self.commits],
            "notes": self.notes,
        }


class LoopInterrupted(KeyboardInterrupt):
    """Ctrl+C, SIGTERM or SIGHUP stopped the loop; its files are consistent.

    ``turn`` and ``phase`` say where (``phase``: ``starting``, ``player``, ``coach`` or
    ``recorded``; both None before the first turn began), and ``str()`` how to go on. It is a
    :class:`KeyboardInterrupt`, so code catching that catches it as before.
    """

    def __init__(self, task_id: str, *, turn: int | None, phase: str | None, resumed: bool,
                 argv: Sequence[str] | None = None) -> None:
        self.task_id = task_id
        self.turn = turn
        self.phase = phase
        self.resumed = resumed
        #: The run's command line (without the program name): the way on repeats it.
        self.argv = tuple(argv) if argv is not None else build_argv(task_id, None, None)
        super().__init__(self.describe())

    def describe(self) -> str:
        if self.turn is None and not self.resumed:
            return ("interrupted before the first turn began; nothing was recorded: run "
                    f"{rerun_command(self.argv, resume=False)} again")
        where = f" during turn {self.turn} ({self.phase})" if self.turn is not None else ""
        return f"interrupted{where}: state saved; continue with {rerun_command(self.argv, resume=True)}"


__all__ = ["LoopInterrupted", "LoopResult"]
