"""A write is verified before it lands: the new text is re-read and compared with the intent.

The splice is simulated going wrong (its edits corrupted after the fact); the verification must
refuse with a typed error naming the file and the first differing key, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from guardkit_state.errors import FrontmatterError, WriteVerificationError
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.taskfile.splice import StateUpdate, splice_state
from guardkit_state.yamltext import positions as splice_positions

TEXT = """\
---
id: TASK-V-1
title: Verify   # keep me
status: backlog
priority: 1
Jira ticket: X-12
autobuild_state:
  current_turn: 1
  criteria:
    AC-001: pending
  turns:
  - turn: 1
    decision: feedback
---
body
"""

TURN_2: dict[str, Any] = {"turn": 2, "decision": "approve", "timestamp": "2026-11-21T10:12:00+00:00"}
UPDATE = StateUpdate(block_scalars={"current_turn": 2}, criteria={"AC-001": "verified"},
                     append_turns=[TURN_2], top_level={"status": "in_review"})


def _corrupt(monkeypatch: pytest.MonkeyPatch, change: Callable[[str], str]) -> None:
    """Make every splice produce its text and then ``change`` it, as a splice bug would."""
    real = splice_positions.Edits.apply

    def broken(self: splice_positions.Edits, text: str) -> str:
        return change(real(self, text))

    monkeypatch.setattr(splice_positions.Edits, "apply", broken)


def _task(tmp_path: Path, text: str = TEXT) -> TaskFile:
    path = tmp_path / "TASK-V-1-verify.md"
    path.write_bytes(text.encode())
    return TaskFile.load(path)


@pytest.mark.parametrize(("change", "pointer"), [
    (lambda t: t.replace("priority: 1\n", "priority: true\n"), "$.priority"),
    (lambda t: t.replace("priority: 1\n", "priority: 1.0\n"), "$.priority"),
    (lambda t: t.replace("Jira ticket: X-12\n", ""), "$['Jira ticket']"),
    (lambda t: t.replace("title: Verify", "title: Verified"), "$.title"),
    (lambda t: t.replace("status: in_review", "status: done"), "$.status"),
    (lambda t: t.replace("priority: 1\nJira ticket: X-12\n", "Jira ticket: X-12\npriority: 1\n"), "$.priority"),
    (lambda t: t.replace("    AC-001: verified\n", "    AC-001: pending\n"), "$.autobuild_state.criteria['AC-001']"),
    (lambda t: t.replace("  - turn: 2\n", "  - turn: 3\n"), "$.autobuild_state.turns[1].turn"),
    (lambda t: t.replace("  current_turn: 2\n", "  current_turn: '2'\n"), "$.autobuild_state.current_turn"),
    (lambda t: t + "extra: 1\n", "$.extra"),
])
def test_a_splice_that_changes_other_data_is_refused_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Callable[[str], str], pointer: str
) -> None:
    task = _task(tmp_path)
    _corrupt(monkeypatch, change)
    with pytest.raises(WriteVerificationError) as info:
        task.apply(UPDATE)
    assert info.value.pointer == pointer
    assert info.value.path == task.path
    assert pointer in str(info.value) and task.path.name in str(info.value)
    assert task.path.read_bytes() == TEXT.encode()
    assert sorted(p.name for p in tmp_path.iterdir()) == [task.path.name]  # no temp file left either


def test_a_splice_that_breaks_the_yaml_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = _task(tmp_path)
    _corrupt(monkeypatch, lambda t: t.replace("  - turn: 2\n", "  - turn: [2\n"))
    with pytest.raises(WriteVerificationError, match="does not parse"):
        task.apply(UPDATE)
    assert task.path.read_bytes() == TEXT.encode()


def test_bytes_outside_the_changed_lines_must_be_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = _task(tmp_path)
    # A comment is invisible to the data comparison; the byte comparison still sees it.
    _corrupt(monkeypatch, lambda t: t.replace("# keep me", "# lost"))
    with pytest.raises(WriteVerificationError, match="outside"):
        task.apply(UPDATE)
    assert task.path.read_bytes() == TEXT.encode()


def test_the_body_must_be_byte_identical(monkeypatch: pytest.MonkeyPatch) -> None:
    _corrupt(monkeypatch, lambda t: t + "---\n")  # an early closing line moves the old one into the body
    with pytest.raises(WriteVerificationError, match="body"):
        splice_state(TEXT, UPDATE, path="t.md")


def test_verification_is_part_of_splice_state_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    _corrupt(monkeypatch, lambda t: t.replace("priority: 1\n", "priority: 2\n"))
    with pytest.raises(WriteVerificationError) as info:
        splice_state(TEXT, UPDATE, path="t.md")
    assert info.value.pointer == "$.priority"


@pytest.mark.parametrize(("old", "new", "pointer"), [
    ("autobuild_state:\n", "autobuild_state: &st\n", "$.copy.current_turn"),
    ("status: backlog\n", "status: &s backlog\n", "$.copy"),
    ("  current_turn: 1\n", "  current_turn: &n 1\n", "$.copy"),
])
def test_an_alias_elsewhere_of_a_value_the_update_changes_is_refused_with_the_reason(
    tmp_path: Path, old: str, new: str, pointer: str
) -> None:
    """An alias *is* its anchored node: writing the update would change a key it does not set."""
    alias = {"&st": "*st", "&s ": "*s", "&n ": "*n"}
    target = next(a for anchor, a in alias.items() if anchor in new)
    task = _task(tmp_path, TEXT.replace(old, new).replace("---\nbody", f"copy: {target}\n---\nbody"))
    before = task.path.read_bytes()
    with pytest.raises(WriteVerificationError) as info:
        task.apply(UPDATE)
    assert info.value.pointer == pointer
    assert "alias" in str(info.value)
    assert task.path.read_bytes() == before


def test_an_anchor_nobody_aliases_elsewhere_is_kept_and_the_write_lands(tmp_path: Path) -> None:
    task = _task(tmp_path, TEXT.replace("autobuild_state:\n", "autobuild_state: &st\n")
                 .replace("    AC-001: pending\n", "    AC-001: &v pending\n"))
    assert task.apply(UPDATE).method == "splice"
    text = task.path.read_text()
    assert "autobuild_state: &st\n" in text and "AC-001: &v verified" in text
    assert TaskFile.load(task.path).data["autobuild_state"]["turns"][1]["turn"] == 2


def test_the_error_type_is_a_frontmatter_error() -> None:
    assert issubclass(WriteVerificationError, FrontmatterError)


def test_a_correct_write_lands_and_keeps_the_verified_parse(tmp_path: Path) -> None:
    task = _task(tmp_path)
    result = task.apply(UPDATE)
    assert result.method == "splice"
    again = TaskFile.load(task.path)
    assert again.data == task.data
    assert again.data["status"] == "in_review" and again.data["priority"] == 1


@pytest.mark.parametrize(("change", "pointer"), [
    (lambda t: t.replace("  - turn: 3\n", "  - turn: 4\n"), "$.autobuild_state.turns[2].turn"),  # the new turn
    (lambda t: t.replace("  - turn: 2\n", "  - turn: 5\n"), "$.autobuild_state.turns[1].turn"),  # a recorded one
    (lambda t: t.replace("  - turn: 1\n    decision: feedback\n", "  - turn: 1\n    decision: approve\n"),
     "$.autobuild_state.turns[0].decision"),
])
def test_a_write_after_a_write_still_refuses_a_changed_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Callable[[str], str], pointer: str
) -> None:
    """The second write locates its keys from the first one's read-back, which left the recorded
    turns out: a corrupted turn, recorded or new, is still found."""
    task = _task(tmp_path)
    task.apply(UPDATE)
    before = task.path.read_bytes()
    _corrupt(monkeypatch, change)
    turn_3 = {"turn": 3, "decision": "feedback", "timestamp": "2026-11-21T10:20:00+00:00"}
    with pytest.raises(WriteVerificationError) as info:
        task.apply(StateUpdate(block_scalars={"current_turn": 3}, append_turns=[turn_3]))
    assert info.value.pointer == pointer
    assert task.path.read_bytes() == before


def test_entries_above_the_state_block_are_located_after_writes(tmp_path: Path) -> None:
    """Writes after writes keep the entries above the state block in their places: a later write
    edits one of them exactly."""
    task = _task(tmp_path)
    for turn in (2, 3):
        task.apply(StateUpdate(block_scalars={"current_turn": turn},
                               append_turns=[{"turn": turn, "decision": "feedback"}]))
    task.apply(StateUpdate(block_scalars={"current_turn": 4}, append_turns=[{"turn": 4, "decision": "approve"}],
                           top_level={"status": "done", "priority": 2}))
    text = task.path.read_text()
    assert text.startswith("---\nid: TASK-V-1\ntitle: Verify   # keep me\nstatus: done\npriority: 2\n"
                           "Jira ticket: X-12\nautobuild_state:\n  current_turn: 4\n")
    assert TaskFile.load(task.path).data == task.data
    assert [t["turn"] for t in task.data["autobuild_state"]["turns"]] == [1, 2, 3, 4]


@pytest.mark.parametrize(("change", "pointer"), [
    (lambda t: t.replace("title: Verify", "title: Verified"), "$.title"),
    (lambda t: t.replace("Jira ticket: X-12\n", "Jira ticket: X-12\nid: TASK-V-2\n"), None),  # a repeated key
])
def test_a_changed_entry_above_the_state_block_is_refused_after_such_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Callable[[str], str], pointer: str | None
) -> None:
    task = _task(tmp_path)
    task.apply(UPDATE)
    before = task.path.read_bytes()
    _corrupt(monkeypatch, change)
    with pytest.raises(FrontmatterError) as info:
        task.apply(StateUpdate(block_scalars={"current_turn": 3}, append_turns=[{"turn": 3, "decision": "x"}]))
    assert pointer is None or info.value.pointer == pointer
    assert task.path.read_bytes() == before
