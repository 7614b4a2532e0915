"""The MCP server's claim tools (``claim_next_task``, ``release_claim``): the server started as a
subprocess and driven over stdio by the SDK's client, on a clone of a bare repository reached over
file://, claiming through the same claim refs ``feature-build --remote`` workers push."""

from __future__ import annotations

import shutil
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_types import CallToolResult

from .feature_support import FEATURE_ID, TaskSpec, git, make_feature
from .remote_support import clone, make_bare
from .test_mcp_server import answer, cli, error_text, with_server

# Wave 1: TASK-FB-001 and TASK-FB-002; wave 2: TASK-FB-003 (after TASK-FB-001).
TASKS = [TaskSpec("TASK-FB-001"), TaskSpec("TASK-FB-002"), TaskSpec("TASK-FB-003", ["TASK-FB-001"])]


@pytest.fixture
def machine(tmp_path: Path) -> tuple[Path, Path]:
    """A clone of a bare remote holding the feature's plan; (the clone, the bare repository)."""
    project = make_feature(tmp_path, TASKS)
    bare = make_bare(tmp_path, project.root)
    return clone(bare.as_uri(), tmp_path / "machine"), bare


def claims_on(bare: Path) -> dict[str, str]:
    """The claim refs on the remote, as ``git ls-remote`` lists them: ref -> sha."""
    out = subprocess.run(["git", "ls-remote", str(bare), "refs/guardkit/claims/*"], cwd=bare.parent,
                         capture_output=True, check=True).stdout.decode("utf-8", "surrogateescape")
    return {name: sha for sha, name in (line.split("\t") for line in out.splitlines())}


def claim(client: Client, **more: Any) -> Any:
    return client.call_tool("claim_next_task", {"feature_id": FEATURE_ID, "remote": "origin", **more})


def test_claims_follow_the_waves_and_a_released_claim_is_claimable_again(machine: tuple[Path, Path]) -> None:
    repo, bare = machine
    before = time.time()

    async def session(client: Client) -> list[Any]:
        first = answer(await claim(client, lease_seconds=600))
        second = answer(await claim(client, worker=first["worker"]))
        third = answer(await claim(client))
        on_remote = claims_on(bare)
        wrong = answer(await client.call_tool("release_claim", {"feature_id": FEATURE_ID, "task_id": "TASK-FB-001",
                                                                "remote": "origin", "worker": "someone-else"}))
        right = answer(await client.call_tool("release_claim", {"feature_id": FEATURE_ID, "task_id": "TASK-FB-001",
                                                                "remote": "origin", "worker": first["worker"]}))
        after_release = claims_on(bare)
        again = answer(await claim(client))
        return [first, second, third, on_remote, wrong, right, after_release, again]

    first, second, third, on_remote, wrong, right, after_release, again = with_server(repo, session)
    ref = f"refs/guardkit/claims/{FEATURE_ID}/TASK-FB-001"
    assert first["status"] == "claimed" and first["task_id"] == "TASK-FB-001" and first["wave"] == 1
    assert first["claim_ref"] == ref
    assert before + 600 <= first["lease_until"] <= time.time() + 600
    assert datetime.fromisoformat(first["lease_until_utc"]).timestamp() == int(first["lease_until"])
    assert first["branch"] == "autobuild/TASK-FB-001" and "record_turn" in first["next"]
    assert second["status"] == "claimed" and second["task_id"] == "TASK-FB-002"
    # Wave 2's task waits for wave 1's merge, and wave 1's tasks are both claimed.
    assert third["status"] == "nothing_ready" and third["wave"] == 1 and "task_id" not in third
    assert on_remote == {ref: first["claim_sha"],
                         f"refs/guardkit/claims/{FEATURE_ID}/TASK-FB-002": second["claim_sha"]}
    assert wrong["released"] is False and "someone-else" in wrong["reason"]
    assert right["released"] is True
    assert ref not in after_release and len(after_release) == 1
    assert again["status"] == "claimed" and again["task_id"] == "TASK-FB-001"
    assert claims_on(bare)[ref] == again["claim_sha"] != first["claim_sha"]


def test_a_task_claimed_by_a_worker_elsewhere_is_skipped(machine: tuple[Path, Path], tmp_path: Path) -> None:
    repo, bare = machine
    other = clone(bare.as_uri(), tmp_path / "other")

    async def session(client: Client) -> list[Any]:
        return [answer(await claim(client)) for _ in range(2)]

    first_here, = with_server(other, lambda client: _one(client))
    here = with_server(repo, session)
    assert first_here["task_id"] == "TASK-FB-001"
    assert here[0]["task_id"] == "TASK-FB-002"
    assert here[1]["status"] == "nothing_ready"


async def _one(client: Client) -> list[Any]:
    return [answer(await claim(client))]


def test_an_unreachable_remote_is_a_one_line_tool_error(machine: tuple[Path, Path]) -> None:
    repo, bare = machine
    shutil.move(bare, bare.with_name("moved.git"))

    async def session(client: Client) -> list[CallToolResult]:
        return [await claim(client), await claim(client, remote="nowhere")]

    unreachable, unknown = with_server(repo, session)
    line = error_text(unreachable)
    assert "cannot fetch from 'origin'" in line and "\n" not in line
    shown = cli(repo, "show", FEATURE_ID, "--remote", "origin")  # the CLI's line for the same remote
    assert shown.returncode != 0 and shown.stderr.strip() == line
    assert "no git remote named 'nowhere'" in error_text(unknown)


def test_a_read_only_server_cannot_claim(machine: tuple[Path, Path]) -> None:
    repo, bare = machine

    async def session(client: Client) -> tuple[set[str], CallToolResult]:
        names = {t.name for t in (await client.list_tools()).tools}
        return names, await claim(client)

    names, refused = with_server(repo, session, read_only=True)
    assert not names & {"claim_next_task", "release_claim"}
    assert refused.is_error
    assert claims_on(bare) == {}


def test_a_quarantined_task_is_not_claimed_until_released_through_the_tool(machine: tuple[Path, Path]) -> None:
    from guardkit_state.git.repo import GitRepo
    from guardkit_state.remote.branches import RemoteBranches
    from guardkit_state.remote.quarantine import crash_entry, write_crash

    repo, _ = machine
    found = GitRepo.discover(repo)
    assert found is not None
    base, tip = git(repo, "rev-parse", "origin/main").strip(), None
    for n in range(3):  # three workers' loops crashed on TASK-FB-001, each written in its history
        tip = write_crash(found, RemoteBranches(found, "origin"), "TASK-FB-001", base, tip,
                          crash_entry(worker=f"w{n}", reason="the loop stopped", limit=3))

    async def session(client: Client) -> list[Any]:
        first = answer(await claim(client))
        blocked = answer(await claim(client))
        released = answer(await client.call_tool("release_quarantined_task", {
            "feature_id": FEATURE_ID, "task_id": "TASK-FB-001", "remote": "origin"}))
        again = answer(await claim(client))
        return [first, blocked, released, again]

    first, blocked, released, again = with_server(repo, session)
    assert first["status"] == "claimed" and first["task_id"] == "TASK-FB-002"  # the quarantined one is skipped
    assert blocked["status"] == "nothing_ready"
    assert blocked["reason"].startswith("TASK-FB-001: quarantined after 3 runs")
    assert released["released"] is True and [r["worker"] for r in released["cleared"]] == ["w0", "w1", "w2"]
    assert again["status"] == "claimed" and again["task_id"] == "TASK-FB-001"


def test_a_lease_past_a_day_is_refused_before_anything_is_pushed(machine: tuple[Path, Path]) -> None:
    repo, bare = machine

    async def session(client: Client) -> list[CallToolResult]:
        return [await claim(client, lease_seconds=1e300), await claim(client, lease_seconds=86_401)]

    for refused in with_server(repo, session):
        assert "expected a number of seconds above 0 and at most 86400" in error_text(refused)
    assert claims_on(bare) == {}  # no claim left on the remote


@pytest.mark.parametrize("worker", ["me\nGuardkit-Lease-Until: 99999999999", "two words", "", "w" * 201])
def test_a_worker_id_that_is_not_one_line_of_safe_characters_is_refused_before_any_push(
        machine: tuple[Path, Path], worker: str) -> None:
    repo, bare = machine

    async def session(client: Client) -> list[CallToolResult]:
        released = await client.call_tool("release_claim", {"feature_id": FEATURE_ID, "task_id": "TASK-FB-001",
                                                            "remote": "origin", "worker": worker})
        return [await claim(client, worker=worker), released]

    for refused in with_server(repo, session):
        line = error_text(refused)
        assert "is not one line of letters, digits and . _ : @ + -" in line and "\n" not in line
    assert claims_on(bare) == {}


@pytest.mark.parametrize("below", ["", "/old", "/\udcff"])  # (the byte 0xff: the MCP server failed to answer)
def test_a_claim_ref_holding_no_claim_is_named_with_how_to_clear_it_not_taken_for_a_lost_race(
        machine: tuple[Path, Path], below: str) -> None:
    # Something that is no worker pushed a commit where TASK-FB-001's claim would be, or below it
    # (git then cannot create the claim ref): no claimant took the task, and asking again never helps.
    repo, bare = machine
    ref = f"refs/guardkit/claims/{FEATURE_ID}/TASK-FB-001{below}"
    tree = git(repo, "hash-object", "-t", "tree", "-w", "/dev/null").strip()
    foreign = git(repo, "commit-tree", tree, "-m", "a note of some other tool").strip()
    git(repo, "push", "-q", "origin", f"{foreign}:{ref}")

    async def session(client: Client) -> list[Any]:
        return [answer(await claim(client)), answer(await claim(client))]

    first, second = with_server(repo, session)
    assert first["status"] == "claimed" and first["task_id"] == "TASK-FB-002" and "lost_to_others" not in first
    held = (f"holds {foreign[:10]}, which is no guardkit claim" if not below else
            f"({foreign[:10]}) keeps git from creating the claim ref refs/guardkit/claims/{FEATURE_ID}/TASK-FB-001")
    shown = ref.replace("\udcff", "\\xff")
    assert second["status"] == "nothing_ready"
    assert second["reason"] == (f"wave 1: {shown} on the remote {held}: TASK-FB-001 runs nowhere until it is deleted "
                                f"(git push origin :{shown})")
    assert claims_on(bare) == {ref: foreign, f"refs/guardkit/claims/{FEATURE_ID}/TASK-FB-002": first["claim_sha"]}


def test_a_claim_made_through_mcp_is_never_adopted_by_a_worker_starting_in_the_clone(
        machine: tuple[Path, Path]) -> None:
    # The claim is the agent's (by its worker id), not the server process's: a worker of this clone
    # that adopted it as a dead worker's would take it back at once, under the agent still at work.
    from guardkit_state.git.repo import GitRepo
    from guardkit_state.remote.own_claims import ClaimKeeper

    repo, bare = machine
    first, = with_server(repo, _one)
    found = GitRepo.discover(repo)
    assert found is not None
    with ClaimKeeper(found, "origin", "a-worker-starting-here") as keeper:
        assert keeper.adopt() == {}
    assert claims_on(bare) == {first["claim_ref"]: first["claim_sha"]}


@pytest.mark.parametrize("above", [f"refs/guardkit/claims/{FEATURE_ID}", "refs/guardkit/claims"])
def test_a_ref_above_the_claim_refs_is_named_with_how_to_clear_it_not_taken_for_an_unreachable_remote(
        machine: tuple[Path, Path], above: str) -> None:
    # git cannot create any claim ref of the feature under that ref: nothing is claimed, nobody holds
    # a task, and asking again never helps (it answered "could not lock" as if a push held the lock).
    repo, bare = machine
    tree = git(repo, "hash-object", "-t", "tree", "-w", "/dev/null").strip()
    foreign = git(repo, "commit-tree", tree, "-m", "a note of some other tool").strip()
    git(repo, "push", "-q", "origin", f"{foreign}:{above}")
    first, = with_server(repo, _one)
    assert first["status"] == "nothing_ready", first
    assert first["reason"] == (f"wave 1: {above} on the remote ({foreign[:10]}) keeps git from creating the claim "
                               f"ref refs/guardkit/claims/{FEATURE_ID}/TASK-FB-001: TASK-FB-001 runs nowhere until it "
                               f"is deleted (git push origin :{above})")
    assert git(bare, "for-each-ref", "--format=%(refname) %(objectname)", "refs/guardkit/") == f"{above} {foreign}\n"
