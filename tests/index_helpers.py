"""Turn state fixtures for the index tests (small, hand-written; no corpus files)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from guardkit_state.model import turn_state_id


def write_turn(root: Path, feature: str | None, task: str, n: int, coach: str, *, blockers: tuple[str, ...] = (),
               feedback: str | None = None, worktree: bool = False, **extra: Any) -> Path:
    """Write ``turn_state_turn_N.json`` for ``task`` (in the task's worktree when asked)."""
    base = root / ".guardkit" / "worktrees" / task if worktree else root
    directory = base / ".guardkit" / "autobuild" / task
    directory.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {
        "id": turn_state_id(feature, task, n), "feature_id": feature, "task_id": task, "turn_number": n,
        "mode": "fresh_start" if n == 1 else "continuing_work",
        "player_summary": f"Worked on {task} in turn {n}", "player_decision": "implemented",
        "coach_decision": coach, "coach_feedback": feedback, "blockers_found": list(blockers),
        "acceptance_criteria_status": {
            "AC-001: Login returns JWT": "completed" if coach == "approved" else "in_progress",
        },
        "files_modified": ["src/auth.py"], "started_at": f"2026-01-01T{n // 60:02d}:{n % 60:02d}:00",
        "completed_at": f"2026-01-01T{n // 60:02d}:{n % 60:02d}:30",
    }
    data.update(extra)
    path = directory / f"turn_state_turn_{n}.json"
    path.write_text(json.dumps(data, indent=2))
    return path


def seed001_project(root: Path) -> Path:
    """Several tasks over two features: rejected turns, blockers, and a look-alike task id."""
    root.mkdir(parents=True, exist_ok=True)
    write_turn(root, "FEAT-AUTH", "TASK-AUTH-001", 1, "feedback", feedback="Missing token refresh mechanism")
    write_turn(root, "FEAT-AUTH", "TASK-AUTH-001", 2, "rejected", blockers=("Unclear refresh window size",),
               feedback="Token refresh does not validate original token expiry")
    write_turn(root, "FEAT-AUTH", "TASK-AUTH-001", 3, "approved")
    write_turn(root, "FEAT-AUTH", "TASK-AUTH-0010", 1, "rejected", feedback="Tests fail on import")
    write_turn(root, "FEAT-CACHE", "TASK-CACHE-002", 1, "feedback", blockers=("Redis not available in CI",),
               feedback="Add a fake cache for tests")
    write_turn(root, "FEAT-CACHE", "TASK-CACHE-002", 2, "approved")
    return root


def keys(hits: list[Any]) -> list[str]:
    return [h.key for h in hits]
