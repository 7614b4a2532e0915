"""The python-frontmatter handler: strict reads with typed errors, saves that keep every other byte.

Examples first, then properties over generated frontmatter (quoting styles, comments, blank lines,
nested maps, block and flow lists), then every real GuardKit task file, read in place.
"""

from __future__ import annotations

import datetime as dt
import difflib
import io
import json
import re
import string
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import frontmatter
import pytest
from frontmatter.default_handlers import YAMLHandler
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import guardkit_state
from guardkit_state.errors import (
    DuplicateKeyError,
    FrontmatterError,
    GuardkitStateError,
    InputError,
    WriteVerificationError,
)
from guardkit_state.taskfile.frontmatter import parse_frontmatter
from guardkit_state.taskfile.handler import FrontmatterHandler
from guardkit_state.yamltext.strict_yaml import parse_yaml
from guardkit_state.yamltext.verify import first_difference

TASK = """\
---
# GuardKit task
id: TASK-042
title: "Fix the refresh path"   # shown in the board
status: backlog
created: 2025-11-02T10:00:00Z
priority: high

tags:
  - auth     # first
  - refresh
owner:
  name: 'Ann'
  # reached on weekdays
  team: core
---

# Fix the refresh path

Some text.
-----
"""


def changed_lines(old: str, new: str) -> list[str]:
    return [line for line in difflib.ndiff(old.splitlines(True), new.splitlines(True)) if line[:1] in "+-"]


def load_text(text: str) -> frontmatter.Post:
    return frontmatter.loads(text, handler=FrontmatterHandler())


# --------------------------------------------------------------------------- reading


def test_load_from_a_file_and_dump_unchanged_is_byte_identical(tmp_path: Path) -> None:
    path = tmp_path / "TASK-042.md"
    path.write_text(TASK, encoding="utf-8")
    post = frontmatter.load(path, handler=FrontmatterHandler())
    assert post.metadata == {
        "id": "TASK-042", "title": "Fix the refresh path", "status": "backlog",
        "created": "2025-11-02T10:00:00Z", "priority": "high", "tags": ["auth", "refresh"],
        "owner": {"name": "Ann", "team": "core"},
    }
    assert post.content == "# Fix the refresh path\n\nSome text.\n-----"
    assert frontmatter.dumps(post) == TASK
    out = tmp_path / "out.md"
    frontmatter.dump(post, out)
    assert out.read_bytes() == TASK.encode()


def test_dates_stay_strings_and_yaml_11_scalars_keep_their_types() -> None:
    post = load_text("---\nday: 2025-12-24\nflag: yes\nnothing: ~\nn: 0x1F\nf: 1.5\n---\n")
    assert post.metadata == {"day": "2025-12-24", "flag": True, "nothing": None, "n": 31, "f": 1.5}


@pytest.mark.parametrize(("text", "error", "line"), [
    ("---\na: 1\nb: 2\na: 3\n---\nbody\n", DuplicateKeyError, 4),
    ("---\na: 1\nbody without a closing line\n", FrontmatterError, 1),
    ("---\na: !!python/object/apply:os.system ['true']\n---\n", FrontmatterError, 2),
    ("---\n- a list\n---\n", FrontmatterError, 2),
    ("---\na: [1, 2\n---\n", FrontmatterError, 3),
    ("---\ncontent: the body?\n---\n", FrontmatterError, 2),
])
def test_the_strict_reader_refuses_with_typed_errors(text: str, error: type[Exception], line: int) -> None:
    with pytest.raises(error) as caught:
        load_text(text)
    assert isinstance(caught.value, GuardkitStateError) and caught.value.line == line


def test_errors_name_the_file_loaded_with_read(tmp_path: Path) -> None:
    path = tmp_path / "bad.md"
    path.write_text("---\na: 1\na: 2\n---\n", encoding="utf-8")
    with pytest.raises(DuplicateKeyError) as caught:
        FrontmatterHandler().read(path)
    assert caught.value.path == path and caught.value.line == 3


def test_a_text_without_frontmatter_has_no_metadata_and_dumps_unchanged() -> None:
    text = "\n\n# Notes\n\n---\nnot: metadata\n---\n\n"
    post = load_text(text)
    assert post.metadata == {} and frontmatter.dumps(post) == text


def test_the_whitespace_python_frontmatter_strips_is_kept() -> None:
    for text in ("---\na: 1\n---", "---\na: 1\n---\n", "---\na: 1\n---\n\n\nbody\n\n", "\ufeff---\na: 1\n---\nx",
                 "---\n---\n", "", "   \n", "body only"):
        assert frontmatter.dumps(load_text(text)) == text, repr(text)


# --------------------------------------------------------------------------- saving


def test_changing_status_changes_only_that_line() -> None:
    post = load_text(TASK)
    post["status"] = "in_review"
    out = frontmatter.dumps(post)
    assert out == TASK.replace("status: backlog", "status: in_review")


def test_a_fresh_handler_at_dump_time_uses_the_text_the_post_was_loaded_from() -> None:
    post = load_text(TASK)
    post["priority"] = "low"
    assert frontmatter.dumps(post, handler=FrontmatterHandler()) == TASK.replace("priority: high", "priority: low")


def test_in_place_scalar_keeps_quotes_elsewhere_and_trailing_comment() -> None:
    post = load_text(TASK)
    post["title"] = "It's done: really"
    out = frontmatter.dumps(post)
    assert changed_lines(TASK, out) == [
        '- title: "Fix the refresh path"   # shown in the board\n',
        "+ title: \"It's done: really\"   # shown in the board\n",
    ] or changed_lines(TASK, out) == [
        '- title: "Fix the refresh path"   # shown in the board\n',
        "+ title: 'It''s done: really'   # shown in the board\n",
    ]
    assert load_text(out)["title"] == "It's done: really"


def test_added_keys_go_at_the_end_and_deleted_keys_take_their_lines() -> None:
    post = load_text(TASK)
    del post["created"]
    del post["tags"]
    post["assignee"] = "bob"
    post["links"] = {"pr": 12}
    out = frontmatter.dumps(post)
    expected = (TASK.replace("created: 2025-11-02T10:00:00Z\n", "")
                .replace("tags:\n  - auth     # first\n  - refresh\n", "")
                .replace("  team: core\n---", "  team: core\nassignee: bob\nlinks:\n  pr: 12\n---"))
    assert out == expected
    assert list(load_text(out).metadata) == ["id", "title", "status", "priority", "owner", "assignee", "links"]


def test_nested_changes_touch_only_the_nested_lines() -> None:
    post = load_text(TASK)
    post["owner"]["team"] = "platform"
    post["owner"]["since"] = "2024-01-01"
    post["tags"].append("oauth")
    out = frontmatter.dumps(post)
    assert changed_lines(TASK, out) == [
        "+   - oauth\n", "-   team: core\n", "+   team: platform\n", "+   since: '2024-01-01'\n",
    ]
    assert load_text(out)["owner"] == {"name": "Ann", "team": "platform", "since": "2024-01-01"}


def test_a_value_rewritten_whole_keeps_the_comment_on_its_key_line() -> None:
    text = "---\nids: [1, 2]  # keep me\nz: 0\n---\n"
    post = load_text(text)
    post["ids"] = [1, 2, {"three": 3}]
    out = frontmatter.dumps(post)
    assert out == "---\nids:  # keep me\n- 1\n- 2\n- three: 3\nz: 0\n---\n"


def test_a_flow_list_of_simple_words_stays_a_flow_list() -> None:
    post = load_text("---\nids: [1, 2]  # keep\nz: 0\n---\n")
    post["ids"].append(3)
    assert frontmatter.dumps(post) == "---\nids: [1, 2, 3]  # keep\nz: 0\n---\n"


def test_a_list_of_mappings_is_edited_item_by_item() -> None:
    text = "---\nsteps:\n- name: a  # first\n  done: false\n- name: b\n  done: false  # last\n---\n"
    post = load_text(text)
    post["steps"][1]["done"] = True
    post["steps"][0]["owner"] = "ann"
    assert frontmatter.dumps(post) == ("---\nsteps:\n- name: a  # first\n  done: false\n  owner: ann\n- name: b\n"
                                       "  done: true  # last\n---\n")


def test_a_rewrite_that_would_drop_a_comment_is_refused() -> None:
    post = load_text(TASK)
    post["tags"] = ["refresh"]  # not an append: the list is rewritten, and '# first' would go
    with pytest.raises(FrontmatterError) as caught:
        frontmatter.dumps(post)
    assert caught.value.line == 10 and "comment" in caught.value.message


def test_a_changed_anchor_read_through_an_alias_is_refused() -> None:
    post = load_text("---\nbase: &b 1\ncopy: *b\n---\n")
    post["base"] = 2
    with pytest.raises(WriteVerificationError) as caught:
        frontmatter.dumps(post)
    assert caught.value.pointer == "$.copy"


def test_keys_cannot_be_appended_after_a_document_end_line() -> None:
    post = load_text("---\na: 1\n...\n---\n")
    post["b"] = 2
    with pytest.raises(FrontmatterError, match="document-end"):
        frontmatter.dumps(post)


def test_changed_content_keeps_the_whitespace_around_the_body() -> None:
    post = load_text(TASK)
    post.content = "# New title"
    assert frontmatter.dumps(post) == TASK.split("---\n\n")[0] + "---\n\n# New title\n"


def test_dates_set_from_python_are_written_as_the_strings_the_reader_gives() -> None:
    post = load_text(TASK)
    post["created"] = dt.datetime(2025, 11, 2, 10, 0, tzinfo=dt.UTC)
    post["due"] = dt.date(2026, 1, 31)
    out = frontmatter.dumps(post)
    assert changed_lines(TASK, out) == [
        "- created: 2025-11-02T10:00:00Z\n", "+ created: '2025-11-02T10:00:00+00:00'\n", "+ due: '2026-01-31'\n",
    ]


def test_metadata_given_for_a_text_without_frontmatter_creates_one() -> None:
    post = load_text("# Title\n\nbody\n")
    post["id"] = "TASK-1"
    assert frontmatter.dumps(post) == "---\nid: TASK-1\n---\n# Title\n\nbody\n"


def test_no_frontmatter_is_created_above_a_look_alike_delimiter() -> None:
    post = load_text("\n---\nid: x\n---\nbody\n")
    assert post.metadata == {}
    post["id"] = "TASK-1"
    with pytest.raises(FrontmatterError, match="not a frontmatter delimiter"):
        frontmatter.dumps(post)


def test_read_keeps_crlf_which_python_frontmatter_itself_turns_into_lf(tmp_path: Path) -> None:
    text = "---\r\nid: TASK-1\r\nstatus: backlog  # c\r\n---\r\n\r\nBody\r\n"
    path = tmp_path / "crlf.md"
    path.write_bytes(text.encode())
    post = FrontmatterHandler().read(path)
    assert frontmatter.dumps(post) == text
    post["status"] = "done"
    post.content = "New\nbody"
    assert frontmatter.dumps(post) == "---\r\nid: TASK-1\r\nstatus: done  # c\r\n---\r\n\r\nNew\r\nbody\r\n"
    assert frontmatter.dumps(frontmatter.load(path, handler=FrontmatterHandler())) == text.replace("\r\n", "\n")


def test_a_handler_holds_one_text() -> None:
    handler = FrontmatterHandler()
    first = frontmatter.loads(TASK, handler=handler)
    assert frontmatter.loads(TASK, handler=handler).metadata == first.metadata  # the same text again
    assert handler.text == TASK
    with pytest.raises(InputError, match="one FrontmatterHandler per file"):
        frontmatter.loads("---\nother: 1\n---\n", handler=handler)
    assert frontmatter.dumps(first) == TASK


def test_frontmatter_parse_reads_but_its_post_cannot_be_saved_exactly() -> None:
    handler = FrontmatterHandler()
    metadata, content = frontmatter.parse(TASK, handler=handler)
    assert metadata["status"] == "backlog"
    with pytest.raises(FrontmatterError, match="text around the frontmatter is not known"):
        frontmatter.dumps(frontmatter.Post(content, handler, **metadata))


def test_a_post_not_loaded_through_the_handler_is_written_afresh_and_read_back() -> None:
    post = frontmatter.loads(TASK, handler=YAMLHandler())
    out = frontmatter.dumps(post, handler=FrontmatterHandler())
    assert out.startswith("---\nid: TASK-042\n") and out.endswith("\n-----\n")
    again = load_text(out)
    assert again.metadata == {**post.metadata, "created": "2025-11-02T10:00:00+00:00"}
    assert FrontmatterHandler().export({"a": "yes", "b": [1]}) == "a: 'yes'\nb:\n- 1"


def test_python_frontmatter_options_are_refused() -> None:
    with pytest.raises(TypeError, match="sort_keys"):
        frontmatter.dumps(load_text(TASK), sort_keys=True)


def test_dump_to_a_file_object() -> None:
    post = load_text(TASK)
    post["status"] = "done"
    sink = io.StringIO()
    frontmatter.dump(post, sink)
    assert sink.getvalue() == TASK.replace("status: backlog", "status: done")


def test_exported_from_the_package() -> None:
    assert guardkit_state.FrontmatterHandler is FrontmatterHandler


# --------------------------------------------------------------------------- properties


@dataclass
class Entry:
    """A generated top-level entry: its data, its lines, and whether a comment sits inside its value."""

    key: str
    value: Any
    lines: list[str]
    inner_comment: bool = False
    kind: str = "scalar"


@dataclass
class Document:
    text: str
    data: dict[str, Any]
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)  # key -> its lines [start, end)
    closing: int = 0  # the line index of the closing '---'
    entries: dict[str, Entry] = field(default_factory=dict)


def plain_key(key: str) -> bool:
    """A key YAML reads as that string (not ``yes``, ``null`` ...), and one ``Post`` accepts."""
    data = parse_yaml(f"{key}: 1\n").data
    return isinstance(data, dict) and list(data) == [key] and key not in ("content", "handler")


KEYS = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True).filter(plain_key)
WORDS = st.text(alphabet=string.ascii_letters + string.digits + " -_.,:#'\"!?é/", max_size=14)  # no '~'
SCALARS = st.one_of(
    WORDS, st.integers(-10**6, 10**6), st.booleans(), st.none(),
    st.dates(min_value=dt.date(1990, 1, 1), max_value=dt.date(2100, 1, 1)).map(dt.date.isoformat),
    st.sampled_from([1.5, -0.25, 100.0]),
)


def reads_as(written: str, value: Any) -> bool:
    try:
        data = parse_yaml(f"k: {written}\n").data
    except GuardkitStateError:
        return False
    return isinstance(data, dict) and first_difference({"k": value}, data) is None


def spellings(value: Any, flow: bool = False) -> list[str]:
    """Ways to write ``value`` as a one-line scalar that read back as exactly ``value``."""
    if value is None:
        candidates = ["~", "null", "Null"] + ([] if flow else [""])
    elif isinstance(value, bool):
        candidates = [str(value).lower(), str(value), "yes" if value else "no", "on" if value else "off"]
    elif isinstance(value, str):
        plain = [value] if not flow or re.fullmatch(r"[A-Za-z][A-Za-z0-9 _.]*", value) else []
        candidates = [*plain, "'" + value.replace("'", "''") + "'", json.dumps(value, ensure_ascii=False)]
    else:
        candidates = [repr(value) if isinstance(value, float) else str(value)]
    good = [c for c in candidates if reads_as(c, value)]
    assert good, value
    return good


@st.composite
def scalar_text(draw: st.DrawFn, value: Any, flow: bool = False) -> str:
    return draw(st.sampled_from(spellings(value, flow)))


@st.composite
def entries(draw: st.DrawFn, key: str) -> Entry:
    kind = draw(st.sampled_from(["scalar", "scalar", "block_list", "flow_list", "map"]))
    comment = draw(st.sampled_from(["", "", "  #~note", " #~ k: v"]))
    if kind == "scalar":
        value = draw(SCALARS)
        written = draw(scalar_text(value))
        return Entry(key, value, [f"{key}: {written}{comment}".rstrip(" ")])
    if kind == "flow_list":
        items = draw(st.lists(SCALARS, max_size=3))
        written = ", ".join(draw(scalar_text(item, flow=True)) for item in items)
        return Entry(key, items, [f"{key}: [{written}]{comment}"], kind=kind)
    indent = draw(st.sampled_from([0, 2, 4])) if kind == "block_list" else draw(st.sampled_from([2, 4]))
    lines = [f"{key}:"]
    inner = False
    if kind == "block_list":
        value: Any = draw(st.lists(SCALARS, min_size=1, max_size=4))
        for item in value:
            note = draw(st.sampled_from(["", "", "  #~item"]))
            written = draw(scalar_text(item))
            inner = inner or (bool(note) and bool(written))
            lines.append(f"{' ' * indent}- {written}{note if written else ''}")
    else:
        value = {}
        for sub in draw(st.lists(KEYS, min_size=1, max_size=4, unique=True)):
            value[sub] = draw(SCALARS)
            if draw(st.booleans()) and len(value) > 1:
                lines.append(f"{' ' * indent}#~about {sub}")
                inner = True
            lines.append(f"{' ' * indent}{sub}: {draw(scalar_text(value[sub]))}".rstrip(" "))
    return Entry(key, value, lines, inner, kind)


@st.composite
def documents(draw: st.DrawFn) -> Document:
    keys = draw(st.lists(KEYS, min_size=1, max_size=6, unique=True))
    lines = ["---"]
    doc = Document("", {})
    for key in keys:
        for _ in range(draw(st.integers(0, 2))):
            lines.append(draw(st.sampled_from(["", "#~a comment", "#~", "   "])))
        entry = draw(entries(key))
        doc.spans[key] = (len(lines), len(lines) + len(entry.lines))
        doc.entries[key] = entry
        doc.data[key] = entry.value
        lines.extend(entry.lines)
    if draw(st.booleans()):
        lines.append("#~closing remark")
    doc.closing = len(lines)
    lines.append("---")
    body = draw(st.sampled_from(["", "\n# Title\n\nbody text\n---\nmore", "body", "\n\n  indented\n"]))
    end = draw(st.sampled_from(["", "\n", "\n\n"]))
    doc.text = "\n".join(lines) + "\n" + body + end if body or end else "\n".join(lines)
    return doc


@dataclass
class Mutation:
    kind: str
    key: str
    expected: dict[str, Any]
    lines: tuple[int, int]  # the original lines the change may touch [start, end)


NEW_VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=3),
                       st.dictionaries(KEYS, SCALARS, min_size=1, max_size=3))


@st.composite
def mutations(draw: st.DrawFn, doc: Document) -> Mutation:
    data = json.loads(json.dumps(doc.data))  # a deep copy
    keys = list(data)
    kind = draw(st.sampled_from(["set", "set_scalar", "delete", "add", "nested", "append"]))
    # A nested change or an append goes to a map or a list when the document has one.
    wanted = {"nested": dict, "append": list}.get(kind)
    fitting = [k for k in keys if wanted is not None and isinstance(data[k], wanted)]
    key = draw(st.sampled_from(fitting or keys))
    span = doc.spans[key]
    if kind == "nested" and isinstance(data[key], dict):
        sub = draw(st.sampled_from([*data[key], "added_sub"]))
        data[key][sub] = draw(SCALARS)
    elif kind == "append" and isinstance(data[key], list):
        data[key].append(draw(SCALARS))
    elif kind == "delete":
        del data[key]
    elif kind == "add":
        new_key = draw(KEYS.filter(lambda k: k not in data))
        data[new_key] = draw(NEW_VALUES)
        key, span = new_key, (doc.closing, doc.closing)
    elif kind == "set_scalar":
        data[key] = draw(SCALARS)
    else:
        kind = "set"
        data[key] = draw(NEW_VALUES)
    return Mutation(kind, key, data, span)


def assert_only_lines_changed(old: str, new: str, start: int, end: int) -> None:
    """Every line of ``old`` before ``start`` and from ``end`` on is in ``new``, unchanged and in place."""
    a, b = old.split("\n"), new.split("\n")
    tail = len(a) - end
    assert b[:start] == a[:start]
    assert b[len(b) - tail:] == a[end:]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_generated_frontmatter_round_trips_and_saves_only_the_changed_key(data: st.DataObject) -> None:
    doc = data.draw(documents())
    post = load_text(doc.text)
    assert first_difference(doc.data, post.metadata) is None, (doc.text, post.metadata)
    assert frontmatter.dumps(post) == doc.text
    change = data.draw(mutations(doc))
    post.metadata.clear()
    post.metadata.update(change.expected)
    event(f"{change.kind} on a {doc.entries[change.key].kind if change.key in doc.entries else 'new key'}")
    try:
        out = frontmatter.dumps(post)
    except FrontmatterError as refused:
        event("refused: a comment would be dropped")
        assert not isinstance(refused, WriteVerificationError), refused
        # Only a rewrite of a whole value holding a comment is refused.
        assert change.kind in ("set", "set_scalar", "nested") and doc.entries[change.key].inner_comment, refused
        return
    reread = parse_frontmatter(out).data
    assert first_difference(change.expected, reread) is None, (doc.text, out)
    assert_only_lines_changed(doc.text, out, *change.lines)
    # Comments (written '#~', which no generated value contains) survive unless their key was deleted.
    deleted = "\n".join(doc.entries[change.key].lines) if change.kind == "delete" else ""
    assert out.count("#~") == doc.text.count("#~") - deleted.count("#~"), (doc.text, out)
    if change.kind == "set_scalar" and doc.entries[change.key].kind == "scalar":
        assert len(out.split("\n")) == len(doc.text.split("\n"))  # the one line, rewritten in place


@settings(max_examples=100, deadline=None)
@given(documents(), st.sampled_from(["New body", "", "  spaced\n\nlines  "]))
def test_changing_the_body_keeps_the_frontmatter_bytes(doc: Document, content: str) -> None:
    post = load_text(doc.text)
    post.content = content
    out = frontmatter.dumps(post)
    head = "\n".join(doc.text.split("\n")[: doc.closing + 1])
    assert out.startswith(head)
    assert load_text(out).content == content.strip()
    body = doc.text[len(head):]
    if body.strip() and content.strip():  # the whitespace around the body is kept
        assert out.endswith(body[len(body.rstrip()):])
        assert out[len(head):].startswith(body[: len(body) - len(body.lstrip())])


# --------------------------------------------------------------------------- the real corpus


def corpus_files(corpus_dir: Path) -> list[Path]:
    tasks = corpus_dir / "tasks"
    if not tasks.is_dir():
        pytest.skip(f"no tasks/ directory in the corpus at {corpus_dir}")
    return sorted(path for path in tasks.rglob("*.md") if path.is_file())


@pytest.mark.corpus
def test_every_corpus_task_file_round_trips_or_is_refused_with_a_typed_error(corpus_dir: Path) -> None:
    files = corpus_files(corpus_dir)
    refused: Counter[str] = Counter()
    identical = status_changes = 0
    for path in files:
        raw = path.read_bytes().decode("utf-8")
        try:
            strict_error: GuardkitStateError | None = None
            parse_frontmatter(raw, path=path)
        except GuardkitStateError as exc:
            strict_error = exc
        try:
            post = frontmatter.load(path, handler=FrontmatterHandler())
        except (FrontmatterError, DuplicateKeyError) as exc:
            assert strict_error is not None and type(exc) is type(strict_error), path
            assert exc.line == strict_error.line, path
            refused[type(exc).__name__] += 1
            continue
        assert strict_error is None, path
        assert frontmatter.dumps(post) == raw, path
        identical += 1
        if not post.metadata:
            continue
        had_status = "status" in post
        post["status"] = "backlog" if post.get("status") == "in_review" else "in_review"
        changed = changed_lines(raw, frontmatter.dumps(post))
        status_line = [line for line in changed if line.startswith("+ status: ")]
        assert len(status_line) == 1 and len(changed) == (2 if had_status else 1), (path, changed)
        status_changes += 1
    assert identical + sum(refused.values()) == len(files)
    assert refused == {"FrontmatterError": 10, "DuplicateKeyError": 4}
    assert identical == 1005 and status_changes == 727
