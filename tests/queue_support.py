"""Helpers for the merge queue's tests: a feature whose tasks are green alone and red together, a
real gate command that logs each run, and the check that every commit on the feature branch's
first-parent line passes that gate."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path

from guardkit_state.features.merge_queue import Approved
from guardkit_state.git.repo import GitRepo

from .feature_support import FEATURE_BRANCH, FeatureProject, TaskSpec, git, make_feature

T1, T2, T3, T4 = "TASK-FB-001", "TASK-FB-002", "TASK-FB-003", "TASK-FB-004"


def port(value: int, *, from_turn: int | None = None, then: int | None = None) -> str:
    """A Player ``shell`` writing ``port=<value>`` into its task's ``src/<task>.conf`` (from turn
    ``from_turn`` on, ``port=<then>``): two tasks writing one port clash at the gate."""
    if from_turn is None:
        return f'echo port={value} > "src/$GUARDKIT_TASK_ID.conf"'
    return (f'if [ "$GUARDKIT_TURN" -ge {from_turn} ]; then echo port={then}; else echo port={value}; fi '
            f'> "src/$GUARDKIT_TASK_ID.conf"')


def gate_script(log: Path, *, sleep: float = 0.0, hang: bool = False) -> str:
    """The gate: fails (exit 1, naming the port) when two tasks' ``.conf`` files hold one port; each
    run appends the commit it ran on to ``log``; ``sleep`` seconds first; ``hang``: never ends."""
    lines = [f"git rev-parse HEAD >> {shlex.quote(str(log))}"]
    if sleep:
        lines.append(f"sleep {sleep}")
    if hang:
        lines.append("sleep 600")
    lines += ['dups=$(cat src/*.conf 2>/dev/null | sort | uniq -d)',
              'if [ -n "$dups" ]; then echo "port clash: $dups is taken twice"; exit 1; fi', "echo ports ok"]
    return "\n".join(lines)


def queue_feature(base: Path, tasks: Sequence[TaskSpec], groups: Sequence[Sequence[str]], gate: str, *,
                  timeout: float = 60, after: str = "all", name: str = "project") -> FeatureProject:
    """A feature whose plan has ``gate`` as its ``smoke_gates`` command (committed)."""
    project = make_feature(base, tasks, groups, name=name)
    indented = "\n".join(f"    {line}" for line in gate.splitlines())
    with project.plan_path.open("a", encoding="utf-8") as plan:
        plan.write(f"smoke_gates:\n  after_wave: {after}\n  command: |\n{indented}\n  expected_exit: 0\n"
                   f"  timeout: {timeout:g}\n")
    git(project.root, "commit", "-qam", "smoke gate")
    return project


def gate_runs(log: Path) -> list[str]:
    """The commits the gate ran on, in order."""
    return log.read_text().split() if log.exists() else []


def first_parent_line(repo: Path, branch: str = FEATURE_BRANCH) -> list[str]:
    return git(repo, "rev-list", "--first-parent", branch).split()


def gate_at(repo: Path, sha: str, command: str, where: Path) -> int:
    """The gate's exit code on commit ``sha``, in a detached worktree of its own at ``where``."""
    git(repo, "worktree", "add", "-q", "--detach", str(where), sha)
    try:
        return subprocess.run(["/bin/sh", "-c", command], cwd=where, capture_output=True, check=False).returncode
    finally:
        git(repo, "worktree", "remove", "--force", str(where))


def assert_first_parent_green(repo: Path, command: str, scratch: Path, branch: str = FEATURE_BRANCH) -> int:
    """Every commit on ``branch``'s first-parent line passes ``command``; how many there are."""
    line = first_parent_line(repo, branch)
    red = [sha for n, sha in enumerate(line) if gate_at(repo, sha, command, scratch / f"at-{n}") != 0]
    assert not red, f"commits on {branch}'s first-parent line that fail the gate: {red}"
    return len(line)


def queue_repo(base: Path, count: int) -> tuple[GitRepo, list[Approved]]:
    """A repository on ``autobuild/FEAT-Q`` with ``count`` task branches, each adding ``src/<n>.part``
    (no task loop: what the merge queue itself is given)."""
    root = base / "q"
    root.mkdir()
    git(root, "init", "-q", "-b", "autobuild/FEAT-Q")
    (root / "src").mkdir()
    (root / "src" / "base.part").write_text("base\n")
    git(root, "add", ".")
    git(root, "commit", "-qm", "start")
    tasks = []
    for n in range(1, count + 1):
        task = f"TASK-Q-{n:03d}"
        git(root, "switch", "-q", "-c", f"autobuild/{task}", "autobuild/FEAT-Q")
        (root / "src" / f"{n}.part").write_text(f"part {n}\n")
        git(root, "add", ".")
        git(root, "commit", "-qm", f"{task}")
        tasks.append(Approved(task, git(root, "rev-parse", "HEAD").strip(), 1))
    git(root, "switch", "-q", "autobuild/FEAT-Q")
    repo = GitRepo.discover(root)
    assert repo is not None
    return repo, tasks
