"""One task resolver: duplicate copies, loop state, feature plans, paths, and loops' worktrees.

Fixtures are real GuardKit layouts in real git repositories, driven through the real CLI: a
planning copy in ``tasks/backlog/<feature>/`` beside the working copy in ``in_review/``, a feature
plan naming one copy, and a second loop's worktree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from guardkit_state.errors import InvalidTaskIdError, TaskNotFoundError
from guardkit_state.inspect.status import repo_status
from guardkit_state.taskfile.locate import locate_task
from guardkit_state.taskfile.resolve import (
    REASON_GIVEN,
    REASON_ONLY,
    REASON_ORDER,
    REASON_PLAN,
    REASON_STATE,
    find_task,
    resolve_task,
)

from .conftest import run_git

CLI = Path(sys.executable).parent / "guardkit-state"

STATE = """\
autobuild_state:
  current_turn: {turns}
  max_turns: 5
  worktree_path: null
  base_branch: main
  started_at: '2026-01-01T00:00:00+00:00'
  last_updated: '2026-01-01T00:00:00+00:00'
  turns:
{entries}"""
TURN = """\
  - turn: {n}
    decision: feedback
    feedback: 'turn {n} feedback'
    timestamp: '2026-01-01T00:00:00+00:00'
"""


def task_text(task_id: str, status: str, *, turns: int = 0, title: str = "Parse durations") -> str:
    state = ""
    if turns:
        state = STATE.format(turns=turns, entries="".join(TURN.format(n=n) for n in range(1, turns + 1)))
    return (f"---\nid: {task_id}\ntitle: {title}\nstatus: {status}\n{state}---\n\n# {title}\n\n"
            "## Acceptance Criteria\n\n- [ ] It parses\n- [ ] It formats\n")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def cli(repo: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | {"NO_COLOR": "1"}
    return subprocess.run([str(CLI), *args, *(["--repo", str(repo)] if cwd is None else [])],
                          cwd=cwd or repo, capture_output=True, text=True, env=env, timeout=120, check=False)


PLANNING = "tasks/backlog/durations/TASK-DUR-001-parse-durations.md"
WORKING = "tasks/in_review/TASK-DUR-001-parse-durations.md"


@pytest.fixture
def repo(git_repo: Path) -> Path:
    """TASK-DUR-001: a stateless planning copy in backlog/<feature>/, the working copy (3 turns) in
    in_review/. TASK-DUR-002: one copy. Committed, like a real GuardKit repository."""
    write(git_repo / PLANNING, task_text("TASK-DUR-001", "backlog"))
    write(git_repo / WORKING, task_text("TASK-DUR-001", "in_review", turns=3))
    write(git_repo / "tasks/backlog/TASK-DUR-002-format.md", task_text("TASK-DUR-002", "backlog", turns=1))
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-q", "-m", "tasks")
    return git_repo


# ---------------------------------------------------------------------------------- the rules


def test_the_copy_holding_loop_state_wins_over_search_order(repo: Path) -> None:
    found = resolve_task(repo, "TASK-DUR-001")
    assert found.path == repo / WORKING
    assert found.reason == REASON_STATE
    assert [p.relative_to(repo).as_posix() for p in found.others] == [PLANNING]
    assert find_task(repo, "TASK-DUR-001") == repo / WORKING


def test_without_state_guardkit_search_order_decides(repo: Path) -> None:
    write(repo / WORKING, task_text("TASK-DUR-001", "in_review"))
    found = resolve_task(repo, "TASK-DUR-001")
    assert (found.path, found.reason) == (repo / PLANNING, REASON_ORDER)  # backlog comes first


def test_with_state_in_several_copies_search_order_decides(repo: Path) -> None:
    write(repo / PLANNING, task_text("TASK-DUR-001", "backlog", turns=1))
    found = resolve_task(repo, "TASK-DUR-001")
    assert found.path == repo / PLANNING
    assert found.reason == f"{REASON_STATE}; {REASON_ORDER}"


def test_search_order_puts_in_progress_before_in_review_and_completed_last(repo: Path) -> None:
    (repo / PLANNING).unlink()
    write(repo / WORKING, task_text("TASK-DUR-001", "in_review"))
    write(repo / "tasks/completed/TASK-DUR-001-parse-durations.md", task_text("TASK-DUR-001", "completed"))
    write(repo / "tasks/in_progress/TASK-DUR-001.md", task_text("TASK-DUR-001", "in_progress"))
    assert find_task(repo, "TASK-DUR-001") == repo / "tasks/in_progress/TASK-DUR-001.md"


def test_a_feature_plan_naming_a_copy_wins_the_tie(repo: Path) -> None:
    write(repo / PLANNING, task_text("TASK-DUR-001", "backlog", turns=1))
    write(repo / ".guardkit/features/FEAT-DUR.yaml",
          f"id: FEAT-DUR\ntasks:\n- id: TASK-DUR-001\n  file_path: \"{WORKING}\"\n  status: pending\n")
    found = resolve_task(repo, "TASK-DUR-001")
    assert found.path == repo / WORKING
    assert found.reason == f"{REASON_STATE}; {REASON_PLAN}"


def test_a_single_copy_has_no_others(repo: Path) -> None:
    found = resolve_task(repo, "TASK-DUR-002")
    assert (found.reason, found.others, found.note) == (REASON_ONLY, (), None)


def test_a_path_is_accepted_wherever_an_id_is(repo: Path) -> None:
    found = resolve_task(repo, PLANNING)
    assert (found.task_id, found.path, found.reason) == ("TASK-DUR-001", repo / PLANNING, REASON_GIVEN)
    assert [p.relative_to(repo).as_posix() for p in found.others] == [WORKING]
    assert find_task(repo, str(repo / PLANNING)) == repo / PLANNING
    location = locate_task(repo, PLANNING)
    assert (location.task_id, location.task_path) == ("TASK-DUR-001", repo / PLANNING)


def test_a_path_outside_tasks_or_missing_is_a_typed_error(repo: Path) -> None:
    with pytest.raises(TaskNotFoundError):
        resolve_task(repo, "tasks/backlog/TASK-NOPE-1.md")
    with pytest.raises(InvalidTaskIdError):
        resolve_task(repo, "README.md")
    with pytest.raises(InvalidTaskIdError):
        resolve_task(repo, "../etc/passwd")


def test_a_task_id_ended_by_a_line_feed_is_no_task_id(repo: Path) -> None:
    # A regex's $ matches before a final "\n": the id went on into store paths and branch names.
    from guardkit_state.store.safe_paths import is_task_id, validate_task_id

    assert not is_task_id("TASK-DUR-001\n") and is_task_id("TASK-DUR-001")
    with pytest.raises(InvalidTaskIdError):
        validate_task_id("TASK-DUR-001\n")
    with pytest.raises(InvalidTaskIdError):
        resolve_task(repo, "TASK-DUR-001\n")


# ----------------------------------------------------------------------- the CLI and status


def test_show_reads_the_state_copy_and_says_which(repo: Path) -> None:
    result = cli(repo, "show", "TASK-DUR-001", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["resolved"] == {"path": WORKING, "reason": REASON_STATE, "others": [PLANNING]}
    assert len(data["turns"]) == 3
    notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert notes == [f"note: TASK-DUR-001: reading {WORKING} ({REASON_STATE}); other copies: {PLANNING}"]


def test_show_accepts_a_task_file_path_relative_to_the_current_folder(repo: Path) -> None:
    result = cli(repo, "show", "backlog/durations/TASK-DUR-001-parse-durations.md", "--json", cwd=repo / "tasks")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["task_id"], data["turns"]) == ("TASK-DUR-001", [])
    assert data["resolved"]["path"] == PLANNING and data["resolved"]["reason"] == REASON_GIVEN


@pytest.mark.parametrize("command", [["context"], ["log"], ["suggest-mode"]])
def test_every_task_command_accepts_a_path(repo: Path, command: list[str]) -> None:
    result = cli(repo, *command, WORKING)
    assert result.returncode == 0, result.stderr
    assert "invalid task id" not in result.stderr


def test_status_and_show_agree_on_the_copy(repo: Path) -> None:
    write(repo / PLANNING, task_text("TASK-DUR-001", "backlog", turns=1))
    write(repo / ".guardkit/features/FEAT-DUR.yaml", f"tasks:\n- file_path: {WORKING}\n")
    rows = {row["task_id"]: row for row in json.loads(cli(repo, "status", "--json").stdout)}
    shown = json.loads(cli(repo, "show", "TASK-DUR-001", "--json").stdout)
    assert rows["TASK-DUR-001"]["path"] == WORKING == shown["resolved"]["path"]
    assert rows["TASK-DUR-001"]["turns"] == 3 == len(shown["turns"])
    assert rows["TASK-DUR-001"]["resolved"] == shown["resolved"]
    assert rows["TASK-DUR-002"]["resolved"] is None


def test_status_says_once_that_copies_exist(repo: Path) -> None:
    result = cli(repo, "status")
    assert result.returncode == 0
    notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "TASK-DUR-001" in notes[0]


# ------------------------------------------------------------------------- loops' worktrees


def add_worktree(repo: Path, task_id: str) -> Path:
    tree = repo / ".guardkit" / "worktrees" / task_id
    run_git(repo, "worktree", "add", "-q", "-b", f"autobuild/{task_id}", str(tree))
    return tree


def test_a_loop_worktree_is_read_only_for_its_own_task(repo: Path) -> None:
    tree = add_worktree(repo, "TASK-DUR-002")
    write(tree / "tasks/backlog/TASK-DUR-002-format.md", task_text("TASK-DUR-002", "in_progress", turns=2))
    # The worktree's (stale) copy of another task must not replace the main checkout's.
    write(repo / WORKING, task_text("TASK-DUR-001", "in_review", turns=4))
    rows = {s.task_id: s for s in repo_status(repo, use_cache=False)}
    assert (rows["TASK-DUR-002"].turns, rows["TASK-DUR-002"].in_worktree) == (2, True)
    assert (rows["TASK-DUR-001"].turns, rows["TASK-DUR-001"].in_worktree) == (4, False)
    text = cli(repo, "status").stdout
    assert text.count("(worktree)") == 1
    shown = json.loads(cli(repo, "show", "TASK-DUR-002", "--json").stdout)
    assert (shown["in_worktree"], len(shown["turns"])) == (True, 2)


def test_a_broken_main_file_appears_once_beside_another_loops_worktree(repo: Path) -> None:
    add_worktree(repo, "TASK-DUR-002")
    write(repo / WORKING, "---\nid: TASK-DUR-001\nautobuild_state:\n  turns: [\n---\n")
    rows = [s for s in repo_status(repo, use_cache=False) if s.task_id == "TASK-DUR-001"]
    assert len(rows) == 1 and rows[0].error and not rows[0].in_worktree
    result = cli(repo, "show", "TASK-DUR-001")
    assert result.returncode == 2 and "Traceback" not in result.stderr  # the same copy, its error
    assert WORKING in result.stderr


def test_record_with_a_path_writes_the_file_named_not_the_rules_pick(repo: Path, tmp_path: Path) -> None:
    from .helpers import coach_decision, player_report

    reports = tmp_path / "reports"
    write(reports / "p.json", json.dumps(player_report(1, task_id="TASK-DUR-001")))
    write(reports / "c.json", json.dumps(coach_decision(1, "feedback", task_id="TASK-DUR-001", feedback="more")))
    working_before = (repo / WORKING).read_bytes()
    result = cli(repo, "record", PLANNING, "--player", str(reports / "p.json"), "--coach", str(reports / "c.json"))
    assert result.returncode == 0, result.stderr
    assert (repo / WORKING).read_bytes() == working_before
    assert "autobuild_state:" in (repo / PLANNING).read_text(encoding="utf-8")


# ------------------------------------------------------------------------------ an id in the wrong case


def test_an_id_typed_in_another_case_resolves_to_the_one_its_files_spell(repo: Path) -> None:
    found = resolve_task(repo, "task-dur-001")
    assert found.task_id == "TASK-DUR-001" and found.path == repo / WORKING
    shown = cli(repo, "show", "task-dur-001", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["task_id"] == "TASK-DUR-001"


def test_an_unknown_id_names_the_ids_it_may_have_meant(repo: Path) -> None:
    with pytest.raises(TaskNotFoundError, match=r"\(did you mean TASK-DUR-00[12] or TASK-DUR-00[12]\?\)"):
        resolve_task(repo, "TASK-DUR-00l")
    refused = cli(repo, "show", "TASK-DUR-1")
    assert refused.returncode == 2 and "(did you mean TASK-DUR-001" in refused.stderr
    with pytest.raises(TaskNotFoundError) as nothing_near:
        resolve_task(repo, "TASK-ZZZ-999")
    assert "did you mean" not in str(nothing_near.value)


def test_two_ids_differing_only_in_case_are_not_guessed_between(git_repo: Path) -> None:
    write(git_repo / "tasks/backlog/TASK-Ab-1-one.md", task_text("TASK-Ab-1", "backlog"))
    write(git_repo / "tasks/backlog/TASK-AB-1-two.md", task_text("TASK-AB-1", "backlog"))
    with pytest.raises(TaskNotFoundError, match=r"did you mean TASK-AB-1 or TASK-Ab-1\?"):
        resolve_task(git_repo, "task-ab-1")
    assert resolve_task(git_repo, "TASK-Ab-1").path.name == "TASK-Ab-1-one.md"


def test_a_feature_id_in_another_case_finds_its_plan(git_repo: Path) -> None:
    from guardkit_state.errors import FeatureNotFoundError
    from guardkit_state.plans.plan import find_plan

    plan = write(git_repo / ".guardkit/features/FEAT-CR01.yaml", "id: FEAT-CR01\ntasks: []\n")
    assert find_plan(git_repo, "feat-cr01") == plan
    with pytest.raises(FeatureNotFoundError, match=r"did you mean FEAT-CR01\?"):
        find_plan(git_repo, "FEAT-CR02")
