"""The write verification's shortcuts must never accept a text a full strict read judges different.

Two shortcuts leave bytes out of the read-back: every recorded turn when new turns are appended
after them, and the entries above the state block (read as blank comment lines). Those bytes are
identical to the old text, but what they *mean* also depends on what follows them: a line indented
under the last of them continues it, and a blank line lengthens a ``|+`` scalar. A splice bug that
writes such a line must be refused, as the full read refuses it; these tests make the splice write
one (as the other verification tests do) and check that nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from guardkit_state.errors import WriteVerificationError
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.taskfile.splice import layout as splice_layout
from guardkit_state.taskfile.splice.core import StateUpdate

TURN_2 = StateUpdate(block_scalars={"current_turn": 2}, append_turns=[{"turn": 2, "decision": "approve"}])


def _task(tmp_path: Path, frontmatter: str) -> TaskFile:
    path = tmp_path / "TASK-R4-1-review.md"
    path.write_bytes(f"---\n{frontmatter}---\nbody\n".encode())
    return TaskFile.load(path)


def _bent_edits(monkeypatch: pytest.MonkeyPatch, bend: Callable[[str], str | None]) -> None:
    """Make the splice write ``bend(text)`` for every edit text it returns a value for (a splice bug)."""
    real = splice_layout.Edits.add

    def add(self: splice_layout.Edits, start: int, end: int, text: str) -> None:
        bent = bend(text)
        real(self, start, end, text if bent is None else bent)

    monkeypatch.setattr(splice_layout.Edits, "add", add)


def _indented(by: int, marker: str) -> Callable[[str], str | None]:
    return lambda text: "".join(" " * by + line for line in text.splitlines(True)) if marker in text else None


def _refused(task: TaskFile, update: StateUpdate) -> None:
    before = task.path.read_bytes()
    with pytest.raises(WriteVerificationError):
        task.apply(update)
    assert task.path.read_bytes() == before
    assert TaskFile.load(task.path).data == task.data  # the object still holds what is on disk


RECORDED = "id: TASK-R4-1\nautobuild_state:\n  current_turn: 1\n  turns:\n  - turn: 1\n"
RECORDED_NULL_LAST = RECORDED + "    files:\n"
RECORDED_LITERAL_LAST = RECORDED + "    note: |\n      a\n"
RECORDED_KEEP_LAST = RECORDED + "    note: |+\n      a\n"


@pytest.mark.parametrize(("frontmatter", "bend"), [
    # The new turn indented under the last recorded one: a full read makes it that turn's 'files'.
    (RECORDED_NULL_LAST, _indented(2, "turn: 2")),
    (RECORDED_NULL_LAST, _indented(1, "turn: 2")),
    # ... or part of its literal scalar.
    (RECORDED_LITERAL_LAST, _indented(2, "turn: 2")),
    # A blank line before the new turn: a full read adds it to the last recorded turn's '|+' text.
    (RECORDED_KEEP_LAST, lambda text: "\n" + text if "turn: 2" in text else None),
], ids=["indented-under-null", "indented-by-one", "inside-literal", "blank-after-keep"])
def test_a_new_turn_that_changes_the_recorded_ones_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, frontmatter: str, bend: Callable[[str], str | None]
) -> None:
    task = _task(tmp_path, frontmatter)
    _bent_edits(monkeypatch, bend)
    _refused(task, TURN_2)


@pytest.mark.parametrize("head", ["notes:\n", "notes: |\n  text\n"], ids=["null", "literal"])
def test_a_state_block_swallowed_by_the_entry_above_it_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, head: str
) -> None:
    """A re-rendered block written indented: a full read makes it part of the entry above it."""
    task = _task(tmp_path, f"id: TASK-R4-1\n{head}autobuild_state: {{current_turn: 1, turns: [{{turn: 1}}]}}\n")
    _bent_edits(monkeypatch, _indented(2, "autobuild_state:"))
    _refused(task, TURN_2)


def test_a_blank_line_after_a_keep_scalar_above_the_block_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new top-level key written after a blank line: a full read adds it to the '|+' text above."""
    task = _task(tmp_path, "id: TASK-R4-1\nnotes: |+\n  text\n\nautobuild_state:\n  current_turn: 1\n"
                           "  turns:\n  - turn: 1\n")
    _bent_edits(monkeypatch, lambda text: "\n" + text if text.startswith("priority") else None)
    _refused(task, StateUpdate(block_scalars={"current_turn": 2}, append_turns=[{"turn": 2}],
                               top_level={"priority": 3}))


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_writes_in_a_row_still_match_a_fresh_read(tmp_path: Path, newline: str) -> None:
    """The shortcuts stay correct (and the node tree they hand on stays usable) over a loop's writes,
    with top-level updates above, below and new in between."""
    frontmatter = ("id: TASK-R4-1\ntags:\n- a\nnotes: |+\n  x\n\ntitle: 'a\u2028b'\n# c\n\n"
                   "autobuild_state:\n  current_turn: 1\n  turns:\n  - turn: 1\n    decision: feedback\n"
                   "priority: 1\n")
    path = tmp_path / "TASK-R4-1-review.md"
    path.write_bytes(f"---\n{frontmatter}---\nbody\n".replace("\n", newline).encode())
    task = TaskFile.load(path)
    tops: list[dict[str, object]] = [{}, {"status": "in_progress"}, {"priority": 2}, {"added": "x"}, {}]
    for turn, top in enumerate(tops, start=2):
        task.apply(StateUpdate(block_scalars={"current_turn": turn}, top_level=top,
                               append_turns=[{"turn": turn, "decision": "feedback", "note": "n" * turn}]))
        fresh = TaskFile.load(path)
        assert (fresh.text, fresh.data) == (task.text, task.data)
    assert [t["turn"] for t in task.data["autobuild_state"]["turns"]] == [1, 2, 3, 4, 5, 6]
