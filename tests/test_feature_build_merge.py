"""Merging task branches into a feature branch (``guardkit_state.git.merge``): trailers, conflicts
aborted, merges found again, and what a killed merge leaves repaired. Real git repositories."""

from __future__ import annotations

from pathlib import Path

import pytest

from guardkit_state.errors import GitError, InputError
from guardkit_state.git.merge import (
    find_task_merge,
    is_ancestor,
    merge_branch,
    merge_in_progress,
    merge_message,
    merged_task_ids,
    recover_interrupted_merge,
    task_merges,
)
from guardkit_state.git.repo import GitRepo

from .conftest import run_git


def _repo(git_repo: Path) -> GitRepo:
    (git_repo / "shared.txt").write_text("base\n")
    run_git(git_repo, "add", "shared.txt")
    run_git(git_repo, "commit", "-q", "-m", "base")
    run_git(git_repo, "branch", "feature")
    for name, path, text in (("task-a", "a.txt", "a\n"), ("task-b", "b.txt", "b\n"), ("task-c", "shared.txt", "c\n"),
                             ("task-d", "shared.txt", "d\n")):
        run_git(git_repo, "checkout", "-q", "-b", name, "feature")
        (git_repo / path).write_text(text)
        run_git(git_repo, "add", path)
        run_git(git_repo, "commit", "-q", "-m", f"{name} work")
    run_git(git_repo, "checkout", "-q", "feature")
    repo = GitRepo.discover(git_repo)
    assert repo is not None
    return repo


def _message(task: str) -> str:
    return merge_message("FEAT-X", task, branch=f"autobuild/{task}", target="autobuild/FEAT-X", wave=1,
                         summary=f"{task} approved in 1 turn(s).")


def test_a_merge_carries_trailers_and_is_found_again(git_repo: Path) -> None:
    repo = _repo(git_repo)
    first = merge_branch(repo, "task-a", _message("TASK-A"))
    second = merge_branch(repo, "task-b", _message("TASK-B"))
    assert first.merged and second.merged and not first.already
    trailers = run_git(git_repo, "log", "-1", "--format=%(trailers:only,unfold)", second.sha or "")
    assert trailers.split("\n")[:3] == ["Guardkit-Feature: FEAT-X", "Guardkit-Task: TASK-B", "Guardkit-Wave: 1"]
    assert run_git(git_repo, "rev-list", "--parents", "-n", "1", second.sha or "").count(" ") == 2  # --no-ff
    assert find_task_merge(repo, "TASK-A", "feature") == first.sha
    assert find_task_merge(repo, "TASK-B", "feature") == second.sha
    assert find_task_merge(repo, "TASK-AB", "feature") is None
    assert find_task_merge(repo, "TASK-A", "no-such-branch") is None
    assert is_ancestor(repo, "task-a", "feature") and not is_ancestor(repo, "task-c", "feature")
    again = merge_branch(repo, "task-a", _message("TASK-A"))
    assert again.already and again.sha == second.sha  # never merged twice


def test_merge_branch_with_head_given_asks_git_nothing_before_merging_and_still_merges_once(
        git_repo: Path) -> None:
    # The caller's HEAD (what it checked out or merged last) replaces the "already in HEAD?" question
    # asked before each merge: git merge answers it ("Already up to date": no commit, HEAD unmoved).
    repo = _repo(git_repo)
    head = repo.head_sha()
    first = merge_branch(repo, "task-a", _message("TASK-A"), head=head)
    assert first.merged and not first.already and first.sha != head
    again = merge_branch(repo, "task-a", _message("TASK-A"), head=first.sha)
    assert again.already and again.sha == first.sha == repo.head_sha()  # never merged twice
    # A branch of another name at a commit HEAD holds is already in HEAD too.
    run_git(git_repo, "branch", "task-a-old", "task-a")
    inside = merge_branch(repo, "task-a-old", _message("TASK-A"), head=first.sha)
    assert inside.already and inside.sha == first.sha
    assert run_git(git_repo, "rev-list", "--count", "--merges", "HEAD").strip() == "1"
    # An unknown branch is an error, as before; a conflict is still aborted and reported.
    with pytest.raises(GitError):
        merge_branch(repo, "no-such-branch", _message("TASK-X"), head=first.sha)
    assert merge_branch(repo, "task-c", _message("TASK-C"), head=first.sha).merged
    clash = merge_branch(repo, "task-d", _message("TASK-D"), head=repo.head_sha())
    assert clash.conflicts == ("shared.txt",) and not merge_in_progress(repo)


def test_merge_branch_of_an_unknown_branch_onto_an_unborn_head_is_a_refusal(tmp_path: Path) -> None:
    run_git(tmp_path, "init", "-q")
    repo = GitRepo.discover(tmp_path)
    assert repo is not None
    refused = merge_branch(repo, "no-such-branch", _message("TASK-X"), head=None)
    assert not refused.merged and refused.error is not None and "no-such-branch" in refused.error


def test_every_merge_is_found_in_one_look_as_find_task_merge_finds_each(git_repo: Path) -> None:
    repo = _repo(git_repo)
    first = merge_branch(repo, "task-a", _message("TASK-A"))
    # A commit-msg hook's footer after the trailers hides them from git's trailer parser; the line
    # is still there, and find_task_merge (a --grep of the line) finds the merge.
    footed = merge_branch(repo, "task-b", _message("TASK-B") + "\n\nReviewed in the weekly sync, see the wiki page.\n")
    run_git(git_repo, "commit", "-q", "--allow-empty", "-m", "not a merge\n\nGuardkit-Task: TASK-C")
    # The same task merged again later (a re-run after its branch was reset): the newest merge counts.
    run_git(git_repo, "checkout", "-q", "-b", "task-a2", "task-a")
    (git_repo / "a.txt").write_text("a again\n")
    run_git(git_repo, "commit", "-q", "-am", "task-a again")
    run_git(git_repo, "checkout", "-q", "feature")
    again = merge_branch(repo, "task-a2", _message("TASK-A"))
    assert first.merged and footed.merged and again.merged
    assert run_git(git_repo, "log", "-1", "--format=%(trailers:key=Guardkit-Task,valueonly)", footed.sha or "") == "\n"
    found = task_merges(repo, "feature")
    assert found == {task: find_task_merge(repo, task, "feature") for task in ("TASK-A", "TASK-B")}
    assert found == {"TASK-A": again.sha, "TASK-B": footed.sha}
    assert merged_task_ids(repo, "feature") == {"TASK-A", "TASK-B"}
    assert find_task_merge(repo, "TASK-C", "feature") is None  # a first-parent commit that is no merge
    assert task_merges(repo, "no-such-branch") == {} and merged_task_ids(repo, "no-such-branch") == frozenset()


def test_a_merge_whose_message_holds_the_record_separator_is_found_in_one_look_too(git_repo: Path) -> None:
    # Control characters a hook's footer (or a hand-written message) may carry: the one look at every
    # merge parses git's output into records, and a message never splits it (find_task_merge finds it).
    repo = _repo(git_repo)
    footer = "\n\nSynced from the tracker \x1e row 12 \x1f col 3\x1e\n"
    message = _message("TASK-A").replace("\n\nGuardkit-Feature", footer + "\nGuardkit-Feature")
    odd = merge_branch(repo, "task-a", message)
    plain = merge_branch(repo, "task-b", _message("TASK-B"))
    assert odd.merged and plain.merged
    assert "\x1e" in run_git(git_repo, "log", "-1", "--format=%B", odd.sha or "")
    assert find_task_merge(repo, "TASK-A", "feature") == odd.sha
    assert task_merges(repo, "feature") == {"TASK-A": odd.sha, "TASK-B": plain.sha}
    assert merged_task_ids(repo, "feature") == {"TASK-A", "TASK-B"}


def test_a_conflict_is_aborted_and_reported(git_repo: Path) -> None:
    repo = _repo(git_repo)
    assert merge_branch(repo, "task-c", _message("TASK-C")).merged
    head = repo.head_sha()
    result = merge_branch(repo, "task-d", _message("TASK-D"))
    assert (result.sha, result.conflicts, result.merged) == (None, ("shared.txt",), False)
    assert repo.head_sha() == head and not merge_in_progress(repo)
    assert run_git(git_repo, "status", "--porcelain") == ""
    assert (git_repo / "shared.txt").read_text() == "c\n"
    assert run_git(git_repo, "rev-parse", "task-d").strip()  # the task's branch is untouched


def test_merge_messages_refuse_forged_trailers() -> None:
    with pytest.raises(InputError):
        merge_message("FEAT-X", "TASK-A\nGuardkit-Task: TASK-B", branch="b", target="t")


def test_recovery_aborts_a_merge_left_in_progress_and_removes_stale_locks(git_repo: Path) -> None:
    repo = _repo(git_repo)
    run_git(git_repo, "merge", "--no-ff", "--no-commit", "task-a")
    assert merge_in_progress(repo)
    (repo.git_dir / "ORIG_HEAD.lock").write_text("")
    (repo.git_dir / "index.lock").write_text("")
    notes = recover_interrupted_merge(repo, lambda: ["task-a"])
    assert any("ORIG_HEAD.lock" in note for note in notes) and any("index.lock" in note for note in notes)
    assert any("aborted a merge" in note for note in notes)
    assert not merge_in_progress(repo) and run_git(git_repo, "status", "--porcelain") == ""
    assert merge_branch(repo, "task-a", _message("TASK-A")).merged


def test_recovery_restores_files_a_merge_began_to_write_and_refuses_others(git_repo: Path) -> None:
    repo = _repo(git_repo)
    # What a merge killed before it wrote MERGE_HEAD can leave: the branch's files, half checked out.
    (git_repo / "a.txt").write_text("a\n")
    (git_repo / "shared.txt").write_text("c\n")
    notes = recover_interrupted_merge(repo, lambda: ["task-a", "task-c", "no-such-branch"])
    assert notes == [f"restored 2 file(s) an interrupted merge had begun to write in {git_repo}"]
    assert run_git(git_repo, "status", "--porcelain") == "" and not (git_repo / "a.txt").exists()
    # A change no task branch makes is someone's edit: named, and nothing is touched.
    (git_repo / "notes.md").write_text("mine\n")
    with pytest.raises(GitError, match=r"changes no merge made: notes\.md"):
        recover_interrupted_merge(repo, lambda: ["task-a"])
    assert (git_repo / "notes.md").read_text() == "mine\n"
