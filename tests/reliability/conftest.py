"""Sizing (``GUARDKIT_SOAK``) and the figures each reliability test records for RELIABILITY.md."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Where each test writes its figures; ``python -m tests.reliability.summary`` adds them up.
SUMMARY_DIR = Path(os.environ.get("GUARDKIT_RELIABILITY_DIR", REPO_ROOT / "build" / "reliability"))


def soak() -> int:
    """0 normally; with ``GUARDKIT_SOAK=1`` the soak sizes; ``GUARDKIT_SOAK=N`` (N > 1) = N kills."""
    try:
        return max(0, int(os.environ.get("GUARDKIT_SOAK", "0") or 0))
    except ValueError:
        return 1


def size(normal: int, soaked: int) -> int:
    """``normal`` in ``make test``, ``soaked`` in ``make soak``."""
    return soaked if soak() else normal


@pytest.fixture
def record_figures(request: pytest.FixtureRequest) -> Callable[[dict[str, Any]], None]:
    """Write this test's figures to ``SUMMARY_DIR/<test>.json`` and print them (seen with ``-s``)."""

    def write(figures: dict[str, Any]) -> None:
        SUMMARY_DIR.mkdir(parents=True, exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid.split("::", 1)[-1])
        data = {"test": request.node.nodeid, "soak": soak(), **figures}
        (SUMMARY_DIR / f"{name}.json").write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        print(f"\n[reliability] {request.node.nodeid}: {json.dumps(figures, sort_keys=True)}")

    return write
