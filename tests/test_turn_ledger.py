"""The ledger of turn commits the loop made: what is written reads back (property-tested against
a plain list), a fresh run's line hides earlier runs, a line cut short by a kill is never trusted,
and only a listed commit on the branch counts."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from guardkit_state.git import turn_ledger
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.turn_ledger import ProvenTurnCommit

from .conftest import run_git

TASK = "TASK-LEDGER-001"
_sha = st.text("0123456789abcdef", min_size=40, max_size=40)
_word = st.sampled_from(["approve", "feedback", "error"])
_mode = st.sampled_from(["fresh_start", "continuing_work", "recovering_state"])
_entry = st.builds(ProvenTurnCommit, _sha, st.integers(1, 999_999), _word, _mode)
_step = st.one_of(_entry, st.just("run"))


def _repo(root: Path) -> GitRepo:
    common = root / "git"
    common.mkdir(parents=True, exist_ok=True)
    return GitRepo(root, common, common)


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(_step, max_size=30))
def test_entries_are_those_recorded_since_the_last_run_line(steps: list[object]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        repo = _repo(Path(folder))
        expected: list[ProvenTurnCommit] = []
        for step in steps:
            if step == "run":
                turn_ledger.start_run(repo, TASK, "2026-11-27T00:00:00Z")
                expected = []
            else:
                assert isinstance(step, ProvenTurnCommit)
                turn_ledger.record(repo, TASK, step)
                expected.append(step)
        assert turn_ledger.entries(repo, TASK) == expected


def test_a_line_cut_short_is_not_trusted_and_the_next_line_is_whole(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    first = ProvenTurnCommit("a" * 40, 1, "feedback", "fresh_start")
    turn_ledger.record(repo, TASK, first)
    path = turn_ledger.ledger_path(repo, TASK)
    with path.open("ab") as handle:
        handle.write(b"b" * 40 + b" 2 appr")  # a kill in the middle of the next append
    second = ProvenTurnCommit("c" * 40, 2, "approve", "continuing_work")
    turn_ledger.record(repo, TASK, second)
    assert turn_ledger.entries(repo, TASK) == [first, second]


def test_only_a_listed_commit_on_the_branch_counts(git_repo: Path) -> None:
    repo = GitRepo.discover(git_repo)
    assert repo is not None
    head = run_git(git_repo, "rev-parse", "HEAD").strip()
    assert turn_ledger.verified_turn_commit(repo, TASK, 1) is None  # a commit nobody listed
    turn_ledger.record(repo, TASK, ProvenTurnCommit(head, 1, "approve", "fresh_start"))
    assert turn_ledger.verified_turn_commit(repo, TASK, 1) == head
    assert turn_ledger.verified_turn_commit(repo, TASK, 2) is None
    run_git(git_repo, "checkout", "-q", "--orphan", "other")
    run_git(git_repo, "commit", "-q", "--allow-empty", "-m", "unrelated")
    assert turn_ledger.verified_turn_commit(repo, TASK, 1) is None  # listed, but not on this branch
    assert turn_ledger.verified_turn_commit(repo, TASK, 1, rev="main") == head
    turn_ledger.start_run(repo, TASK, "2026-11-27T00:00:00Z")
    assert turn_ledger.verified_turn_commit(repo, TASK, 1, rev="main") is None  # an earlier run's


def test_a_listed_commit_that_is_the_tip_the_caller_read_is_on_the_branch_without_asking_git(git_repo: Path) -> None:
    repo = GitRepo.discover(git_repo)
    assert repo is not None
    head = run_git(git_repo, "rev-parse", "HEAD").strip()
    turn_ledger.record(repo, TASK, ProvenTurnCommit(head, 1, "approve", "fresh_start"))
    # Its ledger, seen from a folder that is no repository: any question asked of git there fails, so
    # only the tip can answer.
    (git_repo.parent / "plain").mkdir()
    blind = GitRepo(git_repo.parent / "plain", repo.git_dir, repo.common_dir)
    assert turn_ledger.verified_turn_commit(blind, TASK, 1, rev="main", tip=head) == head
    # Another tip (a commit on top of it): asked, as without one.
    run_git(git_repo, "commit", "-q", "--allow-empty", "-m", "on top")
    top = run_git(git_repo, "rev-parse", "HEAD").strip()
    assert turn_ledger.verified_turn_commit(repo, TASK, 1, rev="main", tip=top) == head
    assert turn_ledger.verified_turn_commit(blind, TASK, 1, rev="main", tip=top) is None
