"""The loop's progress as typed events, its interruption as a typed KeyboardInterrupt, and the CLI's
rendering of both: real files, real git, in-process agents."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from guardkit_state.agents.protocol import CallableAgent, TurnRequest
from guardkit_state.cli.event_lines import event_lines
from guardkit_state.cli.output import Output
from guardkit_state.loop.events import (
    AgentStarted,
    LoopEvent,
    Note,
    TurnRecorded,
    TurnStarted,
    WorktreeReady,
    as_kind_and_data,
)
from guardkit_state.loop.run import LoopInterrupted, LoopOptions, run_task_loop
from guardkit_state.model import Outcome

from .test_loop import TASK, _repo, coach_verifying, scripted_player

# Python agents have no command line: the way on names their places (CMD) and the real task.
RESUME = f"guardkit-state feature-build {TASK} --player CMD --coach CMD --resume"


def _steps(events: list[LoopEvent]) -> list[tuple[str, int, str]]:
    """The turn steps of a run: (event type, turn, role or mode)."""
    steps = []
    for event in events:
        if isinstance(event, TurnStarted):
            steps.append(("TurnStarted", event.turn, event.mode.value))
        elif isinstance(event, AgentStarted):
            steps.append(("AgentStarted", event.turn, event.role))
        elif isinstance(event, TurnRecorded):
            steps.append(("TurnRecorded", event.turn, event.record.entry.decision))
    return steps


def test_a_run_tells_each_step_as_a_typed_event(git_repo: Path) -> None:
    root = _repo(git_repo)
    events: list[LoopEvent] = []
    result = run_task_loop(root, TASK, CallableAgent(scripted_player), coach_verifying(2), on_event=events.append)
    assert result.outcome is Outcome.APPROVED
    assert _steps(events) == [
        ("TurnStarted", 1, "fresh_start"), ("AgentStarted", 1, "player"), ("AgentStarted", 1, "coach"),
        ("TurnRecorded", 1, "feedback"),
        ("TurnStarted", 2, "continuing_work"), ("AgentStarted", 2, "player"), ("AgentStarted", 2, "coach"),
        ("TurnRecorded", 2, "approve"),
    ]
    worktree = next(e for e in events if isinstance(e, WorktreeReady))
    assert (worktree.path, worktree.branch) == (result.checkout, f"autobuild/{TASK}")
    recorded = [e for e in events if isinstance(e, TurnRecorded)]
    assert [e.record for e in recorded] == result.turns
    assert [e.commit for e in recorded] == result.commits and all(c and c.sha for c in result.commits)
    assert [e.text for e in events if isinstance(e, Note)] == result.notes


def test_the_kind_and_data_form_keeps_the_older_callbacks_working(git_repo: Path) -> None:
    root = _repo(git_repo)
    pairs: list[tuple[str, dict[str, Any]]] = []
    run_task_loop(root, TASK, CallableAgent(scripted_player), coach_verifying(1),
                  on_event=as_kind_and_data(lambda kind, data: pairs.append((kind, data))))
    kinds = [kind for kind, _ in pairs if kind not in ("note", "advice")]
    assert kinds == ["worktree", "turn", "agent", "agent", "recorded"]
    data = dict(pairs)
    assert data["turn"] == {"turn": 1, "mode": "fresh_start", "action": "start"}
    assert data["agent"] == {"turn": 1, "role": "coach"}
    assert data["recorded"]["decision"] == "approve" and data["recorded"]["turn"] == 1
    assert data["recorded"]["commit"]["sha"] and "turn_state" in data["recorded"]


def test_an_interrupted_agent_raises_loop_interrupted_saying_where_and_resume_finishes(git_repo: Path) -> None:
    root = _repo(git_repo)

    def player(request: TurnRequest) -> dict[str, Any]:
        if request.turn == 2:
            raise KeyboardInterrupt  # Ctrl-C while turn 2's Player works
        return scripted_player(request)

    with pytest.raises(LoopInterrupted) as stopped:
        run_task_loop(root, TASK, CallableAgent(player), coach_verifying(2))
    assert isinstance(stopped.value, KeyboardInterrupt)  # `except KeyboardInterrupt` still catches it
    assert (stopped.value.turn, stopped.value.phase) == (2, "player")
    assert str(stopped.value) == f"interrupted during turn 2 (player): state saved; continue with {RESUME}"
    result = run_task_loop(root, TASK, CallableAgent(scripted_player), coach_verifying(2), LoopOptions(resume=True))
    assert result.outcome is Outcome.APPROVED and len(result.turns) == 1


def test_an_interrupt_before_the_first_turn_says_nothing_was_recorded(git_repo: Path) -> None:
    root = _repo(git_repo)

    def stop_once_the_worktree_exists(event: LoopEvent) -> None:
        if isinstance(event, WorktreeReady):
            raise KeyboardInterrupt

    with pytest.raises(LoopInterrupted) as stopped:
        run_task_loop(root, TASK, CallableAgent(scripted_player), coach_verifying(1),
                      on_event=stop_once_the_worktree_exists)
    assert stopped.value.turn is None
    assert str(stopped.value) == ("interrupted before the first turn began; nothing was recorded: run "
                                  f"guardkit-state feature-build {TASK} --player CMD --coach CMD again")
    # What it advises works: the same command, run again, starts the loop afresh.
    result = run_task_loop(root, TASK, CallableAgent(scripted_player), coach_verifying(1))
    assert result.outcome is Outcome.APPROVED


def test_the_cli_renders_each_event_type_in_its_own_way(git_repo: Path) -> None:
    root = _repo(git_repo)
    events: list[LoopEvent] = []
    run_task_loop(root, TASK, CallableAgent(scripted_player), coach_verifying(2), on_event=events.append)
    out = Output(io.StringIO(), io.StringIO(), colour=False)
    lines = [line for event in events for line in event_lines(event, out)]
    worktree = root / ".guardkit/worktrees" / TASK
    assert lines[:2] == [f"worktree {worktree} (branch autobuild/{TASK})",
                         "suggested mode for complexity 5: task_work (standard ceremony; advisory)"]
    turn_1 = lines.index("turn 1 · fresh_start")
    assert lines[turn_1 + 1: turn_1 + 5] == [
        "  player running…", "  coach running…",
        "  coach: feedback — 1/3 criteria verified (+AC-001)", "  feedback: Still missing AC-002"]
    assert lines[turn_1 + 5].startswith("  commit ") and len(lines[turn_1 + 5]) == len("  commit ") + 10
    assert "  coach: approve — 2/3 criteria verified · 1 implied by approval (+AC-002 +AC-003)" in lines
    assert event_lines(object(), out) == []  # type: ignore[arg-type]  # an event it does not know: nothing
