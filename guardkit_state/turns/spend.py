"""What agents have cost so far: a task's recorded turns (its turn states), a feature's tasks together."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path

from guardkit_state.store.layout import artifacts_dir


def task_spend(checkout: Path, task_id: str) -> float | None:
    """USD the agents reported for the recorded turns of ``task_id`` in ``checkout`` (None: none reported).

    A turn state that cannot be read counts 0: spending is a limit, never a reason to fail.
    """
    total: float | None = None
    for path in sorted(artifacts_dir(checkout, task_id).glob("turn_state_turn_*.json")):
        try:
            runs = json.loads(path.read_text(encoding="utf-8")).get("agent_runs") or {}
        except (OSError, ValueError, AttributeError):
            continue
        for run in runs.values() if isinstance(runs, dict) else ():
            cost = run.get("cost_usd") if isinstance(run, dict) else None
            # Only what an agent can have spent: a negative, NaN or infinite figure (a hand-edited
            # file) would lower the total or make it NaN, and --max-cost would never be reached.
            if isinstance(cost, (int, float)) and not isinstance(cost, bool) and math.isfinite(cost) and cost >= 0:
                total = (total or 0.0) + cost
    return total


def feature_spend(worktrees: Path, task_ids: Iterable[str]) -> float:
    """USD the agents reported for every recorded turn of ``task_ids``, each in its own worktree."""
    return sum(task_spend(worktrees / task_id, task_id) or 0.0 for task_id in task_ids)


__all__ = ["feature_spend", "task_spend"]
