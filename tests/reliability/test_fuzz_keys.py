"""Property tests: frontmatter built from every legal YAML key shape survives two recorded turns.

The generated frontmatter mixes key names drawn from YAML's grammar (indicators, blanks, non-ASCII,
written plain where the plain-scalar production allows it, single- or double-quoted, or as
``? explicit`` keys), merge keys, anchors and aliases, comments, flow and block values, around and
inside the state block, with CRLF, a BOM, delimiters with trailing blanks and no final newline. Two
successive updates must leave a text that parses, every other key equal by value and in order, the
block exactly as intended and each turn listed once; a no-op update is byte-identical.

The oracle is independent of the splice: the texts are cut and read by ``tests/update_oracle.py``
(ruamel.yaml, not the product's reader) and the intended block is its reference model of a state
update, not ``apply_update_to_block`` (which the writer itself renders from and verifies against).

Mutation check (done by hand once, and kept as ``test_a_broken_update_function_fails_the_oracle``):
make ``apply_update_to_block`` leave ``criteria`` alone. The writer edits the text toward what that
function says and verifies against it, so writer and verification agree with the broken function,
the write succeeds, and only this oracle fails ("the state block is not the update applied"); the
former comparison with ``apply_update_to_block`` agreed too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from guardkit_state.errors import GuardkitStateError, WriteVerificationError
from guardkit_state.taskfile import splice as splice_module
from guardkit_state.taskfile.frontmatter import parse_frontmatter
from guardkit_state.taskfile.splice import StateUpdate, splice_state

from ..update_oracle import expected_state_block, key_forms, key_text, read_frontmatter, same, yaml_key_names
from .conftest import size

EXAMPLES = size(300, 6000)
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large])

#: Names the generated document uses for itself (state block, status, merge base, aliases).
_RESERVED = {"autobuild_state", "feature_build", "status", "base", "<<", "merged_a", "merged_b", "copy of state",
             "mirror"}
_SCALARS = ["x", "1", "true", "1.5", "2026-01-01", "null", "'single ''q'''", '"double \\" q"', "a b c", "~",
            "-1", "0o17", "été", "'2026-01-01T00:00:00Z'"]
_VALUES = [*_SCALARS, "[1, 2]", "{a: b, c: [d]}", "[]", "{}", "\n  - a\n  - b: c", "\n  a: 1\n  b: [x]",
                      "|\n  line one\n  line two", ">-\n  folded\n  text", "\n- indentless\n- list"]


@dataclass
class _Doc:
    """A generated frontmatter, what it should read as, and where the state block is."""

    lines: list[str] = field(default_factory=list)
    anchors: list[str] = field(default_factory=list)
    aliases_of_block: dict[str, tuple[str, ...]] = field(default_factory=dict)  # key -> path in the block
    state_key: str = "autobuild_state"
    turns: int = 0


@st.composite
def _entry(draw: st.DrawFn, name: str, doc: _Doc) -> str:
    key = key_text(name, draw(st.sampled_from(key_forms(name))))
    value = draw(st.sampled_from(_VALUES))
    kind = draw(st.sampled_from(["value", "value", "anchor", "alias", "comment"]))
    if kind == "anchor" and not value.startswith(("\n", "|", ">")):
        anchor = f"a{len(doc.anchors)}"
        doc.anchors.append(anchor)
        value = f"&{anchor} {value}"
    elif kind == "alias" and doc.anchors:
        value = "*" + draw(st.sampled_from(doc.anchors))
    elif kind == "comment" and not value.startswith(("\n", "|", ">")):
        value += "  # trailing comment"
    return f"{key}:{'' if value.startswith(chr(10)) else ' '}{value}"


@st.composite
def _block(draw: st.DrawFn, doc: _Doc) -> list[str]:
    key = draw(st.sampled_from(["autobuild_state", "autobuild_state", '"autobuild_state"', "'autobuild_state'",
                                "feature_build"]))
    doc.state_key = key.strip("'\"")
    shape = draw(st.sampled_from(["block", "block", "block", "{}", "", "~"]))
    if shape != "block":
        return [f"{key}: {shape}".rstrip()]
    anchored = draw(st.booleans())
    head = f"{key}:{' &st' if anchored else ''}{draw(st.sampled_from(['', '  # the state']))}"
    lines = [head, "  current_turn: 0"]
    lines += draw(st.lists(st.sampled_from(["  'quoted child': 1", "  clé: 2", "  # a comment", "  2nd: x",
                                            "  max_turns: 5  # keep", '  "odd key": [a]']),
                           max_size=3, unique=True))
    criteria = draw(st.sampled_from(["block", "flow", "empty", "none", "anchored"]))
    if criteria == "block":
        lines += ["  criteria:", "    AC-001: pending", "    'AC-002': pending  # second"]
    elif criteria == "anchored":
        lines += ["  criteria:", "    AC-001: &crit pending", "    AC-002: pending"]
        doc.aliases_of_block["mirror"] = ("criteria", "AC-001")
    elif criteria == "flow":
        lines += ["  criteria: {AC-001: pending}"]
    elif criteria == "empty":
        lines += ["  criteria: {}"]
    doc.turns = draw(st.integers(0, 2))
    indent = draw(st.sampled_from(["  ", "    "]))
    if doc.turns:
        lines.append("  turns:")
        for n in range(1, doc.turns + 1):
            lines += [f"{indent}- turn: {n}", f"{indent}  decision: feedback", f"{indent}  feedback: |",
                      f"{indent}    line {n}", f"{indent}    # not a comment"]
    else:
        lines.append(draw(st.sampled_from(["  turns: []", "  turns:", "  turns: ~"])))
    if draw(st.booleans()):
        lines.append(draw(st.sampled_from(["  trailing child: x", "  'quoted trailing': y", "  ünï: 1"])))
    if anchored:
        doc.aliases_of_block["copy of state"] = ()
    return lines


@st.composite
def _documents(draw: st.DrawFn) -> tuple[str, _Doc]:
    doc = _Doc()
    names = draw(st.lists(yaml_key_names().filter(lambda name: name not in _RESERVED), min_size=1, max_size=7,
                          unique=True))
    entries = [draw(_entry(name, doc)) for name in names]
    if draw(st.booleans()):
        entries.insert(0, "base: &base {merged_a: 1, merged_b: [x]}")
        entries.insert(1, "<<: *base")
    status = draw(st.sampled_from(["status: backlog", '"status": backlog', "status: backlog  # now", None]))
    if status:
        entries.insert(draw(st.integers(0, len(entries))), status)
    if draw(st.booleans()):
        entries.insert(draw(st.integers(0, len(entries))), "# a comment between keys")
    if draw(st.booleans()):
        entries.insert(draw(st.integers(0, len(entries))), "")
    if draw(st.integers(0, 4)):
        at = draw(st.integers(0, len(entries)))
        block = draw(_block(doc))
        entries[at:at] = block
        entries += [f"{name}: *{'st' if not path else 'crit'}" for name, path in doc.aliases_of_block.items()]
    opening = draw(st.sampled_from(["---", "---", "--- ", "---\t"]))
    closing = draw(st.sampled_from(["---", "---", "---  "]))
    body = draw(st.sampled_from(["\n# Task\n\nbody\n", "body without final newline", "", "\n-----\n"]))
    text = "\n".join([opening, *entries, closing]) + ("\n" + body if body else "")
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    if draw(st.integers(0, 4)) == 0:
        text = "\ufeff" + text
    return text, doc


def _turn(n: int) -> dict[str, Any]:
    return {"turn": n, "decision": "feedback", "feedback": f"turn {n}\nmore", "timestamp": "2026-11-21T10:05:00Z"}


def _others(data: dict[Any, Any], doc: _Doc) -> dict[Any, Any]:
    skip = {doc.state_key, "status", *doc.aliases_of_block}
    return {k: v for k, v in data.items() if k not in skip}


def _updates(key: str, last: int) -> tuple[StateUpdate, StateUpdate]:
    first = StateUpdate(key=key, block_scalars={"current_turn": last + 1}, append_turns=[_turn(last + 1)],
                        top_level={"status": "in_progress"})
    second = StateUpdate(key=key, block_scalars={"current_turn": last + 2, "last_updated": "2026-11-22"},
                         criteria={"AC-001": "verified", "AC-002": "pending"},
                         append_turns=[_turn(last + 2)], top_level={"status": "in_review"})
    return first, second


def _intended(block: Any, *updates: StateUpdate) -> Any:
    """The reference model's block after ``updates`` (never the product's ``apply_update_to_block``)."""
    for update in updates:
        block = expected_state_block(block, update.block_scalars, update.criteria, update.append_turns)
    return block


def judge_block(block: Any, updates: tuple[StateUpdate, ...], written: Any, new_text: str) -> None:
    """The block read back (by the independent reader) is the reference model's block after ``updates``."""
    assert same(written, _intended(block, *updates)), f"the state block is not the update applied:\n{new_text}"


def check_two_turns(text: str, doc: _Doc) -> str:
    """Record two turns on ``text`` and judge the result with the independent oracle.

    Returns how the writes went (``splice``, ``rerender`` or ``alias-refused``); an assertion fails
    when the result is not what the update means. ``assume`` drops inputs the product's strict
    reader refuses (an alias of a key the draw did not keep, a duplicate).
    """
    try:
        before = parse_frontmatter(text)
    except GuardkitStateError:
        assume(False)
        raise
    key = before.state_key or "autobuild_state"
    try:
        data, body = read_frontmatter(text)
    except Exception as oracle_refused:  # the product accepts a text ruamel reads otherwise: see which
        raise AssertionError(f"the oracle cannot read what the product accepts: {oracle_refused}\n{text}") from None
    block = data.get(key)
    last = len(block.get("turns") or []) if isinstance(block, dict) else 0
    first, second = _updates(key, last)
    try:
        one = splice_state(text, first)
        two = splice_state(one.text, second, parsed=one.parsed)
    except WriteVerificationError as refused:
        # A key elsewhere that aliases a value the update changes would change with it: refused,
        # saying so (the hint is given only when that alias explains the whole difference).
        assert "alias" in str(refused) and (doc.aliases_of_block or doc.anchors), (text, refused)
        return "alias-refused"
    after, after_body = read_frontmatter(two.text)
    judge_block(block, (first, second), after[key], two.text)
    assert [t["turn"] for t in after[key]["turns"]] == list(range(1, last + 3)), two.text
    assert after["status"] == "in_review"
    assert same(_others(after, doc), _others(data, doc)), (text, two.text)
    for alias, path in doc.aliases_of_block.items():
        node = after[key]
        for step in path:
            node = node[step]
        assert same(after[alias], node)
    assert after_body == body
    assert splice_state(text, StateUpdate(key=key)).text == text
    same_values = StateUpdate(key=key, top_level={"status": data["status"]}) \
        if "status" in data else StateUpdate(key=key)
    assert splice_state(text, same_values).text == text
    return "rerender" if "rerender" in (one.method, two.method) else "splice"


@pytest.mark.slow
def test_fuzz_two_turns_on_any_key_shape(record_figures: Callable[[dict[str, Any]], None]) -> None:
    seen = {"n": 0, "rerender": 0, "alias_refusals": 0}

    @PROPERTY
    @given(_documents())
    def prop(generated: tuple[str, _Doc]) -> None:
        outcome = check_two_turns(*generated)
        seen["n"] += 1
        seen["rerender"] += outcome == "rerender"
        seen["alias_refusals"] += outcome == "alias-refused"

    prop()
    record_figures({"fuzz_examples": seen["n"], "property": "two-turns-any-key-shape",
                    "rerendered_writes": seen["rerender"], "alias_refusals": seen["alias_refusals"]})


_CRITERIA_DOC = """\
---
"Jira: ticket": X-1
? "? explicit"
: [a, b]
autobuild_state: {current_turn: 0, criteria: {AC-001: pending, AC-002: pending}, turns: []}
---
body
"""


_REAL_APPLY = splice_module.apply_update_to_block


def _criteria_left_alone(block: dict[str, Any] | None, update: StateUpdate) -> dict[str, Any]:
    """``apply_update_to_block`` broken on purpose: the criteria of the update are ignored."""
    return _REAL_APPLY(block, StateUpdate(key=update.key, block_scalars=update.block_scalars,
                                          append_turns=update.append_turns))


def test_a_broken_update_function_fails_the_oracle(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutation check: with the shared update function broken, writer and verification agree
    and the write succeeds, so only an oracle independent of that function can see it. (The block
    is written inline, so the writer renders it whole from the update function.)"""
    assert check_two_turns(_CRITERIA_DOC, _Doc()) == "rerender"  # the real function passes
    update = _updates("autobuild_state", 0)[1]
    monkeypatch.setattr(splice_module, "apply_update_to_block", _criteria_left_alone)
    written = splice_state(_CRITERIA_DOC, update)  # accepted: the writer's own check agrees with itself
    assert written.method == "rerender"
    before, _ = read_frontmatter(_CRITERIA_DOC)
    with pytest.raises(AssertionError, match="the state block is not the update applied"):
        judge_block(before["autobuild_state"], (update,), read_frontmatter(written.text)[0]["autobuild_state"],
                    written.text)
