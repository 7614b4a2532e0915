"""``feature-build FEAT --remote``: one feature built by several worker processes, each in a clone
of one bare remote, with scripted agents."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from guardkit_state.agents.protocol import Agent
from guardkit_state.git.repo import GitRepo
from guardkit_state.remote.claim_record import Claim
from guardkit_state.remote.claims import ClaimBoard
from guardkit_state.remote.ledgers import RemoteLedgers
from tests.feature_support import FEATURE_BRANCH, FEATURE_ID, FeatureProject, TaskSpec, agent_command, git, make_feature
from tests.remote_support import clone, git_daemon, make_bare

INDEPENDENT = [TaskSpec(f"TASK-FB-{n:03d}", sleep=0.3, approve_at=2 if n == 2 else 1) for n in range(1, 7)]
DEPENDENT = TaskSpec("TASK-FB-007", dependencies=["TASK-FB-001", "TASK-FB-004"])


def worker(project: FeatureProject, checkout: Path, *extra: str, player: str | None = None,
           crash_at: str | None = None) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARDKIT_", "FEATURE_"))}
    env.update(project.env(), NO_COLOR="1", **({"GUARDKIT_STATE_CRASH_AT": crash_at} if crash_at else {}))
    argv = [sys.executable, "-m", "guardkit_state", "feature-build", FEATURE_ID, "--repo", str(checkout),
            "--player", player or agent_command("player.py"), "--coach", agent_command("coach.py"),
            "--remote", "origin", "--poll", "0.1", *extra]
    return subprocess.Popen(argv, cwd=checkout, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def cli(cwd: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "guardkit_state", *args], cwd=cwd, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def tree(repo: Path, rev: str, under: str = "src") -> dict[str, str]:
    names = git(repo, "ls-tree", "-r", "--name-only", rev, "--", under).split()
    return {name: git(repo, "show", f"{rev}:{name}") for name in names}


def steady(text: str, root: Path) -> str:
    """``text`` without what differs between two runs of one feature: times, durations, shas, paths."""
    text = re.sub(re.escape(str(root)) + r"/[^/\s'\"]+", "<root>", text)
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(\+00:00|Z)?", "<time>", text)
    text = re.sub(r"\b[0-9a-f]{40}\b", "<sha>", text)
    return re.sub(r'("duration_seconds": )[0-9.]+', r"\1<seconds>", text)


def merged_order(repo: Path) -> list[str]:
    out = git(repo, "log", "--first-parent", "--merges", "--reverse",
              "--format=%(trailers:key=Guardkit-Task,valueonly)%x1e", FEATURE_BRANCH)
    return [item.strip() for item in out.split("\x1e") if item.strip()]


@pytest.mark.parametrize("transport", ["file", "daemon"])
def test_three_workers_build_the_feature_each_task_once_as_one_machine_would(tmp_path: Path, transport: str) -> None:
    tasks = [*INDEPENDENT, DEPENDENT]
    project = make_feature(tmp_path, tasks)
    bare = make_bare(tmp_path, project.root)
    with contextlib.ExitStack() as stack:
        url = bare.as_uri() if transport == "file" else stack.enter_context(git_daemon(tmp_path)).url(bare.name)
        _build_with_three_workers(tmp_path, project, bare, url, tasks)


def _build_with_three_workers(tmp_path: Path, project: FeatureProject, bare: Path, url: str,
                              tasks: list[TaskSpec]) -> None:
    machines = [clone(url, tmp_path / f"machine-{n}") for n in range(1, 4)]
    procs = [worker(project, machine) for machine in machines]
    outputs = [proc.communicate(timeout=600) for proc in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, out + err
    runs = [(e["task"], e["turn"]) for e in project.invocations() if e["role"] == "player" and e["event"] == "start"]
    expected = [(spec.task_id, turn) for spec in tasks for turn in range(1, spec.approve_at + 1)]
    # Every turn of every task run once, by whichever worker.
    assert sorted(runs) == sorted(expected), "\n".join(err for _, err in outputs)
    ran_by = [line for _, err in outputs for line in err.splitlines() if ": running on " in line]
    assert len(ran_by) == len(tasks)
    assert len({line.split("running on ")[1].split(":")[0:2][1] for line in ran_by}) >= 2  # shared out
    # Merged in plan order, wave by wave: the dependent task after its wave.
    assert merged_order(bare) == [spec.task_id for spec in tasks]
    # The same content as one machine building it alone.
    solo = make_feature(tmp_path, tasks, name="solo")
    alone = subprocess.run([sys.executable, "-m", "guardkit_state", "feature-build", FEATURE_ID, "--repo",
                            str(solo.root), "--player", agent_command("player.py"), "--coach",
                            agent_command("coach.py")], env={**os.environ, **solo.env()}, capture_output=True,
                           text=True, check=False)
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert tree(bare, FEATURE_BRANCH) == tree(solo.root, FEATURE_BRANCH)
    assert set(tree(bare, FEATURE_BRANCH)) == {"src/shared.txt", *(f"src/{spec.task_id}.txt" for spec in tasks)}
    # Every file of the feature branch, the plan and its progress included, as one machine leaves
    # it (a one-machine run writes its plan in the checkout): the same but for times, shas and paths.
    plan = ".guardkit/features/FEAT-FB.yaml"
    shared = {name: steady(text, tmp_path) for name, text in tree(bare, FEATURE_BRANCH, ".").items()}
    alone_tree = {name: steady(text, tmp_path) for name, text in tree(solo.root, FEATURE_BRANCH, ".").items()}
    alone_tree[plan] = steady((solo.root / plan).read_text(), tmp_path)
    assert shared.keys() == alone_tree.keys()
    for name in shared:
        assert shared[name] == alone_tree[name], name
    progress = yaml.safe_load(shared[plan])
    assert progress["status"] == "completed" and progress["execution"]["completed_waves"] == [1, 2]
    assert {task["id"]: task["status"] for task in progress["tasks"]} == dict.fromkeys(
        (spec.task_id for spec in tasks), "completed")
    assert git(bare, "for-each-ref", "refs/guardkit/claims/") == ""  # every claim released
    shown = json.loads(cli(machines[0], "show", FEATURE_ID, "--remote", "origin", "--json"))
    assert [(t["task_id"], t["state"], t["wave"]) for t in shown["tasks"]] == [
        *((spec.task_id, "merged", 1) for spec in INDEPENDENT), (DEPENDENT.task_id, "merged", 2)]


def test_a_worker_killed_mid_player_is_taken_over_after_its_lease(tmp_path: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001", approve_at=2)])
    bare = make_bare(tmp_path, project.root)
    first, second = (clone(bare.as_uri(), tmp_path / f"machine-{n}") for n in (1, 2))
    # The first machine's Player hangs in turn 2 (after turn 1 was pushed); it is killed there.
    mark = tmp_path / "in-turn-2"
    hanging = (f'if [ "$GUARDKIT_TURN" = 2 ]; then echo $$ > {mark}; sleep 600; fi; '
               f"exec {agent_command('player.py')}")
    victim = worker(project, first, "--lease", "2", player=hanging)
    while not mark.exists():
        assert victim.poll() is None, victim.communicate()
        subprocess.run(["sleep", "0.05"], check=False)
    os.killpg(victim.pid, signal.SIGKILL)  # the worker, mid-Player
    _, victim_err = victim.communicate()
    while not mark.read_text().strip():
        subprocess.run(["sleep", "0.05"], check=False)
    os.killpg(int(mark.read_text()), signal.SIGKILL)  # its agent too (a session of its own): the machine died
    pushed = git(bare, "log", "--format=%(trailers:key=Turn,valueonly)", "autobuild/TASK-FB-001").split()
    assert pushed == ["1"]  # turn 1 reached the remote before turn 2 started
    assert git(bare, "for-each-ref", "refs/guardkit/claims/FEAT-FB/") != ""  # the claim is left to expire
    heir = worker(project, second, "--lease", "2")
    out, err = heir.communicate(timeout=600)
    assert heir.returncode == 0, out + err
    assert "took over the claim" in err
    players = [(e["task"], e["turn"]) for e in project.invocations()
               if e["role"] == "player" and e["event"] == "start"]
    assert players == [("TASK-FB-001", 1), ("TASK-FB-001", 2)]  # turn 1 kept, turn 2 run once more
    assert merged_order(bare) == ["TASK-FB-001"]
    recorded = git(bare, "show", "autobuild/TASK-FB-001:tasks/backlog/TASK-FB-001-part.md")
    state = yaml.safe_load(recorded.split("---\n")[1])["autobuild_state"]
    assert [(t["turn"], t["decision"]) for t in state["turns"]] == [(1, "feedback"), (2, "approve")]
    # The takeover is in the task's history: its task file says who took it from whom, when, and
    # the claim (and lease) it replaced, on the branch and merged with it.
    victim_id, heir_id = (re.search(r"worker (\S+) on FEAT-FB", text).group(1)  # type: ignore[union-attr]
                          for text in (victim_err, err))
    [entry] = state["takeovers"]
    assert (entry["by"], entry["from"], entry["turns_done"]) == (heir_id, victim_id, 1)
    assert re.fullmatch(r"[0-9a-f]{40}", entry["claim"]) and entry["lease_until"] <= entry["at"]
    merged_copy = git(bare, "show", f"{FEATURE_BRANCH}:tasks/backlog/TASK-FB-001-part.md")
    assert yaml.safe_load(merged_copy.split("---\n")[1])["autobuild_state"]["takeovers"] == [entry]
    history = git(bare, "log", "--format=%s", "autobuild/TASK-FB-001").splitlines()
    assert f"guardkit: TASK-FB-001 taken over by {heir_id} from {victim_id}" in history
    assert json.loads(cli(second, "show", "TASK-FB-001", "--json"))["takeovers"] == [entry]
    assert f"taken over after 1 turn(s) by {heir_id} from {victim_id}" in cli(second, "show", "TASK-FB-001")


def test_a_worker_restarted_on_the_same_clone_takes_over_without_the_killed_turns_staged_files(
        tmp_path: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001", approve_at=2)])
    bare = make_bare(tmp_path, project.root)
    machine = clone(bare.as_uri(), tmp_path / "machine")
    mark = tmp_path / "in-turn-2"
    # Turn 2's Player stages a file of its own, then the machine dies under it.
    hanging = (f'if [ "$GUARDKIT_TURN" = 2 ]; then echo half > half-done.txt; git add half-done.txt; '
               f"echo $$ > {mark}; sleep 600; fi; exec {agent_command('player.py')}")
    victim = worker(project, machine, "--lease", "2", player=hanging)
    while not mark.exists() or not mark.read_text().strip():
        assert victim.poll() is None, victim.communicate()
        subprocess.run(["sleep", "0.05"], check=False)
    os.killpg(victim.pid, signal.SIGKILL)
    os.killpg(int(mark.read_text()), signal.SIGKILL)
    victim.communicate()
    heir = worker(project, machine, "--lease", "2")
    out, err = heir.communicate(timeout=600)
    assert heir.returncode == 0, out + err
    assert "took back the claim" in err
    [takeover] = [line.split()[0] for line in git(bare, "log", "--format=%H %s", "autobuild/TASK-FB-001").splitlines()
                  if " taken over by " in line]
    changed = git(bare, "show", "--name-only", "--format=", takeover).split()
    assert changed == ["tasks/backlog/TASK-FB-001-part.md"]  # the takeover commit holds its entry only
    players = [(e["task"], e["turn"]) for e in project.invocations()
               if e["role"] == "player" and e["event"] == "start"]
    assert players == [("TASK-FB-001", 1), ("TASK-FB-001", 2)]  # the killed turn 2 is run once more
    assert merged_order(bare) == ["TASK-FB-001"]


def test_a_worker_killed_between_its_turns_commit_and_its_ledger_is_taken_over_on_the_same_clone(
        tmp_path: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001", approve_at=2)])
    bare = make_bare(tmp_path, project.root)
    machine = clone(bare.as_uri(), tmp_path / "machine")
    # Turn 2 (the approval) is committed, then the machine dies before the loop lists the commit in
    # its ledger and before the worker pushes it.
    victim = worker(project, machine, "--lease", "2", crash_at="git.after_commit:2")
    victim.communicate(timeout=120)
    assert victim.returncode == -signal.SIGKILL
    heir = worker(project, machine, "--lease", "2")
    try:
        out, err = heir.communicate(timeout=40)
    except subprocess.TimeoutExpired:
        os.killpg(heir.pid, signal.SIGKILL)  # the worker this test started: it never ended
        out, err = heir.communicate()
    assert heir.returncode == 0, out + err[-2000:]
    assert "took back the claim" in err and err.count(": running on ") == 1
    players = [(e["task"], e["turn"]) for e in project.invocations()
               if e["role"] == "player" and e["event"] == "start"]
    assert players == [("TASK-FB-001", 1), ("TASK-FB-001", 2)]  # turn 2 is recorded from its reports
    assert merged_order(bare) == ["TASK-FB-001"]
    recorded = git(bare, "show", f"{FEATURE_BRANCH}:tasks/backlog/TASK-FB-001-part.md")
    state = yaml.safe_load(recorded.split("---\n")[1])["autobuild_state"]
    assert [(t["turn"], t["decision"]) for t in state["turns"]] == [(1, "feedback"), (2, "approve")]
    assert len(state["takeovers"]) == 1


def test_an_approved_task_still_under_a_live_claim_is_not_merged_until_the_claim_is_released(
        tmp_path: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001")])
    bare = make_bare(tmp_path, project.root)
    holder_clone, machine = (clone(bare.as_uri(), tmp_path / f"machine-{n}") for n in (1, 2))
    # Another machine's run: the task approved and its branch pushed, its claim not released yet.
    holder_repo = GitRepo.discover(holder_clone)
    assert holder_repo is not None
    holder = ClaimBoard(holder_repo, "origin", "holder")
    claim = holder.claim(FEATURE_ID, "TASK-FB-001", lease=600)
    assert claim is not None
    run = subprocess.run([sys.executable, "-m", "guardkit_state", "feature-build", "TASK-FB-001", "--repo",
                          str(holder_clone), "--player", agent_command("player.py"), "--coach",
                          agent_command("coach.py")],
                         cwd=holder_clone, env={**os.environ, **project.env()}, capture_output=True, text=True,
                         check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    tip = git(holder_clone, "rev-parse", "autobuild/TASK-FB-001").strip()
    ledger = RemoteLedgers(holder_repo, "origin", FEATURE_ID).refspec("TASK-FB-001", tip)
    git(holder_clone, "push", "-q", "--atomic", "origin", "autobuild/TASK-FB-001", ledger)  # as a worker pushes
    second = worker(project, machine)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(second.stderr or []), daemon=True)
    reader.start()
    subprocess.run(["sleep", "1"], check=False)
    assert second.poll() is None, "".join(lines)
    assert merged_order(bare) == []  # approved, but its claim is live: its holder may still push to it
    assert holder.release(claim)
    out, _ = second.communicate(timeout=120)
    reader.join(10)
    assert second.returncode == 0, out + "".join(lines)
    assert merged_order(bare) == ["TASK-FB-001"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_or_ctrl_c_releases_the_workers_claims(tmp_path: Path, signum: int) -> None:
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001")])
    bare = make_bare(tmp_path, project.root)
    machine = clone(bare.as_uri(), tmp_path / "machine-1")
    mark = tmp_path / "in-turn-1"
    hanging = f"echo $$ > {mark}; sleep 600; exec {agent_command('player.py')}"
    proc = worker(project, machine, player=hanging)
    try:
        while not (mark.exists() and mark.read_text().strip()):
            assert proc.poll() is None, proc.communicate()
            subprocess.run(["sleep", "0.05"], check=False)
        assert git(bare, "for-each-ref", "--format=%(refname)", "refs/guardkit/claims/").split() == [
            "refs/guardkit/claims/FEAT-FB/TASK-FB-001"]
        watcher = clone(bare.as_uri(), tmp_path / "machine-2")
        shown = json.loads(cli(watcher, "show", FEATURE_ID, "--remote", "origin", "--json"))
        task = shown["tasks"][0]
        assert (task["task_id"], task["state"], task["turns"]) == ("TASK-FB-001", "running", 0)
        assert task["holder"].startswith(socket.gethostname()) and task["heartbeat_at"] is not None
        listed = cli(watcher, "status", "--remote", "origin")
        assert "FEAT-FB on 'origin': 0/1 merged" in listed and "TASK-FB-001" in listed and "held by" in listed
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=120)
    finally:
        if mark.exists() and mark.read_text().strip():
            try:
                os.killpg(int(mark.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass  # the loop stopped its agent, as it does on SIGTERM
    assert proc.returncode == 130, out + err
    assert "released the claim(s) of TASK-FB-001" in err
    assert git(bare, "for-each-ref", "refs/guardkit/claims/") == ""


def test_a_remote_gone_for_a_while_is_waited_for_and_no_turn_is_lost(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from guardkit_state.agents.protocol import CommandAgent
    from guardkit_state.remote.worker import WorkerOptions, run_worker

    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001", approve_at=2)])
    bare = make_bare(tmp_path, project.root)
    machine = clone(bare.as_uri(), tmp_path / "machine-1")
    hidden = tmp_path / "hidden.git"
    # Turn 1's Player takes the remote away (as a network would); it comes back when the worker waits.
    player = f'if [ "$GUARDKIT_TURN" = 1 ]; then mv {bare} {hidden}; fi; exec {agent_command("player.py")}'
    for name, value in project.env().items():
        monkeypatch.setenv(name, value)
    notes: list[str] = []
    lock = threading.Lock()

    def on_note(text: str) -> None:
        notes.append(text)
        with lock:
            if "waiting (try" in text and hidden.exists():
                hidden.rename(bare)

    result = run_worker(machine, FEATURE_ID, CommandAgent(player), CommandAgent(agent_command("coach.py")),
                        WorkerOptions(remote="origin", poll=0.1), on_note=on_note)
    assert result.done, notes
    waited = [note for note in notes if "waiting (try" in note]
    assert waited and "TASK-FB-001: push: cannot push autobuild/TASK-FB-001" in waited[0]
    pushed = git(bare, "log", "--format=%(trailers:key=Turn,valueonly)", "autobuild/TASK-FB-001").split()
    assert pushed == ["2", "1"]  # turn 1 reached the remote once it was back, before turn 2 started
    assert notes.index(waited[0]) < next(i for i, n in enumerate(notes) if "turn 2" in n)
    assert merged_order(bare) == ["TASK-FB-001"]


def test_remote_usage_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001")])
    base = [sys.executable, "-m", "guardkit_state", "feature-build", "--repo", str(project.root),
            "--player", "true", "--coach", "true"]
    for extra, said in ((["TASK-FB-001", "--remote", "origin"], "--remote builds a feature"),
                        ([FEATURE_ID, "--remote", "nowhere"], "no git remote named 'nowhere'"),
                        ([FEATURE_ID, "--remote", "origin", "--resume"], "--resume does not apply with --remote"),
                        ([FEATURE_ID, "--remote", "origin", "--lease", "1e300"], "--lease is 1e+300; expected a number "
                         "of seconds above 0 and at most 86400")):
        done = subprocess.run([*base, *extra], capture_output=True, text=True, check=False)
        assert done.returncode == 2 and said in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    assert git(project.root, "for-each-ref", "refs/heads/autobuild/") == ""  # nothing was created


def test_a_worker_says_when_the_merge_driver_is_missing(tmp_path: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001")])
    bare = make_bare(tmp_path, project.root)
    machine = clone(bare.as_uri(), tmp_path / "machine-1")
    _, err = worker(project, machine).communicate(timeout=600)
    assert "merge driver is not registered in this clone" in err
    subprocess.run([sys.executable, "-m", "guardkit_state", "merge-driver", "--install"], cwd=machine, check=True,
                   capture_output=True)
    again = worker(project, machine)
    _, err = again.communicate(timeout=600)
    assert again.returncode == 0 and "merge driver" not in err, err  # registered: nothing to say
    assert "1/1 merged" in cli(machine, "show", FEATURE_ID, "--remote", "origin")


def test_a_task_out_of_turns_stops_the_workers_with_its_reason(tmp_path: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001", approve_at=3), TaskSpec("TASK-FB-002")])
    bare = make_bare(tmp_path, project.root)
    machine = clone(bare.as_uri(), tmp_path / "machine-1")
    proc = worker(project, machine, "--max-turns", "1", "--json")
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 1, out + err
    result = json.loads(out)
    assert result["done"] is False and result["reason"].startswith("TASK-FB-001: ")
    assert sorted(result["ran"]) == ["TASK-FB-001", "TASK-FB-002"] and result["merged"] == []
    assert git(bare, "for-each-ref", "refs/guardkit/claims/") == ""


def _agents_in_process(project: FeatureProject, monkeypatch: pytest.MonkeyPatch) -> tuple[Agent, Agent]:
    """The scripted Player and Coach for a worker run in this process, their environment set."""
    for name, value in project.env().items():
        monkeypatch.setenv(name, value)
    return project.agents()


def _two_machines(tmp_path: Path, project: FeatureProject) -> tuple[Path, Path, Path]:
    """A bare remote of ``project`` and two clones of it, ``mine`` and ``theirs``; ``theirs`` has
    pushed the feature branch (at main)."""
    bare = make_bare(tmp_path, project.root)
    mine, theirs = (clone(bare.as_uri(), tmp_path / f"machine-{n}") for n in (1, 2))
    git(theirs, "branch", FEATURE_BRANCH, "origin/main")
    git(theirs, "push", "-q", "origin", FEATURE_BRANCH)
    return bare, mine, theirs


def _one_turn_here(project: FeatureProject, machine: Path, task: str) -> None:
    """One turn of ``task`` run on ``machine`` alone (one-machine loop, off the feature branch), never
    pushed: the turn a holder ousted before its push leaves on its clone."""
    local = subprocess.run([sys.executable, "-m", "guardkit_state", "feature-build", task, "--repo",
                            str(machine), "--base-branch", FEATURE_BRANCH, "--max-turns", "1", "--player",
                            agent_command("player.py"), "--coach", agent_command("coach.py")],
                           cwd=machine, env={**os.environ, **project.env()}, capture_output=True, text=True,
                           check=False)
    assert local.returncode == 1, local.stdout + local.stderr


def _run_elsewhere(project: FeatureProject, machine: Path, task: str, *extra: str, release: bool = True,
                   lease: float = 600) -> None:
    """Another machine's worker runs ``task`` as a worker does: claims it, runs its loop, pushes its
    branch and turn ledger, and (``release``) releases the claim."""
    repo = GitRepo.discover(machine)
    assert repo is not None
    board = ClaimBoard(repo, "origin", "elsewhere")
    git(machine, "fetch", "-q", "origin", "+refs/heads/autobuild/*:refs/remotes/origin/autobuild/*")
    for name in git(machine, "for-each-ref", "--format=%(refname:lstrip=3)", "refs/remotes/origin/autobuild/").split():
        git(machine, "branch", "-f", name, f"origin/{name}")
    claim = board.claim(FEATURE_ID, task, lease=lease)
    assert claim is not None
    run = subprocess.run([sys.executable, "-m", "guardkit_state", "feature-build", task, "--repo", str(machine),
                          "--base-branch", FEATURE_BRANCH, "--player", agent_command("player.py"), "--coach",
                          agent_command("coach.py"), *extra],
                         cwd=machine, env={**os.environ, **project.env()}, capture_output=True, text=True, check=False)
    assert run.returncode in (0, 1), run.stdout + run.stderr
    tip = git(machine, "rev-parse", f"autobuild/{task}").strip()
    ledger = RemoteLedgers(repo, "origin", FEATURE_ID).refspec(task, tip)
    git(machine, "push", "-q", "--atomic", "origin", f"autobuild/{task}", ledger)
    if release:
        assert board.release(claim)


def _approved_elsewhere(tmp_path: Path) -> tuple[FeatureProject, Path, Path, Path]:
    """A one-task feature, its bare remote and two clones (:func:`_two_machines`), the task run to
    approval on ``theirs`` and pushed, its claim released."""
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001")])
    bare, mine, theirs = _two_machines(tmp_path, project)
    _run_elsewhere(project, theirs, "TASK-FB-001")
    return project, bare, mine, theirs


def _merging_elsewhere(tmp_path: Path, *, lease: float = 600) -> tuple[FeatureProject, Path, Path, Path, ClaimBoard,
                                                                      Claim]:
    """:func:`_approved_elsewhere`, and ``theirs`` holding the merge claim (its board and claim last)."""
    from guardkit_state.remote.worker import MERGE_CLAIM

    project, bare, mine, theirs = _approved_elsewhere(tmp_path)
    repo = GitRepo.discover(theirs)
    assert repo is not None
    board = ClaimBoard(repo, "origin", "elsewhere")
    held = board.claim(FEATURE_ID, MERGE_CLAIM, lease=lease)
    assert held is not None
    return project, bare, mine, theirs, board, held


def _merge_lands_from(theirs: Path) -> None:
    """``theirs`` merges TASK-FB-001 into the feature branch as a merger does and pushes it."""
    from guardkit_state.git.merge import merge_branch, merge_message
    from guardkit_state.git.worktrees import WorktreeManager

    repo = GitRepo.discover(theirs)
    assert repo is not None
    git(theirs, "branch", "-f", FEATURE_BRANCH, f"origin/{FEATURE_BRANCH}")
    feature = WorktreeManager(repo).create(FEATURE_ID).repo()
    message = merge_message(FEATURE_ID, "TASK-FB-001", branch="autobuild/TASK-FB-001", target=FEATURE_BRANCH, wave=1)
    assert merge_branch(feature, "autobuild/TASK-FB-001", message).merged
    git(theirs, "push", "-q", "origin", FEATURE_BRANCH)


def test_a_fresh_claim_on_a_task_approved_elsewhere_since_the_look_does_not_run_it_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from guardkit_state.remote.worker import WorkerOptions, run_worker

    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001")])
    bare, mine, theirs = _two_machines(tmp_path, project)
    for name, value in project.env().items():
        monkeypatch.setenv(name, value)
    real_claim = ClaimBoard.claim
    raced: list[str] = []

    def claim(board: ClaimBoard, feature: str, task: str, lease: float) -> object:
        # Between this worker's look (no claim stood) and its claim, another machine claims the
        # task, runs it to approval, pushes it and releases its claim.
        if board.worker != "elsewhere" and not raced:
            raced.append(task)
            _run_elsewhere(project, theirs, task)
        return real_claim(board, feature, task, lease)

    monkeypatch.setattr(ClaimBoard, "claim", claim)
    player, coach = project.agents()
    result = run_worker(mine, FEATURE_ID, player, coach, WorkerOptions(remote="origin", poll=0.1))
    assert raced == ["TASK-FB-001"]
    assert result.done, result.reason
    players = [(e["task"], e["turn"]) for e in project.invocations()
               if e["role"] == "player" and e["event"] == "start"]
    assert players == [("TASK-FB-001", 1)]  # run once, by the machine that approved it
    assert result.ran == []
    assert merged_order(bare) == ["TASK-FB-001"]


@pytest.mark.parametrize("stale_lock", [False, True], ids=["clean", "stale-git-lock"])
def test_a_clone_whose_branch_went_apart_from_the_remote_never_pushes_over_the_remotes_turns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stale_lock: bool) -> None:
    from guardkit_state.remote.worker import WorkerOptions, run_worker

    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001", approve_at=3)])
    bare, mine, theirs = _two_machines(tmp_path, project)
    git(mine, "fetch", "-q", "origin")
    git(mine, "branch", FEATURE_BRANCH, f"origin/{FEATURE_BRANCH}")
    # This clone's worker ran turn 1 and lost its claim before its push (ousted: its turn is here only);
    # the worker that took the task over pushed turns 1 and 2, then released it (Ctrl-C).
    _one_turn_here(project, mine, "TASK-FB-001")
    _run_elsewhere(project, theirs, "TASK-FB-001", "--max-turns", "2")
    theirs_tip = git(bare, "rev-parse", "autobuild/TASK-FB-001").strip()
    if stale_lock:  # the worker was killed in a git command there: its index lock is left, no git holds it
        (mine / ".git/worktrees/TASK-FB-001/index.lock").write_text("")
    player, coach = _agents_in_process(project, monkeypatch)
    result = run_worker(mine, FEATURE_ID, player, coach, WorkerOptions(remote="origin", poll=0.1, max_turns=5))
    assert result.done, result.reason
    # The remote's turns are kept: what this clone pushed continues them.
    assert subprocess.run(["git", "merge-base", "--is-ancestor", theirs_tip, "autobuild/TASK-FB-001"],
                          cwd=bare, check=False).returncode == 0
    recorded = git(bare, "show", f"{FEATURE_BRANCH}:tasks/backlog/TASK-FB-001-part.md")
    turns = yaml.safe_load(recorded.split("---\n")[1])["autobuild_state"]["turns"]
    assert [(t["turn"], t["decision"]) for t in turns] == [(1, "feedback"), (2, "feedback"), (3, "approve")]
    assert merged_order(bare) == ["TASK-FB-001"]
    # This clone's own turn 1, never pushed, is kept on a ref of its own: not dropped.
    [kept] = git(mine, "for-each-ref", "--format=%(refname) %(subject)", "refs/guardkit/kept/").splitlines()
    assert kept.startswith(f"refs/guardkit/kept/{FEATURE_ID}/TASK-FB-001/") and kept.endswith(": turn 1 feedback")


def test_an_approved_task_whose_holder_died_before_releasing_its_claim_is_merged_after_the_lease(
        tmp_path: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001"), TaskSpec("TASK-FB-002", dependencies=["TASK-FB-001"])])
    bare = make_bare(tmp_path, project.root)
    holder_clone, machine = (clone(bare.as_uri(), tmp_path / f"machine-{n}") for n in (1, 2))
    git(holder_clone, "branch", FEATURE_BRANCH, "origin/main")
    git(holder_clone, "push", "-q", "origin", FEATURE_BRANCH)
    # The holder pushed the approval, then died with its claim (lease 2 s) still on the remote.
    _run_elsewhere(project, holder_clone, "TASK-FB-001", release=False, lease=2)
    second = worker(project, machine, "--lease", "2")
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, out + err
    assert merged_order(bare) == ["TASK-FB-001", "TASK-FB-002"]
    players = [(e["task"], e["turn"]) for e in project.invocations()
               if e["role"] == "player" and e["event"] == "start"]
    assert players == [("TASK-FB-001", 1), ("TASK-FB-002", 1)]
    assert git(bare, "for-each-ref", "refs/guardkit/claims/") == ""  # the dead holder's claim went with the merge


def test_a_takeover_before_the_holders_first_push_is_written_in_the_tasks_history(tmp_path: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001")])
    bare = make_bare(tmp_path, project.root)
    dead, machine = (clone(bare.as_uri(), tmp_path / f"machine-{n}") for n in (1, 2))
    git(dead, "branch", FEATURE_BRANCH, "origin/main")
    git(dead, "push", "-q", "origin", FEATURE_BRANCH)
    # The holder claimed the task and died before its first turn reached the remote.
    repo = GitRepo.discover(dead)
    assert repo is not None
    assert ClaimBoard(repo, "origin", "dead-holder").claim(FEATURE_ID, "TASK-FB-001", lease=1) is not None
    heir = worker(project, machine, "--lease", "2")
    out, err = heir.communicate(timeout=120)
    assert heir.returncode == 0, out + err
    assert "took over the claim of dead-holder" in err
    recorded = git(bare, "show", f"{FEATURE_BRANCH}:tasks/backlog/TASK-FB-001-part.md")
    state = yaml.safe_load(recorded.split("---\n")[1])["autobuild_state"]
    [entry] = state["takeovers"]
    assert (entry["from"], entry["turns_done"]) == ("dead-holder", 0)
    assert [(t["turn"], t["decision"]) for t in state["turns"]] == [(1, "approve")]


def test_a_holder_killed_after_its_first_turns_commit_is_taken_over_on_the_same_clone(tmp_path: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001")])
    bare = make_bare(tmp_path, project.root)
    machine = clone(bare.as_uri(), tmp_path / "machine")
    victim = worker(project, machine, "--lease", "2", crash_at="git.after_commit:1")
    victim.communicate(timeout=120)
    assert victim.returncode == -signal.SIGKILL
    assert git(bare, "for-each-ref", "refs/heads/autobuild/TASK-FB-001") == ""  # nothing of it was pushed
    heir = worker(project, machine, "--lease", "2")
    try:
        out, err = heir.communicate(timeout=40)
    except subprocess.TimeoutExpired:
        os.killpg(heir.pid, signal.SIGKILL)  # the worker this test started: it never ended
        out, err = heir.communicate()
    assert heir.returncode == 0, out + err[-2000:]
    players = [(e["task"], e["turn"]) for e in project.invocations()
               if e["role"] == "player" and e["event"] == "start"]
    assert players == [("TASK-FB-001", 1)]  # the turn is recorded from its reports, not run again
    recorded = git(bare, "show", f"{FEATURE_BRANCH}:tasks/backlog/TASK-FB-001-part.md")
    state = yaml.safe_load(recorded.split("---\n")[1])["autobuild_state"]
    assert [(t["turn"], t["decision"]) for t in state["turns"]] == [(1, "approve")]
    assert len(state["takeovers"]) == 1 and state["takeovers"][0]["turns_done"] == 0
    assert merged_order(bare) == ["TASK-FB-001"]


def test_an_ousted_holders_late_push_racing_the_takeover_entry_does_not_stop_the_taker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from guardkit_state.remote.run_history import RunHistory
    from guardkit_state.remote.worker import WorkerOptions, run_worker

    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001", approve_at=2)])
    bare = make_bare(tmp_path, project.root)
    ousted, machine = (clone(bare.as_uri(), tmp_path / f"machine-{n}") for n in (1, 2))
    git(ousted, "branch", FEATURE_BRANCH, "origin/main")
    git(ousted, "push", "-q", "origin", FEATURE_BRANCH)
    # The holder pushed turn 1, then stood still past its lease (a partition, a suspended laptop).
    _run_elsewhere(project, ousted, "TASK-FB-001", "--max-turns", "1", release=False, lease=1)
    for name, value in project.env().items():
        monkeypatch.setenv(name, value)
    real = RunHistory.takeover

    came_back: list[str] = []

    def record(self: RunHistory, task: str, old: Claim, tip: str | None, *, restart: bool) -> str:
        # It comes back as the taker writes the takeover: its late push lands first.
        if not came_back:
            came_back.append(task)
            where = ousted / ".guardkit/worktrees/TASK-FB-001"
            git(where, "commit", "-q", "--allow-empty", "-m", "a late commit of the ousted holder")
            git(where, "push", "-q", f"--force-with-lease=refs/heads/autobuild/TASK-FB-001:{tip}", "origin",
                "HEAD:refs/heads/autobuild/TASK-FB-001")
        return real(self, task, old, tip, restart=restart)

    monkeypatch.setattr(RunHistory, "takeover", record)
    player, coach = project.agents()
    notes: list[str] = []
    result = run_worker(machine, FEATURE_ID, player, coach,
                        WorkerOptions(remote="origin", poll=0.1, lease=2, max_turns=5), on_note=notes.append)
    assert result.done, (result.reason, notes)
    assert merged_order(bare) == ["TASK-FB-001"]


def test_the_merger_merges_the_remotes_branch_not_its_clones_own_approval_that_never_reached_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from guardkit_state.remote.worker import WorkerOptions, run_worker

    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001", approve_at=2)])
    bare, mine, theirs = _two_machines(tmp_path, project)
    git(mine, "fetch", "-q", "origin")
    git(mine, "branch", FEATURE_BRANCH, f"origin/{FEATURE_BRANCH}")
    # This clone's holder had its Coach approve turn 1, committed, and was ousted before its push
    # (its Coach was another, quicker to approve); the taker's turns, approved at turn 2, are the remote's.
    quick = tmp_path / "quick-spec.json"
    quick.write_text(json.dumps({"TASK-FB-001": {"approve_at": 1}}))
    local = subprocess.run([sys.executable, "-m", "guardkit_state", "feature-build", "TASK-FB-001", "--repo",
                            str(mine), "--base-branch", FEATURE_BRANCH, "--player", agent_command("player.py"),
                            "--coach", agent_command("coach.py")], cwd=mine,
                           env={**os.environ, **project.env(), "FEATURE_SPEC": str(quick)},
                           capture_output=True, text=True, check=False)
    assert local.returncode == 0, local.stdout + local.stderr
    _run_elsewhere(project, theirs, "TASK-FB-001")
    player, coach = _agents_in_process(project, monkeypatch)
    result = run_worker(mine, FEATURE_ID, player, coach, WorkerOptions(remote="origin", poll=0.1))
    assert result.done, result.reason
    assert merged_order(bare) == ["TASK-FB-001"]
    recorded = git(bare, "show", f"{FEATURE_BRANCH}:tasks/backlog/TASK-FB-001-part.md")
    turns = yaml.safe_load(recorded.split("---\n")[1])["autobuild_state"]["turns"]
    assert [(t["turn"], t["decision"]) for t in turns] == [(1, "feedback"), (2, "approve")]  # the remote's
    assert subprocess.run(["git", "merge-base", "--is-ancestor", "autobuild/TASK-FB-001", FEATURE_BRANCH],
                          cwd=bare, check=False).returncode == 0


def test_an_approval_its_dead_holder_never_pushed_reaches_the_task_branch_before_it_is_merged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from guardkit_state.remote.worker import WorkerOptions, run_worker

    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001")])
    bare = make_bare(tmp_path, project.root)
    machine = clone(bare.as_uri(), tmp_path / "machine")
    git(machine, "branch", FEATURE_BRANCH, "origin/main")
    git(machine, "push", "-q", "origin", FEATURE_BRANCH)
    # This clone's holder committed the approval and died before its push, its claim left behind.
    repo = GitRepo.discover(machine)
    assert repo is not None
    assert ClaimBoard(repo, "origin", "dead-holder").claim(FEATURE_ID, "TASK-FB-001", lease=1) is not None
    local = subprocess.run([sys.executable, "-m", "guardkit_state", "feature-build", "TASK-FB-001", "--repo",
                            str(machine), "--base-branch", FEATURE_BRANCH, "--player", agent_command("player.py"),
                            "--coach", agent_command("coach.py")], cwd=machine,
                           env={**os.environ, **project.env()}, capture_output=True, text=True, check=False)
    assert local.returncode == 0, local.stdout + local.stderr
    player, coach = _agents_in_process(project, monkeypatch)
    result = run_worker(machine, FEATURE_ID, player, coach, WorkerOptions(remote="origin", poll=0.1, lease=2))
    assert result.done, result.reason
    assert merged_order(bare) == ["TASK-FB-001"]
    approval = git(machine, "rev-parse", "autobuild/TASK-FB-001").strip()
    assert git(bare, "rev-parse", "autobuild/TASK-FB-001").strip() == approval  # the remote's branch holds it
    assert git(bare, "for-each-ref", "refs/guardkit/claims/") == ""


def test_a_takeover_on_the_same_clone_keeps_the_killed_turns_edit_of_its_task_file(tmp_path: Path) -> None:
    # Turn 2's Player notes something in its task file; the machine dies after the Player, before
    # the Coach: the turn resumes at its Coach with the Player's work, that note included.
    note = '[ "$GUARDKIT_TURN" = 2 ] && echo "Player note of turn 2" >> tasks/backlog/TASK-FB-001-part.md; true'
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001", approve_at=2, shell=note)])
    bare = make_bare(tmp_path, project.root)
    machine = clone(bare.as_uri(), tmp_path / "machine")
    victim = worker(project, machine, "--lease", "2", crash_at="loop.after_player:2")
    victim.communicate(timeout=120)
    assert victim.returncode == -signal.SIGKILL
    heir = worker(project, machine, "--lease", "2")
    out, err = heir.communicate(timeout=120)
    assert heir.returncode == 0, out + err
    players = [(e["task"], e["turn"]) for e in project.invocations()
               if e["role"] == "player" and e["event"] == "start"]
    assert players == [("TASK-FB-001", 1), ("TASK-FB-001", 2)]  # turn 2's Player is not run again
    merged = git(bare, "show", f"{FEATURE_BRANCH}:tasks/backlog/TASK-FB-001-part.md")
    assert "Player note of turn 2" in merged
    state = yaml.safe_load(merged.split("---\n")[1])["autobuild_state"]
    assert [(t["turn"], t["decision"]) for t in state["turns"]] == [(1, "feedback"), (2, "approve")]
    assert len(state["takeovers"]) == 1
    [takeover] = [line.split()[0] for line in git(bare, "log", "--format=%H %s", "autobuild/TASK-FB-001").splitlines()
                  if " taken over by " in line]
    assert "Player note" not in git(bare, "show", f"{takeover}:tasks/backlog/TASK-FB-001-part.md")


def test_a_task_folder_that_is_no_worktree_never_gets_the_clones_own_checkout_reset(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from guardkit_state.remote.worker import WorkerOptions, run_worker

    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001", approve_at=2)])
    _, mine, theirs = _two_machines(tmp_path, project)
    git(mine, "fetch", "-q", "origin")
    git(mine, "branch", FEATURE_BRANCH, f"origin/{FEATURE_BRANCH}")
    # This clone's branch of the task went apart from the remote's, and its task folder is no
    # worktree any more (its .git file removed by hand): git run there finds the clone's checkout.
    _one_turn_here(project, mine, "TASK-FB-001")
    _run_elsewhere(project, theirs, "TASK-FB-001", "--max-turns", "1")
    (mine / ".guardkit/worktrees/TASK-FB-001/.git").unlink()
    (mine / "my-own-work.txt").write_text("uncommitted work of the user\n")
    head = git(mine, "rev-parse", "HEAD").strip()
    player, coach = _agents_in_process(project, monkeypatch)
    with contextlib.suppress(Exception):
        run_worker(mine, FEATURE_ID, player, coach, WorkerOptions(remote="origin", poll=0.1, max_turns=5))
    assert git(mine, "rev-parse", "HEAD").strip() == head and git(mine, "branch", "--show-current").strip() == "main"
    assert (mine / "my-own-work.txt").read_text() == "uncommitted work of the user\n"


def test_a_merge_its_dead_merger_never_pushed_is_not_taken_for_the_remotes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from guardkit_state.git.merge import merge_branch, merge_message
    from guardkit_state.git.worktrees import WorktreeManager
    from guardkit_state.remote.worker import WorkerOptions, run_worker

    tasks = [TaskSpec("TASK-FB-001"), TaskSpec("TASK-FB-002", dependencies=["TASK-FB-001"])]
    project = make_feature(tmp_path, tasks)
    bare, mine, theirs = _two_machines(tmp_path, project)
    _run_elsewhere(project, theirs, "TASK-FB-001")
    # This clone's merger merged wave 1 into its feature branch and died before its push.
    git(mine, "fetch", "-q", "origin")
    git(mine, "branch", FEATURE_BRANCH, f"origin/{FEATURE_BRANCH}")
    git(mine, "branch", "autobuild/TASK-FB-001", "origin/autobuild/TASK-FB-001")
    repo = GitRepo.discover(mine)
    assert repo is not None
    feature_repo = WorktreeManager(repo).create(FEATURE_ID).repo()
    message = merge_message(FEATURE_ID, "TASK-FB-001", branch="autobuild/TASK-FB-001", target=FEATURE_BRANCH, wave=1)
    assert merge_branch(feature_repo, "autobuild/TASK-FB-001", message).merged
    player, coach = _agents_in_process(project, monkeypatch)
    result = run_worker(mine, FEATURE_ID, player, coach, WorkerOptions(remote="origin", poll=0.1))
    assert result.done, result.reason
    assert merged_order(bare) == ["TASK-FB-001", "TASK-FB-002"]  # wave 1 merged on the remote, then wave 2
    progress = yaml.safe_load(git(bare, "show", f"{FEATURE_BRANCH}:.guardkit/features/FEAT-FB.yaml"))
    assert progress["execution"]["completed_waves"] == [1, 2]


def test_a_registered_task_folder_that_is_no_worktree_any_more_never_moves_the_clones_checkout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from guardkit_state.remote.worker import WorkerOptions, run_worker

    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001", approve_at=2)])
    _, mine, theirs = _two_machines(tmp_path, project)
    _run_elsewhere(project, theirs, "TASK-FB-001", "--max-turns", "1")
    # This clone has the task's worktree at turn 1; the remote's branch moves on; then the folder
    # loses its .git file (by hand), while git still lists the worktree.
    git(mine, "fetch", "-q", "origin")
    git(mine, "branch", "autobuild/TASK-FB-001", "origin/autobuild/TASK-FB-001")
    git(mine, "worktree", "add", "-q", ".guardkit/worktrees/TASK-FB-001", "autobuild/TASK-FB-001")
    where = theirs / ".guardkit/worktrees/TASK-FB-001"
    git(where, "commit", "-q", "--allow-empty", "-m", "the remote's branch moves on")
    git(where, "push", "-q", "origin", "HEAD:refs/heads/autobuild/TASK-FB-001")
    (mine / ".guardkit/worktrees/TASK-FB-001/.git").unlink()
    head = git(mine, "rev-parse", "HEAD").strip()
    player, coach = _agents_in_process(project, monkeypatch)
    with contextlib.suppress(Exception):
        run_worker(mine, FEATURE_ID, player, coach, WorkerOptions(remote="origin", poll=0.1, max_turns=5))
    assert git(mine, "rev-parse", "HEAD").strip() == head and git(mine, "branch", "--show-current").strip() == "main"


def test_show_remote_tells_a_task_whose_agent_failed_as_failed(tmp_path: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001", crash=True)])
    bare = make_bare(tmp_path, project.root)
    machine = clone(bare.as_uri(), tmp_path / "machine-1")
    proc = worker(project, machine, "--json")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, out + err
    assert json.loads(out)["reason"].startswith("TASK-FB-001: ")  # the worker stopped on it
    shown = json.loads(cli(machine, "show", FEATURE_ID, "--remote", "origin", "--json"))
    assert [(t["state"], t["outcome"]) for t in shown["tasks"]] == [("failed", "unrecoverable_stall")]
    # The loop's other endings without approval: the agent failing twice alike, the cost limit.
    where = machine / ".guardkit/worktrees/TASK-FB-001"
    path = where / "tasks/backlog/TASK-FB-001-part.md"
    for outcome in ("agent_failed", "cost_limit_reached"):
        text = path.read_text()
        path.write_text(re.sub(r"outcome: \S+", f"outcome: {outcome}", text, count=1))
        git(where, "commit", "-qam", f"as a loop that ended {outcome}")
        git(where, "push", "-q", "origin", "HEAD:refs/heads/autobuild/TASK-FB-001")
        shown = json.loads(cli(machine, "show", FEATURE_ID, "--remote", "origin", "--json"))
        assert [(t["state"], t["outcome"]) for t in shown["tasks"]] == [("failed", outcome)]


def test_a_takeover_on_the_same_clone_removes_the_stale_git_lock_its_killed_worker_left(tmp_path: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001", approve_at=2)])
    bare = make_bare(tmp_path, project.root)
    machine = clone(bare.as_uri(), tmp_path / "machine")
    victim = worker(project, machine, "--lease", "2", crash_at="loop.after_player:2")
    victim.communicate(timeout=120)
    assert victim.returncode == -signal.SIGKILL
    # Killed in a git command in the task's worktree: its index lock is left.
    (machine / ".git/worktrees/TASK-FB-001/index.lock").write_text("")
    heir = worker(project, machine, "--lease", "2")
    out, err = heir.communicate(timeout=120)
    assert heir.returncode == 0, out + err
    assert "took back the claim" in err and merged_order(bare) == ["TASK-FB-001"]


def test_a_merger_killed_in_a_merge_leaves_no_lock_that_stops_the_next_merger_on_its_clone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from guardkit_state.git.worktrees import WorktreeManager
    from guardkit_state.remote.worker import WorkerOptions, run_worker

    project, bare, mine, _theirs = _approved_elsewhere(tmp_path)
    git(mine, "fetch", "-q", "origin")
    git(mine, "branch", FEATURE_BRANCH, f"origin/{FEATURE_BRANCH}")
    repo = GitRepo.discover(mine)
    assert repo is not None
    WorktreeManager(repo).create(FEATURE_ID)
    (mine / f".git/worktrees/{FEATURE_ID}/index.lock").write_text("")  # a merger killed in its git merge
    player, coach = _agents_in_process(project, monkeypatch)
    result = run_worker(mine, FEATURE_ID, player, coach, WorkerOptions(remote="origin", poll=0.1))
    assert result.done, result.reason
    assert merged_order(bare) == ["TASK-FB-001"]


def test_a_claim_the_worker_itself_could_not_release_is_deleted_when_its_task_is_merged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from guardkit_state.remote.worker import WorkerOptions, run_worker

    project, bare, mine, _theirs = _approved_elsewhere(tmp_path)
    # This worker ran the task and its release did not reach the remote (it was unreachable then).
    repo = GitRepo.discover(mine)
    assert repo is not None
    assert ClaimBoard(repo, "origin", "w1").claim(FEATURE_ID, "TASK-FB-001", lease=600) is not None
    player, coach = _agents_in_process(project, monkeypatch)
    result = run_worker(mine, FEATURE_ID, player, coach, WorkerOptions(remote="origin", poll=0.1, worker="w1"))
    assert result.done, result.reason
    assert merged_order(bare) == ["TASK-FB-001"]
    assert git(bare, "for-each-ref", "refs/guardkit/claims/") == ""


def test_a_worker_waiting_on_another_workers_merge_sees_it_land_long_before_its_poll(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from guardkit_state.remote.worker import WorkerOptions, run_worker

    project, bare, mine, theirs, board, held = _merging_elsewhere(tmp_path)
    landed: list[float] = []

    def merge_there() -> None:  # the other machine's merger: its merge lands a second after this worker looked
        threading.Event().wait(1.0)
        _merge_lands_from(theirs)
        landed.append(time.monotonic())
        assert board.release(held)

    player, coach = _agents_in_process(project, monkeypatch)
    notes: list[str] = []
    other = threading.Thread(target=merge_there)
    other.start()
    try:
        result = run_worker(mine, FEATURE_ID, player, coach, WorkerOptions(remote="origin", poll=30),
                            on_note=notes.append)
    finally:
        other.join()
    finished = time.monotonic()
    assert result.done and result.ran == [] and result.merged == [], result.reason
    assert "waiting: wave 1: another worker is merging it" in notes
    assert finished - landed[0] < 5  # at --poll 30 the next look would have come 30 s after the last
    assert merged_order(bare) == ["TASK-FB-001"]


def test_a_merge_that_landed_is_seen_at_once_though_its_dead_merger_never_released_its_claim(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from guardkit_state.remote.worker import WorkerOptions, run_worker

    project, bare, mine, theirs, _, _ = _merging_elsewhere(tmp_path, lease=1)
    landed: list[float] = []

    def merge_there() -> None:  # the other machine's merge lands; its merger is killed before its release
        _merge_lands_from(theirs)
        landed.append(time.monotonic())

    other = threading.Thread(target=merge_there)

    def note(text: str) -> None:  # once this worker waits on that merge, it lands
        if text == "waiting: wave 1: another worker is merging it" and not other.is_alive() and not landed:
            other.start()

    player, coach = _agents_in_process(project, monkeypatch)
    try:
        # Staleness takes 15 s here: the merge has landed, the claim left on it is no reason to wait.
        result = run_worker(mine, FEATURE_ID, player, coach, WorkerOptions(remote="origin", lease=30, poll=0.2),
                            on_note=note)
    finally:
        other.join()
    finished = time.monotonic()
    assert result.done and result.ran == [] and result.merged == [], result.reason
    assert finished - landed[0] < 5
    assert merged_order(bare) == ["TASK-FB-001"]


@contextlib.contextmanager
def _deleted_after_30_seconds(machine: Path, ref: str) -> Iterator[None]:
    """``ref`` deleted on the remote from ``machine`` 30 s from now, unless the block has ended: a
    worker it would hold for good ends then, and the test's assertions say what went wrong."""
    fallback = threading.Timer(30, subprocess.run, (["git", "push", "-q", "origin", f":{ref}"],),
                               {"cwd": machine, "capture_output": True, "check": False})
    fallback.start()
    try:
        yield
    finally:
        fallback.cancel()


def _push_foreign(machine: Path, ref: str) -> str:
    """A commit of some other tool (no claim) pushed from ``machine`` at ``ref`` on the remote; its sha."""
    tree = git(machine, "hash-object", "-t", "tree", "-w", "/dev/null").strip()
    foreign = git(machine, "commit-tree", tree, "-m", "a note of some other tool").strip()
    git(machine, "push", "-q", "origin", f"{foreign}:{ref}")
    return foreign


@pytest.mark.parametrize("blocked", ["TASK-FB-001", "MERGE-WAVES", "TASK-FB-001/old"])
def test_a_claim_ref_holding_no_claim_is_named_with_how_to_clear_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, blocked: str) -> None:
    from guardkit_state.remote.worker import WorkerOptions, run_worker

    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001")])
    bare, mine, theirs = _two_machines(tmp_path, project)
    if blocked == "MERGE-WAVES":
        _run_elsewhere(project, theirs, "TASK-FB-001")
    # Something that is no worker pushed a commit of its own where a claim would be (or below it,
    # where git keeps the claim ref from being created).
    ref = f"refs/guardkit/claims/{FEATURE_ID}/{blocked}"
    foreign = _push_foreign(theirs, ref)
    notes: list[str] = []

    def note(text: str) -> None:
        notes.append(text)
        if ref in text and len([n for n in notes if ref in n]) == 1:
            git(theirs, "push", "-q", "origin", f":{ref}")  # the user does as the note says

    player, coach = _agents_in_process(project, monkeypatch)
    with _deleted_after_30_seconds(theirs, ref):  # without the note the ref would stand for good
        result = run_worker(mine, FEATURE_ID, player, coach, WorkerOptions(remote="origin", poll=0.1), on_note=note)
    assert result.done, result.reason
    said = [n for n in notes if ref in n]
    held = (f"holds {foreign[:10]}, which is no guardkit claim" if "/" not in blocked else
            f"({foreign[:10]}) keeps git from creating the claim ref refs/guardkit/claims/{FEATURE_ID}/TASK-FB-001")
    assert said == [f"waiting: wave 1: {ref} on the remote {held}: "
                    + ("nothing merges it" if blocked == "MERGE-WAVES" else "TASK-FB-001 runs nowhere")
                    + f" until it is deleted (git push origin :{ref})"]
    assert not any("another worker is merging it" in n or "claimed by a live worker" in n for n in notes)
    assert result.ran == ([] if blocked == "MERGE-WAVES" else ["TASK-FB-001"])
    assert merged_order(bare) == ["TASK-FB-001"]


@pytest.mark.parametrize("blocked", ["TASK-FB-001", "TASK-FB-001/old"])
def test_show_remote_names_a_ref_in_the_way_of_a_tasks_claim_and_how_to_clear_it(tmp_path: Path,
                                                                               blocked: str) -> None:
    # No worker claims the task while the ref stands: 'show --remote' says why, not a bare 'waiting'.
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001")])
    _, mine, theirs = _two_machines(tmp_path, project)
    ref = f"refs/guardkit/claims/{FEATURE_ID}/{blocked}"
    foreign = _push_foreign(theirs, ref)
    held = (f"holds {foreign[:10]}, which is no guardkit claim" if "/" not in blocked else
            f"({foreign[:10]}) keeps git from creating the claim ref refs/guardkit/claims/{FEATURE_ID}/TASK-FB-001")
    why = f"{ref} on the remote {held}: no worker claims it until it is deleted (git push origin :{ref})"
    shown = json.loads(cli(mine, "show", FEATURE_ID, "--remote", "origin", "--json"))
    assert [(t["task_id"], t["state"], t["held"]) for t in shown["tasks"]] == [("TASK-FB-001", "waiting", why)]
    assert f"      held: {why}" in cli(mine, "status", "--remote", "origin").splitlines()
    git(theirs, "push", "-q", "origin", f":{ref}")  # cleared as it says: nothing holds the task
    shown = json.loads(cli(mine, "show", FEATURE_ID, "--remote", "origin", "--json"))
    assert [(t["state"], t["held"]) for t in shown["tasks"]] == [("waiting", None)]


def test_a_ref_above_the_claim_refs_is_named_with_how_to_clear_it(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # A ref at refs/guardkit/claims/<FEAT> keeps git from creating every claim ref of the feature: the
    # worker waited on "could not lock" for good (a push holding the lock, as it read the refusal).
    from guardkit_state.remote.worker import WorkerOptions, run_worker

    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001")])
    bare, mine, theirs = _two_machines(tmp_path, project)
    ref = f"refs/guardkit/claims/{FEATURE_ID}"
    foreign = _push_foreign(theirs, ref)
    notes: list[str] = []

    def note(text: str) -> None:
        notes.append(text)
        if f"{ref} on the remote" in text and len([n for n in notes if f"{ref} on the remote" in n]) == 1:
            git(theirs, "push", "-q", "origin", f":{ref}")  # the user does as the note says

    player, coach = _agents_in_process(project, monkeypatch)
    with _deleted_after_30_seconds(theirs, ref):  # without the note the ref would stand for good
        result = run_worker(mine, FEATURE_ID, player, coach, WorkerOptions(remote="origin", poll=0.1), on_note=note)
    assert result.done and result.ran == ["TASK-FB-001"], result.reason
    assert [n for n in notes if "waiting" in n] == [
        f"waiting: wave 1: {ref} on the remote ({foreign[:10]}) keeps git from creating the claim ref "
        f"{ref}/TASK-FB-001: TASK-FB-001 runs nowhere until it is deleted (git push origin :{ref})"]
    assert merged_order(bare) == ["TASK-FB-001"]


def test_a_claim_commit_pushed_at_another_depth_never_holds_its_task(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from guardkit_state.remote.worker import WorkerOptions, run_worker

    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001")])
    bare, mine, theirs = _two_machines(tmp_path, project)
    # A live claim of TASK-FB-001 moved by hand from its claim ref to one a level deeper.
    repo = GitRepo.discover(theirs)
    assert repo is not None
    held = ClaimBoard(repo, "origin", "elsewhere").claim(FEATURE_ID, "TASK-FB-001", lease=600)
    assert held is not None
    nested = f"refs/guardkit/claims/{FEATURE_ID}/x/TASK-FB-001"
    git(theirs, "push", "-q", "origin", f":{held.ref}")
    git(theirs, "push", "-q", "origin", f"{held.sha}:{nested}")
    notes: list[str] = []
    player, coach = _agents_in_process(project, monkeypatch)
    with _deleted_after_30_seconds(theirs, nested):  # read as the task's claim, it would hold the task for good
        result = run_worker(mine, FEATURE_ID, player, coach, WorkerOptions(remote="origin", poll=0.1),
                            on_note=notes.append)
    assert result.done and result.ran == ["TASK-FB-001"], result.reason
    assert not any("claimed by a live worker" in n or "waiting" in n for n in notes), notes
    assert merged_order(bare) == ["TASK-FB-001"]
    assert git(bare, "for-each-ref", "--format=%(refname)", "refs/guardkit/claims/").split() == [nested]


def test_looks_at_another_workers_merge_start_quick_and_slow_down_to_the_poll() -> None:
    from guardkit_state.remote.worker import MERGE_LOOK, merge_wait

    for poll in (0.01, 0.2, 2.0, 30.0, 120.0):
        looks = [0.0]  # when this worker looks again, in seconds since it found the merge under way
        while looks[-1] < 600:
            looks.append(looks[-1] + merge_wait(looks[-1], poll))
        waits = [merge_wait(t, poll) for t in looks[:-1]]
        assert waits[0] == min(MERGE_LOOK, poll)
        assert all(a <= b <= poll for a, b in itertools.pairwise(waits))  # never quicker again, never past --poll
        assert waits[-1] == poll  # a merger that died is looked at every --poll, like any other wait
        for landed in (0.01, 0.3, 1.0, 4.0, 45.0):  # a merge landing then is seen within half the time waited
            seen = next(t for t in looks if t >= landed)
            assert seen - landed <= max(MERGE_LOOK, landed / 2, 0) + 1e-9
        assert sum(1 for t in looks if 0 < t <= 60) <= max(20, 60 / poll + 12)  # gentle on a real remote


@pytest.mark.parametrize(("poll", "more"), [(2.0, 10), (30.0, 16), (120.0, 20)])
def test_looks_at_a_dead_mergers_claim_cost_what_the_docs_say(poll: float, more: int) -> None:
    from guardkit_state.remote.worker import merge_wait

    waited, looks = 0.0, 0
    while waited < 100 * poll:
        waited, looks = waited + merge_wait(waited, poll), looks + 1
    assert looks - 100 == more  # docs/features.md, "Merges in plan order, once"


def test_looks_at_a_merge_that_never_ends_stay_at_the_poll() -> None:
    # A merger whose main thread hangs (a hook, a merge driver) while its heartbeat beats on holds
    # the merge claim for good: the workers waiting on it look every --poll, however long it lasts.
    from guardkit_state.remote.worker import merge_wait

    for poll in (0.1, 2.0, 1e300):
        for waited in (3600.0, 1e12, 1e308, float("inf")):
            assert merge_wait(waited, poll) == min(poll, waited / 2)
    assert merge_wait(float("inf"), 2.0) == 2.0
