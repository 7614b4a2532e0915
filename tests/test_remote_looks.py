"""``remote/looks.py``: what a worker's look at the remote decides, fetch or not, from ref listings alone."""

from __future__ import annotations

from guardkit_state.remote.claim_record import Claim
from guardkit_state.remote.looks import Looks

A, B, C = "a" * 40, "b" * 40, "c" * 40
CLAIMS = "refs/guardkit/claims/FEAT-X"
TASK_1, FEATURE = "refs/heads/autobuild/TASK-1", "refs/heads/autobuild/FEAT-X"
FETCHED = {TASK_1: A, f"{CLAIMS}/TASK-1": C, FEATURE: A}
RUNNING = {"TASK-1": Claim("FEAT-X", "TASK-1", C, "w2", "n", 1e12, 1)}


def look(refs: dict[str, str]) -> str:
    return "".join(f"{sha}\t{ref}\n" for ref, sha in refs.items())


def looks(waited: tuple[str, bool] | None = ("wave 1: every task that has to run is claimed", False)) -> Looks:
    made = Looks("FEAT-X", stale=60.0)
    made.made_fetch(look(FETCHED))
    made.waited = waited
    return made


def decide(made: Looks, refs: dict[str, str], *, stale_read: bool = False) -> str:
    return made.decide(look(refs), RUNNING, lambda claim: True, wave=1, stale_read=stale_read)


def test_a_waiting_worker_waits_on_for_a_claim_made_since_its_fetch_and_the_turns_pushed_under_it() -> None:
    made = looks()
    assert decide(made, {**FETCHED, f"{CLAIMS}/TASK-2": B}) == "wait"
    assert made.deferred == made.waited
    assert decide(made, {**FETCHED, f"{CLAIMS}/TASK-2": B, "refs/heads/autobuild/TASK-2": A}) == "wait"
    assert decide(made, {**FETCHED, f"{CLAIMS}/TASK-2": B, "refs/heads/autobuild/TASK-2": A}) == "wait"  # unchanged


def test_a_new_merge_claim_is_another_worker_merging() -> None:
    made = looks()
    assert decide(made, {**FETCHED, f"{CLAIMS}/MERGE-WAVES": B}) == "wait"
    assert made.deferred == ("wave 1: another worker is merging it", True)


def test_a_worker_that_did_not_wait_fetches_for_a_new_claim() -> None:
    assert decide(looks(waited=None), {**FETCHED, f"{CLAIMS}/TASK-2": B}) == "fetch"


def test_the_deferral_ends_once_a_claim_read_is_stale_or_the_unread_ones_age() -> None:
    made = looks()
    claimed = {**FETCHED, f"{CLAIMS}/TASK-2": B}
    assert decide(made, claimed) == "wait"
    assert decide(made, claimed, stale_read=True) == "fetch"
    made = looks()
    assert decide(made, claimed) == "wait"
    made.fetched_at -= 60.0 / 4  # a quarter of the stale time since the fetch
    assert decide(made, claimed) == "fetch"


def test_a_claim_released_or_the_feature_branch_moved_is_fetched() -> None:
    made = looks()
    assert decide(made, {**FETCHED, f"{CLAIMS}/TASK-2": B}) == "wait"
    assert decide(made, {TASK_1: A, FEATURE: A, f"{CLAIMS}/TASK-2": B}) == "fetch"  # TASK-1's claim went
    assert decide(looks(), {**FETCHED, FEATURE: B}) == "fetch"


def test_only_the_running_tasks_turns_need_no_fetch_waiting_or_not() -> None:
    for waited in (None, ("why", False)):
        made = looks(waited)
        assert decide(made, {**FETCHED, TASK_1: B}) == "read" and made.deferred is None


def test_a_read_claim_gone_from_a_look_alike_the_last_is_fetched() -> None:
    # Read by the fetch (made after the look), gone before the next look: the looks are alike.
    made = looks()
    assert not made.read_claims_moved(look(FETCHED), {f"{CLAIMS}/TASK-1": C})
    assert made.read_claims_moved(look(FETCHED), {f"{CLAIMS}/TASK-2": B})
    assert decide(made, FETCHED) == "fetch"


def test_under_max_cost_every_move_is_fetched() -> None:
    made = looks()
    assert made.decide(look({**FETCHED, TASK_1: B}), RUNNING, lambda claim: True, wave=1, stale_read=False,
                       no_shortcut=True) == "fetch"
