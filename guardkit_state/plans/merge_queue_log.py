"""The merge queue's record in a feature's plan: ``execution.merge_queue``, one entry per step.

A feature's merge queue (:mod:`guardkit_state.features.merge_queue`) builds candidates of the
feature branch, runs the gate on them, sends breaking tasks back and lands the candidates that
passed. Each step is one entry of ``execution.merge_queue``, oldest first, so ``show``, ``log`` and
``report`` can tell each candidate, its gate result and what was sent back::

    execution:
      merge_queue:
      - {wave: 1, step: candidate, candidate: 1a2b..., tasks: [TASK-A, TASK-B], why: the wave's candidate,
         gate: failed, exit_code: 1, expected_exit: 0, seconds: 0.4, run: 1, at: ..., output: ...}
      - {wave: 1, step: candidate, candidate: 9f8e..., tasks: [TASK-A], why: bisecting, gate: passed, ...}
      - {wave: 1, step: sent_back, task: TASK-B, after_turn: 1, breaks_with: [TASK-A], candidate: 1a2b...,
         gate: failed, exit_code: 1, runs: 2, final: false}
      - {wave: 1, step: landed, candidate: 9f8e..., tasks: [TASK-A], runs: 2}

``step`` is ``candidate`` (a gate run, or a verdict ``reused`` from before an interruption),
``sent_back``, ``landed`` or ``halted`` (the gate fails on the feature branch before the wave's
merges too: no task of it is to blame). The list keeps its last :data:`KEPT` entries. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from guardkit_state.plans.plan import FeaturePlan

#: Entries kept in the plan (the newest): enough for a feature's story, not a log without end.
KEPT = 200
#: A failing candidate's output kept in its entry (the task file sent back keeps more).
OUTPUT_KEPT = 600
#: The steps, in the words the entries use.
STEPS = ("candidate", "sent_back", "landed", "halted")


@dataclass(frozen=True)
class QueueStep:
    """One entry of ``execution.merge_queue`` (see the module)."""

    wave: int
    step: str
    candidate: str | None = None
    tasks: tuple[str, ...] = ()
    why: str = ""
    gate: str | None = None
    exit_code: int | None = None
    expected_exit: int = 0
    seconds: float = 0.0
    run: int | None = None
    reused: bool = False
    task: str | None = None
    after_turn: int | None = None
    final: bool = False
    runs: int = 0
    at: str = ""
    output: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The entry as the plan holds it: only the keys its step uses."""
        out: dict[str, Any] = {"wave": self.wave, "step": self.step}
        if self.step == "sent_back":
            out |= {"task": self.task, "after_turn": self.after_turn, "breaks_with": list(self.tasks)}
        elif self.tasks or self.step != "halted":
            out["tasks"] = list(self.tasks)
        if self.candidate:
            out["candidate"] = self.candidate
        if self.step == "candidate":
            out |= {"why": self.why, "run": self.run}
            if self.reused:
                out["reused"] = True
        if self.gate is not None:
            out |= {"gate": self.gate, "exit_code": self.exit_code, "expected_exit": self.expected_exit}
        if self.step == "candidate" and not self.reused:
            out["seconds"] = round(self.seconds, 2)
        if self.step in ("sent_back", "landed", "halted"):
            out["runs"] = self.runs
        if self.step == "sent_back":
            out["final"] = self.final
        out["at"] = self.at
        if self.output and self.gate in ("failed", "timed_out"):
            out["output"] = self.output[-OUTPUT_KEPT:]
        return out

    @classmethod
    def from_dict(cls, data: Any) -> QueueStep | None:
        """An entry as read back, or None for one that is not (the plan is the user's file too)."""
        if not isinstance(data, dict) or not isinstance(data.get("wave"), int) or data.get("step") not in STEPS:
            return None
        tasks = data.get("breaks_with") if data.get("step") == "sent_back" else data.get("tasks")
        return cls(data["wave"], data["step"], _text(data.get("candidate")),
                   tuple(str(t) for t in tasks) if isinstance(tasks, list) else (), str(data.get("why") or ""),
                   _text(data.get("gate")), _whole(data.get("exit_code")), _whole(data.get("expected_exit")) or 0,
                   float(data["seconds"]) if isinstance(data.get("seconds"), (int, float)) else 0.0,
                   _whole(data.get("run")), data.get("reused") is True, _text(data.get("task")),
                   _whole(data.get("after_turn")), data.get("final") is True, _whole(data.get("runs")) or 0,
                   str(data.get("at") or ""), str(data.get("output") or ""))

    @property
    def gate_words(self) -> str:
        """``failed (exit 1, expected 0)``, ``passed (exit 0)``, ``timed_out``."""
        if self.gate is None:
            return ""
        if self.exit_code is None:
            return self.gate
        expected = f", expected {self.expected_exit}" if self.gate != "passed" else ""
        return f"{self.gate} (exit {self.exit_code}{expected})"

    def describe(self) -> str:
        """One line for people (``show``, ``log``, ``report``, the run's progress)."""
        sha = (self.candidate or "")[:10]
        tasks = ", ".join(self.tasks) or "no task"
        if self.step == "candidate":
            how = "verdict recorded before the interruption" if self.reused else f"in {self.seconds:.1f} s"
            return (f"wave {self.wave} · gate run {self.run}: candidate {sha} ({tasks}) · {self.why} · "
                    f"{self.gate_words} {how}")
        if self.step == "sent_back":
            after = f" merged after {tasks}" if self.tasks else ""
            end = ("it has no turn left: it ends failed" if self.final
                   else f"one more turn (turn {(self.after_turn or 0) + 1}) with the gate's output under MUST ADDRESS")
            return (f"wave {self.wave} · {self.task} sent back after turn {self.after_turn}: it breaks the "
                    f"gate{after}, {self.gate_words}; {end} · found in {self.runs} gate run(s)")
        if self.step == "landed":
            return f"wave {self.wave} · the feature branch moves to candidate {sha} ({tasks}), which passed"
        return (f"wave {self.wave} · halted: the gate {self.gate_words} on the feature branch before the wave's "
                f"merges too ({sha}): no task of the wave is to blame")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def recorded_steps(plan: FeaturePlan) -> list[QueueStep]:
    """The queue's steps the plan records (``execution.merge_queue``), oldest first."""
    raw = plan.execution.raw.get("merge_queue") if plan.execution is not None else None
    steps = [QueueStep.from_dict(item) for item in raw] if isinstance(raw, list) else []
    return [step for step in steps if step is not None]


def with_steps(plan: FeaturePlan, steps: list[QueueStep]) -> list[dict[str, Any]]:
    """``execution.merge_queue`` with ``steps`` added (the last :data:`KEPT` entries)."""
    raw = plan.execution.raw.get("merge_queue") if plan.execution is not None else None
    kept = [item for item in raw if isinstance(item, dict)] if isinstance(raw, list) else []
    return [*kept, *(step.to_dict() for step in steps)][-KEPT:]


__all__ = ["KEPT", "OUTPUT_KEPT", "STEPS", "QueueStep", "recorded_steps", "with_steps"]
