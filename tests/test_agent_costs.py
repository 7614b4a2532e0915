"""What ``show`` says agents cost (inspect/agent_costs.py): the same figures ``status`` and
``--max-cost`` count (turns/spend.py), whatever a hand-edited turn state holds."""

from __future__ import annotations

from guardkit_state.inspect.agent_costs import TaskCost, TurnCost, describe_run
from guardkit_state.turns.spend import state_cost

HOSTILE = {"player": {"cost_usd": 0.5}, "coach": {"cost_usd": -5}, "a": {"cost_usd": float("nan")},
           "b": {"cost_usd": float("inf")}, "c": {"cost_usd": "1"}, "d": {"cost_usd": True}}


def test_a_turns_cost_counts_only_what_an_agent_can_have_spent_as_status_does() -> None:
    import json

    turn = TurnCost(1, HOSTILE)
    assert turn.cost_usd == 0.5 == state_cost(json.dumps({"agent_runs": HOSTILE}))
    assert TaskCost((turn, TurnCost(2, {"player": {"cost_usd": 0.25}}))).total_usd == 0.75


def test_a_run_described_shows_no_figure_an_agent_cannot_have_spent() -> None:
    for run in ({"agent": "x", "cost_usd": -5}, {"agent": "x", "cost_usd": float("nan")},
                {"agent": "x", "cost_usd": float("inf")}, {"agent": "x", "cost_usd": True}):
        assert describe_run(run) == "x"
    assert describe_run({"agent": "claude", "model": "sonnet", "cost_usd": 0.0123}) == "claude (sonnet) · $0.0123"
