"""One table of exit codes, one place that picks the code for an error, and read commands that call
one library function each: through the real CLI on real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guardkit_state.cli.app import exit_code_for, run
from guardkit_state.cli.exit_codes import ExitCode
from guardkit_state.errors import (
    AlreadyRecordedError,
    FileTooLargeError,
    GitError,
    GuardkitStateError,
    InputError,
    LockedError,
    ParseError,
    ResumeError,
    SchemaError,
    TaskNotFoundError,
    TurnError,
    WriteVerificationError,
)
from guardkit_state.inspect.task_view import continuation_context, task_view
from guardkit_state.turns.lifecycle import record_turn

from .helpers import coach_decision, make_task_repo, player_report

TASK = "TASK-AUTH-001"


def test_the_table_holds_the_documented_codes() -> None:
    # README and each command's --help promise these numbers; scripts and CI depend on them.
    assert {code.name: int(code) for code in ExitCode} == {
        "OK": 0, "FAILED": 1, "USAGE": 2, "ALREADY_RECORDED": 3, "INTERRUPTED": 130}
    assert ExitCode.REJECTED is ExitCode.FAILED  # record's "rejected" is the general "no"
    assert ExitCode.INTERNAL is ExitCode.FAILED  # a fault of ours is never "usage" (2)
    assert ExitCode.NOT_READY is ExitCode.FAILED  # doctor: something would stop a loop


@pytest.mark.parametrize(("error", "command", "code"), [
    (SchemaError("bad report", pointer="$.decision"), "record", ExitCode.REJECTED),
    (InputError("turn 2 is not turn 3", pointer="$.turn_number"), "record", ExitCode.REJECTED),
    (ParseError("not JSON"), "record", ExitCode.USAGE),
    (FileTooLargeError("too large"), "record", ExitCode.USAGE),
    (InputError("closed task; pass --reopen"), "record", ExitCode.USAGE),
    (AlreadyRecordedError("other reports", identical=False), "record", ExitCode.ALREADY_RECORDED),
    (SchemaError("bad turn state", pointer="$.turn_number"), "show", ExitCode.USAGE),
    (TaskNotFoundError("no task file"), "show", ExitCode.USAGE),
    (LockedError("held"), "feature-build", ExitCode.USAGE),
    (ResumeError("nothing to resume"), "feature-build", ExitCode.USAGE),
    (TurnError("turn failed"), "record", ExitCode.FAILED),
    (GitError("git failed"), "log", ExitCode.FAILED),
    (GuardkitStateError("anything else"), None, ExitCode.FAILED),
    (WriteVerificationError("the splice would change $.title", pointer="$.title"), "record", ExitCode.INTERNAL),
    (WriteVerificationError("the new text does not parse"), "feature-build", ExitCode.INTERNAL),
])
def test_each_error_gets_its_code_from_the_one_place(error: GuardkitStateError, command: str | None,
                                                     code: ExitCode) -> None:
    assert exit_code_for(error, command) is code


def test_show_prints_the_library_view(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_task_repo(tmp_path)
    record_turn(tmp_path, TASK, player_report(1), coach_decision(1, "feedback", feedback="more"))
    assert run(["show", TASK, "--json", "--repo", str(tmp_path)]) == ExitCode.OK
    shown = json.loads(capsys.readouterr().out)
    assert shown == json.loads(json.dumps(task_view(tmp_path, TASK).to_dict(), default=str))
    assert [t["turn"] for t in shown["turns"]] == [1]
    assert run(["context", TASK, "--json", "--repo", str(tmp_path)]) == ExitCode.OK
    context = json.loads(capsys.readouterr().out)
    assert context["context"] == continuation_context(tmp_path, TASK).text and context["turn"] == 2


def test_a_hand_edited_gap_is_shown_but_not_continued(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # `show` is where a user looks at a broken history; `context` (which continues it) refuses it.
    make_task_repo(tmp_path)
    for n in (1, 2, 3):
        record_turn(tmp_path, TASK, player_report(n), coach_decision(n, "feedback", feedback=f"f{n}"))
    path = tmp_path / "tasks/backlog/TASK-AUTH-001-jwt-auth.md"
    text = path.read_text(encoding="utf-8")
    start = text.index("  - turn: 2")
    path.write_text(text[:start] + text[text.index("  - turn: 3"):], encoding="utf-8")
    assert run(["show", TASK, "--json", "--repo", str(tmp_path)]) == ExitCode.OK
    assert [t["turn"] for t in json.loads(capsys.readouterr().out)["turns"]] == [1, 3]
    assert run(["context", TASK, "--repo", str(tmp_path)]) == ExitCode.USAGE
    assert "turn 2 is missing" in capsys.readouterr().err


def test_an_option_out_of_range_is_a_usage_error_naming_it(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    make_task_repo(tmp_path)
    for argv, option in ((["feature-build", TASK, "--player", "true", "--coach", "true", "--max-turns", "0"],
                          "--max-turns"),
                         (["feature-build", TASK, "--player", "true", "--coach", "true", "--turn-timeout", "nan"],
                          "--turn-timeout"),
                         (["record", TASK, "--player", "p.json", "--coach", "c.json", "--max-turns", "-1"],
                          "--max-turns")):
        with pytest.raises(SystemExit) as stopped:
            run([*argv, "--repo", str(tmp_path)])
        assert stopped.value.code == ExitCode.USAGE
        assert option in capsys.readouterr().err
    assert not (tmp_path / ".guardkit").exists()


def test_an_unknown_base_branch_is_refused_before_anything_exists(git_repo: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    make_task_repo(git_repo)
    argv = ["feature-build", TASK, "--player", "true", "--coach", "true", "--base-branch", "no-such-branch"]
    assert run([*argv, "--repo", str(git_repo)]) == ExitCode.USAGE
    assert "unknown base branch 'no-such-branch'" in capsys.readouterr().err
    assert not (git_repo / ".guardkit").exists()


def test_the_interrupted_code_main_uses_is_the_table_s() -> None:
    # cli/__init__ spells 130 itself (it must import nothing at module level): keep it the table's.
    import guardkit_state.cli as cli
    from guardkit_state.cli.exit_codes import ExitCode

    assert cli._EXIT_INTERRUPTED == ExitCode.INTERRUPTED
