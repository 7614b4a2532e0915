"""``git/snapshot.py``: a worktree taken before an agent that must only read it, put back exactly after.

Each case is a real repository (the ``git_repo`` fixture, then a linked worktree as the loop makes one)
and real git run as an agent would run it; the worktree's files, HEAD, branch and index are compared
byte for byte with what they were.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from guardkit_state.git.repo import GitRepo
from guardkit_state.git.snapshot import SNAPSHOT_REFS, WorktreeSnapshots

from .conftest import run_git

TASK = "TASK-SN-002"


def _worktree(git_repo: Path) -> Path:
    """A linked worktree on its own branch, with the Player's work in it: a changed tracked file, a new
    one, a staged one, an ignored build output, a symlink, an executable, and the loop's own records."""
    (git_repo / ".gitignore").write_text("build/\n*.log\n")
    (git_repo / "src").mkdir()
    (git_repo / "src" / "app.py").write_text("print('before')\n")
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-qm", "project")
    worktree = git_repo.parent / "wt"
    run_git(git_repo, "worktree", "add", "-q", "-b", f"autobuild/{TASK}", str(worktree))
    (worktree / "src" / "app.py").write_text("print('the player')\n")
    (worktree / "work.txt").write_text("the player's work\n")
    (worktree / "staged.txt").write_text("staged by the player\n")
    run_git(worktree, "add", "staged.txt")
    (worktree / "build").mkdir()
    (worktree / "build" / "out.bin").write_bytes(b"\x00player output\n")
    (worktree / "run.sh").write_text("#!/bin/sh\n")
    (worktree / "run.sh").chmod(0o755)
    os.symlink("src/app.py", worktree / "link.py")
    records = worktree / ".guardkit" / "autobuild" / TASK
    records.mkdir(parents=True)
    (records / "player_turn_1.json").write_text('{"turn": 1}\n')
    return worktree


def _state(worktree: Path) -> dict[str, object]:
    """Every file (bytes, mode, link target), HEAD, the branch and the index's staged entries."""
    files: dict[str, object] = {}
    for path in sorted(worktree.rglob("*")):
        rel = path.relative_to(worktree).as_posix()
        if rel == ".git" or rel.startswith(".guardkit/autobuild/" + TASK + "/.work"):
            continue
        if path.is_symlink():
            files[rel] = ("link", os.readlink(path))
        elif path.is_file():
            files[rel] = (path.read_bytes(), path.stat().st_mode & 0o777)
    return {"files": files, "head": run_git(worktree, "rev-parse", "HEAD"),
            "branch": run_git(worktree, "symbolic-ref", "-q", "HEAD"),
            "staged": run_git(worktree, "diff", "--cached", "--name-status")}


def _git(worktree: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=c", "-c", "user.email=c@e", *args], cwd=worktree, check=True,
                   capture_output=True)


def _write(rel: str, data: str) -> Callable[[Path], None]:
    def act(worktree: Path) -> None:
        (worktree / rel).parent.mkdir(parents=True, exist_ok=True)
        (worktree / rel).write_text(data)
    return act


def _replace_folder_by_file(worktree: Path) -> None:
    shutil.rmtree(worktree / "src")
    (worktree / "src").write_text("a file now\n")


def _replace_file_by_folder(worktree: Path) -> None:
    (worktree / "work.txt").unlink()
    (worktree / "work.txt").mkdir()
    (worktree / "work.txt" / "inside").write_text("x\n")


#: What an agent does -> the files it changed, as the restoration names them.
ACTS: dict[str, tuple[Callable[[Path], None], set[str]]] = {
    "stash -u": (lambda wt: _git(wt, "stash", "-u"), {"src/app.py", "staged.txt", "work.txt", "run.sh", "link.py",
                                                       f".guardkit/autobuild/{TASK}/player_turn_1.json"}),
    "clean and checkout": (lambda wt: (_git(wt, "clean", "-fdx"), _git(wt, "checkout", "--", ".")),
                           {"src/app.py", "work.txt", "run.sh", "link.py", "build/out.bin",
                            f".guardkit/autobuild/{TASK}/player_turn_1.json"}),
    "reset --hard": (lambda wt: _git(wt, "reset", "--hard", "-q"), {"src/app.py", "staged.txt"}),
    "writes a file": (_write("coach.txt", "mine\n"), {"coach.txt"}),
    "writes an ignored file": (_write("build/coach.log", "mine\n"), {"build/coach.log"}),
    "overwrites an ignored file": (_write("build/out.bin", "mine\n"), {"build/out.bin"}),
    "edits the records": (_write(f".guardkit/autobuild/{TASK}/player_turn_1.json", "{}\n"),
                          {f".guardkit/autobuild/{TASK}/player_turn_1.json"}),
    "chmod": (lambda wt: (wt / "run.sh").chmod(0o644), {"run.sh"}),
    "repoints a link": (lambda wt: ((wt / "link.py").unlink(), os.symlink("work.txt", wt / "link.py")),
                        {"link.py"}),
    "folder to file": (_replace_folder_by_file, {"src", "src/app.py"}),
    "file to folder": (_replace_file_by_folder, {"work.txt", "work.txt/inside"}),
}


@pytest.mark.parametrize("act", sorted(ACTS))
def test_whatever_an_agent_does_the_worktree_is_put_back_exactly(git_repo: Path, act: str) -> None:
    worktree = _worktree(git_repo)
    before = _state(worktree)
    snapshots = WorktreeSnapshots(_repo(worktree), TASK)
    snapshot = snapshots.take()
    do, named = ACTS[act]
    do(worktree)
    restored = snapshots.restore(snapshot)
    assert _state(worktree) == before
    assert set(restored.files) == named and restored.head is None and not restored.not_restored


@pytest.mark.parametrize("act", ["commit", "reset HEAD~1", "switch -c", "checkout --detach"])
def test_head_and_the_branch_are_put_back(git_repo: Path, act: str) -> None:
    worktree = _worktree(git_repo)
    before = _state(worktree)
    snapshots = WorktreeSnapshots(_repo(worktree), TASK)
    snapshot = snapshots.take()
    if act == "commit":
        _git(worktree, "add", "-A")
        _git(worktree, "commit", "-qm", "agent")
    elif act == "reset HEAD~1":
        _git(worktree, "reset", "-q", "--soft", "HEAD~1")
    elif act == "switch -c":
        _git(worktree, "switch", "-q", "-c", "agent-branch")
    else:
        _git(worktree, "checkout", "-q", "--detach")
    restored = snapshots.restore(snapshot)
    assert _state(worktree) == before
    assert restored.head is not None and restored.head.startswith(f"HEAD was autobuild/{TASK} at ")


def test_an_untouched_worktree_is_no_change_and_the_snapshot_ref_goes(git_repo: Path) -> None:
    worktree = _worktree(git_repo)
    (worktree / "src" / "__pycache__").mkdir()
    snapshots = WorktreeSnapshots(_repo(worktree), TASK)
    snapshot = snapshots.take()
    assert run_git(worktree, "rev-parse", f"{SNAPSHOT_REFS}/{TASK}^{{tree}}").strip() == snapshot.tree
    # What tests leave behind, and the loop's own scratch, are not the agent's change.
    (worktree / "src" / "__pycache__" / "app.cpython-311.pyc").write_bytes(b"cache")
    (worktree / ".coverage").write_text("cov")
    scratch = worktree / ".guardkit" / "autobuild" / TASK / ".work"
    scratch.mkdir()
    (scratch / "coach_report_1.json").write_text("{}")
    assert not snapshots.restore(snapshot).changed
    # The scratch is left; a cache git does not ignore is put back unnamed (a turn would commit it).
    assert (scratch / "coach_report_1.json").is_file() and not (worktree / ".coverage").exists()
    assert snapshots.pending() == snapshot
    snapshots.drop()
    assert snapshots.pending() is None
    assert run_git(worktree, "for-each-ref", SNAPSHOT_REFS) == ""


def test_a_cache_a_gitignore_rule_ignores_is_left_and_every_other_new_file_goes(git_repo: Path) -> None:
    worktree = _worktree(git_repo)
    (worktree / ".gitignore").write_text("build/\n*.log\n.pytest_cache/\n")  # the Player's rule: its turn's
    snapshots = WorktreeSnapshots(_repo(worktree), TASK)
    snapshot = snapshots.take()
    (worktree / ".pytest_cache").mkdir()
    (worktree / ".pytest_cache" / "v").write_text("ignored cache")  # ignored, a cache: the Coach's test run
    (worktree / "htmlcov").mkdir()
    (worktree / "htmlcov" / "index.html").write_text("a cache no rule ignores")
    (worktree / "run.log").write_text("ignored, no cache")
    (worktree / "notes.md").write_text("neither")
    restored = snapshots.restore(snapshot)
    assert (worktree / ".pytest_cache" / "v").is_file()
    assert not any((worktree / name).exists() for name in ("htmlcov/index.html", "run.log", "notes.md"))
    assert restored.files == ("notes.md", "run.log")  # the caches are no change to name


def test_a_gc_while_the_agent_runs_keeps_what_the_snapshot_holds(git_repo: Path) -> None:
    worktree = _worktree(git_repo)
    before = _state(worktree)
    snapshots = WorktreeSnapshots(_repo(worktree), TASK)
    snapshot = snapshots.take()
    _git(worktree, "stash", "-u")
    _git(worktree, "stash", "clear")
    _git(worktree, "clean", "-fdx")
    _git(worktree, "gc", "-q", "--prune=now")
    snapshots.restore(snapshot)
    assert _state(worktree) == before


def test_ignored_files_beyond_the_budget_are_watched_and_named_not_undone(git_repo: Path) -> None:
    worktree = _worktree(git_repo)
    (worktree / "build" / "big.bin").write_bytes(b"b" * 4096)
    snapshots = WorktreeSnapshots(_repo(worktree), TASK, ignored_bytes=1024)
    snapshot = snapshots.take()
    assert set(snapshot.watched) == {"build/big.bin"}  # what fits the budget is kept by bytes: out.bin
    (worktree / "build" / "big.bin").write_bytes(b"c" * 10)
    (worktree / "build" / "out.bin").write_bytes(b"changed")
    restored = snapshots.restore(snapshot)
    assert restored.not_restored == ("build/big.bin",)
    assert restored.files == ("build/out.bin",)
    assert (worktree / "build" / "out.bin").read_bytes() == b"\x00player output\n"


def test_a_watched_file_a_changed_gitignore_uncovers_is_never_removed(git_repo: Path) -> None:
    worktree = _worktree(git_repo)
    (worktree / "build" / "big.bin").write_bytes(b"b" * 4096)
    snapshots = WorktreeSnapshots(_repo(worktree), TASK, ignored_bytes=1024)
    snapshot = snapshots.take()
    (worktree / ".gitignore").write_text("*.log\n")  # build/ is no longer ignored
    restored = snapshots.restore(snapshot)
    assert (worktree / "build" / "big.bin").read_bytes() == b"b" * 4096
    assert restored.files == (".gitignore",) and not restored.not_restored


def test_an_inherited_index_variable_changes_nothing(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    worktree = _worktree(git_repo)
    user_index = git_repo / ".git" / "index"
    kept = user_index.read_bytes()
    monkeypatch.setenv("GIT_INDEX_FILE", str(user_index))
    snapshots = WorktreeSnapshots(_repo(worktree), TASK)
    snapshots.restore(snapshots.take())
    assert user_index.read_bytes() == kept


def test_a_removed_worktree_link_is_put_back_first(git_repo: Path) -> None:
    worktree = _worktree(git_repo)
    before = _state(worktree)
    snapshots = WorktreeSnapshots(_repo(worktree), TASK)
    snapshot = snapshots.take()
    (worktree / ".git").unlink()
    (worktree / "work.txt").unlink()
    restored = snapshots.restore(snapshot)
    assert _state(worktree) == before
    assert restored.files == ("work.txt",) and restored.notes


def _repo(worktree: Path) -> GitRepo:
    repo = GitRepo.discover(worktree)
    assert repo is not None
    return repo


def test_a_snapshot_whose_folder_is_gone_is_still_put_back_from_its_ref(git_repo: Path) -> None:
    worktree = _worktree(git_repo)
    before = _state(worktree)
    snapshots = WorktreeSnapshots(_repo(worktree), TASK)
    snapshots.take()
    _git(worktree, "stash", "-u")
    shutil.rmtree(snapshots.folder)
    pending = snapshots.pending()  # as a resumed run finds it: from the ref alone
    assert pending is not None
    restored = snapshots.restore(pending)
    assert restored.files and _state(worktree)["files"] == before["files"]


def test_a_lock_a_killed_git_left_in_the_snapshots_folder_is_cleared(git_repo: Path) -> None:
    # Found by the kill campaign: a SIGKILL inside the snapshot's `git add -A` left index.lock beside
    # the loop's index, and every later run of the task failed on it.
    worktree = _worktree(git_repo)
    snapshots = WorktreeSnapshots(_repo(worktree), TASK)
    snapshots.drop()
    snapshots.folder.mkdir(parents=True)
    for name in ("index.lock", "check-index.lock"):
        (snapshots.folder / name).write_bytes(b"")
    snapshot = snapshots.take()
    assert not snapshots.restore(snapshot).changed


def test_a_snapshot_refs_lock_a_killed_git_left_is_cleared_before_the_put_back(git_repo: Path) -> None:
    # Found by the kill campaign: a SIGKILL inside `git update-ref` of the snapshot's ref left
    # refs/guardkit/snapshots/TASK.lock, and --resume failed on "cannot lock ref" for good.
    worktree = _worktree(git_repo)
    repo = _repo(worktree)
    snapshots = WorktreeSnapshots(repo, TASK)
    snapshots.take()
    _git(worktree, "stash", "-u")
    lock = repo.common_dir / SNAPSHOT_REFS / f"{TASK}.lock"
    lock.write_bytes(b"")
    assert lock in repo.remove_stale_index_lock()  # what the loop does first on --resume
    pending = snapshots.pending()
    assert pending is not None and snapshots.restore(pending).changed
    assert not lock.exists()


def test_a_git_repository_with_no_commit_the_player_made_is_left_out_and_watched(git_repo: Path) -> None:
    # A Player's `git init sub` (no commit yet): git refuses to add it, so it is left out of the
    # snapshot and watched, and the rest of the worktree is still put back exactly.
    worktree = _worktree(git_repo)
    subprocess.run(["git", "init", "-q", "sub"], cwd=worktree, check=True)
    (worktree / "sub" / "notes.txt").write_text("draft\n")
    (worktree / "app.txt").write_text("the Player's work\n")
    before = _state(worktree)
    snapshots = WorktreeSnapshots(_repo(worktree), TASK)
    snapshot = snapshots.take()
    assert "sub" in snapshot.watched
    (worktree / "app.txt").write_text("the Coach's change\n")
    restored = snapshots.restore(snapshot)
    assert restored.changed and _state(worktree)["files"] == before["files"]
