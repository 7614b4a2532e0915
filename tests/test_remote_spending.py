"""``feature-build FEAT --remote --max-cost``: the limit holds for the whole feature, whichever workers
(and how many restarts) spent it, read from what the remote's branches record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from guardkit_state.git.repo import GitRepo
from guardkit_state.remote.spending import RemoteSpending
from tests.agent_fakes import fakes
from tests.feature_support import FEATURE_BRANCH, FEATURE_ID, FeatureProject, TaskSpec, git, make_feature, task_rel
from tests.remote_support import clone, make_bare

__all__ = ["fakes"]  # the fixture, shared

# The fake Claude costs $0.0125 a run: a turn (Player and Coach) $0.025, and a task $0.05 (approved in turn 2).


def _worker(project: FeatureProject, checkout: Path, bin_dir: Path, *extra: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARDKIT_", "FEATURE_"))}
    env.update(project.env(), NO_COLOR="1", PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    argv = [sys.executable, "-m", "guardkit_state", "feature-build", FEATURE_ID, "--repo", str(checkout),
            "--player", "claude", "--coach", "claude", "--remote", "origin", "--poll", "0.1", "--json", *extra]
    return subprocess.Popen(argv, cwd=checkout, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _ended(proc: subprocess.Popen[str]) -> dict[str, object]:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 1, out + err
    result: dict[str, object] = json.loads(out)
    return result


def _turns(bare: Path, task: str) -> list[int]:
    """The turns its task file on its branch on the remote records (none: no branch)."""
    if not git(bare, "branch", "--list", f"autobuild/{task}").strip():
        return []
    text = git(bare, "show", f"autobuild/{task}:{task_rel(task).as_posix()}")
    return [turn["turn"] for turn in yaml.safe_load(text.split("---\n")[1])["autobuild_state"]["turns"]]


def test_no_worker_claims_a_task_once_the_feature_spent_the_limit_even_after_a_restart(
        tmp_path: Path, fakes: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001"), TaskSpec("TASK-FB-002", dependencies=["TASK-FB-001"])])
    bare = make_bare(tmp_path, project.root)
    first, second = (clone(bare.as_uri(), tmp_path / f"machine-{n}") for n in (1, 2))
    result = _ended(_worker(project, first, fakes, "--max-cost", "0.05"))
    # TASK-FB-001 took two turns ($0.05) and was merged: wave 2's task is claimed by nobody.
    assert result["reason"] == f"--max-cost reached: $0.0500 spent on {FEATURE_ID} (limit $0.05)"
    assert "TASK-FB-001" in git(bare, "log", "--format=%B", FEATURE_BRANCH)
    # Its turns are on the feature branch too: what is read once a merged task's branch is gone.
    repo = GitRepo.discover(first)
    assert repo is not None
    feature = git(first, "rev-parse", f"origin/{FEATURE_BRANCH}").strip()
    assert RemoteSpending(repo).spent({"TASK-FB-001": feature}) == {"TASK-FB-001": 0.05}
    # A worker started afresh on another clone reads what the feature spent from the remote: it runs nothing.
    again = _ended(_worker(project, second, fakes, "--max-cost", "0.05"))
    assert again["reason"] == result["reason"] and again["ran"] == []
    assert _turns(bare, "TASK-FB-002") == []
    assert git(bare, "for-each-ref", "refs/guardkit/claims/") == ""


def test_a_task_counts_what_the_features_other_tasks_spent_on_other_workers(tmp_path: Path, fakes: Path) -> None:
    tasks = [TaskSpec("TASK-FB-001"), TaskSpec("TASK-FB-002"),
             TaskSpec("TASK-FB-003", dependencies=["TASK-FB-001", "TASK-FB-002"])]
    project = make_feature(tmp_path, tasks)
    bare = make_bare(tmp_path, project.root)
    machines = [clone(bare.as_uri(), tmp_path / f"machine-{n}") for n in (1, 2)]
    procs = [_worker(project, machine, fakes, "--max-cost", "0.11") for machine in machines]
    results = [_ended(proc) for proc in procs]
    # Wave 1 spent $0.10 whichever worker ran which task; wave 2's task starts under the limit, runs
    # one turn ($0.125 in all) and no second: the limit counts the tasks run on the other machine.
    # Its loop says so; a worker that looks at the feature after it, that the feature reached the limit.
    said = {"TASK-FB-003: --max-cost reached: $0.1250 spent on TASK-FB-003 ($0.1000 of it by the feature's "
            "other tasks) (limit $0.11)", f"--max-cost reached: $0.1250 spent on {FEATURE_ID} (limit $0.11)"}
    assert {str(r["reason"]) for r in results} <= said
    assert [_turns(bare, t.task_id) for t in tasks] == [[1, 2], [1, 2], [1]]


def test_spending_reads_each_tasks_turn_states_at_the_given_tips(tmp_path: Path, fakes: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001"), TaskSpec("TASK-FB-002")])
    bare = make_bare(tmp_path, project.root)
    machine = clone(bare.as_uri(), tmp_path / "machine-1")
    _ended(_worker(project, machine, fakes, "--max-cost", "0.07"))
    git(machine, "fetch", "-q", "origin", "+refs/heads/autobuild/*:refs/remotes/origin/autobuild/*")
    repo = GitRepo.discover(machine)
    assert repo is not None
    spending = RemoteSpending(repo)
    tips = {task: git(machine, "rev-parse", f"origin/autobuild/{task}").strip()
            for task in ("TASK-FB-001", "TASK-FB-002")}
    main = git(machine, "rev-parse", "origin/main").strip()
    spent = spending.spent({**tips, "TASK-FB-000": main})  # (main: a tip without the task's folder)
    # Whichever ran first took two turns; the other one turn, then the limit.
    assert sorted(spent.values()) == [0.0, 0.025, 0.05] and spent["TASK-FB-000"] == 0.0
    assert spending.spent(tips) == {task: spent[task] for task in tips}  # kept by tip: read once


def _branch_holding(tmp_path: Path, turn_states: dict[str, bytes]) -> tuple[GitRepo, str]:
    """A repository whose commit holds these turn states of TASK-FB-001 (file name -> bytes): its tip."""
    root = tmp_path / "repo"
    folder = root / ".guardkit" / "autobuild" / "TASK-FB-001"
    folder.mkdir(parents=True)
    git(root, "init", "-q")
    for name, data in turn_states.items():
        (folder / name).write_bytes(data)
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "forged")
    repo = GitRepo.discover(root)
    assert repo is not None
    return repo, git(root, "rev-parse", "HEAD").strip()


def test_spending_counts_a_hostile_turn_state_on_a_branch_as_unknown_and_never_fails(tmp_path: Path) -> None:
    # A person (or an agent) pushes a task branch whose turn states no worker could have written: the
    # limit counts them as unknown (the well-formed one still counts), and no worker dies reading them.
    repo, tip = _branch_holding(tmp_path, {
        "turn_state_turn_1.json": json.dumps({"agent_runs": {"player": {"cost_usd": 0.5}}}).encode(),
        "turn_state_turn_2.json": b"[" * 100_000,  # deeper than Python's parser goes
        "turn_state_turn_3.json": b'{"agent_runs": {"p": {"cost_usd": 9}}, "x": "\xff"}',
        "turn_state_turn_\u00b3.json": json.dumps({"agent_runs": {"p": {"cost_usd": 7}}}).encode()})
    assert RemoteSpending(repo).spent({"TASK-FB-001": tip}) == {"TASK-FB-001": 0.5}


def test_a_task_branch_pushed_back_by_a_person_hides_none_of_what_the_feature_branch_records(tmp_path: Path) -> None:
    # TASK-FB-001 was merged with $0.05 of turns; a person pushes its branch again, at a commit
    # without them (a fresh start, a force-push): what the feature branch records still counts.
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    ident = ("-c", "user.name=t", "-c", "user.email=t@t")
    git(root, *ident, "commit", "-q", "--allow-empty", "-m", "start")
    folder = root / ".guardkit" / "autobuild" / "TASK-FB-001"
    folder.mkdir(parents=True)
    for turn in (1, 2):
        (folder / f"turn_state_turn_{turn}.json").write_text(
            json.dumps({"agent_runs": {"player": {"cost_usd": 0.0125}, "coach": {"cost_usd": 0.0125}}}))
    git(root, "add", "-A")
    git(root, *ident, "commit", "-qm", "TASK-FB-001 merged")
    feature, start = git(root, "rev-parse", "HEAD").strip(), git(root, "rev-parse", "HEAD~1").strip()
    repo = GitRepo.discover(root)
    assert repo is not None
    spending = RemoteSpending(repo, FEATURE_ID, ("TASK-FB-001", "TASK-FB-002"))
    on_remote = {FEATURE_BRANCH: feature, "autobuild/TASK-FB-001": start}
    assert spending.of_feature(on_remote) == {"TASK-FB-001": 0.05, "TASK-FB-002": 0.0}
    assert spending.reached(0.05, on_remote) == f"--max-cost reached: $0.0500 spent on {FEATURE_ID} (limit $0.05)"


def test_spending_never_reads_a_turn_state_over_the_cap_on_a_branch(tmp_path: Path) -> None:
    # A local reading refuses a turn state over MAX_FILE_BYTES; one on a task branch was read whole by
    # every worker (git cat-file holding it all in memory). Its size is asked first now: unknown.
    from guardkit_state.store.reads import MAX_FILE_BYTES

    huge = json.dumps({"agent_runs": {"player": {"cost_usd": 9}}, "pad": "x" * MAX_FILE_BYTES})
    repo, tip = _branch_holding(tmp_path, {
        "turn_state_turn_1.json": json.dumps({"agent_runs": {"player": {"cost_usd": 0.5}}}).encode(),
        "turn_state_turn_2.json": huge.encode()})
    assert RemoteSpending(repo).spent({"TASK-FB-001": tip}) == {"TASK-FB-001": 0.5}
    found = repo.objects([f"{tip}:.guardkit/autobuild/TASK-FB-001/turn_state_turn_2.json", f"{tip}:missing",
                          f"{tip}:.guardkit/autobuild/TASK-FB-001/turn_state_turn_1.json"], max_bytes=MAX_FILE_BYTES)
    assert found[0] is None and found[1] is None and found[2] is not None and found[2][1] == "blob"
