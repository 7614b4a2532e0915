"""What a run tells its caller while it goes: one family of small records, one per step, by type.

:func:`guardkit_state.loop.run.run_task_loop` calls its ``on_event`` callback with the loop's records
below (:class:`LoopEvent`) as each step happens; a feature run
(:func:`~guardkit_state.features.build.build_feature`) calls its own with the same records of each
of its task loops, ``task_id`` naming the task, and its own steps
(:mod:`guardkit_state.features.feature_events`). A caller picks the types it cares about
(``isinstance``, or a ``functools.singledispatch`` renderer as the CLI does) and ignores the rest;
the records carry the library's own objects (a :class:`TurnRecord`, a :class:`ResumePoint`), never
text made for a terminal.

Each record also has a ``kind`` and a ``to_dict()`` (its fields, as JSON): the older
``(kind, data)`` form of the callback, which :func:`as_kind_and_data` adapts, and a JSON view for
logs and tools.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from guardkit_state.model import json_ready

if TYPE_CHECKING:
    from guardkit_state.config.modes import ModeAdvice
    from guardkit_state.git.commits import CommitResult
    from guardkit_state.model import TurnMode
    from guardkit_state.turns.lifecycle import TurnRecord
    from guardkit_state.turns.resume import ResumePoint


@dataclass(frozen=True)
class Event:
    """A step of a run. ``task_id`` names the task whose loop told it, in a run of several (a
    feature's); None for a loop run alone and a feature run's own steps."""

    kind: ClassVar[str] = "event"
    task_id: str | None = field(default=None, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        """What the event says, as JSON: its fields. The ``task_id`` a feature run adds to its loops'
        events (keyword-only, here) is not one of them; the feature's own events about a task
        declare ``task_id`` as a field of theirs."""
        return {f.name: json_ready(getattr(self, f.name)) for f in fields(self) if not f.kw_only}


@dataclass(frozen=True)
class Note(Event):
    """Something the run did on its own that the user should know (a temp file removed, a stale
    lock reaped, a report reused, a turn committed late); also in the result's ``notes``."""

    kind: ClassVar[str] = "note"
    text: str


@dataclass(frozen=True)
class LoopEvent(Event):
    """A step of one task's loop (a feature run passes its tasks' on, ``task_id`` set)."""


@dataclass(frozen=True)
class ModeSuggested(LoopEvent):
    """The advisory implementation mode for the task's complexity (nothing is blocked by it)."""

    kind: ClassVar[str] = "advice"
    advice: ModeAdvice

    def to_dict(self) -> dict[str, Any]:
        return self.advice.to_dict()


@dataclass(frozen=True)
class WorktreeReady(LoopEvent):
    """The loop's worktree exists (created, found, or restored) and the turns run in it."""

    kind: ClassVar[str] = "worktree"
    path: Path
    branch: str


@dataclass(frozen=True)
class Resuming(LoopEvent):
    """``resume=True``: where the files say the loop continues from."""

    kind: ClassVar[str] = "resume"
    point: ResumePoint

    def to_dict(self) -> dict[str, Any]:
        return self.point.to_dict()


@dataclass(frozen=True)
class TurnStarted(LoopEvent):
    """Turn ``turn`` begins; ``action`` is the resume point's (``run_turn``, ``rerun_coach``, ...)."""

    kind: ClassVar[str] = "turn"
    turn: int
    mode: TurnMode
    action: str


@dataclass(frozen=True)
class ReportsReused(LoopEvent):
    """Reports an interrupted run left on disk are recorded instead of running those agents again."""

    kind: ClassVar[str] = "reuse"
    turn: int
    roles: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"turn": self.turn, "files": list(self.roles)}


@dataclass(frozen=True)
class AgentStarted(LoopEvent):
    """The Player (``role="player"``) or the Coach starts on turn ``turn``."""

    kind: ClassVar[str] = "agent"
    turn: int
    role: str


@dataclass(frozen=True)
class TurnRecorded(LoopEvent):
    """A turn is in the files (and committed, when ``commit`` says so); the loop goes on or ends."""

    kind: ClassVar[str] = "recorded"
    record: TurnRecord
    #: None outside git.
    commit: CommitResult | None

    @property
    def turn(self) -> int:
        return self.record.turn_state.turn_number

    def to_dict(self) -> dict[str, Any]:
        return self.record.to_dict() | {"commit": self.commit.to_dict() if self.commit else None}


#: The ``on_event`` callback of :func:`~guardkit_state.loop.run.run_task_loop` and of a feature run.
EventSink = Callable[[Event], None]
#: The older form of the callback: the event's ``kind`` and ``to_dict()``.
KindAndData = Callable[[str, dict[str, Any]], None]


def as_kind_and_data(callback: KindAndData) -> EventSink:
    """An ``on_event`` for a callback written for ``(kind, data)`` pairs (``"turn"``, ``{"turn": 2, ...}``)."""
    def sink(event: Event) -> None:
        callback(event.kind, event.to_dict())
    return sink


def ignore(event: Event) -> None:
    """The callback when the caller gives none."""


__all__ = ["AgentStarted", "Event", "EventSink", "KindAndData", "LoopEvent", "ModeSuggested", "Note", "ReportsReused",
           "Resuming", "TurnRecorded", "TurnStarted", "WorktreeReady", "as_kind_and_data", "ignore"]
