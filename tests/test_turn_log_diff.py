"""The turn log and turn diffs, read from real git repositories made by a simulated loop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from guardkit_state.cli.app import run
from guardkit_state.errors import GitError, InvalidTaskIdError, TurnError
from guardkit_state.inspect.review import criteria_delta, read_turn_log, turn_diff

from .conftest import run_git
from .gitloop import TASK_FILE, TASK_ID, make_project, run_loop, trailer_turns, write_turn


@pytest.fixture
def looped(git_repo: Path) -> Path:
    """A project whose task ran 3 turns in its worktree; returns the main checkout."""
    make_project(git_repo)
    _, results = run_loop(git_repo)
    assert all(r.committed for r in results), results
    return git_repo


def _added(diff: str) -> list[str]:
    return [line[1:] for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]


def test_loop_makes_exactly_three_turn_commits_with_trailers(looped: Path) -> None:
    branch = f"autobuild/{TASK_ID}"
    assert trailer_turns(looped, branch) == ["1", "2", "3"]
    assert run_git(looped, "rev-list", "--count", f"main..{branch}").strip() == "3"
    body = run_git(looped, "log", "-1", "--format=%B", branch)
    assert body.startswith(f"autobuild({TASK_ID}): turn 3 approve\n\n")
    for key, value in [("Task", TASK_ID), ("Decision", "approve"), ("Mode", "continuing_work")]:
        got = run_git(looped, "log", "-1", f"--format=%(trailers:key={key},valueonly)", branch).strip()
        assert got == value
    # git's own grep finds a turn, as docs/git.md promises.
    assert run_git(looped, "log", "--format=%s", "--grep=^Turn: 2$", branch).strip() == \
        f"autobuild({TASK_ID}): turn 2 feedback"


def test_turn_log_lists_turns_with_sha_decision_mode_and_criteria_delta(looped: Path) -> None:
    entries = read_turn_log(looped, TASK_ID).entries
    shas = run_git(looped, "rev-list", "--reverse", f"main..autobuild/{TASK_ID}").split()
    assert [e.turn for e in entries] == [1, 2, 3]
    assert [e.sha for e in entries] == shas
    assert [e.decision for e in entries] == ["feedback", "feedback", "approve"]
    assert [e.mode for e in entries] == ["fresh_start", "continuing_work", "continuing_work"]
    assert [e.delta for e in entries] == [("+AC-001",), ("+AC-002",), ("+AC-003", "-AC-002")]
    assert [e.verified_count for e in entries] == [1, 2, 2]
    assert all(e.date for e in entries)


def test_turn_log_never_reads_a_committed_turn_state_over_the_size_cap(
        looped: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # As a turn state on disk: one over the cap (a blob of gigabytes an agent committed) is not read;
    # its turn is listed from its commit, without criteria.
    from guardkit_state.store import reads

    monkeypatch.setattr(reads, "MAX_FILE_BYTES", 10)
    entries = read_turn_log(looped, TASK_ID).entries
    assert [e.decision for e in entries] == ["feedback", "feedback", "approve"]
    assert [e.delta for e in entries] == [(), (), ()]


def test_turn_diff_shows_only_that_turns_code_and_state(looped: Path) -> None:
    diff = turn_diff(looped, TASK_ID, 2)
    added = _added(diff)
    assert "turn_2 = 2" in added
    assert "turn_1 = 1" not in added and "turn_3 = 3" not in added
    assert "+++ b/src/module_2.py" in diff
    assert f"+++ b/.guardkit/autobuild/{TASK_ID}/player_turn_2.json" in diff
    assert f"+++ b/.guardkit/autobuild/{TASK_ID}/coach_turn_2.json" in diff
    assert f"+++ b/.guardkit/autobuild/{TASK_ID}/turn_state_turn_2.json" in diff
    assert "player_turn_1.json" not in diff and "player_turn_3.json" not in diff
    # The task file shows exactly turn 2's appended lines.
    assert "  - turn: 2" in added and "  - turn: 1" not in added and "  - turn: 3" not in added
    assert f"+++ b/{TASK_FILE.as_posix()}" in diff


def test_turn_diff_state_only_and_stat(looped: Path) -> None:
    state = turn_diff(looped, TASK_ID, 2, state_only=True)
    headers = [line for line in state.splitlines() if line.startswith("diff --git")]
    assert len(headers) == 4, headers  # task file + the turn's three JSON files, no code
    assert not any("src/" in h for h in headers)
    assert "turn_state_turn_2.json" in state and TASK_FILE.name in state
    stat = turn_diff(looped, TASK_ID, 2, stat=True)
    assert "src/feature.py" in stat and "|" in stat and "@@" not in stat


def test_turn_diff_of_unknown_turn_is_a_turn_error(looped: Path) -> None:
    with pytest.raises(TurnError) as info:
        turn_diff(looped, TASK_ID, 7)
    assert info.value.turn == 7 and info.value.task_id == TASK_ID


def test_log_and_diff_work_after_merge_and_branch_deletion(looped: Path) -> None:
    run_git(looped, "merge", "-q", "--no-ff", "-m", "merge loop", f"autobuild/{TASK_ID}")
    run_git(looped, "worktree", "remove", f".guardkit/worktrees/{TASK_ID}")
    run_git(looped, "branch", "-d", f"autobuild/{TASK_ID}")
    log = read_turn_log(looped, TASK_ID)
    assert log.source == "current branch main"
    assert [e.turn for e in log.entries] == [1, 2, 3]
    assert "turn_2 = 2" in _added(turn_diff(looped, TASK_ID, 2))


def test_turn_log_notes_turns_written_but_not_committed(looped: Path) -> None:
    checkout = looped / ".guardkit" / "worktrees" / TASK_ID
    state_dir = checkout / ".guardkit" / "autobuild" / TASK_ID
    (state_dir / "turn_state_turn_4.json").write_text(json.dumps(
        {"turn_number": 4, "coach_decision": "feedback", "mode": "recovering_state",
         "acceptance_criteria_status": {"AC-001": "verified"}}))
    log = read_turn_log(looped, TASK_ID)
    assert [e.turn for e in log.entries] == [1, 2, 3, 4]
    assert log.entries[3].sha is None and log.entries[3].mode == "recovering_state"
    assert log.entries[3].delta == ("-AC-003",)
    assert any("4" in note and "no commit" in note for note in log.notes)


def test_without_git_log_reads_files_and_diff_says_git_is_needed(tmp_path: Path) -> None:
    project = tmp_path / "plain"
    (project / "tasks" / "in_progress").mkdir(parents=True)
    (project / TASK_FILE).write_text("---\nid: x\n---\n\n## Acceptance Criteria\n")
    (project / "src").mkdir()
    (project / "src" / "feature.py").write_text("")
    write_turn(project, 1)
    log = read_turn_log(project, TASK_ID)
    assert log.source == "files" and [e.turn for e in log.entries] == [1]
    assert log.entries[0].sha is None and log.entries[0].delta == ("+AC-001",)
    with pytest.raises(GitError):
        turn_diff(project, TASK_ID, 1)


def test_invalid_task_id_is_refused(looped: Path) -> None:
    with pytest.raises(InvalidTaskIdError):
        read_turn_log(looped, "../etc")


@pytest.mark.parametrize(
    ("previous", "current", "expected"),
    [
        ({}, {"AC-001": "verified", "AC-002": "pending"}, ("+AC-001",)),
        ({"AC-001": "verified"}, {"AC-001": "verified"}, ()),
        ({"AC-001": "verified", "AC-002": "pending"}, {"AC-001": "rejected", "AC-002": "verified"},
         ("+AC-002", "-AC-001")),
    ],
)
def test_criteria_delta(previous: dict[str, str], current: dict[str, str], expected: tuple[str, ...]) -> None:
    assert criteria_delta(previous, current) == expected


# -- CLI ------------------------------------------------------------------------------------


def test_cli_log_json_and_text(looped: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["log", TASK_ID, "--repo", str(looped), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["source"] == f"branch autobuild/{TASK_ID}"
    assert [t["turn"] for t in data["turns"]] == [1, 2, 3]
    assert data["turns"][2]["delta"] == ["+AC-003", "-AC-002"]
    assert run(["log", TASK_ID, "--repo", str(looped)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and lines[2].startswith("turn 3") and "approve" in lines[2] and "-AC-002" in lines[2]


def test_cli_diff(looped: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["diff", TASK_ID, "--turn", "2", "--repo", str(looped), "--state-only"]) == 0
    out = capsys.readouterr().out
    assert "turn_state_turn_2.json" in out and "diff --git a/src/" not in out
    assert run(["diff", TASK_ID, "--turn", "9", "--repo", str(looped)]) == 1
    assert "no commit of turn 9" in capsys.readouterr().err
    assert run(["diff", "bad/id", "--turn", "1", "--repo", str(looped)]) == 2


def test_cli_diff_runs_as_a_subprocess_from_the_main_checkout(looped: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    result = subprocess.run([sys.executable, "-m", "guardkit_state", "diff", TASK_ID, "--turn", "1", "--stat"],
                            cwd=looped, capture_output=True, text=True, env={**env, "NO_COLOR": "1"}, check=False)
    assert result.returncode == 0, result.stderr
    assert "src/module_1.py" in result.stdout and "module_2" not in result.stdout


@pytest.mark.parametrize("tail", [b', "cost": NaN}', b', "deep": ' + b"[" * 5000 + b"]" * 5000 + b"}"],
                         ids=["nan", "deep"])
def test_turn_log_reads_a_committed_turn_state_as_strictly_as_one_on_disk(looped: Path, tail: bytes) -> None:
    # A turn commit pushed with a turn state the strict JSON reader refuses (NaN; nesting deeper than
    # its bound, deeper than Python's parser goes): its turn is listed without criteria, never a crash.
    from .conftest import commit_on_branch

    state = b'{"acceptance_criteria_status": {"AC-001": "verified", "AC-009": "verified"}' + tail
    commit_on_branch(looped, f"autobuild/{TASK_ID}", f".guardkit/autobuild/{TASK_ID}/turn_state_turn_4.json", state,
                     f"autobuild({TASK_ID}): turn 4 feedback\n\nTask: {TASK_ID}\nTurn: 4\nDecision: feedback\n"
                     "Mode: continuing_work\n")
    entries = read_turn_log(looped, TASK_ID).entries
    assert [(e.turn, e.decision) for e in entries] == [(1, "feedback"), (2, "feedback"), (3, "approve"),
                                                      (4, "feedback")]
    assert (entries[-1].delta, entries[-1].verified_count) == ((), None)


def test_turn_diff_shows_a_committed_file_over_the_cap_as_binary_never_reading_it(
        looped: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A turn commit pushed with a task file of gigabytes (the cap monkeypatched small): the diff names
    # it as git names a binary file, and no git answer holds it.
    from guardkit_state.store import reads

    from .conftest import commit_on_branch, git_answer_sizes

    commit_on_branch(looped, f"autobuild/{TASK_ID}", TASK_FILE, b"a line of the task file\n" * 400,
                     f"autobuild({TASK_ID}): turn 4 feedback\n\nTask: {TASK_ID}\nTurn: 4\nDecision: feedback\n"
                     "Mode: continuing_work\n")
    monkeypatch.setattr(reads, "MAX_FILE_BYTES", 5000)
    answers = git_answer_sizes(monkeypatch)
    diff = turn_diff(looped, TASK_ID, 4)
    assert f"Binary files a/{TASK_FILE} and b/{TASK_FILE} differ" in diff
    assert max(answers) < 5000, answers
