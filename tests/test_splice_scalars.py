"""The splice's scalar lines mean exactly what PyYAML reads, whatever the value (property tests).

Each written value is also read back by the independent reader of ``tests/update_oracle.py``
(ruamel.yaml), so a fault shared by the product's renderer and its own reader cannot pass.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardkit_state.errors import GuardkitStateError
from guardkit_state.taskfile.frontmatter import parse_frontmatter
from guardkit_state.taskfile.splice import StateUpdate, render_yaml, splice_state
from guardkit_state.yamltext.strict_yaml import parse_yaml

from .update_oracle import read_frontmatter, read_yaml
from .update_oracle import same as same_value

TOKENS = st.text(alphabet="aAyYnNoOfFtTuUlLeEsS019_-./:'\" #~xX+", min_size=0, max_size=12)
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-10**20, max_value=10**20), TOKENS,
    st.sampled_from(["2026-11-21T10:00:00+00:00", "2026-01-29", "1e3", "010", "0x1F", ".inf", "~", "on"]),
)


def _typed(value: Any) -> tuple[type, Any]:
    return type(value), value


@settings(max_examples=1500, deadline=None)
@given(SCALARS)
def test_render_yaml_reads_back_exactly(value: Any) -> None:
    rendered = render_yaml({"key": value})
    assert _typed(parse_yaml(rendered).data["key"]) == _typed(value)
    assert same_value(read_yaml(rendered)["key"], value)


def _task(token: str) -> str:
    return ("---\nid: TASK-X-1\nautobuild_state:\n  current_turn: 1\n"
            f"  base_branch: {token}\n  criteria:\n    AC-001: {token}\n  turns: []\n---\nbody\n")


@settings(max_examples=1500, deadline=None)
@given(TOKENS, SCALARS)
def test_splice_reads_current_values_as_yaml_does(token: str, new: Any) -> None:
    text = _task(token)
    try:
        data = parse_frontmatter(text).data
    except GuardkitStateError:
        return  # not YAML at all: the reader's own tests cover refusals
    current = data["autobuild_state"]["base_branch"]
    # Setting the value the file already holds changes nothing ...
    same = StateUpdate(block_scalars={"base_branch": current})
    assert splice_state(text, same).text == text
    # ... and setting another one reads back as exactly that value, the rest untouched.
    result = splice_state(text, StateUpdate(block_scalars={"base_branch": new}))
    after = parse_frontmatter(result.text).data
    assert _typed(after["autobuild_state"]["base_branch"]) == _typed(new)
    independent, _ = read_frontmatter(result.text)
    assert same_value(independent["autobuild_state"]["base_branch"], new)
    untouched = {k: v for k, v in read_frontmatter(text)[0]["autobuild_state"].items() if k != "base_branch"}
    assert same_value({k: v for k, v in independent["autobuild_state"].items() if k != "base_branch"}, untouched)
    others = {k: v for k, v in data["autobuild_state"].items() if k != "base_branch"}
    assert {k: v for k, v in after["autobuild_state"].items() if k != "base_branch"} == others
    assert result.text.endswith("---\nbody\n")


@pytest.mark.parametrize("feedback", ["\n", "a\n", "a\nb", "a\nb\n\n", " a\nb", "\na", "x\n\n\n", "tab\there\n"])
def test_appended_multiline_feedback_reads_back_exactly(feedback: str) -> None:
    # PyYAML ends a "keep"-chomped literal block with a '...' document-end line: it must never
    # reach the frontmatter, where it would end the YAML document early.
    text = _task("main")
    result = splice_state(text, StateUpdate(block_scalars={"current_turn": 2},
                                            append_turns=[{"turn": 1, "decision": "feedback", "feedback": feedback}]))
    assert "\n  ...\n" not in result.text
    assert parse_frontmatter(result.text).data["autobuild_state"]["turns"] == [
        {"turn": 1, "decision": "feedback", "feedback": feedback}]


# One line of text as agents write it: ASCII with every indicator YAML knows, some non-ASCII, a tab.
LINE_CHARS = st.sampled_from(list(" abcTXY0129-_.:#'\",[]{}&*!|>%@`?~=<+/\\") + ["é", "\t", "😀", "\u2028"])
LINES = st.text(alphabet=LINE_CHARS, min_size=0, max_size=40)
ENTRY_VALUES = st.one_of(st.none(), st.booleans(), st.integers(min_value=-10**6, max_value=10**6), LINES,
                         st.sampled_from(["yes", "null", "1.5", "2026-11-21T10:00:00+00:00", "---x", "... x",
                                          "- x", "a: b", "a:b", "a #b", "a#b", "x:", "'q'", " lead", "trail ",
                                          "2026-01-01T4", "...", "1_000", "<<", "="]))
ENTRIES = st.dictionaries(st.sampled_from(["turn", "mode", "decision", "feedback", "timestamp", "player_summary"]),
                          ENTRY_VALUES, min_size=1, max_size=6)


@pytest.mark.parametrize("length", [128, 129, 1024, 1100])
@pytest.mark.parametrize("as_list", [False, True])
def test_a_long_key_renders_and_reads_back(length: int, as_list: bool) -> None:
    """libyaml writes a key over 128 characters as an explicit ``? key`` entry, and reads a plain
    key only up to 1024 characters: a turn entry with such a key still reads back exactly."""
    entry = {"turn": 1, "k" * length: "feedback text"}
    data: Any = [entry] if as_list else entry
    assert parse_yaml(render_yaml(data)).data == data


@settings(max_examples=1500, deadline=None)
@given(st.lists(ENTRIES, min_size=1, max_size=3))
def test_turn_entries_render_and_read_back(turns: list[dict[str, Any]]) -> None:
    assert parse_yaml(render_yaml(turns)).data == turns
