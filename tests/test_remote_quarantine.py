"""Crash loops stop (``remote/quarantine.py``): a task whose runs keep ending in a dead worker or a
crashed loop is quarantined, counted on a real bare remote in the task's history, listed by
``show``/``status --remote`` with the reason of each run, and claimed again only after a person's
``feature-build FEAT --release TASK`` (or the MCP tool)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from guardkit_state.git.repo import GitRepo
from guardkit_state.remote.branches import RemoteBranches
from guardkit_state.remote.quarantine import crash_entry, read_quarantine, release_task, write_crash
from tests.feature_support import FEATURE_BRANCH, FEATURE_ID, FeatureProject, TaskSpec, agent_command, git, make_feature
from tests.remote_support import clone, make_bare

TASK = "TASK-FB-001"


def worker(project: FeatureProject, checkout: Path, *extra: str, player: str | None = None) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARDKIT_", "FEATURE_"))}
    env.update(project.env(), NO_COLOR="1")
    argv = [sys.executable, "-m", "guardkit_state", "feature-build", FEATURE_ID, "--repo", str(checkout),
            "--player", player or agent_command("player.py"), "--coach", agent_command("coach.py"),
            "--remote", "origin", "--poll", "0.1", *extra]
    return subprocess.Popen(argv, cwd=checkout, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[str, str]:
    """The worker's output once it ended; one that never ends is killed (this test started it) and fails."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        raise AssertionError(f"the worker never ended: {err[-3000:]}") from None


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "guardkit_state", *args], cwd=cwd, capture_output=True, text=True,
                          check=False, env={**os.environ, "NO_COLOR": "1"})


def state_on(bare: Path, rev: str) -> dict[str, object]:
    text = git(bare, "show", f"{rev}:tasks/backlog/{TASK}-part.md")
    found = yaml.safe_load(text.split("---\n")[1])["autobuild_state"]
    assert isinstance(found, dict)
    return found


def players(project: FeatureProject) -> list[tuple[str, int]]:
    return [(e["task"], e["turn"]) for e in project.invocations() if e["role"] == "player" and e["event"] == "start"]


def test_a_task_that_kills_its_worker_three_times_is_quarantined_until_released(tmp_path: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec(TASK)])
    bare = make_bare(tmp_path, project.root)
    machine = clone(bare.as_uri(), tmp_path / "machine")
    deadly = tmp_path / "deadly"
    deadly.write_text("")
    # The Player takes its machine down (its worker, SIGKILLed) while the marker exists: a crash loop.
    runs = tmp_path / "player-runs"
    killer = (f"echo $GUARDKIT_TURN >> {runs}; if [ -e {deadly} ]; then kill -9 $PPID; exit 3; fi; "
              f"exec {agent_command('player.py')}")
    outputs = []
    for _ in range(4):  # each restart takes its dead predecessor's claim back at once (and counts it)
        proc = worker(project, machine, "--json", player=killer)
        outputs.append(finish(proc))
        if proc.returncode != -signal.SIGKILL:
            break
    assert [len(outputs), proc.returncode] == [4, 1], outputs[-1]
    result = json.loads(outputs[-1][0])
    assert result["reason"].startswith(f"{TASK}: quarantined after 3 runs that ended in a dead worker or a crash")
    assert f"guardkit-state feature-build {FEATURE_ID} --release {TASK} --remote origin" in result["reason"]
    assert runs.read_text().split() == ["1"] * 3  # the fourth worker ran no Player: the third death was one too many
    takeovers = state_on(bare, f"autobuild/{TASK}")["takeovers"]
    assert isinstance(takeovers, list) and [t["how"] for t in takeovers] == ["restart"] * 3
    assert set(result["seconds"]) >= {"start", "look", "fetch", "claim", "push", "step"}
    # show and status --remote list it with the reason of each run.
    shown = json.loads(cli(machine, "show", FEATURE_ID, "--remote", "origin", "--json").stdout)
    [task] = shown["tasks"]
    assert task["state"] == "quarantined" and len(task["failed_runs"]) == 3
    assert all(run["reason"].startswith("worker ") and " died after 0 turn(s) (a worker restarted in its clone took "
                                                      "its claim back" in run["reason"] for run in task["failed_runs"])
    listed = cli(machine, "status", "--remote", "origin").stdout
    assert f"{TASK}      quarantined" in listed and listed.count("failed run: worker ") == 3
    assert f"release it: guardkit-state feature-build {FEATURE_ID} --release {TASK} --remote origin" in listed
    # Another machine's worker does not claim it either.
    other = clone(bare.as_uri(), tmp_path / "other")
    out, err = finish(worker(project, other, "--json"))
    assert json.loads(out)["ran"] == [] and runs.read_text().split() == ["1"] * 3
    # A person fixes what killed it and releases it; then the workers claim and finish it.
    deadly.unlink()
    released = cli(other, "feature-build", FEATURE_ID, "--release", TASK)
    assert released.returncode == 0, released.stderr
    assert released.stdout.startswith(f"{TASK}: released — {TASK} was quarantined; 3 failed run(s) cleared")
    assert released.stdout.count("  cleared: worker ") == 3
    assert state_on(bare, f"autobuild/{TASK}")["releases"][0]["takeovers"] == 3  # type: ignore[index]
    again = cli(other, "feature-build", FEATURE_ID, "--release", TASK)
    assert again.returncode == 0 and "nothing to release" in again.stdout
    proc = worker(project, machine, player=killer)
    out, err = finish(proc)
    assert proc.returncode == 0, out + err
    assert runs.read_text().split() == ["1"] * 4 and players(project) == [(TASK, 1)]
    assert git(bare, "log", "--format=%(trailers:key=Guardkit-Task,valueonly)", "--merges", FEATURE_BRANCH).split() \
        == [TASK]


def test_a_loop_that_keeps_crashing_is_quarantined_by_one_worker_after_three_runs(tmp_path: Path) -> None:
    # The Player replaces the worktree's .guardkit by a file: every run of the loop stops on it.
    project = make_feature(tmp_path, [TaskSpec(TASK, shell="mv .guardkit .guardkit-moved; echo x > .guardkit"),
                                      TaskSpec("TASK-FB-002")])
    bare = make_bare(tmp_path, project.root)
    machine = clone(bare.as_uri(), tmp_path / "machine")
    proc = worker(project, machine, "--json")
    out, err = finish(proc)
    assert proc.returncode == 1, out + err
    result = json.loads(out)
    assert sorted(result["ran"]) == [TASK, "TASK-FB-002"]  # a task it ran three times is listed once (its crashes:)
    assert result["reason"].startswith(f"{TASK}: quarantined after 3 runs")
    crashes = state_on(bare, f"autobuild/{TASK}")["crashes"]
    assert isinstance(crashes, list) and len(crashes) == 3
    assert all(".guardkit is a file, not a directory" in c["reason"] and c["quarantine_after"] == 3 for c in crashes)
    assert players(project).count((TASK, 1)) == 1  # the Player ran once; the loop crashed before it after that
    history = git(bare, "log", "--format=%s", f"autobuild/{TASK}").splitlines()
    assert sum(line.startswith(f"guardkit: {TASK} run by ") and line.endswith(" crashed") for line in history) == 3


def test_quarantine_after_sets_the_limit_and_it_travels_with_the_history(tmp_path: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec(TASK)])
    bare = make_bare(tmp_path, project.root)
    machine = clone(bare.as_uri(), tmp_path / "machine")
    repo = GitRepo.discover(machine)
    assert repo is not None
    branches = RemoteBranches(repo, "origin")
    base = git(machine, "rev-parse", "origin/main").strip()
    tip = None
    for n in range(2):  # two crashes written by a worker run with --quarantine-after 2
        tip = write_crash(repo, branches, TASK, base, tip, crash_entry(worker=f"w{n}", reason=f"boom {n}", limit=2))
    found = read_quarantine(repo, TASK, tip)
    assert found.quarantined and found.limit == 2 and [r.worker for r in found.runs] == ["w0", "w1"]
    assert [r.reason for r in found.runs] == ["the loop crashed after 0 turn(s): boom 0",
                                              "the loop crashed after 0 turn(s): boom 1"]
    proc = worker(project, clone(bare.as_uri(), tmp_path / "other"), "--json")  # its own limit (3) is not asked
    out, err = finish(proc)
    assert proc.returncode == 1 and json.loads(out)["ran"] == [], out + err
    done = release_task(machine, FEATURE_ID, TASK, "origin", by="a person")
    assert done.released and [r.worker for r in done.cleared] == ["w0", "w1"]
    assert not read_quarantine(repo, TASK, git(bare, "rev-parse", f"autobuild/{TASK}").strip()).runs
    assert git(machine, "status", "--porcelain") == ""  # the release touched no checkout


def test_release_refuses_a_task_of_no_such_feature_and_changes_nothing(tmp_path: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec(TASK)])
    bare = make_bare(tmp_path, project.root)
    machine = clone(bare.as_uri(), tmp_path / "machine")
    done = cli(machine, "feature-build", FEATURE_ID, "--release", "TASK-NOPE-001")
    assert done.returncode == 2 and done.stderr.startswith("error: TASK-NOPE-001 is not a task of FEAT-FB")
    done = cli(machine, "feature-build", TASK, "--release", TASK)
    assert done.returncode == 2 and "--release takes the task's feature" in done.stderr
    done = cli(machine, "feature-build", FEATURE_ID)
    assert done.returncode == 2 and "the following arguments are required: --player, --coach" in done.stderr
    assert git(bare, "for-each-ref", "refs/heads/autobuild/") == ""


def test_task_copy_at_never_reads_a_task_file_over_the_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A hostile worker pushed a blob of gigabytes at the task's file (the cap monkeypatched small):
    # the copy is unreadable, as one on disk over the cap is, and never read.
    from guardkit_state.remote.quarantine import task_copy_at
    from guardkit_state.store import reads
    from tests.conftest import commit_on_branch, git_answer_sizes
    from tests.feature_support import task_rel

    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001")])
    repo = GitRepo.discover(project.root)
    assert repo is not None
    rel = task_rel("TASK-FB-001").as_posix()
    assert task_copy_at(repo, "TASK-FB-001", "main")[1] is not None
    monkeypatch.setattr(reads, "MAX_FILE_BYTES", 2000)
    tip = commit_on_branch(project.root, "main", rel, b"x" * 2001)
    answers = git_answer_sizes(monkeypatch)
    assert task_copy_at(repo, "TASK-FB-001", tip) == (rel, None)
    assert max(answers) < 2000, answers


def test_a_task_whose_file_on_the_remote_is_over_the_cap_is_held_back_not_run_for_ever(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A hostile worker pushed a task file of gigabytes on the task's branch (the caps monkeypatched
    # small): every worker's loop would stop on it and no crash could be written in it, so a worker
    # claimed and stopped it for ever. It is held back at once: the workers end, naming it.
    from guardkit_state.remote.worker import WorkerOptions, run_worker
    from guardkit_state.store import reads
    from tests.conftest import commit_on_branch
    from tests.feature_support import task_rel, task_text

    project = make_feature(tmp_path, [TaskSpec(TASK)])
    bare = make_bare(tmp_path, project.root)
    git(project.root, "branch", f"autobuild/{TASK}", "main")
    rel = task_rel(TASK).as_posix()
    commit_on_branch(project.root, f"autobuild/{TASK}", rel, (task_text(TASK) + "x" * 5000 + "\n").encode())
    git(project.root, "push", "-q", str(bare), f"autobuild/{TASK}")
    mine = clone(bare.as_uri(), tmp_path / "machine-1")
    monkeypatch.setattr(reads, "MAX_FILE_BYTES", 4096)  # read out of git
    monkeypatch.setitem(reads.read_bytes_capped.__kwdefaults__, "limit", 4096)  # read on disk
    for name, value in project.env().items():
        monkeypatch.setenv(name, value)
    notes: list[str] = []
    result = run_worker(mine, FEATURE_ID, *project.agents(), WorkerOptions(remote="origin", poll=0.1),
                        on_note=notes.append)
    assert not result.done and project.invocations() == []  # never claimed, no agent ran
    assert f"{TASK}: its task file on the remote's branch cannot be read (" in result.reason
    assert f":{rel}: file is {len(task_text(TASK)) + 5001} bytes, over the 4096-byte limit" in result.reason
    assert "no worker claims it until a readable one is pushed" in result.reason
    assert git(bare, "for-each-ref", f"refs/heads/autobuild/{TASK}").split()[0] == \
        git(project.root, "rev-parse", f"autobuild/{TASK}").strip()  # its branch untouched
    from guardkit_state.remote.overview import remote_progress

    shown = remote_progress(mine, FEATURE_ID, "origin").tasks[0]  # why no worker claims it, as the worker said
    assert shown.state == "quarantined" and shown.held is not None
    assert shown.held.startswith(f"its task file on the remote's branch cannot be read (refs/remotes/origin/"
                                 f"autobuild/{TASK}:{rel}: file is {len(task_text(TASK)) + 5001} bytes, over the 4096")
    assert shown.held.endswith(f"; no worker claims it until a readable one is pushed to autobuild/{TASK} on origin")
