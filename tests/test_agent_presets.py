"""Every preset runs a whole loop against faithful fakes on PATH: real subprocesses, real git.

``feature-build TASK --player claude --coach codex`` (and each preset as Player and as Coach): turn 1
feedback, turn 2 approval; a Ctrl-C in the middle and ``--resume``; the fakes' cost, tokens and
session in the turn state and in ``show --json``; errors reported as the CLIs report them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .agent_fakes import BODY, REL, TASK, fakes, run_cli
from .guardkit_fixtures import make_repo, snapshot

__all__ = ["fakes"]  # the fixture, shared

def _store(root: Path) -> Path:
    return root / ".guardkit" / "worktrees" / TASK / ".guardkit" / "autobuild" / TASK


def _turn_state(root: Path, n: int) -> dict[str, object]:
    return json.loads((_store(root) / f"turn_state_turn_{n}.json").read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize(("player", "coach"), [("claude", "codex"), ("codex", "claude"), ("gemini", "aider"),
                                               ("aider", "gemini")])
def test_a_whole_loop_with_presets(tmp_path: Path, fakes: Path, player: str, coach: str) -> None:
    root = make_repo(tmp_path / "repo", {REL: BODY})
    run = run_cli(root, fakes, "feature-build", TASK, "--player", player, "--coach", coach)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{TASK}: approved" in run.stdout

    first, second = _turn_state(root, 1), _turn_state(root, 2)
    assert (first["coach_decision"], second["coach_decision"]) == ("feedback", "approved")
    assert first["coach_issues"] == [{"description": "AC-002 is not tested", "suggestion": "add a test for AC-002",
                                      "severity": "must_fix", "category": "testing"}]
    runs = first["agent_runs"]
    assert isinstance(runs, dict)
    assert (runs["player"]["agent"], runs["coach"]["agent"]) == (player, coach)
    expected_cost = {"claude": 0.0125, "aider": 0.0031, "codex": None, "gemini": None}
    assert runs["player"]["cost_usd"] == expected_cost[player]
    assert runs["coach"]["cost_usd"] == expected_cost[coach]
    tokens = {"claude": (1200, 340), "codex": (5120, 610), "gemini": (2493, 120), "aider": (3000, 200)}
    assert (runs["player"]["tokens_in"], runs["player"]["tokens_out"]) == tokens[player]
    # The Player's files are git's truth, not its claim (claimed_1.py does not exist).
    report = json.loads((_store(root) / "player_turn_1.json").read_text())
    assert report["files_created"] == ["impl_1.py"]
    assert report["claimed_files"]["files_created"] == ["claimed_1.py"]
    # Turn 2's Player was told what turn 1's Coach found.
    prompt = (_store(root) / ".work" / "player_prompt_turn_2.md").read_text()
    assert "AC-002 is not tested — suggestion: add a test for AC-002" in prompt


@pytest.mark.parametrize(("player", "coach", "cost"), [("claude", "codex", 0.025), ("codex", "claude", 0.025),
                                                       ("gemini", "aider", 0.0062), ("aider", "gemini", 0.0062)])
def test_ctrl_c_in_the_middle_then_resume(tmp_path: Path, fakes: Path, player: str, coach: str, cost: float) -> None:
    root = make_repo(tmp_path / "repo", {REL: BODY})
    log = tmp_path / "log"
    log.mkdir()
    stopped = run_cli(root, fakes, "feature-build", TASK, "--player", player, "--coach", coach,
                      FAKE_INTERRUPT="player:2", FAKE_LOG=str(log))
    assert stopped.returncode == 130, stopped.stdout + stopped.stderr
    assert "interrupted during turn 2 (player)" in stopped.stderr
    resumed = run_cli(root, fakes, "feature-build", TASK, "--player", player, "--coach", coach, "--resume",
                      FAKE_LOG=str(log))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    calls = (log / "calls").read_text().splitlines()
    assert calls == [f"{player} player 1", f"{coach} coach 1", f"{player} player 2", f"{player} player 2",
                     f"{coach} coach 2"]

    # The cost the fakes reported (Claude's total_cost_usd, aider's analytics log) in show --json and the page.
    shown = json.loads(run_cli(root, fakes, "show", TASK, "--json").stdout)
    assert [t["decision"] for t in shown["turns"]] == ["feedback", "approve"]
    assert shown["cost"]["total_usd"] == pytest.approx(cost)
    assert [t["runs"]["player"]["agent"] for t in shown["cost"]["turns"]] == [player, player]
    page = run_cli(root, fakes, "report", TASK, "--output", str(tmp_path / "r.html"))
    assert page.returncode == 0, page.stderr
    assert f"${cost:.4f}" in (tmp_path / "r.html").read_text()


@pytest.mark.parametrize(("player", "said"), [
    ("claude", "player: error — Player (claude) reported an error (exit 0): Claude AI usage limit reached"),
    ("codex", "player: error — Player (codex) reported an error (exit 1): You've hit your usage limit"),
    ("gemini", "player: error — Player (gemini) reported an error (ApiError) (exit 1): Quota exceeded"),
])
def test_a_quota_error_twice_stops_the_loop_naming_the_player(tmp_path: Path, fakes: Path, player: str,
                                                               said: str) -> None:
    root = make_repo(tmp_path / "repo", {REL: BODY})
    run = run_cli(root, fakes, "feature-build", TASK, "--player", player, "--coach", "codex",
                  FAKE_FAIL="quota", FAKE_FAIL_ROLE="player")
    assert run.returncode == 1
    assert said in run.stderr, run.stderr
    assert f"{TASK}: agent_failed — the Player failed twice in a row (quota)" in run.stdout
    assert "coach:" not in run.stderr


def _git_state(root: Path) -> tuple[dict[str, bytes], str, str]:
    """Every file outside .git, every ref and the worktrees: what a refused run must leave as it was."""
    import subprocess

    refs = subprocess.run(["git", "for-each-ref"], cwd=root, capture_output=True, text=True, check=True).stdout
    trees = subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=root, capture_output=True, text=True,
                           check=True).stdout
    return snapshot(root), refs, trees


@pytest.mark.parametrize("target", ["task", "feature", "remote"])
@pytest.mark.parametrize(("args", "said"), [
    (("--player", "claud", "--coach", "codex"),
     "error: --player claud: neither an agent preset nor a command on PATH; did you mean `claude`?"),
    (("--player", "claude", "--coach", "codexx --sandbox read-only"),
     "error: --coach codexx --sandbox read-only: neither an agent preset nor a command on PATH "
     "(its program codexx); did you mean `codex`?"),
    (("--player", "claude", "--coach", "gemini"),
     "error: --coach gemini: the gemini preset runs gemini, which is not on PATH; install it, or name "
     "another agent"),
    (("--player", "claude", "--coach", "gemini --yolo"),  # a preset's program as a command: no typo to suggest
     "error: --coach gemini --yolo: gemini is not on PATH; install it (and `--coach gemini` alone runs the "
     "gemini preset with its own arguments)"),
    (("--player", "", "--coach", "codex"),  # an unset variable: --player "$PLAYER"
     "error: --player is empty: name an agent preset (aider, claude, codex, gemini) or a command"),
    (("--player", "  ", "--coach", "codex"),
     "error: --player is empty: name an agent preset (aider, claude, codex, gemini) or a command"),
    (("--player", "claude", "--coach", "./agents/coach.sh --strict"),
     "error: --coach ./agents/coach.sh --strict: its program ./agents/coach.sh does not exist"),
    (("--player", "/nonexistent/bin/agent", "--coach", "codex"),
     "error: --player /nonexistent/bin/agent: its program /nonexistent/bin/agent does not exist"),
])
def test_an_agent_that_cannot_run_is_refused_before_anything_exists(tmp_path: Path, fakes: Path, target: str,
                                                                     args: tuple[str, ...], said: str) -> None:
    from .feature_support import FEATURE_ID, TaskSpec, make_feature

    (fakes / "gemini").unlink()  # a preset whose program is not installed
    if target == "task":
        root, ref, extra = make_repo(tmp_path / "repo", {REL: BODY}), TASK, ()
    else:
        root, ref = make_feature(tmp_path, [TaskSpec("TASK-FB-1")]).root, FEATURE_ID
        extra = ("--remote", "origin") if target == "remote" else ()
    before = _git_state(root)
    run = run_cli(root, fakes, "feature-build", ref, *args, *extra)
    assert (run.returncode, run.stderr) == (2, said + "\n"), run.stdout + run.stderr
    assert _git_state(root) == before  # no branch, worktree, commit, lock or log


def test_codex_earlier_item_shape_is_read(tmp_path: Path, fakes: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: BODY})
    run = run_cli(root, fakes, "feature-build", TASK, "--player", "codex", "--coach", "codex",
                  FAKE_CODEX_ITEMS="legacy")
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_codex_stream_error_it_retried_is_not_the_turn_failing(tmp_path: Path, fakes: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: BODY})
    run = run_cli(root, fakes, "feature-build", TASK, "--player", "codex", "--coach", "codex", FAKE_CODEX_RETRY="1")
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{TASK}: approved" in run.stdout and ": error —" not in run.stderr


@pytest.mark.parametrize("player", ["claude", "gemini"])
def test_a_task_text_no_argument_can_hold_is_the_players_error_not_a_crash(tmp_path: Path, fakes: Path,
                                                                         player: str) -> None:
    # The prompt, task text included, is one argument of these CLIs: a NUL cannot be passed.
    root = make_repo(tmp_path / "repo", {REL: BODY.replace("# Parse durations\n", "# Parse durations\n\nA \x00 NUL\n")})
    run = run_cli(root, fakes, "feature-build", TASK, "--player", player, "--coach", "codex", "--max-turns", "5")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "unexpected" not in run.stderr
    assert "player: error — Player could not be started: embedded null byte" in run.stderr
    assert f"{TASK}: agent_failed — the Player failed twice in a row (cannot start)" in run.stdout


def test_agents_lists_presets_found_and_their_versions(tmp_path: Path, fakes: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: BODY, ".guardkit/config/agents.yaml":
                                         "mine:\n  command: [mine, '{prompt}']\n  output: text\n"
                                         "claude:\n  coach: [--permission-mode, plan, --max-turns, '5']\n"})
    listed = json.loads(run_cli(root, fakes, "agents", "--json").stdout)
    by_name = {row["name"]: row for row in listed}
    assert list(by_name) == ["claude", "codex", "gemini", "aider", "mine"]
    assert by_name["claude"]["found"] and by_name["claude"]["version"] == "2.0.14 (Claude Code)"
    assert by_name["claude"]["source"] == ".guardkit/config/agents.yaml"
    assert by_name["mine"]["found"] is False and by_name["codex"]["source"] == "built-in"


def test_the_player_goes_on_with_its_session_across_turns_and_a_resume(tmp_path: Path, fakes: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: BODY})
    log = tmp_path / "log"
    log.mkdir()
    args = ("feature-build", TASK, "--player", "claude", "--coach", "codex", "--continue-session")
    stopped = run_cli(root, fakes, *args, FAKE_INTERRUPT="player:2", FAKE_LOG=str(log))
    assert stopped.returncode == 130, stopped.stdout + stopped.stderr
    resumed = run_cli(root, fakes, *args, "--resume", FAKE_LOG=str(log))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    calls = [json.loads(line) for line in (log / "argv").read_text().splitlines()]
    players = [argv for name, role, turn, argv in calls if role == "player"]
    assert "--resume" not in players[0]  # turn 1: a new session
    session = _turn_state(root, 1)["agent_runs"]["player"]["session_id"]  # type: ignore[index]
    assert len(players) == 3  # turn 1; turn 2 interrupted; turn 2 again in the resumed run
    for argv in players[1:]:  # turn 2 goes on with it, in the resumed run too (read from turn 1's state)
        assert argv[argv.index("--resume") + 1] == session
    # The Coach never continues a session: each judges afresh.
    assert all("--resume" not in argv for name, role, turn, argv in calls if role == "coach")


def test_without_the_option_every_turn_starts_a_new_session(tmp_path: Path, fakes: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: BODY})
    log = tmp_path / "log"
    log.mkdir()
    run = run_cli(root, fakes, "feature-build", TASK, "--player", "claude", "--coach", "claude", FAKE_LOG=str(log))
    assert run.returncode == 0, run.stdout + run.stderr
    assert all("--resume" not in json.loads(line)[3] for line in (log / "argv").read_text().splitlines())


@pytest.mark.parametrize(("yaml_text", "said"), [
    # A misspelt envelope field would never be read: the cost never counted, --max-cost never reached.
    ("claude:\n  fields:\n    cost: total_cost_usd\n",
     "agents.yaml:2: $.claude.fields.cost: 'cost' is not an envelope field"),
    ("claude:\n  fields:\n    cost_usd: [total_cost_usd]\n", "agents.yaml:2: $.claude.fields.cost_usd: cost_usd is"),
    ("codex:\n  fields:\n    tokens_in: usage.input_tokens\n", "agents.yaml:2: $.codex.fields.tokens_in: tokens_in is"),
    ("aider:\n  log: {fields: {cost_usd: 3}}\n", "agents.yaml:2: $.aider.log.fields.cost_usd: cost_usd is 3"),
    ("claude:\n  binary: 5\n", "agents.yaml:2: $.claude.binary: binary must be a string"),
    ("codex:\n  coach: [--x]\n  comand: [x]\n", "agents.yaml:3: $.codex.comand: unknown key(s) comand ("),
])
def test_a_bad_agents_file_is_one_line_naming_file_line_and_key(tmp_path: Path, fakes: Path, yaml_text: str,
                                                               said: str) -> None:
    root = make_repo(tmp_path / "repo", {REL: BODY, ".guardkit/config/agents.yaml": yaml_text})
    before = snapshot(root)
    for args in (("agents",), ("feature-build", TASK, "--player", "claude", "--coach", "codex")):
        run = run_cli(root, fakes, *args)
        assert run.returncode == 2, run.stdout + run.stderr
        [line] = run.stderr.strip().splitlines()
        assert said in line
        assert snapshot(root) == before


def test_agent_json_nested_past_the_limit_is_the_agents_error_turn_and_the_loop_resumes(tmp_path: Path,
                                                                                     fakes: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: BODY})
    run = run_cli(root, fakes, "feature-build", TASK, "--player", "claude", "--coach", "claude", "--max-turns", "1",
                  FAKE_FAIL="deep", FAKE_FAIL_ROLE="player")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "unexpected" not in run.stderr
    said = [line for line in run.stderr.splitlines() if "printed JSON that cannot be read" in line]
    assert said == ["  player: error — Player (claude) printed JSON that cannot be read: JSON nested deeper than "
                    "64 levels (column 134)"], run.stderr
    shown = json.loads(run_cli(root, fakes, "show", TASK, "--json").stdout)
    assert [t["decision"] for t in shown["turns"]] == ["error"]
    resumed = run_cli(root, fakes, "feature-build", TASK, "--resume", "--max-turns", "3", "--player", "claude",
                      "--coach", "claude")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert [t["decision"] for t in json.loads(run_cli(root, fakes, "show", TASK, "--json").stdout)["turns"]] == [
        "error", "approve"]


@pytest.mark.parametrize("literal", ["Infinity", "1e400", "-1"])
def test_a_cost_that_is_no_finite_amount_is_unknown_with_a_note(tmp_path: Path, fakes: Path, literal: str) -> None:
    root = make_repo(tmp_path / "repo", {REL: BODY})
    run = run_cli(root, fakes, "feature-build", TASK, "--player", "claude", "--coach", "claude", FAKE_COST=literal)
    assert run.returncode == 0, run.stdout + run.stderr
    shown = "-1" if literal == "-1" else "inf"
    assert (f"note: turn 1: the Player (claude): its cost was reported as {shown}, not a finite amount of at least 0: "
            "counted as unknown") in run.stderr, run.stderr
    runs = _turn_state(root, 1)["agent_runs"]
    assert isinstance(runs, dict) and runs["player"]["cost_usd"] is None and runs["coach"]["cost_usd"] is None
