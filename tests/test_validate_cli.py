"""``guardkit-state validate`` on directories of real fixture files: exact lines and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from guardkit_state.cli.app import run
from guardkit_state.inspect.validation import kind_of, validate_file, validate_paths

TASK_OK = """\
---
id: TASK-A-001
title: A valid task   # a comment
status: in_progress
autobuild_state:
  current_turn: 1
  max_turns: 5
  worktree_path: .guardkit/worktrees/TASK-A-001
  base_branch: main
  started_at: '2026-11-21T10:00:00+00:00'
  last_updated: 2026-11-21T10:05:00
  turns:
  - turn: 1
    decision: feedback
    feedback: Missing token refresh
    timestamp: '2026-11-21T10:05:00+00:00'
    player_summary: Implemented login
    player_success: true
    coach_success: true
---

# TASK-A-001
"""

TASK_BAD = """\
---
id: TASK-A-002
autobuild_state:
  current_turn: 2
  max_turns: 5
  turns:
  - turn: 1
    decision: approved
    player_success: yes please
  - turn: 2
    decision: feedback
---
body
"""

TASK_GAP = """\
---
id: TASK-A-004
autobuild_state:
  current_turn: 1
  turns:
  - turn: 1
    decision: feedback
  - turn: 3
    decision: feedback
---
"""

TASK_DUP = """\
---
id: TASK-A-003
status: backlog
status: done
---
"""

PLAYER_OK = {"task_id": "TASK-A-001", "turn": 1, "files_modified": [], "tests_run": True,
             "completion_promises": [{"ac_id": "AC-001", "status": "done"}]}
COACH_WARN = {"task_id": "TASK-A-001", "turn": 1, "decision": "feedback",
              "criteria_verification": [{"criterion_id": "AC-001", "result": "verified"},
                                        {"criterion_id": "AC-002", "result": "unverified"}]}
TURN_STATE_MISNAMED = {"id": "TURN-F-TASK-A-001-T2", "task_id": "TASK-A-001", "turn_number": 2,
                       "mode": "continuing_work", "player_decision": "implemented", "coach_decision": "feedback"}


def _tree(root: Path) -> Path:
    tasks = root / "tasks" / "in_progress"
    tasks.mkdir(parents=True)
    (tasks / "TASK-A-001-ok.md").write_text(TASK_OK, encoding="utf-8")
    (tasks / "TASK-A-002-bad.md").write_text(TASK_BAD, encoding="utf-8")
    (tasks / "TASK-A-003-dup.md").write_text(TASK_DUP, encoding="utf-8")
    (tasks / "TASK-A-004-gap.md").write_text(TASK_GAP, encoding="utf-8")
    (tasks / "README.md").write_text("# Tasks\n\nNo frontmatter here.\n", encoding="utf-8")
    reports = root / ".guardkit" / "autobuild" / "TASK-A-001"
    reports.mkdir(parents=True)
    (reports / "player_turn_1.json").write_text(json.dumps(PLAYER_OK, indent=2), encoding="utf-8")
    (reports / "coach_turn_1.json").write_text(json.dumps(COACH_WARN, indent=2), encoding="utf-8")
    (reports / "coach_turn_2.json").write_text('{\n  "task_id": "TASK-A-001",\n  "turn": NaN\n}\n', encoding="utf-8")
    (reports / "turn_state_turn_1.json").write_text(json.dumps(TURN_STATE_MISNAMED), encoding="utf-8")
    (reports / "checkpoints.json").write_text("not json at all", encoding="utf-8")  # skipped: not a report
    git = root / ".git"
    git.mkdir()
    (git / "TASK-Z-9.md").write_text("---\n: broken\n", encoding="utf-8")  # never walked
    return root


def _expected_lines(root: Path) -> list[str]:
    reports = root / ".guardkit" / "autobuild" / "TASK-A-001"
    tasks = root / "tasks" / "in_progress"
    # Errors first, then warnings; README.md beside the tasks is not a task file.
    return [
        f"error: {reports}/coach_turn_2.json:3: NaN is not valid JSON (column 11) "
        "(expected strict JSON (UTF-8, no duplicate keys, no NaN/Infinity))",
        f"error: {reports}/turn_state_turn_1.json: $.turn_number: turn_number 2 does not match the file name "
        "(expected 1)",
        f'error: {tasks}/TASK-A-002-bad.md:8: $.autobuild_state.turns[0].decision: "approved" is not allowed '
        '(expected one of "approve", "feedback", "reject", "error")',
        f'error: {tasks}/TASK-A-002-bad.md:9: $.autobuild_state.turns[0].player_success: '
        'expected boolean or null, got string "yes please"',
        f"error: {tasks}/TASK-A-004-gap.md:8: $.autobuild_state.turns[1].turn: turn 3 is item 2 of turns "
        "(expected turn 2: turns are numbered 1, 2, 3 ... in order)",
        f'warning: {reports}/coach_turn_1.json: $.criteria_verification[1].result: "unverified" read as "rejected"',
        f"warning: {tasks}/TASK-A-003-dup.md:4: duplicate key 'status' on lines 3 and 4: read as the last value "
        "(as GuardKit reads it); guardkit-state will not write to this file until each key is kept once",
        f"warning: {tasks}/TASK-A-004-gap.md:4: $.autobuild_state.current_turn: "
        "current_turn 1 is behind the 2 recorded turns",
        "checked 8 files: 4 valid, 4 invalid, 3 warnings",
    ]


def test_validate_directory_prints_exact_lines_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path)
    code = run(["validate", str(root)])
    captured = capsys.readouterr()
    assert captured.out.splitlines() == _expected_lines(root)
    assert captured.err == ""
    assert code == 1


def test_validate_all_valid_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path)
    ok_task = root / "tasks" / "in_progress" / "TASK-A-001-ok.md"
    player = root / ".guardkit" / "autobuild" / "TASK-A-001" / "player_turn_1.json"
    code = run(["validate", str(ok_task), str(player)])
    assert capsys.readouterr().out == "checked 2 files: 2 valid, 0 invalid\n"
    assert code == 0


def test_validate_missing_path_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path)
    code = run(["validate", str(root / "tasks"), str(root / "nope")])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""  # nothing checked when an argument is wrong
    assert captured.err == (f"error: {root / 'nope'}: no such file or directory "
                            "(expected a task file, a per-turn JSON report, or a directory)\n")


def test_validate_named_file_of_unknown_kind_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _tree(tmp_path)
    code = run(["validate", str(root / ".guardkit" / "autobuild" / "TASK-A-001" / "checkpoints.json")])
    assert code == 2
    assert "not a task file or per-turn report" in capsys.readouterr().err


def test_validate_without_paths_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        run(["validate"])
    assert info.value.code == 2
    assert "PATH" in capsys.readouterr().err


def test_validate_json_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path)
    code = run(["validate", "--json", str(root)])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert (
        report["checked"], report["valid"], report["invalid"], report["warnings"], report["ok"]
    ) == (8, 4, 4, 3, False)
    by_name = {Path(f["path"]).name: f for f in report["files"]}
    assert "README.md" not in by_name and "checkpoints.json" not in by_name and "TASK-Z-9.md" not in by_name
    bad = by_name["TASK-A-002-bad.md"]
    assert bad["kind"] == "task" and bad["valid"] is False
    assert bad["problems"][0] == {"line": 8, "pointer": "$.autobuild_state.turns[0].decision",
                                  "message": '"approved" is not allowed (expected one of "approve", '
                                             '"feedback", "reject", "error")'}
    assert by_name["coach_turn_1.json"]["warnings"] == [
        {"line": None, "pointer": "$.criteria_verification[1].result", "message": '"unverified" read as "rejected"'}]
    assert by_name["coach_turn_2.json"]["problems"][0]["line"] == 3


def test_validate_help_has_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        run(["validate", "--help"])
    assert "Example:\n  guardkit-state validate" in capsys.readouterr().out


def test_control_characters_are_neutralised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "evil\x1b[2J"
    folder.mkdir()
    path = folder / "coach_turn_1.json"
    path.write_text(json.dumps({"task_id": "TASK-A-1", "turn": 1, "decision": "\x1b[2Japprove"}), encoding="utf-8")
    assert run(["validate", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "evil\\x1b[2J/coach_turn_1.json: $.decision: " in out
    assert '"\\u001b[2Japprove" is not allowed' in out


def test_newer_schema_version_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "player_turn_1.json"
    path.write_text(json.dumps({"schema_version": 3, "task_id": "TASK-A-1", "turn": 1}), encoding="utf-8")
    assert run(["validate", str(path)]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"error: {path}: $.schema_version: player_turn record has schema_version 3, newer than")


def test_legacy_feature_build_block_is_validated(tmp_path: Path) -> None:
    path = tmp_path / "TASK-B-1.md"
    path.write_text("---\nid: TASK-B-1\nfeature_build:\n  current_turn: 1\n  turns:\n  - turn: 1\n"
                    "    decision: nope\n---\n", encoding="utf-8")
    result = validate_file(path)
    assert [(p.line, p.pointer) for p in result.problems] == [(7, "$.feature_build.turns[0].decision")]


def test_kind_of_file_names() -> None:
    assert kind_of(Path("x/TASK-A-1.md")) == "task"
    assert kind_of(Path("player_turn_12.json")) == "player_turn"
    assert kind_of(Path("coach_turn_3.json")) == "coach_turn"
    assert kind_of(Path("turn_state_turn_3.json")) == "turn_state"
    assert kind_of(Path("coach_evidence_turn_3.json")) is None
    assert kind_of(Path("player_turn_x.json")) is None


def test_validate_subprocess_exit_codes(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    env_cmd = [sys.executable, "-m", "guardkit_state", "validate"]
    bad = subprocess.run([*env_cmd, str(root)], capture_output=True, text=True, check=False)
    assert bad.returncode == 1
    assert bad.stdout.splitlines() == _expected_lines(root)
    good = subprocess.run([*env_cmd, str(root / "tasks" / "in_progress" / "TASK-A-001-ok.md")],
                          capture_output=True, text=True, check=False)
    assert (good.returncode, good.stdout) == (0, "checked 1 file: 1 valid, 0 invalid\n")


# --------------------------------------------------------------------------------------------------
# The real GuardKit corpus


@pytest.mark.corpus
def test_corpus_autobuild_reports_all_valid(corpus_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["validate", str(corpus_dir / "autobuild")])
    out = capsys.readouterr().out.splitlines()
    assert code == 0, out
    assert all(line.startswith("warning: ") for line in out[:-1])
    assert out[-1].startswith("checked ") and " 0 invalid" in out[-1]


@pytest.mark.corpus
def test_corpus_state_blocks_all_match_the_schema(corpus_dir: Path) -> None:
    report = validate_paths([corpus_dir / "tasks"])
    assert report.checked >= 100
    state_problems = [(r.path, p) for r in report.results for p in r.problems
                      if p.pointer and p.pointer.startswith(("$.autobuild_state", "$.feature_build"))]
    assert state_problems == []
    # What remains invalid is unparseable frontmatter, each named with its line.
    assert all(p.line is not None for r in report.results for p in r.problems)
