"""TaskFile: reading task files, surgical atomic writes, criteria extraction, finding by exact id."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from guardkit_state.errors import (
    DuplicateKeyError,
    FileTooLargeError,
    FrontmatterError,
    InvalidTaskIdError,
    ParseError,
    TaskNotFoundError,
)
from guardkit_state.model import Criterion
from guardkit_state.store.turn_files import TurnStore
from guardkit_state.taskfile.criteria_text import extract_criteria
from guardkit_state.taskfile.discovery import iter_task_files, task_id_from_filename
from guardkit_state.taskfile.document import TaskFile, read_task_settled
from guardkit_state.taskfile.frontmatter import parse_frontmatter
from guardkit_state.taskfile.resolve import find_task
from guardkit_state.taskfile.splice import StateUpdate

TASK = """\
---
id: TASK-AUTH-001
title: Add login
status: in_progress
task_type: feature
complexity: 4
feature_id: FEAT-AUTH
autobuild_state:
  current_turn: 1
  max_turns: 5
  worktree_path: .guardkit/worktrees/TASK-AUTH-001
  base_branch: main
  started_at: '2026-11-21T10:00:00+00:00'
  last_updated: '2026-11-21T10:05:00+00:00'
  turns:
  - turn: 1
    decision: feedback
    feedback: Missing token refresh mechanism
    timestamp: '2026-11-21T10:05:00+00:00'
    player_summary: Implemented JWT login endpoint
    player_success: true
    coach_success: true
---

# Add login

## Acceptance Criteria

- [x] Login endpoint returns a JWT
- [ ] Tokens can be refreshed
"""


def turn(n: int, **extra: Any) -> dict[str, Any]:
    return {"turn": n, "mode": "continuing_work", "decision": "approve", "feedback": None,
            "timestamp": f"2026-11-21T10:{10 + n:02d}:00+00:00", "player_summary": f"turn {n}",
            "player_success": True, "coach_success": True, **extra}


def record(n: int, **extra: Any) -> StateUpdate:
    return StateUpdate(
        block_scalars={"current_turn": n, "last_updated": f"2026-11-21T10:{10 + n:02d}:00+00:00"},
        append_turns=[turn(n)],
        **extra,
    )


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path


@pytest.fixture
def task_path(tmp_path: Path) -> Path:
    return write(tmp_path / "tasks" / "in_progress" / "TASK-AUTH-001-add-login.md", TASK)


# --------------------------------------------------------------------------- load


def test_load_reads_frontmatter_state_and_criteria(task_path: Path) -> None:
    task = TaskFile.load(task_path)
    assert task.task_id == "TASK-AUTH-001"
    assert (task.title, task.status, task.task_type, task.complexity, task.feature_id) == (
        "Add login", "in_progress", "feature", 4, "FEAT-AUTH")
    assert task.state is not None
    assert task.state_key == "autobuild_state"
    assert task.state.current_turn == 1
    assert task.state.next_turn == 2
    assert task.state.turns[0].feedback == "Missing token refresh mechanism"
    assert task.criteria == [
        Criterion("AC-001", "Login endpoint returns a JWT", checked=True),
        Criterion("AC-002", "Tokens can be refreshed", checked=False),
    ]
    assert task.body.startswith("\n# Add login")
    assert task.text == TASK


def test_load_task_id_from_filename_when_frontmatter_has_none(tmp_path: Path) -> None:
    path = write(tmp_path / "TASK-FIX-RWOP1.1-wire-feature-plan.md", "---\ntitle: x\n---\nbody\n")
    task = TaskFile.load(path)
    assert task.task_id == "TASK-FIX-RWOP1.1"
    assert task.state is None
    assert task.state_key == "autobuild_state"


@pytest.mark.parametrize(
    ("name", "expected"),
    [("TASK-SFT-009-quality-gate-update.md", "TASK-SFT-009"), ("TASK-020.md", "TASK-020"),
     ("TASK-REV-47D2-plan-implement.md", "TASK-REV-47D2"), ("TASK-ABC-1.md", "TASK-ABC-1")],
)
def test_task_id_from_filename(name: str, expected: str) -> None:
    assert task_id_from_filename(name) == expected


def test_load_legacy_feature_build_key(tmp_path: Path) -> None:
    path = write(tmp_path / "TASK-AUTH-001.md", TASK.replace("autobuild_state:", "feature_build:"))
    task = TaskFile.load(path)
    assert task.state_key == "feature_build"
    assert task.state is not None and task.state.key == "feature_build"
    task.apply(record(2))
    data = parse_frontmatter(path.read_text()).data
    assert "autobuild_state" not in data
    assert [t["turn"] for t in data["feature_build"]["turns"]] == [1, 2]


def test_load_errors_are_typed_with_lines(tmp_path: Path) -> None:
    bad = write(tmp_path / "a.md", "---\nid: T-1\ntitle: one: two\n---\n")
    with pytest.raises(FrontmatterError) as info:
        TaskFile.load(bad)
    assert (info.value.path, info.value.line) == (bad, 3)
    dup = write(tmp_path / "b.md", "---\nstatus: a\nstatus: b\n---\n")
    assert TaskFile.load(dup).status == "b"  # read as GuardKit reads it; writing it is refused
    with pytest.raises(DuplicateKeyError) as dup_info:
        TaskFile.load(dup).apply(StateUpdate(top_level={"status": "c"}))
    assert dup_info.value.line == 3
    utf = tmp_path / "c.md"
    utf.write_bytes(b"---\nid: T-1\ntitle: \xff\n---\n")
    with pytest.raises(ParseError) as utf_info:
        TaskFile.load(utf)
    assert utf_info.value.line == 3


def test_load_state_with_a_wrong_shape_names_the_pointer(tmp_path: Path) -> None:
    path = write(tmp_path / "a.md", "---\nid: T-1\nautobuild_state:\n  turns:\n  - decision: x\n---\n")
    with pytest.raises(FrontmatterError) as info:
        TaskFile.load(path)
    assert info.value.pointer == "$.autobuild_state.turns[0].decision"  # the value itself, by its schema
    assert info.value.line == 5


def test_load_refuses_oversized_files(tmp_path: Path) -> None:
    path = tmp_path / "big.md"
    with open(path, "wb") as handle:
        handle.truncate(9 * 1024 * 1024)
    with pytest.raises(FileTooLargeError):
        TaskFile.load(path)


# --------------------------------------------------------------------------- apply


def test_apply_appends_and_reflects_the_new_state_in_memory(task_path: Path) -> None:
    task = TaskFile.load(task_path)
    update = record(2, criteria={"AC-001": "verified", "AC-002": "pending"}, top_level={"status": "in_review"})
    result = task.apply(update)
    assert result.method == "splice"
    on_disk = task_path.read_text()
    assert task.text == on_disk
    assert not task.is_stale()
    assert task.state is not None
    assert [t.turn for t in task.state.turns] == [1, 2]
    assert task.state.turns[1].mode == "continuing_work"
    assert task.state.current_turn == 2
    assert task.state.last_updated == "2026-11-21T10:12:00+00:00"
    assert task.state.criteria == {"AC-001": "verified", "AC-002": "pending"}
    assert task.status == "in_review"
    # the in-memory view equals a fresh load
    fresh = TaskFile.load(task_path)
    assert fresh.data == task.data
    assert fresh.state == task.state
    assert fresh.body == task.body


def test_apply_noop_writes_nothing(task_path: Path) -> None:
    task = TaskFile.load(task_path)
    before = os.stat(task_path)
    result = task.apply(StateUpdate(block_scalars={"current_turn": 1}, top_level={"status": "in_progress"}))
    assert result.method == "noop"
    after = os.stat(task_path)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert task_path.read_bytes() == TASK.encode()


def test_apply_keeps_the_file_mode(task_path: Path) -> None:
    os.chmod(task_path, 0o640)
    TaskFile.load(task_path).apply(record(2))
    assert stat.S_IMODE(os.stat(task_path).st_mode) == 0o640
    assert not [p for p in task_path.parent.iterdir() if p.name.startswith(".gks-tmp-")]


def test_apply_reapplies_over_an_editor_save(task_path: Path) -> None:
    task = TaskFile.load(task_path)
    # an editor saves between load and apply: a new criterion and a comment in the block
    edited = TASK.replace("- [ ] Tokens can be refreshed\n", "- [ ] Tokens can be refreshed\n- [ ] Logout works\n")
    edited = edited.replace("  base_branch: main\n", "  base_branch: main  # edited by hand\n")
    task_path.write_text(edited)
    assert task.is_stale()
    result = task.apply(record(2))
    assert result.method == "splice"
    text = task_path.read_text()
    assert "- [ ] Logout works\n" in text
    assert "  base_branch: main  # edited by hand\n" in text
    assert [t["turn"] for t in parse_frontmatter(text).data["autobuild_state"]["turns"]] == [1, 2]
    assert task.text == text
    assert [c.text for c in task.criteria][-1] == "Logout works"


def test_apply_over_an_editor_save_that_broke_the_file_raises_and_writes_nothing(task_path: Path) -> None:
    task = TaskFile.load(task_path)
    task_path.write_text(TASK.replace("title: Add login", "title: Add: login"))
    with pytest.raises(FrontmatterError):
        task.apply(record(2))
    assert "title: Add: login" in task_path.read_text()


def test_apply_successive_turns(task_path: Path) -> None:
    task = TaskFile.load(task_path)
    for n in range(2, 6):
        task.apply(record(n))
    data = parse_frontmatter(task_path.read_text()).data["autobuild_state"]
    assert [t["turn"] for t in data["turns"]] == [1, 2, 3, 4, 5]
    assert data["current_turn"] == 5
    assert TaskFile.load(task_path).state == task.state


def test_apply_creates_the_block_in_a_file_without_one(tmp_path: Path) -> None:
    path = write(tmp_path / "TASK-X-1.md",
                 "---\nid: TASK-X-1\nstatus: backlog\n---\n\n## Acceptance Criteria\n\n- [ ] a\n")
    task = TaskFile.load(path)
    assert task.state is None
    task.apply(StateUpdate(block_scalars={"current_turn": 0, "max_turns": 5},
                           criteria={"AC-001": "pending"}))
    assert task.state is not None and task.state.max_turns == 5
    assert task.state.criteria == {"AC-001": "pending"}
    assert TaskFile.load(path).state == task.state


def test_apply_creates_frontmatter_in_a_file_without_any(tmp_path: Path) -> None:
    path = write(tmp_path / "TASK-X-2.md", "# Task\n\n## Acceptance Criteria\n\n- [ ] a\n")
    task = TaskFile.load(path)
    task.apply(record(1))
    assert path.read_text().endswith("---\n# Task\n\n## Acceptance Criteria\n\n- [ ] a\n")
    assert task.has_frontmatter
    assert TaskFile.load(path).state == task.state
    assert task.criteria == [Criterion("AC-001", "a")]


def test_apply_crlf_and_bom_file(tmp_path: Path) -> None:
    raw = ("\ufeff" + TASK.replace("\n", "\r\n")).encode("utf-8")
    path = tmp_path / "TASK-AUTH-001.md"
    path.write_bytes(raw)
    task = TaskFile.load(path)
    assert task.task_id == "TASK-AUTH-001"
    task.apply(record(2))
    out = path.read_bytes()
    assert out.startswith(b"\xef\xbb\xbf---\r\n")
    assert b"\n" not in out.replace(b"\r\n", b"")
    assert [t.turn for t in TaskFile.load(path).state.turns] == [1, 2]  # type: ignore[union-attr]


# --------------------------------------------------------------------------- criteria


def test_extract_criteria_variants() -> None:
    body = """
# Task

## Description

- [ ] not a criterion (wrong section)

## Acceptance Criteria

### Functional

- [ ] First line of one
      continued on the next line
      - `detail` sub-bullet belongs to it
* [X] Star bullet checked

```
- [ ] inside a code fence: ignored
```

### Non-functional

   - [ ] nested under a numbered step

## Implementation Notes

- [ ] after the section: ignored
"""
    criteria = extract_criteria({}, body)
    assert [(c.id, c.checked) for c in criteria] == [("AC-001", False), ("AC-002", True), ("AC-003", False)]
    # Continuation lines are folded into one line of text.
    assert criteria[0].text == "First line of one continued on the next line - `detail` sub-bullet belongs to it"
    assert criteria[1].text == "Star bullet checked"
    assert criteria[2].text == "nested under a numbered step"


def test_extract_criteria_section_heading_variants() -> None:
    body = "## Acceptance criteria (Machine-Verifiable)\n\n- [ ] one\n"
    assert [c.text for c in extract_criteria({}, body)] == ["one"]


def test_extract_criteria_numbered_list_without_checkboxes() -> None:
    body = "## Acceptance Criteria\n\n1. First\n   - detail\n2. Second\n"
    assert [c.text for c in extract_criteria({}, body)] == ["First", "Second"]


def test_extract_criteria_from_frontmatter_list() -> None:
    data = {"acceptance_criteria": ["Plain string", {"text": "Dict text"}, {"description": "Described"}, ""]}
    assert [(c.id, c.text) for c in extract_criteria(data, "no section\n")] == [
        ("AC-001", "Plain string"), ("AC-002", "Dict text"), ("AC-003", "Described")]


def test_extract_criteria_frontmatter_list_wins_over_body() -> None:
    # GuardKit's own order: a frontmatter acceptance_criteria list comes first.
    data = {"acceptance_criteria": ["from frontmatter"]}
    assert [c.text for c in extract_criteria(data, "## Acceptance Criteria\n- [ ] from body\n")] == ["from frontmatter"]


def test_extract_criteria_none() -> None:
    assert extract_criteria({}, "# Nothing here\n") == []


# --------------------------------------------------------------------------- find


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write(root / "tasks" / "backlog" / "TASK-ABC-10-x.md", "---\nid: TASK-ABC-10\n---\n")
    write(root / "tasks" / "backlog" / "TASK-ABC-1-2-y.md", "---\nid: TASK-ABC-1-2\n---\n")
    write(root / "tasks" / "in_progress" / "TASK-ABC-1-login.md", "---\nid: TASK-ABC-1\n---\n")
    write(root / "tasks" / "completed" / "TASK-DEF-2" / "TASK-DEF-2.md", "---\nid: TASK-DEF-2\n---\n")
    write(root / "tasks" / "completed" / "TASK-DEF-2" / "code-review.md", "review\n")
    write(root / "tasks" / "backlog" / "README.md", "# readme\n")
    return root


def test_find_task_exact_id_not_prefix(repo: Path) -> None:
    assert find_task(repo, "TASK-ABC-1") == repo / "tasks" / "in_progress" / "TASK-ABC-1-login.md"
    assert find_task(repo, "TASK-ABC-10") == repo / "tasks" / "backlog" / "TASK-ABC-10-x.md"
    assert find_task(repo, "TASK-ABC-1-2") == repo / "tasks" / "backlog" / "TASK-ABC-1-2-y.md"
    assert find_task(repo, "TASK-DEF-2") == repo / "tasks" / "completed" / "TASK-DEF-2" / "TASK-DEF-2.md"


def test_find_task_not_found_says_where(repo: Path) -> None:
    (repo / "tasks" / "in_progress" / "TASK-ABC-1-login.md").unlink()
    with pytest.raises(TaskNotFoundError) as info:
        find_task(repo, "TASK-ABC-1")
    assert str(repo / "tasks") in str(info.value)
    assert info.value.task_id == "TASK-ABC-1"


def test_find_task_several_copies_follow_guardkit_search_order(repo: Path) -> None:
    # Several copies are no longer an error: without loop state, backlog comes first (the rules
    # themselves are tested in test_resolve.py).
    write(repo / "tasks" / "backlog" / "TASK-ABC-1-copy.md", "---\nid: TASK-ABC-1\n---\n")
    assert find_task(repo, "TASK-ABC-1") == repo / "tasks" / "backlog" / "TASK-ABC-1-copy.md"


@pytest.mark.parametrize("bad", ["../etc/passwd", "TASK-1/../../x", "TASK\x00-1", "task id", ""])
def test_find_task_validates_the_id(repo: Path, bad: str) -> None:
    with pytest.raises(InvalidTaskIdError):
        find_task(repo, bad)


def test_find_task_skips_symlinks_leaving_the_repo(repo: Path, tmp_path: Path) -> None:
    outside = write(tmp_path / "outside" / "TASK-OUT-1.md", "---\nid: TASK-OUT-1\n---\n")
    (repo / "tasks" / "backlog" / "TASK-OUT-1.md").symlink_to(outside)
    with pytest.raises(TaskNotFoundError):
        find_task(repo, "TASK-OUT-1")
    inside = repo / "tasks" / "in_progress" / "TASK-ABC-1-login.md"
    (repo / "tasks" / "backlog" / "TASK-IN-1.md").symlink_to(inside)
    assert find_task(repo, "TASK-IN-1") == repo / "tasks" / "backlog" / "TASK-IN-1.md"


def test_iter_task_files_skips_readmes_and_reports(repo: Path) -> None:
    names = [p.name for p in iter_task_files(repo)]
    # sorted walk: directories in name order, files in name order inside each
    assert names == ["TASK-ABC-1-2-y.md", "TASK-ABC-10-x.md", "TASK-DEF-2.md", "TASK-ABC-1-login.md"]
    assert list(iter_task_files(repo / "nowhere")) == []


def test_a_settled_read_left_behind_its_store_is_confirmed_without_waiting_its_pauses_again(tmp_path: Path) -> None:
    # A kill between a turn's state and its frontmatter append leaves the file a turn behind the store.
    # The settled read waits out its pauses once (an editor saving in place would be done by then);
    # confirming the file, unchanged since, must not wait them out again: a resume slept through both
    # (~1.5 s) before it rolled the turn forward, and a campaign killing every resume within a run's
    # time never saw one finish.
    path = tmp_path / "TASK-X.md"
    path.write_text("---\nid: TASK-X\nstatus: in_progress\n---\n# Task\n", encoding="utf-8")
    store = TurnStore(tmp_path / "store", "TASK-X")
    store.path("turn_state", 1).parent.mkdir(parents=True)
    store.path("turn_state", 1).write_text("{}", encoding="utf-8")
    task = read_task_settled(path, store, confirm=False)
    assert task.looks_half_saved(store)
    assert task.confirmed(store) is task
    other = TurnStore(tmp_path / "other", "TASK-X")  # waited out for that store, not for another
    other.path("turn_state", 1).parent.mkdir(parents=True)
    other.path("turn_state", 1).write_text("{}", encoding="utf-8")
    assert task.confirmed(other) is not task
    path.write_text("---\nid: TASK-X\nstatus: in_review\n---\n# Task\n", encoding="utf-8")  # changed since: read again
    again = task.confirmed(store)
    assert again is not task and again.status == "in_review"
