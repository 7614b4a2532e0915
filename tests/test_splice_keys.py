"""The splice bounds every key YAML allows, keeps anchors, and knows every delimiter form.

Each test pins a way the line scanner used to lose or corrupt user data: keys it did not
recognise (spaces, non-ASCII, quotes, a leading digit) were swallowed into the value above them,
anchors were dropped by a re-render, and ``---`` with trailing blanks was not a delimiter.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from guardkit_state.errors import FrontmatterError, WriteVerificationError
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.taskfile.frontmatter import parse_frontmatter, split_frontmatter
from guardkit_state.taskfile.splice import StateUpdate, splice_state

TURN: dict[str, Any] = {"turn": 1, "decision": "feedback", "feedback": "more tests",
                        "timestamp": "2026-11-21T10:05:00+00:00"}

UNUSUAL_KEYS = [
    ("Jira ticket: X-12", "Jira ticket", "X-12"),
    ("étiquette: x", "étiquette", "x"),
    ('"owner": alice', "owner", "alice"),
    ("'a b': 1", "a b", 1),
    ("2fa: true", "2fa", True),
    ("? complex\n: value", "complex", "value"),
    ("日本語: テスト", "日本語", "テスト"),
    ("😀 emoji: 1.5", "😀 emoji", 1.5),
    ("x.y-z: [1, {a: b}]", "x.y-z", [1, {"a": "b"}]),
]


def _frontmatter(text: str) -> dict[str, Any]:
    return parse_frontmatter(text).data


@pytest.mark.parametrize(("line", "key", "value"), UNUSUAL_KEYS)
def test_unusual_key_after_status_survives_a_status_rewrite(line: str, key: str, value: Any) -> None:
    text = f"---\nid: T-1\nstatus: backlog\n{line}\nowner_2: bob\n---\nbody\n"
    result = splice_state(text, StateUpdate(top_level={"status": "in_progress"}))
    data = _frontmatter(result.text)
    assert data["status"] == "in_progress"
    assert data[key] == value
    assert data["owner_2"] == "bob"
    assert result.text == text.replace("status: backlog", "status: in_progress")


@pytest.mark.parametrize(("line", "key", "value"), UNUSUAL_KEYS)
def test_unusual_key_after_status_through_taskfile_apply(tmp_path: Path, line: str, key: str, value: Any) -> None:
    path = tmp_path / "TASK-X-1-x.md"
    path.write_text(f"---\nid: TASK-X-1\nstatus: backlog\n{line}\n---\nbody\n")
    task = TaskFile.load(path)
    assert task.apply(StateUpdate(top_level={"status": "in_progress"}, append_turns=[TURN])).method == "splice"
    data = TaskFile.load(path).data
    assert data[key] == value and data["status"] == "in_progress"
    assert data["autobuild_state"]["turns"] == [TURN]


@pytest.mark.parametrize("empty", ["{}", "{}  # none yet", "~", "null", ""])
def test_key_after_an_empty_flow_state_block_is_kept(empty: str) -> None:
    text = f"---\nid: T-1\nautobuild_state: {empty}\nJira ticket: X-12\nétiquette: x\n---\nbody\n"
    result = splice_state(text, StateUpdate(block_scalars={"current_turn": 1}, append_turns=[TURN]))
    data = _frontmatter(result.text)
    assert data["Jira ticket"] == "X-12" and data["étiquette"] == "x"
    assert list(data) == ["id", "autobuild_state", "Jira ticket", "étiquette"]
    assert data["autobuild_state"]["turns"] == [TURN]
    assert result.text.endswith("Jira ticket: X-12\nétiquette: x\n---\nbody\n")


@pytest.mark.parametrize("after", ["étiquette: x", "'quoted key': x", "Jira ticket: X", "2fa: true"])
def test_turn_is_appended_inside_the_block_not_after_an_unusual_key(after: str) -> None:
    text = ("---\nid: T-1\nautobuild_state:\n  current_turn: 1\n  turns:\n  - turn: 1\n    decision: feedback\n"
            f"{after}\n---\nbody\n")
    turn2 = {**TURN, "turn": 2}
    result = splice_state(text, StateUpdate(block_scalars={"current_turn": 2}, append_turns=[turn2]))
    data = _frontmatter(result.text)
    assert [t["turn"] for t in data["autobuild_state"]["turns"]] == [1, 2]
    assert result.method == "splice"
    assert result.text.endswith(f"{after}\n---\nbody\n")


def test_anchored_state_block_is_spliced_and_an_alias_of_it_elsewhere_refused() -> None:
    text = "---\nid: T-1\nautobuild_state: &st\n  current_turn: 0\n  turns: []\nstatus: backlog\n---\nbody\n"
    update = StateUpdate(block_scalars={"current_turn": 1}, append_turns=[TURN], top_level={"status": "wip"})
    result = splice_state(text, update)
    assert result.method == "splice"
    assert "autobuild_state: &st\n" in result.text
    assert _frontmatter(result.text)["autobuild_state"] == {"current_turn": 1, "turns": [TURN]}
    # An alias *is* its anchored node: 'copy' would change with the block, so the write is refused.
    with pytest.raises(WriteVerificationError, match="alias") as info:
        splice_state(text.replace("---\nbody", "copy: *st\n---\nbody"), update)
    assert info.value.pointer == "$.copy.current_turn"


def test_anchored_criterion_keeps_its_anchor_when_rewritten() -> None:
    text = ("---\nid: T-1\nautobuild_state:\n  current_turn: 1\n  criteria:\n    AC-001: &v pending  # first\n"
            "    AC-002: pending\n  turns: []\n---\nbody\n")
    update = StateUpdate(criteria={"AC-001": "verified", "AC-002": "pending"})
    result = splice_state(text, update)
    assert result.method == "splice"
    assert "    AC-001: &v verified  # first\n" in result.text
    assert _frontmatter(result.text)["autobuild_state"]["criteria"] == {"AC-001": "verified", "AC-002": "pending"}
    with pytest.raises(WriteVerificationError, match="alias"):
        splice_state(text.replace("---\nbody", "mirror: *v\n---\nbody"), update)


def test_anchored_scalars_inside_the_block_keep_their_anchor() -> None:
    text = ("---\nautobuild_state:\n  current_turn: &n 1\n  base_branch: &b main\n  turns:\n  - turn: 1\n"
            "branch: *b\n---\n")
    update = StateUpdate(block_scalars={"current_turn": 2}, append_turns=[{**TURN, "turn": 2}])
    result = splice_state(text, update)
    assert result.method == "splice"
    assert "  current_turn: &n 2\n" in result.text
    data = _frontmatter(result.text)
    assert data["branch"] == "main"  # aliases a value the update leaves alone
    assert [t["turn"] for t in data["autobuild_state"]["turns"]] == [1, 2]
    anchored = text.replace("  turns:\n", "  turns: &t\n")
    for alias in ("turn_copy: *n\n", "turns_copy: *t\n"):
        with pytest.raises(WriteVerificationError, match="alias"):
            splice_state(anchored.replace("branch: *b\n", "branch: *b\n" + alias), update)


def test_alias_inside_the_block_to_an_anchor_outside() -> None:
    text = "---\nmain: &m main\nautobuild_state:\n  base_branch: *m\n  current_turn: 1\n  turns: []\n---\n"
    result = splice_state(text, StateUpdate(block_scalars={"current_turn": 2, "base_branch": "dev"},
                                            append_turns=[TURN]))
    data = _frontmatter(result.text)
    assert data["main"] == "main" and data["autobuild_state"]["base_branch"] == "dev"


def test_merge_key_at_the_top_and_in_the_block() -> None:
    text = ("---\nbase: &base\n  status: backlog\n  owner: x\n<<: *base\nid: T-1\nautobuild_state:\n"
            "  <<: {max_turns: 5}\n  current_turn: 1\n  turns: []\n---\nbody\n")
    result = splice_state(text, StateUpdate(top_level={"status": "wip"}, block_scalars={"current_turn": 2},
                                            append_turns=[TURN]))
    data = _frontmatter(result.text)
    assert data["status"] == "wip" and data["owner"] == "x" and data["base"]["status"] == "backlog"
    assert data["autobuild_state"]["max_turns"] == 5 and data["autobuild_state"]["turns"] == [TURN]


@pytest.mark.parametrize(("opening", "closing"), [("--- ", "---"), ("---\t", "---  "), ("---  \t", "--- \t"),
                                                  ("---", "--- ")])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("bom", ["", "\ufeff"])
def test_delimiters_with_trailing_blanks(opening: str, closing: str, newline: str, bom: str) -> None:
    text = bom + f"{opening}\nid: T-1\nstatus: backlog\n{closing}\nbody\n".replace("\n", newline)
    split = split_frontmatter(text)
    assert split.has_frontmatter and split.body == "body" + newline
    assert _frontmatter(text) == {"id": "T-1", "status": "backlog"}
    result = splice_state(text, StateUpdate(top_level={"status": "wip"}, append_turns=[TURN]))
    assert result.text.count("---") == 2, result.text
    assert result.text.startswith(bom + opening + newline)
    assert result.text.endswith(closing + newline + "body" + newline)
    assert _frontmatter(result.text)["status"] == "wip"


def test_closing_delimiter_with_blanks_at_end_of_file() -> None:
    text = "---\nid: T-1\n---  "
    assert split_frontmatter(text).closing == "---  "
    result = splice_state(text, StateUpdate(append_turns=[TURN]))
    assert result.text.endswith("\n---  ") and result.text.count("---") == 2


def test_lone_opening_with_blanks_is_an_unclosed_frontmatter() -> None:
    with pytest.raises(FrontmatterError, match="never closed"):
        split_frontmatter("---  \n")


@pytest.mark.parametrize("text", [
    "---\nid: T-1\r\nstatus: b\r\n---\r\n",         # mixed endings
    "---\nid: T-1\nstatus: b\n# trailing comment\n---\n",
    "---\nid: T-1\nstatus: b\n\n\n---\nbody",       # no final newline in the body
    "---\nid: T-1\nstatus: b\n---",                 # nothing after the closing line
    "---\nid: T-1\nstatus: b  # c\nextra: >\n  folded\n  text\n---\n",
])
def test_odd_layouts_keep_every_other_byte(text: str) -> None:
    result = splice_state(text, StateUpdate(top_level={"status": "wip"}))
    assert result.text == text.replace("status: b", "status: wip")


def test_quoted_state_key_is_spliced_in_place() -> None:
    text = '---\nid: T-1\n"autobuild_state":\n  current_turn: 0\n  turns: []\nafter: 1\n---\n'
    result = splice_state(text, StateUpdate(block_scalars={"current_turn": 1}, append_turns=[TURN]))
    assert result.method == "splice" and result.text.count("autobuild_state") == 1
    data = _frontmatter(result.text)
    assert data["autobuild_state"]["turns"] == [TURN] and data["after"] == 1


def test_unusual_keys_inside_the_block_and_criteria() -> None:
    text = ("---\nautobuild_state:\n  'quoted': 1\n  clé: 2\n  current_turn: 1\n  criteria:\n"
            "    'AC 001': pending\n    AC-002: pending\n  turns:\n  - turn: 1\n  trailing key: x\n---\n")
    update = StateUpdate(block_scalars={"current_turn": 2}, criteria={"AC 001": "verified", "AC-002": "pending"},
                         append_turns=[{**TURN, "turn": 2}])
    result = splice_state(text, update)
    assert result.method == "splice", result.reason
    block = _frontmatter(result.text)["autobuild_state"]
    assert block["quoted"] == 1 and block["clé"] == 2 and block["trailing key"] == "x"
    assert block["criteria"] == {"AC 001": "verified", "AC-002": "pending"}
    assert [t["turn"] for t in block["turns"]] == [1, 2]


def test_anchored_top_level_value_keeps_its_anchor() -> None:
    text = "---\nstatus: &s backlog  # now\nbase: &b main\nbranch: *b\n---\n"
    result = splice_state(text, StateUpdate(top_level={"status": "done"}))
    assert result.text == "---\nstatus: &s done  # now\nbase: &b main\nbranch: *b\n---\n"
    aliased = splice_state("---\nbase: &b main\nstatus: *b\n---\n", StateUpdate(top_level={"status": "done"}))
    assert _frontmatter(aliased.text) == {"base": "main", "status": "done"}
    with pytest.raises(WriteVerificationError, match="alias") as info:
        splice_state(text.replace("base:", "mirror: *s\nbase:"), StateUpdate(top_level={"status": "done"}))
    assert info.value.pointer == "$.mirror"
