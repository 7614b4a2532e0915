"""SIGKILL real ``feature-build`` loops at random instants and inside every write step; resume.

After every kill: every file parses and validates, turns are 1..n with no duplicate (in the
frontmatter and in git), the main checkout's task file is untouched by a worktree loop. After the
last resume: no temp file is left and the history equals an uninterrupted reference run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import size, soak
from .harness import CRASH_POINTS, Setup, run_campaign, timed_reference

#: make test: 6 shards x 55 = 330 kills; make soak: 5,000+ (or GUARDKIT_SOAK=N kills).
SHARDS = [Setup(), Setup(), Setup(worktree=False), Setup(worktree=False), Setup(git=False), Setup()]


def _kills_per_shard() -> int:
    if soak() > 1:
        return math.ceil(soak() / len(SHARDS))
    return size(55, math.ceil(5000 / len(SHARDS)))


@pytest.mark.slow
@pytest.mark.parametrize("shard", range(len(SHARDS)), ids=[f"{i}-{s.name}" for i, s in enumerate(SHARDS)])
def test_kill_and_resume_keeps_history(tmp_path: Path, shard: int,
                                       record_figures: Callable[[dict[str, Any]], None]) -> None:
    setup = SHARDS[shard]
    reference, duration = timed_reference(tmp_path, setup)
    assert [t[1] for t in reference.turns] == ["feedback", "feedback", "feedback", "approve"]
    stats = run_campaign(tmp_path / "campaign", setup, kills_wanted=_kills_per_shard(), seed=1000 + shard,
                         reference=reference, duration=duration)
    assert stats.kills >= _kills_per_shard()
    assert stats.completed_loops >= 1
    record_figures({"setup": setup.name, "kills": stats.kills, "random_kills": stats.random_kills,
                    "kills_by_point": stats.kills_by_point, "runs": stats.runs, "resumes": stats.resumes,
                    "completed_loops": stats.completed_loops, "checks": stats.checks})


@pytest.mark.parametrize("point", sorted(CRASH_POINTS))
def test_kill_inside_each_write_step(tmp_path: Path, point: str,
                                     record_figures: Callable[[dict[str, Any]], None]) -> None:
    """One kill in each named step (the first time it is reached in turn 2 or so), then resume."""
    setup = Setup()
    reference, duration = timed_reference(tmp_path, setup)
    stats = run_campaign(tmp_path / "campaign", setup, kills_wanted=1, seed=sum(map(ord, point)), reference=reference,
                         duration=duration, crash_share=1.0, only_point=point)
    assert stats.kills_by_point == {point: 1}
    record_figures({"setup": setup.name, "kills": stats.kills, "kills_by_point": stats.kills_by_point,
                    "runs": stats.runs, "resumes": stats.resumes, "completed_loops": stats.completed_loops,
                    "checks": stats.checks})
