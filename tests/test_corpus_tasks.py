"""Every real GuardKit task file: strict reads with typed errors, no-op saves, surgical turn appends.

The corpus is read in place and copied to ``tmp_path`` before anything is written.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from guardkit_state.errors import DuplicateKeyError, FrontmatterError, GuardkitStateError
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.taskfile.frontmatter import parse_frontmatter
from guardkit_state.taskfile.splice import StateUpdate

from .conftest import run_git, writable_copy

pytestmark = pytest.mark.corpus

NEW_TURN: dict[str, Any] = {
    "turn": 0,  # set per file
    "mode": "continuing_work",
    "decision": "feedback",
    "feedback": "- Not all criteria met:\n  • AC-002 still failing — 'null' ≠ 12\n-----\nsee above",
    "timestamp": "2026-11-21T10:05:00+00:00",
    "player_summary": "Fixed: the refresh path",
    "player_success": True,
    "coach_success": False,
}

#: Lines an appended turn may remove: the scalars it changes, and ``turns: []`` becoming a list.
CHANGED_LINE = re.compile(r"^\s*(current_turn: .*|last_updated: .*|turns: \[\])$")


@pytest.fixture(scope="module")
def tasks_copy(corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus") / "repo"
    writable_copy(corpus_dir / "tasks", root / "tasks")
    return root


class _DatesAsText(yaml.SafeLoader):
    """PyYAML's own pure-Python safe loader (the last of two keys wins), dates left as text."""


_DatesAsText.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}


def _pyyaml_with_dates_as_text(text: str) -> Any:
    return yaml.load(text, Loader=_DatesAsText)


def all_markdown(root: Path) -> list[Path]:
    return sorted(p for p in (root / "tasks").rglob("*.md") if p.is_file())


def load_all(root: Path) -> tuple[dict[Path, TaskFile], dict[Path, GuardkitStateError]]:
    loaded: dict[Path, TaskFile] = {}
    failed: dict[Path, GuardkitStateError] = {}
    for path in all_markdown(root):
        try:
            loaded[path] = TaskFile.load(path)
        except GuardkitStateError as exc:
            failed[path] = exc
    return loaded, failed


def test_every_task_file_is_read_or_fails_with_a_typed_error(tasks_copy: Path) -> None:
    loaded, failed = load_all(tasks_copy)
    with_frontmatter = [t for t in loaded.values() if t.has_frontmatter]
    kinds = Counter(type(exc).__name__ for exc in failed.values())
    assert len(loaded) + len(failed) == len(all_markdown(tasks_copy)) == 1019
    assert len(with_frontmatter) == 731
    assert len(loaded) - len(with_frontmatter) == 278
    assert kinds == {"FrontmatterError": 10}
    for exc in failed.values():
        assert exc.path is not None and exc.line is not None
    # GuardKit's re-dumps repeat keys: read as PyYAML (so GuardKit) reads them, the last value winning.
    repeated = {p.name: t for p, t in loaded.items() if t._parsed is not None and t._parsed.duplicates}
    assert sorted(repeated) == [
        "TASK-FBSDK-024-feature-code-test-case.md",
        "TASK-MTS-002-create-settings-json.md",
        "TASK-MTS-007-create-testing-specialist-agent.md",
        "TASK-MTS-010-create-claude-md-files.md",
    ]
    for task in repeated.values():
        assert task.data == _pyyaml_with_dates_as_text(task.split.yaml_text), task.path
    states = [t for t in loaded.values() if t.state is not None]
    assert len(states) == 124
    assert all(t.state_key == "autobuild_state" for t in states)


@pytest.mark.parametrize(
    ("relative", "error", "line", "text"),
    [
        # the closing '---' is missing: YAML runs into the body
        ("completed/2026-04/TASK-ABSR-CEIL-skip-phase4-5-on-sdk-ceiling-hit.md", FrontmatterError, 42,
         "closing '---' missing before line 39"),
        # a key wedged into a list
        ("completed/TASK-FBSDK-004/TASK-FBSDK-004.md", FrontmatterError, 18, "did not find expected key"),
        # unquoted colons
        ("completed/TASK-020/TASK-020.md", FrontmatterError, 27, "mapping values are not allowed"),
        ("completed/2026-04/TASK-FIX-RWOP1.1-wire-feature-plan-step-11-bdd-linking.md", FrontmatterError, 3,
         "mapping values are not allowed"),
    ],
)
def test_known_bad_files_report_the_right_line(
    tasks_copy: Path, relative: str, error: type[GuardkitStateError], line: int, text: str
) -> None:
    path = tasks_copy / "tasks" / relative
    with pytest.raises(error) as info:
        TaskFile.load(path)
    assert type(info.value) is error
    assert info.value.line == line
    assert info.value.path == path
    assert text in str(info.value)


def test_noop_apply_leaves_every_file_byte_identical(tasks_copy: Path) -> None:
    loaded, _ = load_all(tasks_copy)
    for path, task in loaded.items():
        before = path.read_bytes()
        scalars = {}
        if task.state is not None:
            block = task.data[task.state_key]
            scalars = {k: block[k] for k in ("current_turn", "last_updated", "max_turns") if k in block}
        top = {"status": task.data["status"]} if "status" in task.data else {}
        for update in (StateUpdate(), StateUpdate(block_scalars=scalars, top_level=top)):
            if task._parsed is not None and task._parsed.duplicates:
                with pytest.raises(DuplicateKeyError):  # a file repeating a key is never written
                    task.apply(update)
            else:
                assert task.apply(update).method == "noop", path
        assert path.read_bytes() == before, path


@pytest.mark.slow
def test_appending_a_turn_to_every_state_block(corpus_dir: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    writable_copy(corpus_dir / "tasks", repo / "tasks")
    run_git(repo, "init", "-q", "-b", "main")
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", "corpus")
    candidates = [p for p in all_markdown(repo) if re.search(r"^autobuild_state:", p.read_text(), re.M)]
    assert len(candidates) == 124
    appended: dict[Path, tuple[str, dict[str, Any], int]] = {}
    refused: list[Path] = []
    for path in candidates:
        task = TaskFile.load(path)
        assert task.state is not None
        n = task.state.next_turn
        update = StateUpdate(
            block_scalars={"current_turn": n, "last_updated": "2026-11-21T10:05:00+00:00"},
            append_turns=[{**NEW_TURN, "turn": n}],
        )
        before = path.read_bytes()
        try:
            old_text, old_data = task.text, parse_frontmatter(task.text).data
        except DuplicateKeyError:
            # Read (the last value wins) but never written: which value to keep is the user's call.
            with pytest.raises(DuplicateKeyError, match="not written: keep one line of each key"):
                task.apply(update)
            assert path.read_bytes() == before
            refused.append(path)
            continue
        result = task.apply(update)
        assert result.method == "splice", (path, result.reason)
        appended[path] = (old_text, old_data, n)
    assert len(appended) == 121
    assert [p.name for p in refused] == [
        "TASK-MTS-002-create-settings-json.md",
        "TASK-MTS-007-create-testing-specialist-agent.md",
        "TASK-MTS-010-create-claude-md-files.md",
    ]

    for path, (old_text, old_data, n) in appended.items():
        new_text = path.read_text()
        new_data = parse_frontmatter(new_text).data
        old_block, new_block = old_data["autobuild_state"], new_data["autobuild_state"]
        # the old state plus exactly that turn; every other key untouched
        assert new_block["turns"] == (old_block["turns"] or []) + [{**NEW_TURN, "turn": n}], path
        assert new_block["current_turn"] == n
        assert new_block["last_updated"] == "2026-11-21T10:05:00+00:00"
        assert {k: v for k, v in new_block.items() if k not in ("turns", "current_turn", "last_updated")} == {
            k: v for k, v in old_block.items() if k not in ("turns", "current_turn", "last_updated")}
        assert {k: v for k, v in new_data.items() if k != "autobuild_state"} == {
            k: v for k, v in old_data.items() if k != "autobuild_state"}
        assert new_text.endswith(old_text[old_text.index("\n---", 3) :])  # body bytes kept
        removed = [d[2:].rstrip("\n") for d in difflib.ndiff(old_text.splitlines(True), new_text.splitlines(True))
                   if d.startswith("- ")]
        assert all(CHANGED_LINE.match(line) for line in removed), (path, removed)

    # the same check through a real `git diff`, for every appended file
    numstat = run_git(repo, "diff", "--numstat")
    stats = {line.split("\t")[2]: (int(line.split("\t")[0]), int(line.split("\t")[1]))
             for line in numstat.splitlines()}
    assert set(stats) == {str(p.relative_to(repo)) for p in appended}
    turn_lines = 12  # NEW_TURN renders as 12 lines: 8 keys, its feedback a 4-line literal block
    for name, (added, deleted) in stats.items():
        assert 1 <= deleted <= 3, (name, deleted)
        assert added >= deleted + turn_lines, (name, added)
    zero_context = run_git(repo, "diff", "-U0", "--no-color")
    removed = [line[1:] for line in zero_context.splitlines() if line.startswith("-") and not line.startswith("---")]
    assert removed and all(CHANGED_LINE.match(line) for line in removed)


def test_harv_006_round_trips(tasks_copy: Path) -> None:
    """GuardKit's split("---", 2) truncates this file: a '-----' sits inside a feedback string."""
    for path in sorted((tasks_copy / "tasks").rglob("TASK-HARV-006-acceptance-tests.md")):
        before = path.read_bytes()
        task = TaskFile.load(path)
        assert task.task_id == "TASK-HARV-006"
        assert task.state is not None
        assert "\n---------------" in (task.state.turns[0].feedback or "")
        assert task.body.startswith("\n# ")
        assert task.text.count("\n") - task.body.count("\n") == 46  # the closing '---' is line 46
        assert task.apply(StateUpdate(block_scalars={"current_turn": task.state.current_turn})).method == "noop"
        assert path.read_bytes() == before
        n = task.state.next_turn
        result = task.apply(StateUpdate(block_scalars={"current_turn": n}, append_turns=[{**NEW_TURN, "turn": n}]))
        assert result.method == "splice"
        reread = TaskFile.load(path)
        assert reread.state == task.state
        assert reread.body == task.body
        assert [t.turn for t in reread.state.turns] == list(range(1, n + 1))  # type: ignore[union-attr]
