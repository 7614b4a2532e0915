"""Test helper: a 3-turn autobuild loop simulated with real files and real git.

It does what the loop does at each turn, without the turn store: a code change, the three JSON
files of the turn, a turn appended to the task file (plain text), then ``commit_turn``.
"""

from __future__ import annotations

import json
from pathlib import Path

from guardkit_state.git.commits import CommitResult, commit_turn
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.worktrees import Worktree, WorktreeManager

from .conftest import run_git

TASK_ID = "TASK-GIT-001"
TASK_FILE = Path("tasks/in_progress") / f"{TASK_ID}-git-native-loop.md"

#: Criteria status per turn: turn 3 verifies AC-003 and regresses AC-002.
CRITERIA = {
    1: {"AC-001": "verified", "AC-002": "pending", "AC-003": "rejected"},
    2: {"AC-001": "verified", "AC-002": "verified", "AC-003": "rejected"},
    3: {"AC-001": "verified", "AC-002": "rejected", "AC-003": "verified"},
}
DECISIONS = {1: "feedback", 2: "feedback", 3: "approve"}
MODES = {1: "fresh_start", 2: "continuing_work", 3: "continuing_work"}


def make_project(root: Path, task_id: str = TASK_ID) -> Path:
    """Add a task file and a source file to the ``git_repo`` fixture's repository and commit them."""
    task = root / "tasks" / "in_progress" / f"{task_id}-git-native-loop.md"
    task.parent.mkdir(parents=True, exist_ok=True)
    task.write_text(
        f"---\nid: {task_id}\ntitle: Git-native loop\nstatus: in_progress\n"
        "autobuild_state:\n  current_turn: 0\n  base_branch: main\n  turns:\n---\n\n"
        "## Acceptance Criteria\n\n- [ ] AC one\n- [ ] AC two\n- [ ] AC three\n"
    )
    (root / "src").mkdir(exist_ok=True)
    (root / "src" / "feature.py").write_text('"""Feature."""\n')
    run_git(root, "add", "tasks", "src")
    run_git(root, "commit", "-q", "-m", "add task and source")
    return root


def write_turn(checkout: Path, turn: int, task_id: str = TASK_ID) -> list[Path]:
    """Write turn ``turn``'s code change, its three JSON files and its task-file lines; return the paths."""
    code = checkout / "src" / "feature.py"
    with code.open("a") as handle:
        handle.write(f"turn_{turn} = {turn}\n")
    new_module = checkout / "src" / f"module_{turn}.py"
    new_module.write_text(f"VALUE = {turn}\n")
    state_dir = checkout / ".guardkit" / "autobuild" / task_id
    state_dir.mkdir(parents=True, exist_ok=True)
    status = CRITERIA[turn]
    files = {
        f"player_turn_{turn}.json": {"task_id": task_id, "turn": turn, "files_modified": ["src/feature.py"],
                                     "implementation_notes": f"player notes of turn {turn}"},
        f"coach_turn_{turn}.json": {"task_id": task_id, "turn": turn, "decision": DECISIONS[turn],
                                    "rationale": f"coach rationale of turn {turn}"},
        f"turn_state_turn_{turn}.json": {
            "task_id": task_id, "turn_number": turn, "coach_decision": DECISIONS[turn], "mode": MODES[turn],
            "acceptance_criteria_status": status,
            "verified_count": sum(v == "verified" for v in status.values()),
        },
    }
    written = [code, new_module]
    for name, data in files.items():
        (state_dir / name).write_text(json.dumps(data, indent=2) + "\n")
        written.append(state_dir / name)
    task = checkout / "tasks" / "in_progress" / f"{task_id}-git-native-loop.md"
    # Append the turn's entry at the end of the frontmatter (after the last item of turns:).
    before, marker, after = task.read_text().partition("---\n\n## Acceptance")
    task.write_text(f"{before}  - turn: {turn}\n    decision: {DECISIONS[turn]}\n{marker}{after}")
    written.append(task)
    return written


def run_turn(checkout: Path, turn: int, *, managed: bool = True, task_id: str = TASK_ID) -> CommitResult:
    """Write turn ``turn`` in ``checkout`` and commit it the way the loop does."""
    paths = write_turn(checkout, turn, task_id)
    repo = GitRepo.discover(checkout)
    return commit_turn(repo, task_id=task_id, turn=turn, decision=DECISIONS[turn], mode=MODES[turn],
                       paths=None if managed else paths, managed_worktree=managed)


def run_loop(main: Path, turns: int = 3, *, task_id: str = TASK_ID,
             base_branch: str | None = None) -> tuple[Worktree, list[CommitResult]]:
    """Create the task's worktree with :class:`WorktreeManager` and run ``turns`` turns in it."""
    repo = GitRepo.discover(main)
    assert repo is not None
    worktree = WorktreeManager(repo).create(task_id, base_branch)
    results = [run_turn(worktree.path, n, task_id=task_id) for n in range(1, turns + 1)]
    return worktree, results


def trailer_turns(checkout: Path, rev: str) -> list[str]:
    """``git log --format=%(trailers:key=Turn,valueonly)`` as a list, oldest first."""
    out = run_git(checkout, "log", "--reverse", "--format=%(trailers:key=Turn,valueonly)", rev)
    return [line for line in out.splitlines() if line.strip()]
