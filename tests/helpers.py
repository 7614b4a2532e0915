"""Builders for small, realistic test fixtures: a task repo and Player/Coach reports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

JWT_TASK = """\
---
id: TASK-AUTH-001
title: JWT authentication
status: backlog
task_type: feature
complexity: 5
feature_id: FEAT-AUTH
created_at: 2026-01-29T00:00:00Z   # unquoted date, must survive
tags: [auth, jwt]
---

# TASK-AUTH-001: JWT authentication

## Acceptance Criteria

- [ ] Login returns JWT
- [ ] Token refresh works
- [ ] Invalid tokens rejected

## Notes

Keep the refresh window configurable.
"""


def make_task_repo(root: Path, text: str = JWT_TASK, *, name: str = "TASK-AUTH-001-jwt-auth.md") -> Path:
    """A checkout with one task file under ``tasks/backlog``; returns the task file's path."""
    path = root / "tasks" / "backlog" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def player_report(turn: int, *, task_id: str = "TASK-AUTH-001", summary: str = "Implemented JWT login endpoint",
                  promises: list[tuple[str, str]] | None = None, **extra: Any) -> dict[str, Any]:
    report: dict[str, Any] = {
        "task_id": task_id,
        "turn": turn,
        "files_modified": ["src/auth/login.py"],
        "files_created": [f"tests/test_turn{turn}.py"],
        "tests_written": [f"tests/test_turn{turn}.py"],
        "tests_run": True,
        "tests_passed": True,
        "implementation_notes": f"{summary}. More details follow.",
        "concerns": [],
        "requirements_addressed": [],
        "requirements_remaining": [],
        "summary": summary,
        "tests_passed_count": 8 + turn,
        "tests_failed_count": 0,
        "coverage": 75.5,
        "lessons": [f"lesson from turn {turn}"],
    }
    if promises is not None:
        report["completion_promises"] = [
            {"criterion_id": cid, "criterion_text": "", "status": status, "evidence": "tests pass"}
            for cid, status in promises
        ]
    report.update(extra)
    return report


def coach_decision(turn: int, decision: str, *, task_id: str = "TASK-AUTH-001", feedback: str | None = None,
                   verdicts: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "task_id": task_id,
        "turn": turn,
        "decision": decision,
        "issues": [] if feedback is None else [{"severity": "must_fix", "category": "correctness",
                                                  "description": feedback}],
        "criteria_verification": [
            {"criterion_id": cid, "result": result, "notes": f"checked in turn {turn}"}
            for cid, result in (verdicts or {}).items()
        ],
        "validation_results": {"tests_passed_count": 8 + turn, "tests_failed_count": 0, "coverage": 80.0,
                               "arch_score": 82},
        "rationale": feedback or "All criteria verified.",
    }
    if feedback is not None:
        data["feedback"] = feedback
    data.update(extra)
    return data


def dead_pid() -> int:
    """The pid of a process that has run and been reaped: a writer that is gone."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def killed_and_live_temp_files(folder: Path, name: str, text: str) -> tuple[Path, Path]:
    """Two temp files of ``name`` as atomic writes leave them in ``folder`` (``.gks-tmp-NAME.PID.NS``,
    holding ``text``): one a killed writer's (its pid gone), one a live writer's (this process's)."""
    from guardkit_state.store.fsio import TEMP_PREFIX

    killed = folder / f"{TEMP_PREFIX}{name}.{dead_pid()}.1000001"
    live = folder / f"{TEMP_PREFIX}{name}.{os.getpid()}.1000002"
    for leftover in (killed, live):
        leftover.write_text(text, encoding="utf-8")
    return killed, live
