"""``remote/known_states.py``: what a waiting worker decides without reading a task or fetching."""

from __future__ import annotations

import pytest

from guardkit_state.git.turn_ledger import ProvenTurnCommit
from guardkit_state.remote.claim_record import Claim
from guardkit_state.remote.known_states import approved_in_ledger, what_moved

A, B, C = "a" * 40, "b" * 40, "c" * 40
CLAIMS = "refs/guardkit/claims/FEAT-X"


def turn(sha: str, number: int, decision: str) -> ProvenTurnCommit:
    return ProvenTurnCommit(sha, number, decision, "fresh_start")


@pytest.mark.parametrize(("turns", "tip", "expected"), [
    ([turn(A, 1, "feedback"), turn(B, 2, "approve")], B, ("approved", 2)),
    ([turn(A, 1, "approve")], B, None),  # the branch moved past its last turn (a person, a send-back)
    ([turn(A, 1, "feedback")], A, None),  # not approved
    ([], A, None),  # no ledger
    ([turn(A, 1, "approve")], None, None),  # no branch on the remote
])
def test_approved_in_ledger_only_for_an_approval_at_the_tip(
        turns: list[ProvenTurnCommit], tip: str | None, expected: tuple[str, int] | None) -> None:
    state = approved_in_ledger("TASK-1", turns, tip, None)
    assert (state.phase, state.turns) == expected if state is not None else expected is None


def test_a_merged_approval_is_merged_with_its_merge_commit() -> None:
    state = approved_in_ledger("TASK-1", [turn(A, 1, "approve")], A, C)
    assert state is not None and (state.phase, state.merge_commit, state.runs) == ("merged", C, False)


def claim(task: str, worker: str = "w2") -> Claim:
    return Claim("FEAT-X", task, "d" * 40, worker, "n", 1e12, 1)


def look(refs: dict[str, str]) -> str:
    """``ls-remote``'s lines for ``refs`` (ref -> sha)."""
    return "".join(f"{sha}\t{ref}\n" for ref, sha in refs.items())


TASK_1, TASK_2, FEATURE = "refs/heads/autobuild/TASK-1", "refs/heads/autobuild/TASK-2", "refs/heads/autobuild/FEAT-X"
BEFORE = {TASK_1: A, f"{CLAIMS}/TASK-1": C, FEATURE: A}


def moved(before: dict[str, str], after: dict[str, str], running: bool = True,
          fetched: dict[str, str] | None = None) -> str | None:
    """What :func:`what_moved` says of two looks, TASK-1 running under its claim (as fetched)."""
    return what_moved(look(BEFORE if fetched is None else fetched), look(before), look(after),
                      {"TASK-1": claim("TASK-1")}, lambda c: running, CLAIMS)


@pytest.mark.parametrize(("changes", "expected"), [
    ({TASK_1: B}, "running"),  # a turn of the running task
    ({}, "running"),
    ({FEATURE: B}, None),  # the feature branch moved (a merge)
    ({f"{CLAIMS}/TASK-1": B}, None),  # its claim changed (renewed, taken over)
    ({TASK_2: B}, None),  # a task under no claim
    ({f"{CLAIMS}/TASK-2": B}, "claimed"),  # a task claimed since the fetch
    ({f"{CLAIMS}/TASK-2": B, TASK_2: C}, "claimed"),  # ... and its first turn pushed
    ({f"{CLAIMS}/MERGE-WAVES": B, TASK_1: B}, "claimed"),  # a merge claimed
    ({f"{CLAIMS}/x/TASK-2": B, TASK_1: B}, "running"),  # a ref at another depth: the claim of no task
    ({f"{CLAIMS}/TASK-2/x": B}, "claimed"),  # a ref below TASK-2's claim ref: in its way, as a claim is
])
def test_what_moved(changes: dict[str, str], expected: str | None) -> None:
    assert moved(BEFORE, {**BEFORE, **changes}) == expected


def test_a_claim_not_running_elsewhere_makes_any_move_worth_a_fetch() -> None:
    assert moved(BEFORE, {**BEFORE, TASK_1: B}, running=False) is None


def test_a_released_claim_is_worth_a_fetch() -> None:
    released = {k: v for k, v in BEFORE.items() if "claims" not in k}
    assert moved(BEFORE, released) is None


def test_a_claim_made_since_the_fetch_is_worth_a_fetch_once_it_changes_or_goes() -> None:
    claimed = {**BEFORE, f"{CLAIMS}/TASK-2": B, TASK_2: C}
    assert moved(claimed, {**claimed, TASK_2: A}) == "running"  # its next turn: it still runs
    assert moved(claimed, {**claimed, f"{CLAIMS}/TASK-2": C}) is None  # renewed or taken over
    assert moved(claimed, {k: v for k, v in claimed.items() if k != f"{CLAIMS}/TASK-2"}) is None  # released


def test_a_claim_the_fetch_saw_is_not_new_when_it_comes_back() -> None:
    # Gone at the look before, back now: a claim the fetch read, released and made again meanwhile.
    fetched = {**BEFORE, f"{CLAIMS}/TASK-2": B}
    assert moved(BEFORE, {**BEFORE, f"{CLAIMS}/TASK-2": C}, fetched=fetched) is None
