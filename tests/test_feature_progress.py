"""``features/progress.py``: where an approved task stands, read from its files and git, asking git
as little as the usual case allows (one call: its branch not merged yet, its tip the approved turn's
commit) and as much as before everywhere else. A real feature run stopped before its merge."""

from __future__ import annotations

from pathlib import Path

import pytest

from guardkit_state.features.progress import FeatureGit, files_read_ahead, read_task_state
from guardkit_state.features.standing import feature_git
from guardkit_state.git import turn_ledger
from guardkit_state.git.repo import GitRepo

from .conftest import commit_on_branch, git_answer_sizes
from .feature_support import FeatureProject, TaskSpec, count_git_runs, git, make_feature, start_cli, task_rel, task_text

T1 = "TASK-FB-001"
BRANCH = f"autobuild/{T1}"


@pytest.fixture
def approved(tmp_path: Path) -> FeatureProject:
    """A feature whose one task is approved and committed, its run killed before the merge."""
    project = make_feature(tmp_path, [TaskSpec(T1)])
    proc = start_cli(project, crash_at="feature.before_merge")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0, err
    return project


def _fgit(project: FeatureProject) -> FeatureGit:
    found = feature_git(project.root, GitRepo.discover(project.root), "FEAT-FB")
    assert found is not None
    return found


def test_read_task_state_of_an_approved_unmerged_task_asks_git_once(approved: FeatureProject,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    fgit = _fgit(approved)
    calls = count_git_runs(monkeypatch)
    state = read_task_state(fgit, T1, merges={}, has_branch=True)
    assert (state.phase, state.turns, state.reason) == ("approved", 1, "approved by the Coach in turn 1")
    # Its branch listed as not merged, with its tip: the ledger's commit of turn 1 (no merge-base).
    assert [call[0] for call in calls] == ["for-each-ref"], calls


def test_read_task_state_of_a_task_branch_merged_by_hand_is_merged(approved: FeatureProject) -> None:
    fgit = _fgit(approved)
    git(approved.feature_worktree, "merge", "--no-ff", "-q", "-m", "merged by hand", BRANCH)
    state = read_task_state(fgit, T1, merges={}, has_branch=True)
    assert (state.phase, state.reason, state.merge_commit) == ("merged", "merged into the feature branch", None)


def test_read_task_state_with_a_forged_ledger_runs_the_task_again(approved: FeatureProject) -> None:
    # The ledger names a commit its branch does not hold for the approved turn: not a turn this loop
    # committed there, so the approval is not committed yet (its loop runs again to commit it).
    fgit = _fgit(approved)
    forged = git(approved.root, "commit-tree", git(approved.root, "hash-object", "-t", "tree", "/dev/null").strip(),
                 "-m", f"autobuild({T1}): turn 1 approve").strip()
    path = turn_ledger.ledger_path(fgit.main, T1)
    path.write_text("".join(f"{forged} {rest}\n" for _, rest in
                            (line.split(" ", 1) for line in path.read_text().splitlines() if line[:4] != "run ")))
    state = read_task_state(fgit, T1, merges={}, has_branch=True)
    assert (state.phase, state.reason, state.resume) == ("resume", "approval not committed yet", True)


def test_read_task_state_of_an_approved_branch_with_a_commit_on_top_is_approved(approved: FeatureProject) -> None:
    # Its tip is no longer the approved turn's commit: whether that commit is on the branch is asked.
    fgit = _fgit(approved)
    worktree = approved.task_worktree(T1)
    (worktree / "extra.txt").write_text("a person's commit\n")
    git(worktree, "add", "extra.txt")
    git(worktree, "commit", "-q", "-m", "on top")
    assert read_task_state(fgit, T1, merges={}, has_branch=True).phase == "approved"
    assert read_task_state(fgit, T1, known_unmerged=True).phase == "approved"
    git(approved.feature_worktree, "merge", "--no-ff", "-q", "-m", "merged by hand", BRANCH)
    assert read_task_state(fgit, T1, merges={}, has_branch=True).phase == "merged"


def _elsewhere(project: FeatureProject) -> FeatureGit:
    """The task as a clone that did not run it reads it: from its branch (no worktree here)."""
    git(project.root, "worktree", "remove", "--force", str(project.task_worktree(T1)))
    return _fgit(project)


def test_read_task_state_finds_a_file_read_ahead_and_asks_git_once(approved: FeatureProject,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    fgit = _elsewhere(approved)
    tip = git(approved.root, "rev-parse", BRANCH).strip()
    unread = read_task_state(fgit, T1, merges={}, has_branch=True)
    calls = count_git_runs(monkeypatch)
    with files_read_ahead(fgit, {T1: tip}):
        # The files' sizes (none over the cap is read), the files; the unmerged branches.
        assert [call[0] for call in calls] == ["cat-file", "cat-file", "for-each-ref"]
        calls.clear()
        state = read_task_state(fgit, T1, merges={}, has_branch=True)
        assert [call[0] for call in calls] == ["for-each-ref"], calls  # its file not shown again
        calls.clear()
        # Its tip as the caller has just read it, listed unmerged at that very tip: nothing asked.
        assert read_task_state(fgit, T1, merges={}, has_branch=True, tip_read=tip) == state
        assert calls == []
        # Another tip than the one listed (the branch moved since): asked again.
        read_task_state(fgit, T1, merges={}, has_branch=True, tip_read="0" * 40)
        assert [call[0] for call in calls] == ["for-each-ref"], calls
    assert state == unread and state.phase == "approved"
    assert fgit.ahead == {} and fgit.unmerged == {}  # forgotten on leaving


def test_read_task_state_of_a_branch_moved_since_it_was_read_ahead_reads_it_again(approved: FeatureProject) -> None:
    # Read ahead at its approved commit; then its file changes on top (the Coach's approval taken back):
    # the reading is of the branch as it is now.
    fgit = _elsewhere(approved)
    tip = git(approved.root, "rev-parse", BRANCH).strip()
    again = approved.task_worktree(T1).parent / "again"
    with files_read_ahead(fgit, {T1: tip}):
        git(approved.root, "worktree", "add", "-q", str(again), BRANCH)
        (again / task_rel(T1)).write_text(task_text(T1))  # no state block: no turn, nothing approved
        git(again, "commit", "-q", "-am", "the state block gone")
        git(approved.root, "worktree", "remove", "--force", str(again))
        assert read_task_state(fgit, T1, merges={}, has_branch=True).phase == "resume"


def test_read_task_state_with_a_forged_ledger_read_ahead_runs_the_task_again(approved: FeatureProject) -> None:
    fgit = _elsewhere(approved)
    tip = git(approved.root, "rev-parse", BRANCH).strip()
    path = turn_ledger.ledger_path(fgit.main, T1)
    path.write_text(path.read_text().replace(tip, "f" * 40))  # a commit the branch does not hold
    with files_read_ahead(fgit, {T1: tip}):
        state = read_task_state(fgit, T1, merges={}, has_branch=True)
    assert (state.phase, state.reason) == ("resume", "approval not committed yet")


def _oversized_on_branch(project: FeatureProject, monkeypatch: pytest.MonkeyPatch) -> tuple[FeatureGit, str, int]:
    """The task's file on its branch pushed again over the cap (monkeypatched small: a blob of
    gigabytes a hostile worker pushed), the task's worktree gone (read as another clone reads it)."""
    from guardkit_state.store import reads

    fgit = _elsewhere(project)
    cap = 4096
    monkeypatch.setattr(reads, "MAX_FILE_BYTES", cap)
    padded = (task_text(T1) + "\n" + "x" * 80 + "\n") * 60
    assert len(padded) > cap
    tip = commit_on_branch(project.root, BRANCH, task_rel(T1).as_posix(), padded.encode())
    return fgit, tip, cap


def test_files_read_ahead_never_reads_a_task_file_over_the_cap(approved: FeatureProject,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    fgit, tip, cap = _oversized_on_branch(approved, monkeypatch)
    answers = git_answer_sizes(monkeypatch)
    with files_read_ahead(fgit, {T1: tip}):
        assert fgit.ahead == {}  # not read ahead: the reading asks for it, and refuses it as on disk
        state = read_task_state(fgit, T1, merges={}, has_branch=True)
    assert max(answers) < cap, answers
    # As a copy over the cap in its worktree: no state read, its loop (reading its file) says why.
    assert (state.phase, state.turns, state.decisions) == ("resume", 0, ())


def test_read_task_state_never_reads_a_task_file_on_its_branch_over_the_cap(
        approved: FeatureProject, monkeypatch: pytest.MonkeyPatch) -> None:
    fgit, _, cap = _oversized_on_branch(approved, monkeypatch)
    answers = git_answer_sizes(monkeypatch)
    state = read_task_state(fgit, T1, merges={}, has_branch=True)
    assert max(answers) < cap, answers
    assert (state.phase, state.turns, state.decisions) == ("resume", 0, ())
