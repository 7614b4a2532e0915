"""Small task files shaped like the ones GuardKit's own tools write, and a CLI runner for them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from .conftest import run_git
from .e2e_support import GUARDKIT_STATE, clean_env

GENERIC_FEEDBACK = "- Tests did not pass during task-work execution"

#: Criteria labelled the three ways GuardKit task bodies do, plus one without a label.
LABELLED_BODY = """\
# Task: Labelled criteria

## Acceptance Criteria

- [ ] AC-1: Parser accepts `1h30m`
      and rejects garbage
- [ ] **AC-2** Formatter renders the shortest form
- [x] **AC-3:** Round trip holds
- [ ] AC-ANTISTUB-1 — no stub bodies in authored code
- [ ] All modified files pass lint

## Implementation Notes

- [ ] not a criterion
"""

HEADING_BODY = """\
# Task: Heading criteria

## Acceptance criteria

### AC-001 — Eligibility check

**WHEN** the operator runs it, **THE SYSTEM SHALL** check eligibility.

- a detail bullet, not a criterion

### AC-002 — Decision rule

Pick exactly one outcome.

### AC-003 — Report persisted

## Implementation notes

Nothing else.
"""


def task_text(task_id: str, body: str, *, turns: list[dict[str, Any]] | None = None, key: str = "autobuild_state",
              status: str = "in_progress", max_turns: int = 25, criteria: dict[str, str] | None = None,
              decision_key: str = "decision") -> str:
    """A task file; with ``turns``, a state block as GuardKit's loop writes it (no per-turn files)."""
    lines = ["---", f"id: {task_id}", f"title: Fixture {task_id}", f"status: {status}", "complexity: 3"]
    if turns is not None:
        lines += [f"{key}:", f"  current_turn: {len(turns)}", f"  max_turns: {max_turns}",
                  f"  worktree_path: /elsewhere/.guardkit/worktrees/{task_id}", "  base_branch: main",
                  "  started_at: '2026-02-05T17:50:14.222006'", "  last_updated: '2026-02-05T18:11:40.938636'"]
        if criteria:
            lines.append("  criteria:")
            lines += [f"    {cid}: {status_}" for cid, status_ in criteria.items()]
        lines.append("  turns:")
        for entry in turns:
            lines.append(f"  - turn: {entry['turn']}")
            lines.append(f"    {decision_key}: {entry['decision']}")
            if entry.get("feedback") is not None:
                lines.append(f"    feedback: {json.dumps(entry['feedback'])}")
            lines.append(f"    timestamp: '2026-02-05T17:{50 + entry['turn'] % 10}:00.000000'")
            summary = entry.get("summary", "Implementation via task-work delegation")
            lines.append(f"    player_summary: {json.dumps(summary)}")
            lines += ["    player_success: true", "    coach_success: true"]
    lines.append("---")
    return "\n".join(lines) + "\n\n" + body


def feedback_turns(count: int, feedback: str = GENERIC_FEEDBACK, *, last: str | None = None) -> list[dict[str, Any]]:
    """``count`` GuardKit turns with the same feedback (``last``: the final turn's decision instead)."""
    turns = [{"turn": n, "decision": "feedback", "feedback": feedback,
              "summary": f"Implementation via task-work delegation (turn {n})"} for n in range(1, count + 1)]
    if last is not None:
        turns[-1] = {"turn": count, "decision": last, "feedback": None, "summary": f"Approved work (turn {count})"}
    return turns


def make_repo(root: Path, files: dict[str, str]) -> Path:
    """A git repository holding ``files`` (relative path -> text), committed."""
    root.mkdir(parents=True, exist_ok=True)
    run_git(root, "init", "-q", "-b", "main")
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    run_git(root, "add", "-A")
    run_git(root, "commit", "-q", "-m", "fixture")
    return root


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the real CLI against ``root``."""
    return subprocess.run([str(GUARDKIT_STATE), *args, "--repo", str(root)], capture_output=True, text=True,
                          env=clean_env(), timeout=120, check=False)


def cli_json(root: Path, *args: str) -> Any:
    run = cli(root, *args, "--json")
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` except git's own, by relative path (to prove nothing was written)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts[:1]}
