"""``--max-cost``: a task's or a feature's loop stops cleanly once its agents have reported that much."""

from __future__ import annotations

import json
from pathlib import Path

from .agent_fakes import BODY, REL, TASK, fakes, run_cli
from .feature_support import FEATURE_ID, TaskSpec, make_feature
from .guardkit_fixtures import make_repo

__all__ = ["fakes"]  # the fixture, shared


def test_a_task_stops_once_its_agents_cost_the_limit(tmp_path: Path, fakes: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: BODY})
    run = run_cli(root, fakes, "feature-build", TASK, "--player", "claude", "--coach", "claude", "--max-cost", "0.02")
    assert run.returncode == 1, run.stdout + run.stderr
    # One turn of two Claude runs at $0.0125 each: over the limit after turn 1, before turn 2 starts.
    assert f"{TASK}: cost_limit_reached — --max-cost reached: $0.0250 spent on {TASK} (limit $0.02)" in run.stdout
    shown = json.loads(run_cli(root, fakes, "show", TASK, "--json").stdout)
    assert len(shown["turns"]) == 1 and shown["outcome"] == "cost_limit_reached"
    assert shown["cost"]["total_usd"] == 0.025
    [row] = [r for r in json.loads(run_cli(root, fakes, "status", "--json").stdout) if r["task_id"] == TASK]
    assert row["cost_usd"] == 0.025
    assert "$0.0250" in run_cli(root, fakes, "status").stdout


def test_a_bad_limit_is_refused_before_anything_runs(tmp_path: Path, fakes: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: BODY})
    run = run_cli(root, fakes, "feature-build", TASK, "--player", "claude", "--coach", "claude", "--max-cost", "-1")
    assert run.returncode == 2
    assert "--max-cost: must be an amount of USD above 0" in run.stderr
    assert not (root / ".guardkit" / "worktrees").exists()


def test_a_feature_stops_before_the_wave_after_its_limit(tmp_path: Path, fakes: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-1"), TaskSpec("TASK-FB-2", dependencies=["TASK-FB-1"])])
    run = run_cli(project.root, fakes, "feature-build", FEATURE_ID, "--player", "claude", "--coach", "claude",
                  "--max-cost", "0.05")
    assert run.returncode == 1, run.stdout + run.stderr
    # TASK-FB-1 took two turns ($0.05, approved in its second): the next wave does not start.
    assert f"--max-cost reached: $0.0500 spent on {FEATURE_ID} (limit $0.05)" in run.stdout + run.stderr
    assert not (project.root / ".guardkit" / "worktrees" / "TASK-FB-2").exists()
    # The feature's page and its --json say what each task cost, and the total.
    page = run_cli(project.root, fakes, "report", FEATURE_ID, "--output", str(tmp_path / "f.html"))
    assert page.returncode == 0, page.stderr
    assert "agents' cost <b>$0.0500</b>" in (tmp_path / "f.html").read_text()
    tasks = json.loads(run_cli(project.root, fakes, "report", FEATURE_ID, "--json").stdout)["tasks"]
    assert [t["cost_usd"] for t in tasks] == [0.05, None]


def test_a_feature_task_whose_agent_fails_twice_is_failed_with_its_reason(tmp_path: Path, fakes: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-1")])
    run = run_cli(project.root, fakes, "feature-build", FEATURE_ID, "--player", "claude", "--coach", "codex",
                  "--json", FAKE_FAIL="auth", FAKE_FAIL_ROLE="player")
    assert run.returncode == 1, run.stdout + run.stderr
    [task] = json.loads(run.stdout)["tasks"]
    assert (task["status"], task["outcome"]) == ("failed", "agent_failed")
    assert "the Player failed twice in a row (authentication)" in task["reason"]


def test_spend_counts_only_what_an_agent_can_have_spent(tmp_path: Path) -> None:
    from guardkit_state.store.layout import artifacts_dir
    from guardkit_state.turns.spend import task_spend

    store = artifacts_dir(tmp_path, TASK)
    store.mkdir(parents=True)
    runs = {"player": {"cost_usd": 0.5}, "coach": {"cost_usd": -5}, "a": {"cost_usd": float("nan")},
            "b": {"cost_usd": float("inf")}, "c": {"cost_usd": "1"}, "d": {"cost_usd": True}, "e": ["x"]}
    # json.dumps writes NaN and Infinity, and json.loads reads them back.
    (store / "turn_state_turn_1.json").write_text(json.dumps({"agent_runs": runs}))
    (store / "turn_state_turn_2.json").write_text(json.dumps({"agent_runs": {"player": {"cost_usd": 0.25}}}))
    assert task_spend(tmp_path, TASK) == 0.75


def test_a_limit_says_which_agents_it_cannot_see(tmp_path: Path, fakes: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: BODY})
    run = run_cli(root, fakes, "feature-build", TASK, "--player", "claude", "--coach", "gemini", "--max-cost", "1")
    assert run.returncode == 0, run.stdout + run.stderr
    said = [line.strip() for line in (run.stdout + run.stderr).splitlines() if "--max-cost:" in line]
    assert said == ["note: --max-cost: gemini reports no cost, so its runs are not counted toward the limit"]


def test_a_resumed_loop_counts_what_the_task_already_spent(tmp_path: Path, fakes: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: BODY})
    agents = ("--player", "claude", "--coach", "claude")
    first = run_cli(root, fakes, "feature-build", TASK, *agents, "--max-cost", "0.01")
    assert first.returncode == 1, first.stdout + first.stderr
    again = run_cli(root, fakes, "feature-build", TASK, *agents, "--resume", "--max-cost", "0.01")
    assert again.returncode == 1, again.stdout + again.stderr
    assert f"{TASK}: cost_limit_reached — --max-cost reached: $0.0250 spent on {TASK} (limit $0.01)" in again.stdout
    assert "turn 2 ·" not in again.stderr
    shown = json.loads(run_cli(root, fakes, "show", TASK, "--json").stdout)
    assert len(shown["turns"]) == 1 and shown["cost"]["total_usd"] == 0.025


def test_a_turn_that_would_pass_the_limit_does_not_start(tmp_path: Path, fakes: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: BODY})
    run = run_cli(root, fakes, "feature-build", TASK, "--player", "claude", "--coach", "claude", "--max-cost", "0.04")
    assert run.returncode == 1, run.stdout + run.stderr
    # $0.025 spent; turn 2 would cost about as much again, $0.05 > $0.04: it does not start.
    assert (f"{TASK}: cost_limit_reached — --max-cost: $0.0250 spent on {TASK}; another turn (about $0.0250, the "
            "mean of the last 1) would pass the limit $0.04") in run.stdout
    assert "turn 2 ·" not in run.stderr
    shown = json.loads(run_cli(root, fakes, "show", TASK, "--json").stdout)
    assert len(shown["turns"]) == 1


def test_turn_costs_are_in_turn_order_and_unknown_where_no_agent_said(tmp_path: Path) -> None:
    from guardkit_state.store.layout import artifacts_dir
    from guardkit_state.turns.spend import turn_costs

    store = artifacts_dir(tmp_path, TASK)
    store.mkdir(parents=True)
    for turn, runs in ((1, {"player": {"cost_usd": 0.5}, "coach": {"cost_usd": 0.25}}), (2, {"player": {}}),
                       (10, {"coach": {"cost_usd": 1.0}})):
        (store / f"turn_state_turn_{turn}.json").write_text(json.dumps({"agent_runs": runs}))
    assert turn_costs(tmp_path, TASK) == [(1, 0.75), (2, None), (10, 1.0)]



def test_what_a_features_other_tasks_spent_counts_toward_the_limit(tmp_path: Path) -> None:
    from guardkit_state.agents.protocol import CallableAgent, TurnRequest
    from guardkit_state.loop.run import LoopOptions, run_task_loop
    from guardkit_state.model import Outcome

    root = make_repo(tmp_path / "repo", {REL: BODY})

    def player(request: TurnRequest) -> dict[str, object]:
        return {"summary": "work", "files_modified": [], "files_created": [], "tests_written": [], "tests_run": True,
                "tests_passed": True, "implementation_notes": "x", "concerns": [], "requirements_addressed": [],
                "requirements_remaining": [], "agent_run": {"agent": "p", "cost_usd": 0.01}}

    def coach(request: TurnRequest) -> dict[str, object]:
        return {"decision": "feedback", "rationale": "more", "issues": [], "criteria_verification": [],
                "agent_run": {"agent": "c", "cost_usd": 0.01}}

    options = LoopOptions(max_turns=5, max_cost=0.08, cost_before=0.03)
    result = run_task_loop(root, TASK, CallableAgent(player), CallableAgent(coach), options)
    # $0.02 a turn: with the $0.03 the others spent, two turns make $0.07, and a third would pass $0.08.
    assert result.outcome is Outcome.COST_LIMIT_REACHED and len(result.turns) == 2
    assert result.reason == (f"--max-cost: $0.0700 spent on {TASK} ($0.0300 of it by the feature's other tasks); "
                             "another turn (about $0.0200, the mean of the last 2) would pass the limit $0.08")


def test_spend_counts_an_unreadable_turn_state_as_unknown_and_never_fails(tmp_path: Path) -> None:
    # "Spending is a limit, never a reason to fail": not bad UTF-8, not nesting deeper than Python's
    # parser goes, not a turn number in digits int() does not read (a superscript three).
    from guardkit_state.store.layout import artifacts_dir
    from guardkit_state.turns.spend import turn_costs

    store = artifacts_dir(tmp_path, TASK)
    store.mkdir(parents=True)
    (store / "turn_state_turn_1.json").write_text(json.dumps({"agent_runs": {"player": {"cost_usd": 0.5}}}))
    (store / "turn_state_turn_2.json").write_bytes(b'{"agent_runs": {"p": {"cost_usd": 9}}, "x": "\xff"}')
    (store / "turn_state_turn_3.json").write_text("[" * 100_000)
    (store / "turn_state_turn_\u00b3.json").write_text(json.dumps({"agent_runs": {"p": {"cost_usd": 7}}}))
    assert turn_costs(tmp_path, TASK) == [(1, 0.5), (2, None), (3, None)]


def test_a_resumed_feature_counts_what_its_merged_tasks_spent_after_their_worktrees_are_pruned(
        tmp_path: Path, fakes: Path) -> None:
    # TASK-FB-1 spent $0.05 and was merged; `worktrees prune` removes its worktree (merged and clean):
    # its turns are on the feature branch, and --resume still counts them.
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-1"), TaskSpec("TASK-FB-2", dependencies=["TASK-FB-1"])])
    agents = ("--player", "claude", "--coach", "claude", "--max-cost", "0.05")
    first = run_cli(project.root, fakes, "feature-build", FEATURE_ID, *agents)
    assert first.returncode == 1, first.stdout + first.stderr
    pruned = run_cli(project.root, fakes, "worktrees", "prune")
    assert pruned.returncode == 0, pruned.stdout + pruned.stderr
    assert not (project.root / ".guardkit" / "worktrees" / "TASK-FB-1").exists()
    again = run_cli(project.root, fakes, "feature-build", FEATURE_ID, *agents, "--resume")
    assert again.returncode == 1, again.stdout + again.stderr
    assert f"--max-cost reached: $0.0500 spent on {FEATURE_ID} (limit $0.05)" in again.stdout + again.stderr
    assert not (project.root / ".guardkit" / "worktrees" / "TASK-FB-2").exists()


def test_spend_never_blocks_on_a_fifo_or_reads_a_huge_file_named_like_a_turn_state(tmp_path: Path) -> None:
    # An agent works in the worktree the limit is read from: a FIFO there (an open of it waits for a
    # writer forever) or a file of gigabytes must not stop the loop; each counts as unknown.
    import os
    import subprocess
    import sys

    from guardkit_state.store.layout import artifacts_dir

    store = artifacts_dir(tmp_path, TASK)
    store.mkdir(parents=True)
    (store / "turn_state_turn_1.json").write_text(json.dumps({"agent_runs": {"player": {"cost_usd": 0.5}}}))
    os.mkfifo(store / "turn_state_turn_2.json")
    with open(store / "turn_state_turn_3.json", "w") as big:  # 64 MB of blanks before the JSON: sparse, no disk
        big.seek(64 * 1024 * 1024)
        big.write(json.dumps({"agent_runs": {"player": {"cost_usd": 7}}}))
    code = ("import sys; from pathlib import Path; from guardkit_state.turns.spend import turn_costs; "
            f"print(turn_costs(Path(sys.argv[1]), {TASK!r}))")
    # (the timeout only ends a run that blocks: the answer is the assertion)
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert (done.returncode, done.stdout.strip()) == (0, "[(1, 0.5), (2, None), (3, None)]"), done.stderr
