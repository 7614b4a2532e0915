"""What a task's agents cost, turn by turn: agent, model, session, USD, tokens, time (from turn states)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from guardkit_state.turns.history import TaskHistory
from guardkit_state.turns.spend import reported_usd


@dataclass(frozen=True)
class TurnCost:
    """One turn's agent runs (role -> run) and what they cost together."""

    turn: int
    runs: dict[str, dict[str, Any]]

    @property
    def cost_usd(self) -> float | None:
        """The turn's cost, or None when no agent of it reported one."""
        costs = [cost for run in self.runs.values() if (cost := reported_usd(run.get("cost_usd"))) is not None]
        return round(sum(costs), 6) if costs else None

    def tokens(self, key: str) -> int:
        return sum(run[key] for run in self.runs.values() if isinstance(run.get(key), int))

    def to_dict(self) -> dict[str, Any]:
        return {"turn": self.turn, "cost_usd": self.cost_usd, "runs": self.runs}


@dataclass(frozen=True)
class TaskCost:
    """Every recorded turn's cost, and the totals (cost in USD is None when no agent reported any)."""

    turns: tuple[TurnCost, ...]

    @property
    def total_usd(self) -> float | None:
        costs = [t.cost_usd for t in self.turns if t.cost_usd is not None]
        return round(sum(costs), 6) if costs else None

    def to_dict(self) -> dict[str, Any]:
        return {"total_usd": self.total_usd, "tokens_in": sum(t.tokens("tokens_in") for t in self.turns),
                "tokens_out": sum(t.tokens("tokens_out") for t in self.turns),
                "turns": [t.to_dict() for t in self.turns]}

    def describe(self) -> str:
        """``$0.0250 · 12,640 in / 1,900 out`` (``cost not reported`` when no agent said)."""
        data = self.to_dict()
        cost = f"${self.total_usd:.4f}" if self.total_usd is not None else "cost not reported"
        return f"{cost} · {data['tokens_in']:,} tokens in / {data['tokens_out']:,} out"


def describe_run(run: dict[str, object]) -> str:
    """``claude (sonnet) $0.0123 · 1,200 in / 340 out · 12.3s``: what an agent's run cost."""
    parts = [str(run.get("agent") or "agent") + (f" ({run['model']})" if run.get("model") else "")]
    cost = reported_usd(run.get("cost_usd"))
    if cost is not None:
        parts.append(f"${cost:.4f}")
    tokens_in, tokens_out = run.get("tokens_in"), run.get("tokens_out")
    if isinstance(tokens_in, int) or isinstance(tokens_out, int):
        parts.append(f"{_count(tokens_in)} in / {_count(tokens_out)} out")
    duration = run.get("duration_seconds")
    if isinstance(duration, (int, float)):
        parts.append(f"{duration:.1f}s")
    return " · ".join(parts)


def _count(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) else "?"


def task_cost(history: TaskHistory, recorded_turns: int) -> TaskCost:
    """The cost of turns 1..``recorded_turns`` as their turn states keep it."""
    turns = []
    for number in range(1, recorded_turns + 1):
        state = history.turn_state(number)
        if state is not None and state.agent_runs:
            turns.append(TurnCost(number, state.agent_runs))
    return TaskCost(tuple(turns))


__all__ = ["TaskCost", "TurnCost", "describe_run", "task_cost"]
