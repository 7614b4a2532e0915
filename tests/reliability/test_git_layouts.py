"""Git layouts beyond one plain checkout: linked worktrees, submodules, detached HEADs, races.

Every test builds real repositories in a temp dir and drives the real ``guardkit-state`` CLI in
subprocesses (the scripted agents of the reliability harness), or the library on real git.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from guardkit_state.errors import LockedError
from guardkit_state.git.checkouts import shared_lock_path
from guardkit_state.git.commits import commit_turn
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.worktrees import WorktreeManager
from guardkit_state.store.locks import exclusive_lock

from .harness import TASK_ID, TASK_REL, Setup, agent_command, git, make_project

CLI = str(Path(sys.executable).parent / "guardkit-state")
BRANCH = f"autobuild/{TASK_ID}"


@pytest.fixture
def env() -> Iterator[dict[str, str]]:
    """The subprocess environment: no inherited GIT_* variables, a fixed identity, fast approval."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    clean.update(GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="T", GIT_AUTHOR_EMAIL="t@example.com",
                 GIT_COMMITTER_NAME="T", GIT_COMMITTER_EMAIL="t@example.com", NO_COLOR="1",
                 RELIABILITY_APPROVE_AT="1")
    clean.pop("GUARDKIT_STATE_CRASH_AT", None)
    yield clean


def cli(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def build(cwd: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return cli(cwd, env, "feature-build", TASK_ID, "--player", agent_command("player.py"),
               "--coach", agent_command("coach.py"), "--max-turns", "3", *extra)


def branches(repo: Path) -> list[str]:
    return git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads").split()


def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "repo", Setup())


def linked_worktree(main: Path, path: Path, branch: str) -> Path:
    git(main, "worktree", "add", "-q", "-b", branch, str(path))
    (path / "src" / "feature.txt").write_text("work on the feature branch\n")
    git(path, "add", "src/feature.txt")
    git(path, "commit", "-q", "-m", "feature work")
    return path


def submodule(tmp_path: Path) -> tuple[Path, Path]:
    """A superproject with the harness project as a submodule at ``sub``; returns (super, sub)."""
    inner = project(tmp_path)
    outer = tmp_path / "super"
    outer.mkdir()
    git(outer, "init", "-q", "-b", "main")
    (outer / "README.md").write_text("superproject\n")
    git(outer, "add", "README.md")
    git(outer, "commit", "-q", "-m", "initial")
    git(outer, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(inner), "sub")
    git(outer, "commit", "-q", "-m", "add submodule")
    return outer, outer / "sub"


# -- finding: the base branch, the worktree's place and show/status follow the user's checkout --

def test_linked_worktree_branches_from_its_own_branch_and_show_reads_the_loop(
        tmp_path: Path, env: dict[str, str]) -> None:
    main = project(tmp_path)
    other = linked_worktree(main, tmp_path / "feature-wt", "feature")
    result = build(other, env)
    assert result.returncode == 0, result.stderr
    loop_wt = main / ".guardkit" / "worktrees" / TASK_ID
    assert (loop_wt / TASK_REL).is_file(), "the loop's worktree belongs to the main checkout's .guardkit"
    assert not (other / ".guardkit" / "worktrees").exists()
    # Branched from the branch checked out where the user ran it, and tracks it.
    assert git(main, "merge-base", "--is-ancestor", "feature", BRANCH) == ""
    assert git(main, "rev-parse", "--abbrev-ref", f"{BRANCH}@{{upstream}}").strip() == "feature"
    shown = cli(other, env, "show", TASK_ID, "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert [t["turn"] for t in data["turns"]] == [1] and data["in_worktree"] is True
    status = cli(other, env, "status", "--json", "--no-cache")
    assert status.returncode == 0, status.stderr
    rows = {row["task_id"]: row for row in json.loads(status.stdout)}
    assert rows[TASK_ID]["turns"] == 1 and rows[TASK_ID]["in_worktree"] is True


def test_detached_head_in_a_linked_worktree_branches_from_its_commit(tmp_path: Path) -> None:
    main = project(tmp_path)
    other = linked_worktree(main, tmp_path / "feature-wt", "feature")
    head = git(other, "rev-parse", "HEAD").strip()
    git(other, "checkout", "-q", "--detach")
    repo = GitRepo.discover(other)
    assert repo is not None
    worktree = WorktreeManager(repo).create(TASK_ID)
    assert git(main, "rev-parse", BRANCH).strip() == head
    assert worktree.base_branch is None
    assert any("detached" in note and head[:12] in note for note in worktree.notes), worktree.notes
    assert worktree.path == main / ".guardkit" / "worktrees" / TASK_ID


def test_a_base_revision_means_the_users_checkout_not_the_main_one(tmp_path: Path) -> None:
    main = project(tmp_path)
    other = linked_worktree(main, tmp_path / "feature-wt", "feature")
    repo = GitRepo.discover(other)
    assert repo is not None
    WorktreeManager(repo).create(TASK_ID, "HEAD")
    assert git(main, "rev-parse", BRANCH).strip() == git(other, "rev-parse", "HEAD").strip()


def test_submodule_loop_worktree_lives_in_the_submodules_tree(tmp_path: Path, env: dict[str, str]) -> None:
    outer, sub = submodule(tmp_path)
    result = build(sub, env)
    assert result.returncode == 0, result.stderr
    loop_wt = sub / ".guardkit" / "worktrees" / TASK_ID
    assert (loop_wt / TASK_REL).is_file(), result.stderr
    assert not list((outer / ".git").rglob(".guardkit")), "nothing may be created inside the superproject's .git"
    assert "autobuild(" in git(loop_wt, "log", "-1", "--format=%s")
    shown = cli(sub, env, "show", TASK_ID, "--json")
    assert shown.returncode == 0, shown.stderr
    assert len(json.loads(shown.stdout)["turns"]) == 1


def test_worktree_manager_of_a_submodules_linked_worktree_uses_the_submodule_checkout(tmp_path: Path) -> None:
    _outer, sub = submodule(tmp_path)
    other = linked_worktree(sub, tmp_path / "sub-wt", "feature")
    repo = GitRepo.discover(other)
    assert repo is not None
    manager = WorktreeManager(repo)
    assert manager.root == sub
    assert manager.create(TASK_ID).path == sub / ".guardkit" / "worktrees" / TASK_ID


@pytest.mark.parametrize("layout", ["main", "linked", "submodule", "submodule-linked", "loop-worktree"])
def test_shared_lock_path_is_in_gits_common_dir(tmp_path: Path, layout: str) -> None:
    if layout.startswith("submodule"):
        _outer, base = submodule(tmp_path)
    else:
        base = project(tmp_path)
    checkout = base
    if layout.endswith("linked"):
        checkout = linked_worktree(base, tmp_path / "wt", "feature")
    elif layout == "loop-worktree":
        checkout = WorktreeManager(GitRepo.discover(base)).create(TASK_ID).path  # type: ignore[arg-type]
    common = git(checkout, "rev-parse", "--path-format=absolute", "--git-common-dir").strip()
    expected = Path(common) / "guardkit-state" / "locks" / f"{TASK_ID}.lock"
    assert shared_lock_path(checkout, TASK_ID) == expected
    assert shared_lock_path(checkout / "src", TASK_ID) == expected


# -- finding: one lock before the branch; creation that races is idempotent ------------------

def test_fresh_build_while_the_task_is_locked_creates_nothing(tmp_path: Path, env: dict[str, str]) -> None:
    main = project(tmp_path)
    with exclusive_lock(shared_lock_path(main, TASK_ID), holder=TASK_ID):
        result = build(main, env)
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "another guardkit-state process holds this lock (pid" in errors[0], result.stderr
    assert BRANCH not in branches(main), "the loser must not create the branch"
    assert not (main / ".guardkit" / "worktrees" / TASK_ID).exists()


def test_simultaneous_fresh_builds_one_runs_the_others_get_the_lock_error(
        tmp_path: Path, env: dict[str, str]) -> None:
    for attempt in range(2):
        main = make_project(tmp_path / f"repo{attempt}", Setup())
        argv = [CLI, "feature-build", TASK_ID, "--player", agent_command("player.py"), "--coach",
                agent_command("coach.py"), "--max-turns", "3"]
        # The winner's Player sleeps, so every other process starts while the winner holds the lock.
        slow = {**env, "RELIABILITY_PLAYER_SLEEP": "3"}
        procs = [subprocess.Popen(argv, cwd=main, env=slow, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for _ in range(3)]
        results = [(p.wait(timeout=120), p.communicate()[1]) for p in procs]
        codes = sorted(code for code, _ in results)
        assert codes == [0, 2, 2], results
        for code, err in results:
            if code == 2:
                errors = [line for line in err.splitlines() if line.startswith("error:")]
                assert len(errors) == 1 and "another guardkit-state process holds this lock" in errors[0], err
        assert branches(main).count(BRANCH) == 1


def test_create_reuses_a_branch_that_appeared_meanwhile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    main = project(tmp_path)
    repo = GitRepo.discover(main)
    assert repo is not None
    manager = WorktreeManager(repo)
    git(main, "branch", BRANCH, "main")  # another process won the race to create it
    monkeypatch.setattr(manager.main, "branch_exists", lambda name: name != BRANCH)
    worktree = manager.create(TASK_ID, "main")
    assert worktree.path == main / ".guardkit" / "worktrees" / TASK_ID and (worktree.path / TASK_REL).is_file()
    assert git(worktree.path, "rev-parse", "--abbrev-ref", "HEAD").strip() == BRANCH


def test_create_reuses_a_worktree_that_appeared_meanwhile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    main = project(tmp_path)
    repo = GitRepo.discover(main)
    assert repo is not None
    manager = WorktreeManager(repo)
    made = WorktreeManager(GitRepo.discover(main)).create(TASK_ID, "main")  # type: ignore[arg-type]
    real_find = manager.find
    calls: list[int] = []

    def find_after_the_check(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return (None, "") if len(calls) == 1 else real_find(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(manager, "find", find_after_the_check)
    monkeypatch.setattr(manager.main, "branch_exists", lambda name: name != BRANCH)
    worktree = manager.create(TASK_ID, "main")
    assert worktree.path == made.path and worktree.branch == BRANCH


def test_a_branch_that_appeared_pointing_elsewhere_is_not_taken_over(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    main = project(tmp_path)
    (main / "other.txt").write_text("x\n")
    git(main, "add", "other.txt")
    git(main, "commit", "-q", "-m", "moved on")
    git(main, "branch", BRANCH, "HEAD~1")
    repo = GitRepo.discover(main)
    assert repo is not None
    manager = WorktreeManager(repo)
    monkeypatch.setattr(manager.main, "branch_exists", lambda name: name != BRANCH)
    with pytest.raises(Exception, match="already exists"):
        manager.create(TASK_ID, "main")


# -- finding: option errors are usage errors, found before anything is created --------------

@pytest.mark.parametrize("option", [
    ("--base-branch", "no-such-branch"),
    ("--turn-timeout", "nan"), ("--turn-timeout", "inf"), ("--turn-timeout", "0"), ("--turn-timeout", "-3"),
    ("--max-turns", "five"), ("--max-turns", "0"),
])
def test_bad_options_are_usage_errors_before_any_side_effect(
        tmp_path: Path, env: dict[str, str], option: tuple[str, str]) -> None:
    main = project(tmp_path)
    before = git(main, "status", "--porcelain", "--ignored", "--untracked-files=all")
    result = build(main, env, *option) if option[0] != "--max-turns" else cli(
        main, env, "feature-build", TASK_ID, "--player", "true", "--coach", "true", *option)
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    if option[0] == "--base-branch":
        assert errors[0] == f"error: unknown base branch 'no-such-branch': not a branch or commit in {main}"
    assert not (main / ".guardkit").exists()
    assert branches(main) == ["main"]
    assert not (main / ".git" / "guardkit-state").exists(), "no lock file"
    assert git(main, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert git(main, "status", "--porcelain", "--ignored", "--untracked-files=all") == before


def test_unknown_base_branch_on_resume_is_a_usage_error(tmp_path: Path, env: dict[str, str]) -> None:
    main = project(tmp_path)
    result = build(main, env, "--resume", "--base-branch", "nope")
    assert result.returncode == 2 and "unknown base branch 'nope'" in result.stderr, result.stderr
    assert not (main / ".guardkit").exists()


def test_library_refuses_an_unknown_base_branch_before_creating_a_branch(tmp_path: Path) -> None:
    main = project(tmp_path)
    repo = GitRepo.discover(main)
    assert repo is not None
    from guardkit_state.errors import InputError
    with pytest.raises(InputError, match="unknown base branch 'nope'"):
        WorktreeManager(repo).create(TASK_ID, "nope")
    assert branches(main) == ["main"]
    assert not (main / ".guardkit").exists()


# -- finding: only guardkit-state's own temp files are kept out of a turn commit -------------

def test_turn_commit_keeps_user_files_with_the_temp_prefix(tmp_path: Path) -> None:
    main = project(tmp_path)
    worktree = WorktreeManager(GitRepo.discover(main)).create(TASK_ID, "main")  # type: ignore[arg-type]
    wt = worktree.path
    user_files = [".gks-tmp-something", "src/.gks-tmp-notes.txt", "src/.gks-tmp-a.b.c"]
    ours = [".gks-tmp-README.md.1234.567890", f"{TASK_REL.parent}/.gks-tmp-{TASK_REL.name}.99.1234567",
            f".guardkit/autobuild/{TASK_ID}/.gks-tmp-coach_turn_1.json.5.6543210",
            f".guardkit/autobuild/{TASK_ID}/.work/.gks-tmp-player_report_1.agent.json.77",
            ".guardkit/logs/.gks-tmp-autobuild.log.1.2345678"]
    for name in [*user_files, *ours]:
        (wt / name).parent.mkdir(parents=True, exist_ok=True)
        (wt / name).write_text("x\n")
    result = commit_turn(worktree.repo(), task_id=TASK_ID, turn=1, decision="feedback", mode="fresh_start",
                         managed_worktree=True)
    assert result.committed, result
    committed = set(git(wt, "show", "--name-only", "--format=", "HEAD").split())
    assert set(user_files) <= committed, committed
    assert not committed & set(ours), committed


def test_player_file_with_the_temp_prefix_is_committed_by_the_loop(tmp_path: Path, env: dict[str, str]) -> None:
    main = project(tmp_path)
    player = tmp_path / "player.sh"
    player.write_text(f"echo mine > .gks-tmp-something && {agent_command('player.py')}\n")
    result = cli(main, env, "feature-build", TASK_ID, "--player", f"sh {player}", "--coach",
                 agent_command("coach.py"), "--max-turns", "3")
    assert result.returncode == 0, result.stderr
    wt = main / ".guardkit" / "worktrees" / TASK_ID
    assert ".gks-tmp-something" in git(wt, "ls-files").split()
    # The loop's worktree and the main checkout share one lock file.
    with pytest.raises(LockedError):
        with exclusive_lock(shared_lock_path(wt, TASK_ID)), exclusive_lock(shared_lock_path(main, TASK_ID)):
            pass
