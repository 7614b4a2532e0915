"""SIGKILL real ``feature-build FEAT-X`` runs at random instants and inside named steps; resume.

After every kill: the plan parses and keeps its comment, no task is merged twice or out of plan
order, every task's turns are 1..n. After the last resume: no temp file left anywhere, the same tasks
approved with the same turns and decisions, the same merged files and plan progress as an
uninterrupted run.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import size, soak
from .feature_harness import CRASH_POINTS, reference_state, run_campaign


def _kills() -> int:
    return soak() if soak() > 1 else size(16, 400)


@pytest.mark.slow
def test_feature_kill_and_resume_ends_like_an_uninterrupted_run(
        tmp_path: Path, record_figures: Callable[[dict[str, Any]], None]) -> None:
    reference, duration = reference_state(tmp_path)
    assert reference["merged_tasks"] == ["TASK-FB-001", "TASK-FB-002", "TASK-FB-003"]
    stats = run_campaign(tmp_path / "campaign", kills_wanted=_kills(), seed=4242, reference=reference,
                         duration=duration)
    assert stats.kills >= _kills() and stats.completed_features >= 1
    record_figures({"setup": "feature", "kills": stats.kills, "random_kills": stats.random_kills,
                    "kills_by_point": stats.kills_by_point, "runs": stats.runs, "resumes": stats.resumes,
                    "completed_features": stats.completed_features, "checks": stats.checks})


@pytest.mark.parametrize("point", sorted(CRASH_POINTS))
def test_feature_kill_inside_each_named_step(tmp_path: Path, point: str,
                                             record_figures: Callable[[dict[str, Any]], None]) -> None:
    """One kill inside each named step (at a random one of its occurrences), then resume."""
    reference, duration = reference_state(tmp_path)
    stats = run_campaign(tmp_path / "campaign", kills_wanted=1, seed=sum(map(ord, point)), reference=reference,
                         duration=duration, crash_share=1.0, only_point=point)
    assert stats.kills_by_point == {point: 1}
    record_figures({"setup": "feature", "kills": stats.kills, "kills_by_point": stats.kills_by_point,
                    "runs": stats.runs, "resumes": stats.resumes, "completed_features": stats.completed_features,
                    "checks": stats.checks})
