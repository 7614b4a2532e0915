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
        "OK": 0, "FAILED": 1, "USAGE": 2, "ALREADY_RECORDED": 3, "INTERNAL": 70, "INTERRUPTED": 130}
    assert ExitCode.REJECTED is ExitCode.FAILED  # record's "rejected" is the general "no"
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


@pytest.mark.parametrize("has_state_home", [True, False])
def test_an_unexpected_error_exits_70_with_one_line_naming_its_crash_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        has_state_home: bool) -> None:
    from guardkit_state import __version__
    from guardkit_state.inspect import status

    repo = tmp_path / "repo"
    (repo / "tasks").mkdir(parents=True)
    if has_state_home:
        (repo / ".guardkit").mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(status, "repo_status", broken)
    assert run(["status", "--repo", str(repo)]) == ExitCode.INTERNAL == 70
    log = repo / ".guardkit/logs/crash.log" if has_state_home else tmp_path / "cache/guardkit-state/crash.log"
    assert capsys.readouterr().err == (f"error: unexpected RuntimeError: a bug (a bug in guardkit-state; the "
                                       f"traceback is in {log})\n")
    text = log.read_text(encoding="utf-8")
    assert f"guardkit-state: {__version__}" in text and "git: git version" in text and "python: 3." in text
    assert f"guardkit-state status --repo {repo}" in text
    assert "Traceback (most recent call last)" in text and 'raise RuntimeError("a bug")' in text
    assert not (repo / ".guardkit").exists() or has_state_home  # no .guardkit made for a crash


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


@pytest.mark.parametrize("wrapper", [RuntimeError, ValueError])
def test_a_ctrl_c_wrapped_by_a_lazy_import_is_an_interruption_not_a_crash(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        wrapper: type[Exception]) -> None:
    # Python 3.11 wraps what a descriptor's __set_name__ raises in a RuntimeError: a Ctrl-C landing
    # in a class body of a module a command imports as it goes (the index, the live report) came out
    # as exit 70, "a bug in guardkit-state", with a crash log. (Any error raised from a Ctrl-C: run()
    # passes each on to main, which took only a RuntimeError, and a ValueError was a traceback.)
    from guardkit_state.cli import main
    from guardkit_state.inspect import status

    (tmp_path / "tasks").mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def interrupted(*args: object, **kwargs: object) -> None:
        raise wrapper("Error calling __set_name__") from KeyboardInterrupt()

    monkeypatch.setattr(status, "repo_status", interrupted)
    with pytest.raises(SystemExit) as stopped:
        main(["status", "--repo", str(tmp_path)])
    assert stopped.value.code == 130
    assert capsys.readouterr().err == "error: interrupted\n"
    assert not (tmp_path / "cache").exists()  # no crash log


PROGRAM = """
import atexit, pathlib, sys, threading
marker = pathlib.Path(sys.argv[1])
atexit.register(lambda: marker.with_suffix(".atexit").write_text("ran"))
if sys.argv[2] == "thread":  # a thread of the program still running when the command ends: it waits for
    # the main thread's end (however slow the command is), which only Python's own exit lets it see
    main = threading.main_thread()
    threading.Thread(target=lambda: (main.join(), marker.with_suffix(".thread").write_text("ran"))).start()
sys.argv = ["guardkit-state", *sys.argv[3:]]
from guardkit_state.cli import main  # what the console script runs
main()
"""


@pytest.mark.parametrize(("command", "code", "said"), [
    (["status"], 0, ("no tasks with loop state under tasks/\n", "")),
    (["show", "TASK-NONE-001"], ExitCode.USAGE, ("", "error: ")),
])
@pytest.mark.parametrize("thread", ["none", "thread"])
def test_the_program_ends_with_its_code_after_its_exit_handlers_and_threads(
        tmp_path: Path, command: list[str], code: int, said: tuple[str, str], thread: str) -> None:
    # The program skips the interpreter's teardown (tens of ms a run); its exit code, its output (block-
    # buffered without PYTHONUNBUFFERED: written as it ends), its exit handlers and a thread still
    # running (waited for, as Python's exit does) are as before.
    import subprocess
    import sys

    from .e2e_support import clean_env

    (tmp_path / "tasks").mkdir()
    marker = tmp_path / "marker"
    env = {k: v for k, v in clean_env().items() if k != "PYTHONUNBUFFERED"}
    run_ = subprocess.run([sys.executable, "-c", PROGRAM, str(marker), thread, *command, "--repo", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert run_.returncode == code, run_.stderr
    assert run_.stdout == said[0] and run_.stderr.startswith(said[1]), (run_.stdout, run_.stderr)
    assert marker.with_suffix(".atexit").read_text() == "ran"
    assert marker.with_suffix(".thread").exists() is (thread == "thread")


SLOW_READER_PROGRAM = """
import sys
import guardkit_state.cli.app as app
def run(argv=None):  # a command whose output is written as the program ends (stdout block-buffered)
    sys.stdout.write("x" * 6000 + "\\n")  # more than the reader's pipe holds, less than stdout's buffer
    return 0
app.run = run
from guardkit_state.cli import main
main()
"""


def test_a_ctrl_c_while_the_last_output_waits_for_its_reader_is_an_interruption(tmp_path: Path) -> None:
    # `guardkit-state status | less`, the pager not reading yet: the output's last part is written
    # as the program ends, and waits. A Ctrl-C then was a KeyboardInterrupt traceback (Python's own
    # exit said "Exception ignored" and 120): it is one line and 130, as at any other moment.
    import fcntl
    import os
    import signal
    import subprocess
    import sys
    import time

    from .e2e_support import clean_env

    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, 1031, 4096)  # F_SETPIPE_SZ: a one-page pipe, never read
    env = {k: v for k, v in clean_env().items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.Popen([sys.executable, "-c", SLOW_READER_PROGRAM], stdout=write_end, stderr=subprocess.PIPE,
                            cwd=tmp_path, env=env)
    os.close(write_end)
    try:
        wchan = Path(f"/proc/{proc.pid}/wchan")
        deadline = time.monotonic() + 60  # a hang guard, not a speed claim
        while "pipe" not in wchan.read_text():  # blocked writing to the pipe
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        os.close(read_end)
        if proc.poll() is None:
            proc.kill()
    assert (proc.returncode, err) == (ExitCode.INTERRUPTED, b"error: interrupted\n")


def test_the_program_ends_with_its_code_when_a_standard_stream_was_closed(tmp_path: Path) -> None:
    # Python's own exit passes over a closed sys.stdout (an SDK closing the stream it wrapped, say);
    # the program's exit did not (flushing it raised ValueError) and said 120.
    import subprocess
    import sys

    from .e2e_support import clean_env

    program = SLOW_READER_PROGRAM.replace('sys.stdout.write("x" * 6000 + "\\n")', "sys.stdout.close()")
    run_ = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, env=clean_env(), capture_output=True,
                          timeout=60, check=False)
    assert (run_.returncode, run_.stderr) == (0, b"")
