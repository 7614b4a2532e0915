"""``remote/branches.py``: the loop branches between a worker's clone and a real bare remote."""

from __future__ import annotations

from pathlib import Path

from guardkit_state.git.repo import GitRepo
from guardkit_state.remote.branches import RemoteBranches
from guardkit_state.remote.claims import ClaimBoard
from tests.conftest import run_git
from tests.remote_support import clone, make_bare


def test_a_fetch_is_not_stopped_for_good_by_a_ref_lock_a_killed_fetch_left(git_repo: Path, tmp_path: Path) -> None:
    # A worker SIGKILLed in its fetch leaves packed-refs.lock (or a ref's .lock) in its clone: every
    # later fetch failed on it, taken for an unreachable remote and retried for ever (the chaos campaign).
    bare = make_bare(tmp_path, git_repo)
    base = run_git(git_repo, "rev-parse", "main").strip()
    run_git(git_repo, "push", "-q", str(bare), f"{base}:refs/heads/autobuild/TASK-X-001",
            f"{base}:refs/heads/autobuild/TASK-X-002")
    machine = clone(bare.as_uri(), tmp_path / "machine")
    repo = GitRepo.discover(machine)
    assert repo is not None
    branches = RemoteBranches(repo, "origin")
    assert set(branches.fetch()) == {"autobuild/TASK-X-001", "autobuild/TASK-X-002"}
    run_git(machine, "pack-refs", "--all")
    run_git(bare, "update-ref", "-d", "refs/heads/autobuild/TASK-X-002")  # the next fetch prunes it
    (machine / ".git" / "packed-refs.lock").write_text("")
    (machine / ".git" / "refs" / "remotes" / "origin" / "autobuild").mkdir(parents=True, exist_ok=True)
    run_git(bare, "update-ref", "refs/heads/autobuild/TASK-X-003", base)
    (machine / ".git" / "refs" / "remotes" / "origin" / "autobuild" / "TASK-X-003.lock").write_text("")
    assert set(branches.fetch()) == {"autobuild/TASK-X-001", "autobuild/TASK-X-003"}
    assert not (machine / ".git" / "packed-refs.lock").exists()
    (machine / ".git" / "refs" / "guardkit" / "seen" / "origin" / "claims" / "FEAT-X").mkdir(parents=True)
    run_git(bare, "update-ref", "refs/guardkit/claims/FEAT-X/TASK-X-001", base)
    seen = machine / ".git" / "refs" / "guardkit" / "seen" / "origin" / "claims" / "FEAT-X"
    (seen / "TASK-X-001.lock").write_text("")
    ClaimBoard(repo, "origin", "w").read("FEAT-X")  # the claims' own fetch too (a commit that is no claim)
