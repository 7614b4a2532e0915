"""Exact split, strict parse and surgical splice of task frontmatter (pure text in, text out)."""

from __future__ import annotations

import difflib
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from guardkit_state.errors import DuplicateKeyError, FrontmatterError
from guardkit_state.taskfile.frontmatter import parse_frontmatter, split_frontmatter
from guardkit_state.taskfile.splice import StateUpdate, apply_update_to_block, render_yaml, splice_state
from guardkit_state.yamltext import render as splice_render
from guardkit_state.yamltext import strict_yaml

BASIC = """\
---
id: TASK-AUTH-001
title: Add login   # the title
status: in_progress
created: 2025-12-24T00:00:00Z
tags: [auth, api]
notes: "Grüße — non-ASCII stays"
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

- [ ] Login works
"""

TURN_2: dict[str, Any] = {
    "turn": 2,
    "mode": "continuing_work",
    "decision": "approve",
    "feedback": None,
    "timestamp": "2026-11-21T10:12:00+00:00",
    "player_summary": "Added token refresh",
    "player_success": True,
    "coach_success": True,
}


def record_turn_2(**extra: Any) -> StateUpdate:
    return StateUpdate(
        block_scalars={"current_turn": 2, "last_updated": "2026-11-21T10:12:00+00:00"},
        append_turns=[TURN_2],
        **extra,
    )


def removed_and_added(old: str, new: str) -> tuple[list[str], list[str]]:
    diff = list(difflib.ndiff(old.splitlines(keepends=True), new.splitlines(keepends=True)))
    return [d[2:] for d in diff if d.startswith("- ")], [d[2:] for d in diff if d.startswith("+ ")]


def expected_data(text: str, update: StateUpdate, key: str = "autobuild_state") -> dict[str, Any]:
    data = parse_frontmatter(text).data
    data[key] = apply_update_to_block(data.get(key), update)
    for name, value in update.top_level.items():
        data[name] = value
    return data


# --------------------------------------------------------------------------- split


def test_split_frontmatter_parts_rebuild_the_text() -> None:
    split = split_frontmatter(BASIC)
    assert split.has_frontmatter
    assert split.prefix + split.yaml_text + split.closing + split.body == BASIC
    assert split.yaml_text.startswith("id: TASK-AUTH-001\n")
    assert split.body.startswith("\n# Add login")
    assert split.newline == "\n"


def test_split_frontmatter_dashes_inside_a_scalar_are_not_a_delimiter() -> None:
    text = '---\nfeedback: "a\\n\\\n-----\\nb"\nrule: x\n---\n-----\nbody\n'
    split = split_frontmatter(text)
    assert split.yaml_text == 'feedback: "a\\n\\\n-----\\nb"\nrule: x\n'
    assert split.body == "-----\nbody\n"
    assert parse_frontmatter(text).data == {"feedback": "a\n-----\nb", "rule": "x"}


def test_split_frontmatter_delimiter_is_three_dashes_and_optional_blanks() -> None:
    text = "---\na: 1\n----\n--- x\nb: 2\n--- \t\nbody"
    split = split_frontmatter(text)
    assert split.yaml_text == "a: 1\n----\n--- x\nb: 2\n"
    assert split.closing == "--- \t\n"
    assert split.body == "body"


def test_split_frontmatter_crlf_and_bom() -> None:
    text = "\ufeff---\r\na: 1\r\n---\r\nbody\r\n"
    split = split_frontmatter(text)
    assert split.bom == "\ufeff"
    assert split.newline == "\r\n"
    assert split.yaml_text == "a: 1\r\n"
    assert split.body == "body\r\n"
    assert parse_frontmatter(text).data == {"a": 1}


def test_split_frontmatter_without_frontmatter() -> None:
    text = "# Title\n\n---\n\ntext\n"
    split = split_frontmatter(text)
    assert not split.has_frontmatter
    assert split.body == text
    assert parse_frontmatter(text).data == {}


def test_split_frontmatter_closing_at_end_of_file() -> None:
    assert split_frontmatter("---\na: 1\n---").body == ""


@pytest.mark.parametrize("text", ["---\na: 1\nb: 2\n", "---", "---\n"])
def test_split_frontmatter_missing_closing_names_the_opening_line(text: str) -> None:
    with pytest.raises(FrontmatterError) as info:
        split_frontmatter(text, path="t.md")
    assert info.value.line == 1
    assert "never closed" in str(info.value)


# --------------------------------------------------------------------------- parse


def test_parse_frontmatter_keeps_dates_as_strings() -> None:
    data = parse_frontmatter(BASIC).data
    assert data["created"] == "2025-12-24T00:00:00Z"
    assert data["autobuild_state"]["turns"][0]["timestamp"] == "2026-11-21T10:05:00+00:00"


def test_parse_frontmatter_errors_carry_file_line_numbers() -> None:
    text = "---\nid: T-1\ntitle: bad: colon\n---\n"
    with pytest.raises(FrontmatterError) as info:
        parse_frontmatter(text, path="t.md")
    assert info.value.line == 3
    assert str(info.value).startswith("t.md:3:")


def test_parse_frontmatter_duplicate_key_is_an_error_with_its_line() -> None:
    text = "---\nid: T-1\nstatus: a\nx: 1\nstatus: b\n---\n"
    with pytest.raises(DuplicateKeyError) as info:
        parse_frontmatter(text)
    assert info.value.line == 5


def test_parse_frontmatter_second_state_block_is_a_duplicate() -> None:
    text = "---\nautobuild_state:\n  current_turn: 1\nautobuild_state:\n  current_turn: 2\n---\n"
    with pytest.raises(DuplicateKeyError) as info:
        parse_frontmatter(text)
    assert info.value.line == 4


def test_parse_frontmatter_both_state_keys_is_an_error() -> None:
    text = "---\nautobuild_state:\n  turns: []\nfeature_build:\n  turns: []\n---\n"
    with pytest.raises(FrontmatterError) as info:
        parse_frontmatter(text)
    assert info.value.line == 4
    assert "both" in info.value.message


@pytest.mark.parametrize("yaml_text", ["- a\n- b\n", "just text\n"])
def test_parse_frontmatter_must_be_a_mapping(yaml_text: str) -> None:
    with pytest.raises(FrontmatterError, match="not a mapping"):
        parse_frontmatter(f"---\n{yaml_text}---\n")


def test_parse_frontmatter_state_block_must_be_a_mapping() -> None:
    with pytest.raises(FrontmatterError) as info:
        parse_frontmatter("---\nid: T-1\nautobuild_state: [1, 2]\n---\n")
    assert info.value.line == 3
    assert info.value.pointer == "$.autobuild_state"


def test_parse_frontmatter_refuses_object_tags() -> None:
    with pytest.raises(FrontmatterError, match="tag refused"):
        parse_frontmatter("---\nx: !!python/object/apply:os.system ['true']\n---\n")


def test_parse_frontmatter_reads_flow_style_turns() -> None:
    text = "---\nautobuild_state: {current_turn: 1, turns: [{turn: 1, decision: approve}]}\n---\n"
    parsed = parse_frontmatter(text)
    assert parsed.state_key == "autobuild_state"
    assert parsed.data["autobuild_state"]["turns"] == [{"turn": 1, "decision": "approve"}]


def test_parse_frontmatter_hints_at_a_missing_closing_delimiter() -> None:
    text = "---\nid: T-1\nnotes: |\n  text\n\n## Summary\n\n`guard.py` gained a check\n\n---\nmore\n"
    with pytest.raises(FrontmatterError) as info:
        parse_frontmatter(text)
    assert info.value.line == 8
    assert "closing '---' missing before line 6" in info.value.message


# --------------------------------------------------------------------------- render


def test_render_yaml_quotes_strings_that_would_change_type() -> None:
    data = {"a": "2026-11-21T10:00:00+00:00", "b": "null", "c": "12", "d": "true", "e": "ü — ok"}
    text = render_yaml(data)
    assert text == "a: '2026-11-21T10:00:00+00:00'\nb: 'null'\nc: '12'\nd: 'true'\ne: ü — ok\n"


def test_render_yaml_never_wraps_and_uses_literal_blocks() -> None:
    long = "word " * 100
    text = render_yaml({"a": long.strip(), "b": "line one\nline two\n"})
    assert text.splitlines()[0] == "a: " + long.strip()
    assert "b: |\n  line one\n  line two\n" in text


def test_render_yaml_falls_back_to_quoted_style_when_literal_cannot_carry_it() -> None:
    value = "trailing spaces   \n  and more  "
    assert parse_frontmatter("---\n" + render_yaml({"f": value}) + "---\n").data == {"f": value}


# --------------------------------------------------------------------------- splice


def test_splice_state_appends_a_turn_and_changes_only_the_scalars() -> None:
    update = record_turn_2()
    result = splice_state(BASIC, update)
    assert result.method == "splice"
    assert result.reason is None
    expected = BASIC.replace("  current_turn: 1\n", "  current_turn: 2\n").replace(
        "  last_updated: '2026-11-21T10:05:00+00:00'\n", "  last_updated: '2026-11-21T10:12:00+00:00'\n"
    ).replace(
        "    coach_success: true\n---\n",
        "    coach_success: true\n"
        "  - turn: 2\n"
        "    mode: continuing_work\n"
        "    decision: approve\n"
        "    feedback: null\n"
        "    timestamp: '2026-11-21T10:12:00+00:00'\n"
        "    player_summary: Added token refresh\n"
        "    player_success: true\n"
        "    coach_success: true\n---\n",
    )
    assert result.text == expected
    assert parse_frontmatter(result.text).data == expected_data(BASIC, update)
    # the appended lines sit after the last item, right before the closing delimiter
    assert "    coach_success: true\n  - turn: 2\n" in result.text


@pytest.mark.parametrize(
    "update",
    [
        StateUpdate(),
        StateUpdate(block_scalars={"current_turn": 1, "base_branch": "main"}),
        StateUpdate(top_level={"status": "in_progress", "created": "2025-12-24T00:00:00Z"}),
        StateUpdate(block_scalars={"started_at": "2026-11-21T10:00:00+00:00"}),
    ],
)
def test_splice_state_noop_returns_identical_text(update: StateUpdate) -> None:
    result = splice_state(BASIC, update)
    assert result.method == "noop"
    assert result.text is BASIC


def test_splice_state_type_change_is_a_change() -> None:
    text = BASIC.replace("current_turn: 1", "current_turn: '1'")
    result = splice_state(text, StateUpdate(block_scalars={"current_turn": 1}))
    assert result.method == "splice"
    assert "  current_turn: 1\n" in result.text


def test_splice_state_keeps_trailing_comments_on_rewritten_lines() -> None:
    text = BASIC.replace("current_turn: 1", "current_turn: 1   # bumped by the loop")
    result = splice_state(text, StateUpdate(block_scalars={"current_turn": 2}))
    assert "  current_turn: 2   # bumped by the loop\n" in result.text
    result = splice_state(text, StateUpdate(top_level={"title": "Add sign-in"}))
    assert "title: Add sign-in   # the title\n" in result.text


def test_splice_state_adds_missing_scalars_before_turns() -> None:
    update = StateUpdate(block_scalars={"stall_window": 3, "current_turn": 1})
    result = splice_state(BASIC, update)
    assert "  last_updated: '2026-11-21T10:05:00+00:00'\n  stall_window: 3\n  turns:\n" in result.text
    assert parse_frontmatter(result.text).data == expected_data(BASIC, update)


def test_splice_state_top_level_status_changed_and_added() -> None:
    result = splice_state(BASIC, StateUpdate(top_level={"status": "blocked", "outcome": "stall"}))
    removed, added = removed_and_added(BASIC, result.text)
    assert removed == ["status: in_progress\n"]
    assert added == ["status: blocked\n", "outcome: stall\n"]
    assert "outcome: stall\nautobuild_state:\n" in result.text


def test_splice_state_crlf_file_stays_crlf() -> None:
    text = BASIC.replace("\n", "\r\n")
    update = record_turn_2(top_level={"status": "in_review"}, criteria={"AC-001": "verified"})
    result = splice_state(text, update)
    assert result.method == "splice"
    assert "\n" not in result.text.replace("\r\n", "")
    assert result.text.replace("\r\n", "\n") == splice_state(BASIC, update).text


def test_splice_state_bom_is_kept() -> None:
    result = splice_state("\ufeff" + BASIC, record_turn_2())
    assert result.text.startswith("\ufeff---\n")
    assert result.text[1:] == splice_state(BASIC, record_turn_2()).text


def test_splice_state_keeps_comments_inside_the_block() -> None:
    text = BASIC.replace(
        "  base_branch: main\n", "  # the branch the worktree started from\n  base_branch: main\n"
    ).replace("  turns:\n", "  # history, one entry per turn\n  turns:\n")
    update = record_turn_2(criteria={"AC-001": "verified"})
    result = splice_state(text, update)
    assert result.method == "splice"
    assert "  # the branch the worktree started from\n  base_branch: main\n" in result.text
    assert "  # history, one entry per turn\n  turns:\n" in result.text
    removed, _ = removed_and_added(text, result.text)
    assert len(removed) == 2
    assert parse_frontmatter(result.text).data == expected_data(text, update)


def test_splice_state_keeps_flow_lists_dates_and_body_bytes() -> None:
    result = splice_state(BASIC, record_turn_2())
    assert "tags: [auth, api]\n" in result.text
    assert "created: 2025-12-24T00:00:00Z\n" in result.text
    assert 'notes: "Grüße — non-ASCII stays"\n' in result.text
    assert result.text.endswith(split_frontmatter(BASIC).body)


def test_splice_state_empty_turns_list_becomes_a_block_list() -> None:
    text = BASIC.split("  turns:\n")[0] + "  turns: []\n---\nbody\n"
    result = splice_state(text, record_turn_2())
    removed, _ = removed_and_added(text, result.text)
    assert "  turns: []\n" in removed
    assert "  turns:\n  - turn: 2\n    mode: continuing_work\n" in result.text
    assert parse_frontmatter(result.text).data == expected_data(text, record_turn_2())


def test_splice_state_items_indented_deeper_keep_their_indent() -> None:
    head, turns = BASIC.split("  turns:\n")
    items, closing = turns.split("---\n", 1)
    text = head + "  turns:\n" + "".join("  " + line for line in items.splitlines(True)) + "---\n" + closing
    assert parse_frontmatter(text).data["autobuild_state"]["turns"][0]["decision"] == "feedback"
    result = splice_state(text, record_turn_2())
    assert "      coach_success: true\n    - turn: 2\n      mode: continuing_work\n" in result.text
    assert parse_frontmatter(result.text).data == expected_data(text, record_turn_2())


def test_splice_state_block_in_the_middle_with_sorted_keys() -> None:
    text = """---
autobuild_state:
  base_branch: main
  current_turn: 1
  turns:
  - decision: feedback
    turn: 1
  worktree_path: /tmp/wt

complexity: 3
status: in_progress
---
body
"""
    update = record_turn_2(criteria={"AC-001": "pending"})
    result = splice_state(text, update)
    assert result.method == "splice"
    assert "    turn: 1\n  - turn: 2\n" in result.text
    assert "  worktree_path: /tmp/wt\n\ncomplexity: 3\n" in result.text
    assert parse_frontmatter(result.text).data == expected_data(text, update)


def test_splice_state_multiline_feedback_in_existing_turns() -> None:
    text = BASIC.replace(
        "    feedback: Missing token refresh mechanism\n",
        '    feedback: "- Not all criteria met:\\n  \\u2022 Existing tests\\\n      \\ pass"\n',
    )
    update = record_turn_2()
    result = splice_state(text, update)
    assert parse_frontmatter(result.text).data == expected_data(text, update)


def test_splice_state_creates_the_block_at_the_end_of_the_frontmatter() -> None:
    text = "---\nid: TASK-X-1\nstatus: backlog\n# trailing comment\n---\nbody\n"
    update = StateUpdate(
        block_scalars={"current_turn": 0, "max_turns": 5, "started_at": "2026-11-21T10:00:00+00:00"}
    )
    result = splice_state(text, update)
    assert result.text == (
        "---\nid: TASK-X-1\nstatus: backlog\n# trailing comment\n"
        "autobuild_state:\n  current_turn: 0\n  max_turns: 5\n"
        "  started_at: '2026-11-21T10:00:00+00:00'\n  turns: []\n---\nbody\n"
    )


def test_splice_state_creates_frontmatter_when_the_file_has_none() -> None:
    text = "# Task\n\nbody\n"
    result = splice_state(text, StateUpdate(top_level={"status": "in_progress"}, append_turns=[TURN_2]))
    assert result.text.endswith("---\n# Task\n\nbody\n")
    data = parse_frontmatter(result.text).data
    assert data == {"status": "in_progress", "autobuild_state": {"turns": [TURN_2]}}


def test_splice_state_null_block_is_filled() -> None:
    text = "---\nid: T-1\nautobuild_state:\nstatus: x\n---\n"
    result = splice_state(text, StateUpdate(block_scalars={"current_turn": 1}))
    assert parse_frontmatter(result.text).data == {
        "id": "T-1", "autobuild_state": {"current_turn": 1, "turns": []}, "status": "x"}


def test_splice_state_legacy_feature_build_key_is_written_back() -> None:
    text = BASIC.replace("autobuild_state:", "feature_build:")
    result = splice_state(text, record_turn_2())
    assert "autobuild_state" not in result.text
    assert parse_frontmatter(result.text).data == expected_data(text, record_turn_2(), key="feature_build")


def test_splice_state_criteria_created_then_updated() -> None:
    first = StateUpdate(criteria={"AC-001": "pending", "AC-002": "pending"})
    created = splice_state(BASIC, first).text
    assert "  criteria:\n    AC-001: pending\n    AC-002: pending\n  turns:\n" in created
    second = StateUpdate(criteria={"AC-001": "verified", "AC-002": "pending", "AC-003": "pending"})
    result = splice_state(created, second)
    removed, added = removed_and_added(created, result.text)
    assert removed == ["    AC-001: pending\n"]
    assert added == ["    AC-001: verified\n", "    AC-003: pending\n"]
    assert parse_frontmatter(result.text).data["autobuild_state"]["criteria"] == second.criteria
    assert splice_state(result.text, second).method == "noop"


def test_splice_state_criteria_entry_removed_and_emptied() -> None:
    text = splice_state(BASIC, StateUpdate(criteria={"AC-001": "verified", "AC-002": "pending"})).text
    fewer = splice_state(text, StateUpdate(criteria={"AC-002": "pending"})).text
    assert parse_frontmatter(fewer).data["autobuild_state"]["criteria"] == {"AC-002": "pending"}
    empty = splice_state(text, StateUpdate(criteria={})).text
    assert parse_frontmatter(empty).data["autobuild_state"]["criteria"] == {}
    assert splice_state(BASIC, StateUpdate(criteria={})).method == "noop"


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        ("  turns:\n  - turn: 1\n", "  turns: [{turn: 1,\n", "flow style"),
        ("autobuild_state:\n", "autobuild_state:\n  <<: {owner: x}\n", "merge key"),
    ],
)
def test_splice_state_rerender_fallback_is_reported(old: str, new: str, reason: str) -> None:
    if new.endswith("[{turn: 1,\n"):
        head, tail = BASIC.split("  turns:\n")
        text = head + "  turns: [{turn: 1, decision: feedback, feedback: Missing token refresh mechanism}]\n"
        text += "---" + tail.split("---", 1)[1]
    else:
        text = BASIC.replace(old, new)
    text = text.replace("tags: [auth, api]\n", "tags: [auth, api]  # keep me\n")
    result = splice_state(text, record_turn_2())
    assert result.method == "rerender"
    assert reason in (result.reason or "")
    assert parse_frontmatter(result.text).data == expected_data(text, record_turn_2())
    # only the state block was re-rendered: everything before it is byte-identical
    before = text.split("autobuild_state:")[0]
    assert result.text.startswith(before)
    assert result.text.endswith(split_frontmatter(text).closing + split_frontmatter(text).body)


def test_splice_state_flow_style_block_is_rerendered() -> None:
    text = "---\nid: T-1\nautobuild_state: {current_turn: 1, turns: []}\nstatus: x  # note\n---\nbody\n"
    update = record_turn_2()
    result = splice_state(text, update)
    assert result.method == "rerender"
    assert "status: x  # note\n" in result.text
    assert parse_frontmatter(result.text).data == expected_data(text, update)


def test_splice_state_multiline_scalar_to_replace_is_replaced_in_place() -> None:
    text = BASIC.replace(
        "  worktree_path: .guardkit/worktrees/TASK-AUTH-001\n",
        "  worktree_path: .guardkit/worktrees/\n    TASK-AUTH-001\n",
    )
    same = splice_state(text, StateUpdate(block_scalars={"worktree_path": ".guardkit/worktrees/ TASK-AUTH-001"}))
    assert same.method == "noop"
    result = splice_state(text, StateUpdate(block_scalars={"worktree_path": "/elsewhere"}))
    assert result.method == "splice"
    assert result.text == text.replace("  worktree_path: .guardkit/worktrees/\n    TASK-AUTH-001\n",
                                       "  worktree_path: /elsewhere\n")


def test_splice_state_duplicate_top_level_key_is_refused() -> None:
    text = BASIC.replace("status: in_progress\n", "status: in_progress\nstatus: done\n")
    with pytest.raises(DuplicateKeyError) as info:
        splice_state(text, StateUpdate(top_level={"status": "blocked"}), path="t.md")
    assert info.value.line == 5


def test_splice_state_both_state_keys_refused() -> None:
    text = BASIC.replace("---\n\n# Add", "feature_build:\n  turns: []\n---\n\n# Add")
    with pytest.raises(FrontmatterError, match="both"):
        splice_state(text, record_turn_2())


def test_splice_state_quoted_state_key_is_spliced_not_duplicated() -> None:
    text = BASIC.replace("autobuild_state:", '"autobuild_state":')
    result = splice_state(text, record_turn_2())
    assert result.method == "splice" and result.text.count("autobuild_state") == 1
    assert parse_frontmatter(result.text).data == expected_data(text, record_turn_2())


def test_splice_state_enum_values_are_written_as_plain_strings() -> None:
    from guardkit_state.model import TurnMode

    result = splice_state(BASIC, StateUpdate(append_turns=[{**TURN_2, "mode": TurnMode.RECOVERING_STATE}]))
    assert "    mode: recovering_state\n" in result.text


_YAML_DATA = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
    | st.sampled_from(["2026-01-01", "1e3", "0o17", "0x1F", ".inf", "~", "on", "yes", "010", "1_000"]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.text(max_size=8) | st.integers() | st.booleans(), children, max_size=4),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)
@given(_YAML_DATA, st.booleans(), st.sampled_from([None, "'", '"']))
def test_direct_build_reads_as_the_yaml_constructor_does(data: Any, flow: bool, style: str | None) -> None:
    text = yaml.dump({"k": data}, Dumper=yaml.CSafeDumper, default_flow_style=flow, default_style=style,
                     allow_unicode=True)
    loader = strict_yaml.StrictLoader(text)
    node = loader.get_single_node()
    try:
        generic = loader.construct_document(node)
    finally:
        loader.dispose()
    direct = strict_yaml.parse_yaml(text).data
    assert splice_render.same(direct, generic)
    assert repr(direct) == repr(generic)


@pytest.mark.parametrize("text", ["a: 1\nb: 2\na: 3\n", "1: x\ntrue: y\n", "[a]: 1\n", "a: !!binary aGk=\n",
                                  "a: !!set {x}\n", "a: !!timestamp 2026-01-01\n", "? [x, y]\n: z\n"])
def test_direct_build_refuses_and_defers_as_the_yaml_constructor_does(text: str) -> None:
    loader = strict_yaml.StrictLoader(text)
    try:
        generic: Any = loader.construct_document(loader.get_single_node())
    except Exception as exc:  # the type is what is compared
        generic = type(exc)
    finally:
        loader.dispose()
    try:
        direct: Any = strict_yaml.parse_yaml(text).data
    except DuplicateKeyError:
        direct = strict_yaml._DuplicateKey
    except FrontmatterError as exc:
        direct = type(exc.__cause__)
    assert direct == generic or repr(direct) == repr(generic)
