"""A key repeated in a task's frontmatter (GuardKit's whole-file re-dumps leave some): read as its
last value with a one-line warning naming both lines; any write to the file refused, one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from guardkit_state.cli.app import run as cli_run
from guardkit_state.errors import DuplicateKeyError
from guardkit_state.yamltext.strict_yaml import parse_yaml

from .helpers import coach_decision, player_report

TASK = """---
id: TASK-DUP-001
title: Written twice by a re-dump
status: backlog
priority: high
status: in_review
---

# TASK-DUP-001

## Acceptance Criteria

- [ ] it works
"""


class _PyYaml(yaml.SafeLoader):
    """PyYAML's pure-Python safe loader (the oracle: the last of two keys wins), dates as text."""


_PyYaml.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}

_keys = st.sampled_from(["status", "id", "tags", "a", "b"])
_values = st.one_of(st.integers(-5, 5), st.sampled_from(["x", "y z", "2026-01-02", "true", "null"]))


@given(st.lists(st.tuples(_keys, _values), min_size=1, max_size=8), st.booleans())
def test_keep_last_reads_what_pyyaml_reads_and_lists_each_repeat(pairs: list[tuple[str, Any]], nested: bool) -> None:
    lines = [f"{key}: {json.dumps(value)}" for key, value in pairs]
    text = "\n".join(["outer:", *("  " + line for line in lines)] if nested else lines) + "\n"
    parsed = parse_yaml(text, keep_last=True)
    assert parsed.data == yaml.load(text, Loader=_PyYaml)
    offset = 2 if nested else 1
    expected = []
    first: dict[str, int] = {}
    for number, (key, _) in enumerate(pairs):
        if key in first:
            expected.append((key, first[key], number + offset))
        else:
            first[key] = number + offset
    assert [(d.key, d.first_line, d.line) for d in parsed.duplicates] == expected
    if expected:
        with pytest.raises(DuplicateKeyError):  # without keep_last: refused, as before
            parse_yaml(text)


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli_run(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def repo(git_repo: Path) -> Path:
    path = git_repo / "tasks" / "in_review" / "TASK-DUP-001.md"
    path.parent.mkdir(parents=True)
    path.write_text(TASK, encoding="utf-8")
    return git_repo


def test_show_reads_the_last_value_and_warns_once_naming_both_lines(repo: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(capsys, "show", "TASK-DUP-001", "--json", "--repo", str(repo))
    assert code == 0, err
    assert json.loads(out)["status"] == "in_review"
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: {repo / 'tasks/in_review/TASK-DUP-001.md'}:6: duplicate key 'status' on lines "
                        "4 and 6: the last value is read (as GuardKit reads it)"]


def test_status_lists_it_and_show_opens_it(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = repo / "tasks" / "in_review" / "TASK-DUP-001.md"
    path.write_text(TASK.replace("---\n\n#", "autobuild_state:\n  current_turn: 1\n  turns:\n  - turn: 1\n"
                                 "    decision: feedback\n---\n\n#", 1), encoding="utf-8")
    code, out, _ = _cli(capsys, "status", "--json", "--repo", str(repo))
    (row,) = json.loads(out)
    assert code == 0 and row["error"] is None and (row["status"], row["turns"]) == ("in_review", 1)


def test_recording_a_turn_is_refused_in_one_line_and_writes_nothing(repo: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    player, coach = tmp_path / "p.json", tmp_path / "c.json"
    player.write_text(json.dumps(player_report(1, task_id="TASK-DUP-001")), encoding="utf-8")
    coach.write_text(json.dumps(coach_decision(1, "feedback", task_id="TASK-DUP-001", feedback="more")),
                     encoding="utf-8")
    before = sorted(p for p in repo.rglob("*") if ".git" not in p.parts)
    text = (repo / "tasks/in_review/TASK-DUP-001.md").read_bytes()
    code, _, err = _cli(capsys, "record", "TASK-DUP-001", "--player", str(player), "--coach", str(coach),
                        "--repo", str(repo))
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1, err
    assert "duplicate key 'status' on lines 4 and 6; not written: keep one line of each key" in errors[0]
    assert (repo / "tasks/in_review/TASK-DUP-001.md").read_bytes() == text
    assert sorted(p for p in repo.rglob("*") if ".git" not in p.parts) == before


def _with_state(task_id: str) -> str:
    return TASK.replace("TASK-DUP-001", task_id).replace(
        "---\n\n#", "autobuild_state:\n  current_turn: 1\n  turns:\n  - turn: 1\n    decision: feedback\n---\n\n#", 1)


def test_warnings_a_command_cannot_act_on_fold_into_one_line(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``status`` of a GuardKit repository: one line pointing at validate, not one per file, on every
    run (the same line whether the files were parsed now or their summaries came from the cache)."""
    for n in (1, 2, 3):
        path = repo / "tasks" / "in_review" / f"TASK-DUP-00{n}.md"
        path.write_text(_with_state(f"TASK-DUP-00{n}"), encoding="utf-8")
    folded = ("warning: 3 other task files repeat a key (read as GuardKit reads it, the last value winning; never "
              "written to until fixed): 'guardkit-state validate tasks' lists them")
    for _ in range(2):
        code, _, err = _cli(capsys, "status", "--repo", str(repo))
        assert code == 0
        assert [line for line in err.splitlines() if line.startswith("warning:")] == [folded]


def test_the_task_a_command_is_about_is_warned_of_in_full(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = repo / "tasks" / "in_review" / "TASK-DUP-002.md"
    other.write_text(_with_state("TASK-DUP-002"), encoding="utf-8")
    (repo / "tasks" / "in_review" / "TASK-DUP-001.md").write_text(_with_state("TASK-DUP-001"), encoding="utf-8")
    from guardkit_state.inspect.status import repo_status

    repo_status(repo)  # a warning the same process gave before is given again in the next command
    code, _, err = _cli(capsys, "show", "TASK-DUP-001", "--repo", str(repo))
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: {repo / 'tasks/in_review/TASK-DUP-001.md'}:6: duplicate key 'status' on lines "
                        "4 and 6: the last value is read (as GuardKit reads it)"]
