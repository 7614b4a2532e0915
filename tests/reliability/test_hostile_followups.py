"""Follow-ups from a hostile tester: look-alike frontmatter, terminal escapes in values, line and
paragraph separators in output, temp files left beside task files, the size-cap message, usage
errors, Ctrl-C at start-up, and a boolean where a number belongs.

Every CLI run is the real ``guardkit-state`` executable in a subprocess, on real files.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from guardkit_state.errors import InputError
from guardkit_state.git.commits import commit_turn
from guardkit_state.git.repo import GitRepo
from guardkit_state.store import fsio, reads
from guardkit_state.turns.checks import checked_max_turns

from ..e2e_support import GUARDKIT_STATE, clean_env, git
from ..helpers import dead_pid
from .harness import TASK_ID, TASK_REL, TASK_TEXT, Setup, agent_command, make_project

STORE = Path(".guardkit/autobuild") / TASK_ID
WAIT = 60.0


# -- helpers -------------------------------------------------------------------------------------
def _cli(root: Path, *args: str, env: dict[str, str] | None = None,
         timeout: float = WAIT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(GUARDKIT_STATE), *args, "--repo", str(root)], cwd=root,
                          env=env or clean_env(NO_COLOR="1"), capture_output=True, text=True, encoding="utf-8",
                          errors="surrogateescape", timeout=timeout, check=False)


def _write_reports(where: Path, player: dict[str, object], coach: dict[str, object]) -> tuple[Path, Path]:
    where.mkdir(parents=True, exist_ok=True)
    p, c = where / "player.json", where / "coach.json"
    p.write_text(json.dumps(player), encoding="utf-8")
    c.write_text(json.dumps(coach), encoding="utf-8")
    return p, c


def _player(**extra: object) -> dict[str, object]:
    return {"files_modified": ["src/work.txt"], "implementation_notes": "Did the work.", "tests_run": True,
            "tests_passed": True, **extra}


def _coach(**extra: object) -> dict[str, object]:
    return {"decision": "feedback", "rationale": "AC-003 still fails", "feedback": "AC-003 still fails", **extra}


def _record(root: Path, tmp_path: Path, *extra: str, player: dict[str, object] | None = None,
            coach: dict[str, object] | None = None, env: dict[str, str] | None = None,
            task_id: str = TASK_ID) -> subprocess.CompletedProcess[str]:
    p, c = _write_reports(tmp_path / "in", player or _player(), coach or _coach())
    return _cli(root, "record", task_id, "--player", str(p), "--coach", str(c), *extra, env=env)


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def _age(*paths: Path, seconds: float = 3600) -> None:
    then = time.time() - seconds
    for path in paths:
        os.utime(path, (then, then), follow_symlinks=False)


def _files_outside_git(root: Path) -> dict[str, bytes]:
    """Every file of the checkout but git's own and the log (a refused run may log why)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts
            and not str(p.relative_to(root)).startswith(".guardkit/logs")}


# -- a line that looks like a frontmatter delimiter but is not one -----------------------------------
LOOK_ALIKES = {
    "comment-on-opening": ("--- # meta\nid: TASK-A\nstatus: backlog\n---\nbody\n", 1),
    "blank-first-line": ("\n---\nid: TASK-A\nstatus: backlog\n---\nbody\n", 2),
    "blank-lines-crlf": ("  \r\n\r\n---\r\nid: TASK-A\r\nstatus: backlog\r\n---\r\nbody\r\n", 3),
}


@pytest.mark.parametrize(("text", "line"), list(LOOK_ALIKES.values()), ids=list(LOOK_ALIKES))
def test_record_refuses_to_prepend_a_frontmatter_above_a_look_alike_one(tmp_path: Path, text: str,
                                                                         line: int) -> None:
    root = tmp_path / "repo"
    task = root / "tasks" / "backlog" / "TASK-A-x.md"
    task.parent.mkdir(parents=True)
    task.write_bytes(text.encode("utf-8"))
    git(root, "init", "-q", "-b", "main")
    before = _files_outside_git(root)
    run = _record(root, tmp_path, task_id="TASK-A", player=_player(), coach=_coach())
    assert run.returncode == 2, (run.stdout, run.stderr)
    errors = _error_lines(run.stderr)
    assert len(errors) == 1 and "Traceback" not in run.stderr, run.stderr
    assert "TASK-A-x.md" in errors[0], errors
    assert (f"line {line} starts with '---' but is not a frontmatter delimiter (GuardKit reads no frontmatter "
            "here): make the first line exactly '---'") in errors[0], errors
    assert task.read_bytes() == text.encode("utf-8")
    assert _files_outside_git(root) == before  # no report, no turn state, nothing


def test_record_still_creates_a_frontmatter_for_a_plain_markdown_file(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    task = root / "tasks" / "backlog" / "TASK-A-x.md"
    task.parent.mkdir(parents=True)
    task.write_text("\n# TASK-A: plain notes\n\nsome text\n---\nmore\n", encoding="utf-8")
    run = _record(root, tmp_path, task_id="TASK-A")
    assert run.returncode == 0, run.stderr
    text = task.read_text(encoding="utf-8")
    assert text.startswith("---\n") and text.endswith("\n# TASK-A: plain notes\n\nsome text\n---\nmore\n")


def test_feature_build_refuses_a_look_alike_frontmatter_and_leaves_the_file(tmp_path: Path) -> None:
    text = "--- # meta\nid: TASK-REL-001\nstatus: backlog\n---\n\n## Acceptance Criteria\n\n- [ ] One\n"
    root = make_project(tmp_path / "repo", Setup(git=False), text)
    run = _cli(root, "feature-build", TASK_ID, "--player", agent_command("player.py"), "--coach",
               agent_command("coach.py"), "--max-turns", "2", "--no-worktree")
    assert run.returncode != 0, run.stdout
    assert "line 1 starts with '---' but is not a frontmatter delimiter" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    assert (root / TASK_REL).read_text(encoding="utf-8") == text


# -- terminal escapes in values the human renderers print --------------------------------------------
ESCAPED_STATE = """\
---
id: TASK-REL-001
title: Escapes
status: "bl\\e[31mred\\e[2J"
autobuild_state:
  current_turn: 1
  max_turns: 5
  turns:
  - turn: 1
    decision: approve
    feedback: "app\\e[2Jrove"
    timestamp: '2026-01-29T00:00:00+00:00'
---

# TASK-REL-001: Escapes
"""


def test_status_and_show_never_print_raw_escapes_from_a_status_or_the_feedback(tmp_path: Path) -> None:
    # (A decision is one of four words, its schema says: an escape there makes the file invalid, named.)
    root = make_project(tmp_path / "repo", Setup(git=False), ESCAPED_STATE)
    run = _cli(root, "status", "--no-cache")
    assert run.returncode == 0, run.stderr
    assert "\x1b" not in run.stdout + run.stderr, repr(run.stdout)
    assert "bl\\x1b[31mred\\x1b[2J" in run.stdout, run.stdout
    shown = _cli(root, "show", TASK_ID)
    assert shown.returncode == 0 and "\x1b" not in shown.stdout + shown.stderr, repr(shown.stdout)
    assert "app\\x1b[2Jrove" in shown.stdout, shown.stdout
    as_json = _cli(root, "status", "--no-cache", "--json")
    assert json.loads(as_json.stdout)[0]["status"] == "bl\x1b[31mred\x1b[2J"  # escaped, not lost


# -- line/paragraph separators, BOM, NEL and DEL in output ---------------------------------------------
SEPARATORS = "\u2028\u2029\ufeff\u0085"
HOSTILE = f"one{SEPARATORS}two\x7fthree"


def test_separators_bom_nel_and_del_never_reach_stdout_raw(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo", Setup(git=False))
    run = _record(root, tmp_path, coach=_coach(feedback=HOSTILE, rationale=HOSTILE),
                  player=_player(summary=HOSTILE, implementation_notes=HOSTILE))
    assert run.returncode == 0, run.stderr
    outputs = {"record": run.stdout}
    for argv in (["show", TASK_ID], ["show", TASK_ID, "--json"], ["context", TASK_ID],
                 ["context", TASK_ID, "--json"]):
        result = _cli(root, *argv)
        assert result.returncode == 0, result.stderr
        outputs[" ".join(argv)] = result.stdout
        if "--json" in argv:
            # Escaped, not lost: the JSON reads back to the very text.
            assert HOSTILE in json.dumps(json.loads(result.stdout), ensure_ascii=False), argv
    for name, text in outputs.items():
        raw = sorted({f"U+{ord(c):04X}" for c in text if c in SEPARATORS + "\x7f"})
        assert not raw, (name, raw)
    assert "\\u2028" in outputs["show TASK-REL-001"] and "\\u2028" in outputs["show TASK-REL-001 --json"]
    assert "\\u007f" in outputs["show TASK-REL-001 --json"]


# -- temp files a killed write left beside the task file ---------------------------------------------
def test_record_after_a_kill_mid_write_removes_the_temp_file_beside_the_task_file(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo", Setup(git=True))
    task = root / TASK_REL
    users = task.parent / ".gks-tmp-release.2024.11"  # a user's file, committed: never ours to delete
    users.write_text("mine\n")
    git(root, "add", str(users))
    git(root, "commit", "-q", "-m", "release notes")
    _age(users)
    big = _coach(feedback="x" * (5 * 1024 * 1024))
    leftovers: list[Path] = []
    for n in range(1, 8):  # the n-th atomic write of this record: the one of the task file leaves a temp
        run = _record(root, tmp_path, coach=big, env=clean_env(NO_COLOR="1",
                                                                GUARDKIT_STATE_CRASH_AT=f"write.before_replace:{n}"))
        assert run.returncode == -signal.SIGKILL, (n, run.stderr)
        leftovers = [p for p in task.parent.iterdir() if p.name.startswith(f"{fsio.TEMP_PREFIX}{task.name}.")]
        if leftovers:
            break
    assert leftovers, "no kill left a temp file beside the task file"
    run = _record(root, tmp_path, coach=big)
    assert run.returncode == 0, run.stderr
    assert not [p for p in task.parent.iterdir() if p.name.startswith(f"{fsio.TEMP_PREFIX}{task.name}.")]
    assert users.read_text() == "mine\n"


def test_record_removes_stale_temp_files_beside_a_linked_task_files_target(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo", Setup(git=False))
    task = root / TASK_REL
    real = root / "docs" / "tasks" / task.name
    real.parent.mkdir(parents=True)
    real.write_bytes(task.read_bytes())
    task.unlink()
    task.symlink_to(os.path.relpath(real, task.parent))
    beside_link = task.parent / f"{fsio.TEMP_PREFIX}{task.name}.{dead_pid()}.123456789012"
    beside_target = real.parent / f"{fsio.TEMP_PREFIX}{real.name}.{dead_pid()}.123456789013"
    users = real.parent / ".gks-tmp-release.2024.11"
    for path in (beside_link, beside_target, users):
        path.write_text("partial")
    _age(beside_link, beside_target, users)
    run = _record(root, tmp_path)
    assert run.returncode == 0, run.stderr
    assert not beside_link.exists() and not beside_target.exists()
    assert users.read_text() == "partial"
    assert task.is_symlink() and "turn: 1" in real.read_text(encoding="utf-8")


def test_only_the_exact_temp_name_fsio_writes_counts_as_stale_debris(tmp_path: Path) -> None:
    dead = dead_pid()
    ours = f"{fsio.TEMP_PREFIX}task.md.{dead}.{time.monotonic_ns()}"
    theirs = [".gks-tmp-release.2024.11", f".gks-tmp-task.md.{dead}.12345", f".gks-tmp-task.md.{dead}.",
              f".gks-tmp-.{dead}.1234567", ".gks-tmp-task.md.0.1234567", f".gks-tmp-task.md.{dead}.12345678x",
              f"release-notes.{dead}.1234567", f"x.gks-tmp-task.md.{dead}.1234567"]  # no prefix at all
    for name in [ours, *theirs]:
        (tmp_path / name).write_text("x")
    _age(*tmp_path.iterdir())
    removed = {p.name for p in fsio.remove_stale_temp_files(tmp_path)}
    assert removed == {ours}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(theirs)


def test_a_turn_commit_keeps_an_agents_prefixed_files_under_guardkit(git_repo: Path) -> None:
    agent_files = [".guardkit/notes/.gks-tmp-plan.md", ".guardkit/notes/.gks-tmp-release.2024.11"]
    ours = [f".guardkit/autobuild/{TASK_ID}/.gks-tmp-coach_turn_1.json.{dead_pid()}.{time.monotonic_ns()}",
            f".guardkit/autobuild/{TASK_ID}/.work/.gks-tmp-player_turn_1.agent.json.{dead_pid()}"]
    for name in [*agent_files, *ours]:
        (git_repo / name).parent.mkdir(parents=True, exist_ok=True)
        (git_repo / name).write_text("x\n")
    repo = GitRepo.discover(git_repo)
    assert repo is not None
    result = commit_turn(repo, task_id=TASK_ID, turn=1, decision="feedback", mode="fresh_start",
                         managed_worktree=True)
    assert result.committed, result
    committed = set(git(git_repo, "show", "--name-only", "--format=", "HEAD").split())
    assert set(agent_files) <= committed, committed
    assert not committed & set(ours), committed


# -- the size cap on writes ---------------------------------------------------------------------------
def test_a_write_over_the_size_cap_says_the_cap_and_why(tmp_path: Path) -> None:
    body = "filler line of the task body\n" * ((reads.MAX_FILE_BYTES - 4096) // 29)
    root = make_project(tmp_path / "repo", Setup(git=False), TASK_TEXT + body)
    before = (root / TASK_REL).read_bytes()
    run = _record(root, tmp_path, coach=_coach(feedback="y" * 8192))
    assert run.returncode == 2, (run.stdout, run.stderr)
    errors = _error_lines(run.stderr)
    assert len(errors) == 1, run.stderr
    assert "over the 8 MiB limit task files are read with; nothing was written" in errors[0], errors
    assert "could not be read back" not in errors[0]
    assert (root / TASK_REL).read_bytes() == before


# -- usage errors and Ctrl-C ----------------------------------------------------------------------------
@pytest.mark.parametrize(("argv", "command", "fragment"), [
    (["record", TASK_ID, "--player", "p.json", "--coach", "c.json", "--max-turns", "1e3"], "record",
     "--max-turns"),
    (["feature-build", TASK_ID, "--player", "p", "--coach", "c", "--base-branch", "-x"], "feature-build",
     "--base-branch"),
    (["no-such-command"], None, "no-such-command"),
], ids=["record-max-turns", "feature-build-base-branch", "unknown-command"])
def test_a_usage_error_is_one_error_line_with_a_help_hint(tmp_path: Path, argv: list[str], command: str | None,
                                                          fragment: str) -> None:
    run = _cli(tmp_path, *argv)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), run.stderr
    prog = f"guardkit-state {command}" if command else "guardkit-state"
    assert prog in lines[0] and fragment in lines[0] and f"'{prog} --help'" in lines[0], lines


def _every_command() -> list[list[str]]:
    """Every command and sub-action the CLI has, as argv prefixes."""
    import argparse

    from guardkit_state.cli.app import build_parser

    found: list[list[str]] = []

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    found.append([*prefix, name])
                    walk(child, [*prefix, name])

    walk(build_parser(), [])
    return found


def test_every_subcommand_reports_a_bad_option_on_one_line(tmp_path: Path) -> None:
    commands = _every_command()
    assert len(commands) > 13
    for argv in commands:
        run = _cli(tmp_path, *argv, "--no-such-option")
        lines = run.stderr.splitlines()
        assert run.returncode == 2 and len(lines) == 1, (argv, run.stderr)
        assert lines[0].startswith("error: ") and f"'guardkit-state {' '.join(argv)} --help'" in lines[0], lines


INTERRUPTED_IMPORT = """\
import sys

AT = sys.argv[1]

class CtrlC:
    # Ctrl-C while the CLI's modules are still loading, at a chosen import.
    def find_spec(self, name, path=None, target=None):
        if name == AT:
            raise KeyboardInterrupt
        return None

sys.meta_path.insert(0, CtrlC())
sys.argv = ["guardkit-state", "status"]
from guardkit_state.cli import main  # what the installed console script runs
main()
"""


@pytest.mark.parametrize("module", ["guardkit_state.cli.app", "guardkit_state.cli.output", "argparse",
                                    "guardkit_state.cli.cmd_status"])
def test_ctrl_c_while_the_cli_starts_is_one_line_and_exit_130(tmp_path: Path, module: str) -> None:
    run = subprocess.run([sys.executable, "-c", INTERRUPTED_IMPORT, module], cwd=tmp_path, env=clean_env(),
                         capture_output=True, text=True, timeout=WAIT, check=False)
    assert run.returncode == 130, run.stderr
    assert run.stderr == "error: interrupted\n", run.stderr


SET_NAME_INTERRUPTED = """
import dataclasses, sys

# A Ctrl-C landing while a dataclass body of the CLI's modules runs: the interpreter calls each
# field's __set_name__ and (Python 3.11) wraps what it raises in a RuntimeError.
def interrupted(self, owner, name):
    raise KeyboardInterrupt

dataclasses.Field.__set_name__ = interrupted
sys.argv = ["guardkit-state", "status"]
from guardkit_state.cli import main
main()
"""


def test_ctrl_c_inside_a_class_body_while_the_cli_starts_is_one_line_and_exit_130(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-c", SET_NAME_INTERRUPTED], cwd=tmp_path, env=clean_env(),
                         capture_output=True, text=True, timeout=WAIT, check=False)
    assert run.returncode == 130, run.stderr
    assert run.stderr == "error: interrupted\n", run.stderr


def test_a_real_ctrl_c_at_start_up_never_shows_a_traceback_once_the_cli_runs(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo", Setup(git=False))
    for i in range(24):
        proc = subprocess.Popen([str(GUARDKIT_STATE), "status", "--repo", str(root)], cwd=root,
                                env=clean_env(NO_COLOR="1"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep((i % 12) * 0.006)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=WAIT)
        stderr = err.decode("utf-8", "replace")
        # Before the CLI's entry point runs (the interpreter starting, the package's own import) no
        # code can catch a Ctrl-C; from its first line on, none may show a traceback.
        assert "guardkit_state/cli" not in stderr, stderr
        if proc.returncode == 130:
            assert stderr == "error: interrupted\n", stderr


# -- a boolean where a number belongs ------------------------------------------------------------------
def test_a_boolean_max_turns_is_named_as_a_boolean(tmp_path: Path) -> None:
    text = TASK_TEXT.replace("tags: [reliability, crash]\n", "tags: [reliability, crash]\nautobuild_state:\n"
                             "  max_turns: true\n  turns: []\n")
    root = make_project(tmp_path / "repo", Setup(git=False), text)
    run = _record(root, tmp_path)
    assert run.returncode != 0
    errors = _error_lines(run.stderr)
    assert len(errors) == 1, run.stderr
    assert "$.autobuild_state.max_turns: expected integer or null, got boolean true" in errors[0], errors
    assert "True" not in errors[0]
    with pytest.raises(InputError, match=re.escape("max_turns is a boolean (true); expected a positive whole "
                                                   "number")):
        checked_max_turns(True)
