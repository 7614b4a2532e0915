"""Exactly once under machine failure: the remote chaos campaign (:mod:`tests.reliability.remote_chaos`).

Worker clones on one bare remote (half through a proxy that delays, drops and stalls connections to
``git daemon``), two of them with clocks skewed by minutes, SIGKILLed and restarted at random
moments; afterwards each turn of each task is recorded once on the remote, none lost, a Player run
again only where its holder died before pushing, the merges in plan order, the feature complete.
6 workers in ``make test``, 12 in ``make soak``; ``GUARDKIT_CHAOS_SEED=N`` replays a campaign's draws.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import size, soak
from .remote_chaos import Plan, run_chaos


@pytest.mark.slow
def test_workers_killed_and_restarted_on_a_bad_network_build_the_feature_exactly_once(
        tmp_path: Path, record_figures: Callable[[dict[str, Any]], None]) -> None:
    seed = int(os.environ.get("GUARDKIT_CHAOS_SEED") or 41)
    plan = (Plan(seed, workers=12, kills=soak() if soak() > 1 else 60, waves=(24, 12, 6, 1), kill_gap=(0.5, 2.5),
                 skews=((1, 300.0), (3, -240.0), (5, 420.0), (7, -180.0)), deadline=1800.0)
            if soak() else Plan(seed, workers=size(6, 12)))
    figures = run_chaos(tmp_path, plan)
    assert figures["kills"] >= 1 and figures["duplicates"] == 0 and figures["lost_turns"] == 0
    record_figures({"setup": "remote-chaos", **figures})
