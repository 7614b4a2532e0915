"""The loop-state merge driver on real ``git merge``s of task files and plans changed on both sides."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from guardkit_state.git.merge_driver_setup import registration, unregistered_note
from guardkit_state.git.repo import GitRepo
from tests.conftest import run_git

TASK = "tasks/backlog/TASK-A-001.md"
PLAN = ".guardkit/features/FEAT-A.yaml"

TASK_TEXT = """\
---
id: TASK-A-001
title: JWT login   # the user's comment
status: in_progress
tags: [auth, jwt]
autobuild_state:
  current_turn: 1
  max_turns: 5
  outcome: null
  criteria:
    AC-1: pending
    AC-2: pending
  turns:
  - turn: 1
    decision: feedback
    feedback: more tests
---
# JWT login

First paragraph.

Middle paragraph.

Last paragraph.
"""

PLAN_TEXT = """\
# the plan's comment
id: FEAT-A
name: Auth
status: in_progress
tasks:
- id: TASK-A-001
  file_path: tasks/backlog/TASK-A-001.md
  dependencies: []
  status: pending
- id: TASK-A-002
  file_path: tasks/backlog/TASK-A-002.md
  dependencies: []
  status: pending
execution:
  current_wave: 1
  completed_waves: []
  tasks_completed: 0
"""


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "guardkit_state", *args], cwd=cwd, capture_output=True,
                          text=True, check=False)


def git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)


@pytest.fixture
def repo(git_repo: Path) -> Path:
    for rel, text in ((TASK, TASK_TEXT), (PLAN, PLAN_TEXT)):
        (git_repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (git_repo / rel).write_text(text)
    installed = cli(git_repo, "merge-driver", "--install")
    assert installed.returncode == 0, installed.stderr
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "base")
    return git_repo


def edit(root: Path, rel: str, *pairs: tuple[str, str]) -> None:
    text = (root / rel).read_text()
    for old, new in pairs:
        assert old in text, old
        text = text.replace(old, new, 1)
    (root / rel).write_text(text)


def both_sides(root: Path, rel: str, ours: list[tuple[str, str]], theirs: list[tuple[str, str]]) -> None:
    run_git(root, "checkout", "-qb", "side")
    edit(root, rel, *theirs)
    run_git(root, "commit", "-qam", "theirs")
    run_git(root, "checkout", "-q", "main")
    edit(root, rel, *ours)
    run_git(root, "commit", "-qam", "ours")


def frontmatter(text: str) -> dict[str, object]:
    data = yaml.safe_load(text.split("---\n")[1])
    assert isinstance(data, dict)
    return data


def test_install_writes_attributes_and_config_and_check_says_so(git_repo: Path) -> None:
    before = cli(git_repo, "merge-driver", "--check")
    assert before.returncode == 1 and "not registered" in before.stdout
    first = cli(git_repo, "merge-driver", "--install", "--json")
    assert first.returncode == 0, first.stderr
    answer = json.loads(first.stdout)
    assert answer["registered"] is True and len(answer["changed"]) == 2
    assert "merge=guardkit-state" in (git_repo / ".gitattributes").read_text()
    again = json.loads(cli(git_repo, "merge-driver", "--install", "--json").stdout)
    assert again["changed"] == []  # nothing written twice
    assert (git_repo / ".gitattributes").read_text().count("tasks/**/*.md") == 1
    assert cli(git_repo, "merge-driver", "--check").returncode == 0


def test_task_file_changed_on_both_sides_merges_key_by_key(repo: Path) -> None:
    both_sides(
        repo, TASK,
        ours=[("tags: [auth, jwt]", "tags: [auth, jwt, api]"), ("AC-2: pending", "AC-2: rejected"),
              ("First paragraph.", "First paragraph, ours.")],
        theirs=[("status: in_progress", "status: in_review"), ("current_turn: 1", "current_turn: 2"),
                ("outcome: null", "outcome: approved"), ("AC-1: pending", "AC-1: verified"),
                ("    feedback: more tests\n", "    feedback: more tests\n  - turn: 2\n    decision: approve\n"),
                ("Last paragraph.", "Last paragraph, theirs.")],
    )
    merged = git(repo, "merge", "--no-edit", "side")
    assert merged.returncode == 0, merged.stdout + merged.stderr
    text = (repo / TASK).read_text()
    data = frontmatter(text)
    state = data["autobuild_state"]
    assert isinstance(state, dict)
    assert data["status"] == "in_review" and data["tags"] == ["auth", "jwt", "api"]
    assert [t["turn"] for t in state["turns"]] == [1, 2] and state["current_turn"] == 2
    assert state["criteria"] == {"AC-1": "verified", "AC-2": "rejected"}
    assert state["outcome"] == "approved"
    assert "title: JWT login   # the user's comment\n" in text  # an untouched key keeps its bytes
    assert "First paragraph, ours." in text and "Last paragraph, theirs." in text


def test_a_scalar_changed_both_ways_is_a_conflict_with_markers(repo: Path) -> None:
    both_sides(repo, TASK, ours=[("title: JWT login", "title: Login with JWT")],
               theirs=[("title: JWT login", "title: JWT sign-in"), ("AC-1: pending", "AC-1: verified")])
    merged = git(repo, "merge", "--no-edit", "side")
    assert merged.returncode != 0
    assert "conflict: title: ours 'Login with JWT', theirs 'JWT sign-in'" in merged.stderr + merged.stdout
    text = (repo / TASK).read_text()
    assert "<<<<<<< ours\ntitle: Login with JWT" in text and "=======\ntitle: JWT sign-in" in text
    assert "AC-1: verified" in text  # what did merge is merged
    assert TASK in run_git(repo, "diff", "--name-only", "--diff-filter=U")


def test_one_turn_recorded_differently_on_both_sides_conflicts(repo: Path) -> None:
    extra = "    feedback: more tests\n"
    both_sides(repo, TASK, ours=[(extra, extra + "  - turn: 2\n    decision: approve\n")],
               theirs=[(extra, extra + "  - turn: 2\n    decision: feedback\n")])
    merged = git(repo, "merge", "--no-edit", "side")
    assert merged.returncode != 0
    assert "autobuild_state.turns[turn=2].decision" in merged.stderr + merged.stdout


def test_status_moves_forward_whichever_side_is_ours(repo: Path) -> None:
    both_sides(repo, TASK, ours=[("status: in_progress", "status: completed")],
               theirs=[("status: in_progress", "status: in_review")])
    assert git(repo, "merge", "--no-edit", "side").returncode == 0
    assert frontmatter((repo / TASK).read_text())["status"] == "completed"


def test_plan_tasks_merge_by_id_with_statuses_forward(repo: Path) -> None:
    both_sides(
        repo, PLAN,
        ours=[("  status: pending\n- id: TASK-A-002",
               "  status: completed\n  turns_completed: 2\n- id: TASK-A-002"),
              ("tasks_completed: 0", "tasks_completed: 1")],
        theirs=[("  status: pending\nexecution", "  status: in_progress\nexecution"),
                ("  status: pending\n- id: TASK-A-002", "  status: in_progress\n- id: TASK-A-002"),
                ("completed_waves: []", "completed_waves: [1]")],
    )
    merged = git(repo, "merge", "--no-edit", "side")
    assert merged.returncode == 0, merged.stdout + merged.stderr
    text = (repo / PLAN).read_text()
    plan = yaml.safe_load(text)
    assert [(t["id"], t["status"]) for t in plan["tasks"]] == [("TASK-A-001", "completed"),
                                                                ("TASK-A-002", "in_progress")]
    assert plan["tasks"][0]["turns_completed"] == 2
    assert plan["execution"]["completed_waves"] == [1] and plan["execution"]["tasks_completed"] == 1
    assert text.startswith("# the plan's comment\nid: FEAT-A\n")


def test_plan_statuses_at_one_step_conflict(repo: Path) -> None:
    both_sides(repo, PLAN, ours=[("  status: pending\n- id: TASK-A-002", "  status: completed\n- id: TASK-A-002")],
               theirs=[("  status: pending\n- id: TASK-A-002", "  status: failed\n- id: TASK-A-002")])
    merged = git(repo, "merge", "--no-edit", "side")
    assert merged.returncode != 0
    assert "tasks[id=TASK-A-001].status: ours 'completed', theirs 'failed'" in merged.stderr + merged.stdout


def test_without_the_driver_git_merges_as_text_and_the_note_says_so(git_repo: Path) -> None:
    (git_repo / TASK).parent.mkdir(parents=True)
    (git_repo / TASK).write_text(TASK_TEXT)
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "base")
    last = "    feedback: more tests\n"
    two = last + "  - turn: 2\n    decision: approve\n"
    both_sides(git_repo, TASK, ours=[(last, two)], theirs=[(last, two + "  - turn: 3\n    decision: approve\n")])
    assert git(git_repo, "merge", "--no-edit", "side").returncode != 0  # text merge: both appended
    repo = GitRepo.discover(git_repo)
    assert repo is not None and not registration(repo).registered
    note = unregistered_note(repo, [TASK, "src/app.py"])
    assert note is not None and TASK in note and "merge-driver --install" in note
    assert unregistered_note(repo, ["src/app.py"]) is None


def test_driver_called_by_hand_takes_git_arguments(tmp_path: Path) -> None:
    files = {}
    for name, text in (("base", TASK_TEXT), ("ours", TASK_TEXT.replace("AC-1: pending", "AC-1: verified")),
                       ("theirs", TASK_TEXT.replace("AC-2: pending", "AC-2: verified"))):
        files[name] = tmp_path / name
        files[name].write_text(text)
    done = cli(tmp_path, "merge-driver", str(files["base"]), str(files["ours"]), str(files["theirs"]), TASK)
    assert done.returncode == 0, done.stderr
    state = frontmatter(files["ours"].read_text())["autobuild_state"]
    assert isinstance(state, dict) and state["criteria"] == {"AC-1": "verified", "AC-2": "verified"}
    assert cli(tmp_path, "merge-driver", str(files["base"])).returncode == 2


TURN_1 = "  - turn: 1\n    decision: feedback\n    feedback: more tests\n"
TURN_2 = "  - turn: 2\n    decision: feedback\n    feedback: still one test\n"
TURN_3 = "  - turn: 3\n    decision: approve\n"


@pytest.fixture
def two_turns(repo: Path) -> Path:
    """The task with turns 1 and 2 recorded and AC-1 verified, committed as the base."""
    edit(repo, TASK, ("AC-1: pending", "AC-1: verified"), (TURN_1, TURN_1 + TURN_2),
         ("current_turn: 1", "current_turn: 2"))
    run_git(repo, "commit", "-qam", "turn 2")
    return repo


@pytest.mark.parametrize(("theirs", "named"), [
    ([(TURN_1, "")], "autobuild_state.turns[turn=1]: theirs deletes recorded turn 1"),
    ([(TURN_1 + TURN_2, ""), ("  turns:\n", "  turns: []\n")], "autobuild_state.turns[turn=1]: theirs deletes"),
], ids=["one-entry", "every-entry"])
def test_a_recorded_turn_deleted_on_one_side_is_a_conflict_naming_it(two_turns: Path, theirs: list[tuple[str, str]],
                                                                    named: str) -> None:
    both_sides(two_turns, TASK, ours=[(TURN_2, TURN_2 + TURN_3), ("current_turn: 2", "current_turn: 3")],
               theirs=theirs)
    merged = git(two_turns, "merge", "--no-edit", "side")
    told = merged.stderr + merged.stdout
    assert merged.returncode != 0, told
    assert named in told and "a merge never drops recorded history" in told
    text = (two_turns / TASK).read_text()
    assert "<<<<<<< ours\n" in text and ">>>>>>> theirs\n" in text
    assert TASK in run_git(two_turns, "diff", "--name-only", "--diff-filter=U")


def test_a_turn_deleted_on_one_side_left_otherwise_as_the_base_is_still_a_conflict(two_turns: Path) -> None:
    both_sides(two_turns, TASK, ours=[("title: JWT login", "title: Login with JWT")], theirs=[(TURN_1, "")])
    merged = git(two_turns, "merge", "--no-edit", "side")
    assert merged.returncode != 0
    assert "autobuild_state.turns[turn=1]: theirs deletes recorded turn 1" in merged.stderr + merged.stdout


def test_a_state_block_deleted_on_one_side_is_a_conflict_naming_its_turns(two_turns: Path) -> None:
    text = (two_turns / TASK).read_text()
    block = text[text.index("autobuild_state:"):text.index("---\n# JWT")]
    both_sides(two_turns, TASK, ours=[("title: JWT login", "title: Login with JWT")], theirs=[(block, "")])
    merged = git(two_turns, "merge", "--no-edit", "side")
    assert merged.returncode != 0
    assert "autobuild_state: theirs deletes recorded turns 1, 2 and un-verifies AC-1" in merged.stderr + merged.stdout


def test_a_criterion_unverified_on_one_side_without_a_later_turn_is_a_conflict(two_turns: Path) -> None:
    both_sides(two_turns, TASK, ours=[("tags: [auth, jwt]", "tags: [auth]")],
               theirs=[("AC-1: verified", "AC-1: pending")])
    merged = git(two_turns, "merge", "--no-edit", "side")
    assert merged.returncode != 0
    assert "autobuild_state.criteria.AC-1: theirs un-verifies AC-1 (verified in the base) without a later turn" \
        in merged.stderr + merged.stdout


def test_a_later_turn_that_rejects_a_verified_criterion_merges(two_turns: Path) -> None:
    # The Coach of turn 3 found a regression: recorded history, not a deletion.
    both_sides(two_turns, TASK, ours=[("tags: [auth, jwt]", "tags: [auth]")],
               theirs=[("AC-1: verified", "AC-1: rejected"), (TURN_2, TURN_2 + TURN_3.replace("approve", "feedback"))])
    merged = git(two_turns, "merge", "--no-edit", "side")
    assert merged.returncode == 0, merged.stderr + merged.stdout
    state = frontmatter((two_turns / TASK).read_text())["autobuild_state"]
    assert isinstance(state, dict) and state["criteria"]["AC-1"] == "rejected"
    assert [t["turn"] for t in state["turns"]] == [1, 2, 3]


def test_driver_refuses_a_side_over_the_cap_unread_and_leaves_ours_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # A task file of gigabytes on a task branch (the cap monkeypatched small): git's merge hands it to
    # the driver, which reads it as a file on disk is read: refused before it is read, and git
    # takes the driver's failure as a conflict (nothing merged).
    from guardkit_state.cli.app import run as cli_run
    from guardkit_state.store import reads

    files = {name: tmp_path / name for name in ("base", "ours", "theirs")}
    for name, file in files.items():
        file.write_text(TASK_TEXT + ("x" * 200 if name == "theirs" else ""))
    limit = len(TASK_TEXT) + 100
    monkeypatch.setitem(reads.read_bytes_capped.__kwdefaults__, "limit", limit)
    code = cli_run(["merge-driver", *(str(files[name]) for name in ("base", "ours", "theirs")), TASK])
    captured = capsys.readouterr()
    assert (code, captured.out) == (2, "")
    assert captured.err == (f"error: {files['theirs']}: file is {len(TASK_TEXT) + 200} bytes, over the {limit}-byte "
                            f"limit (expected at most {limit} bytes)\n")
    assert files["ours"].read_text() == TASK_TEXT
