"""Progress lines (stderr) of ``feature-build``: one renderer per loop or feature event type.

A task's loop events are shown by :func:`progress_lines`; a feature's by :func:`feature_lines`, each
task loop's lines prefixed with the task's id. A type a renderer does not know shows nothing.
"""

from __future__ import annotations

import functools

from guardkit_state.cli.output import Output, one_line, safe
from guardkit_state.features.feature_events import (
    NOT_RUN_WORDS,
    FeatureEvent,
    FeatureNote,
    FeatureStarted,
    QueueStepped,
    TaskBlocked,
    TaskEnded,
    TaskEvent,
    TaskMerged,
    TaskSentBack,
    TaskStarted,
    WaveStarted,
)
from guardkit_state.loop.events import (
    AgentStarted,
    LoopEvent,
    LoopNote,
    ModeSuggested,
    ReportsReused,
    Resuming,
    TurnRecorded,
    TurnStarted,
    WorktreeReady,
)

#: How much of the Coach's feedback a progress line shows (``show`` and ``--json`` have it whole).
FEEDBACK_CHARS = 160


@functools.singledispatch
def progress_lines(event: LoopEvent, out: Output) -> list[str]:
    """The progress lines (stderr) for one loop event; none for a type this command does not show."""
    return []


@progress_lines.register
def _(event: LoopNote, out: Output) -> list[str]:
    return [f"  note: {safe(event.text)}"]


@progress_lines.register
def _(event: ModeSuggested, out: Output) -> list[str]:
    # One advisory line; the full advice (with GuardKit's own pitfalls) is `suggest-mode`'s job.
    mode = event.advice.mode
    return [f"suggested mode for complexity {event.advice.complexity}: {safe(mode.mode)} "
            f"({safe(mode.ceremony_level)} ceremony; advisory)"]


@progress_lines.register
def _(event: WorktreeReady, out: Output) -> list[str]:
    return [f"worktree {safe(event.path)} (branch {safe(event.branch)})"]


@progress_lines.register
def _(event: Resuming, out: Output) -> list[str]:
    return [f"resume: {safe(event.point.describe())}"]


@progress_lines.register
def _(event: TurnStarted, out: Output) -> list[str]:
    return [out.style(f"turn {event.turn}", "bold") + f" · {event.mode.value}"]


@progress_lines.register
def _(event: AgentStarted, out: Output) -> list[str]:
    return [f"  {event.role} running…"]


@progress_lines.register
def _(event: ReportsReused, out: Output) -> list[str]:
    return [f"  reusing the {' and '.join(event.roles)} report(s) already on disk"]


@progress_lines.register
def _(event: TurnRecorded, out: Output) -> list[str]:
    from guardkit_state.inspect.agent_costs import describe_run  # here: building the parser stays light

    record = event.record
    state = record.turn_state
    if state.error:
        # Whose failure it was: a Player that cannot start is not the Coach's error.
        role = state.failed_role or "turn"
        lines = [f"  {role}: error — {one_line(state.error, 3 * FEEDBACK_CHARS)}"]
    else:
        decision = safe(record.entry.decision)
        delta = " ".join(record.ledger.delta(record.ledger_before))
        lines = [f"  coach: {decision} — {record.ledger.counts().describe('criteria')}" +
                 (f" ({delta})" if delta else "")]
        if state.gate_override:
            lines.append(f"  gate: {one_line(state.gate_override, FEEDBACK_CHARS)}")
        feedback = state.coach_feedback
        if feedback and record.entry.decision != "approve" and not state.gate_override:
            lines.append(f"  feedback: {one_line(feedback, FEEDBACK_CHARS)}")
    lines.extend(f"  {role}: {describe_run(run)}" for role, run in state.agent_runs.items()
                 if run.get("cost_usd") is not None or run.get("tokens_in") is not None)
    if event.commit is not None and event.commit.sha:
        lines.append(f"  commit {event.commit.sha[:10]}")
    return lines


@functools.singledispatch
def feature_lines(event: FeatureEvent, out: Output) -> list[str]:
    """The progress lines (stderr) for one feature event; none for a type not shown."""
    return []


@feature_lines.register
def _(event: FeatureStarted, out: Output) -> list[str]:
    tasks = sum(len(wave) for wave in event.waves)
    again = " (resumed)" if event.resumed else ""
    return [out.style(f"feature {safe(event.feature_id)}", "bold") + f"{again}: {tasks} task(s) in "
            f"{len(event.waves)} wave(s), up to {event.max_parallel} at a time · branch {safe(event.branch)} "
            f"in {safe(event.worktree)}"]


@feature_lines.register
def _(event: WaveStarted, out: Output) -> list[str]:
    # The tasks not run again, each kind by name: a failed task is not "done".
    words = {**NOT_RUN_WORDS, "ended": "ended in an earlier run"}
    told = ", ".join(f"{count} {words.get(phase, phase)}" for phase, count in event.not_run().items())
    tail = f" ({told})" if told else ""
    return [out.style(f"wave {event.number}/{event.total}", "bold") + f": {safe(', '.join(event.task_ids))}{tail}"]


@feature_lines.register
def _(event: TaskStarted, out: Output) -> list[str]:
    how = "resuming from its files" if event.resume else "started"
    return [f"[{safe(event.task_id)}] {how}"]


@feature_lines.register
def _(event: TaskEvent, out: Output) -> list[str]:
    return [f"[{safe(event.task_id)}] {line.lstrip()}" for line in progress_lines(event.event, out)]


@feature_lines.register
def _(event: TaskEnded, out: Output) -> list[str]:
    task = event.outcome
    return [f"[{safe(task.task_id)}] {task.outcome or 'stopped'} after {task.turns} turn(s): {safe(task.reason)}"]


@feature_lines.register
def _(event: TaskMerged, out: Output) -> list[str]:
    sha = f" ({event.sha[:10]})" if event.sha else ""
    return [f"merged {safe(event.branch)}{sha}"]


@feature_lines.register
def _(event: TaskBlocked, out: Output) -> list[str]:
    why = f"conflict in {', '.join(event.conflicts)}" if event.conflicts else (event.error or "merge refused")
    return [out.style(f"{event.task_id} blocked", "yellow") + f": {safe(why)}; branch {safe(event.branch)} kept"]


@feature_lines.register
def _(event: QueueStepped, out: Output) -> list[str]:
    step = event.step
    line = safe(step.describe())
    if step.step == "halted" or (step.step == "candidate" and step.gate in ("failed", "timed_out")):
        return [out.style(line, "yellow")]
    return [line]


@feature_lines.register
def _(event: TaskSentBack, out: Output) -> list[str]:
    return []  # the queue's own step says it, with the gate's verdict (QueueStepped)


@feature_lines.register
def _(event: FeatureNote, out: Output) -> list[str]:
    return [f"note: {safe(event.text)}"]


__all__ = ["FEEDBACK_CHARS", "feature_lines", "progress_lines"]
