"""What agents have cost so far: a task's recorded turns (its turn states), a feature's tasks together."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path

from guardkit_state.errors import GuardkitStateError
from guardkit_state.store.layout import artifacts_dir
from guardkit_state.store.reads import read_bytes_capped
from guardkit_state.store.turn_files import turn_state_number


def turn_costs(checkout: Path, task_id: str) -> list[tuple[int, float | None]]:
    """(turn, USD its agents reported) for each recorded turn of ``task_id`` in ``checkout``, in turn
    order; None where no agent of the turn reported a cost.

    A turn state that cannot be read counts as unknown: spending is a limit, never a reason to fail.
    """
    costs: list[tuple[int, float | None]] = []
    for path in artifacts_dir(checkout, task_id).glob("turn_state_turn_*.json"):
        number = turn_state_number(path.name)
        if number is None:
            continue
        try:  # (capped, and never an open that waits: an agent can leave a FIFO or gigabytes here)
            text = read_bytes_capped(path)  # (bad UTF-8 is json.loads' ValueError in state_cost: unknown)
        except (GuardkitStateError, OSError):
            text = b""
        costs.append((number, state_cost(text)))
    return sorted(costs)


def state_cost(text: str | bytes) -> float | None:
    """USD a turn's agents reported, from the text of its turn state; None where none reported one.

    A turn state that cannot be read counts as unknown: spending is a limit, never a reason to fail.
    """
    try:
        runs = json.loads(text).get("agent_runs") or {}
    except (ValueError, AttributeError, RecursionError):  # (bad UTF-8 or JSON; nesting deeper than the parser goes)
        runs = {}
    total: float | None = None
    for run in runs.values() if isinstance(runs, dict) else ():
        cost = reported_usd(run.get("cost_usd") if isinstance(run, dict) else None)
        if cost is not None:
            total = (total or 0.0) + cost
    return total


def reported_usd(value: object) -> float | None:
    """An agent run's ``cost_usd`` when it is what an agent can have spent, else None: a negative,
    NaN or infinite figure (a hand-edited file) would lower a total or make it NaN, and --max-cost
    would never be reached. ``status``, ``show`` and the limit all count through this."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return float(value)
    return None


def task_spend(checkout: Path, task_id: str) -> float | None:
    """USD the agents reported for the recorded turns of ``task_id`` in ``checkout`` (None: none reported)."""
    known = [cost for _, cost in turn_costs(checkout, task_id) if cost is not None]
    return sum(known) if known else None


def over_limit(checkout: Path, task_id: str, *, limit: float, spent_elsewhere: float = 0.0) -> str | None:
    """Why the next turn of ``task_id`` must not start under ``--max-cost limit``, in one line; or None.

    What the task's recorded turns cost, plus ``spent_elsewhere`` (a feature's other tasks), reaches
    the limit, or would pass it with another turn at the mean cost of the last three that reported one.
    """
    known = [cost for _, cost in turn_costs(checkout, task_id) if cost is not None]  # the turn states read once
    spent = sum(known) + spent_elsewhere
    where = task_id + (f" (${spent_elsewhere:.4f} of it by the feature's other tasks)" if spent_elsewhere else "")
    if spent >= limit:
        return f"--max-cost reached: ${spent:.4f} spent on {where} (limit ${limit:g})"
    last = known[-3:]
    if last and spent + (mean := sum(last) / len(last)) > limit:
        return (f"--max-cost: ${spent:.4f} spent on {where}; another turn (about ${mean:.4f}, the mean of the "
                f"last {len(last)}) would pass the limit ${limit:g}")
    return None


def merged_task_spend(worktrees: Path, task_id: str, merged_into: Path | None) -> float:
    """USD the agents reported for the recorded turns of ``task_id`` in its own worktree, or in
    ``merged_into`` (the feature's checkout: a merge brings the task's turn states there), the more
    of the two: a merged task's worktree may be pruned since (``worktrees prune``), and what it
    spent stays spent."""
    own = task_spend(worktrees / task_id, task_id) or 0.0
    return max(own, task_spend(merged_into, task_id) or 0.0) if merged_into is not None else own


def feature_spend(worktrees: Path, task_ids: Iterable[str], merged_into: Path | None = None) -> float:
    """USD the agents reported for every recorded turn of ``task_ids``, each in its own worktree (or
    in ``merged_into``: :func:`merged_task_spend`)."""
    return sum(merged_task_spend(worktrees, task_id, merged_into) for task_id in task_ids)


__all__ = ["feature_spend", "merged_task_spend", "over_limit", "reported_usd", "state_cost", "task_spend",
           "turn_costs"]
