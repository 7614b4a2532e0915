"""The gate's verdicts on a feature's candidates, in the git common directory: kept at once, read back
by a later process, keyed by what a candidate is made of; a torn line is skipped; a reset forgets."""

from __future__ import annotations

from pathlib import Path

from guardkit_state.features.gate_verdicts import GateVerdicts, candidate_key
from guardkit_state.git.repo import GitRepo
from guardkit_state.plans.smoke_gates import SmokeGate, SmokeRun

GATE = SmokeGate(None, "pytest -q")
FAILED = SmokeRun(1, "failed", 1, 0, 0.5, "1 failed", "t")


def _repo(git_repo: Path) -> GitRepo:
    repo = GitRepo.discover(git_repo)
    assert repo is not None
    return repo


def test_a_verdict_is_read_back_by_a_later_process_by_what_the_candidate_is_made_of(git_repo: Path) -> None:
    repo = _repo(git_repo)
    key = candidate_key(GATE, "a" * 40, [("TASK-A", "b" * 40)])
    GateVerdicts(repo, "FEAT-Q").record(key, "c" * 40, FAILED)
    again = GateVerdicts(repo, "FEAT-Q")
    assert again.verdict(key) == FAILED and not again.passes("c" * 40)
    # Another tip, another order, another gate: another candidate.
    assert again.verdict(candidate_key(GATE, "a" * 40, [("TASK-A", "d" * 40)])) is None
    assert again.verdict(candidate_key(SmokeGate(None, "pytest -q", expected_exit=1), "a" * 40,
                                       [("TASK-A", "b" * 40)])) is None


def test_a_line_cut_short_by_a_kill_is_skipped_and_the_next_starts_a_line_of_its_own(git_repo: Path) -> None:
    repo = _repo(git_repo)
    verdicts = GateVerdicts(repo, "FEAT-Q")
    verdicts.good("e" * 40)
    with verdicts.path.open("a") as torn:
        torn.write('{"key":"x","sha":"f')
    GateVerdicts(repo, "FEAT-Q").good("f" * 40)
    again = GateVerdicts(repo, "FEAT-Q")
    assert again.passes("e" * 40) and again.passes("f" * 40)


def test_a_reset_forgets_every_verdict(git_repo: Path) -> None:
    repo = _repo(git_repo)
    verdicts = GateVerdicts(repo, "FEAT-Q")
    verdicts.record("k", "c" * 40, SmokeRun(1, "passed", 0, 0, 0.1, "", "t"))
    assert GateVerdicts(repo, "FEAT-Q").passes("c" * 40)
    verdicts.reset("a fresh start")
    again = GateVerdicts(repo, "FEAT-Q")
    assert again.verdict("k") is None and not again.passes("c" * 40)
