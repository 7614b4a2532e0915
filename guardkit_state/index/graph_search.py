"""Ranking with graphiti's own hybrid retrieval: one ``graphiti.search_()`` per group, three lists.

* entities: BM25 over names and summaries + cosine similarity — a record's own entity is embedded
  from the record's whole text, so this is the record-level semantic match;
* facts: BM25 over the fact sentences (a blocker, a piece of feedback, a failed gate);
* episodes: BM25 over the whole record (spelled as :func:`.words.index_text` spells it).

The fact-level vector search is left out: graphiti computes it by brute force over every fact
(~60 ms at 10,000 turns) where the record-level one costs ~13 ms and finds the same records. Each
hit stands for a record (its ``record_key`` or episode name); the lists are fused with reciprocal
rank fusion, never re-scored by word overlap (a fact close in meaning keeps its place). A query's
identifiers and filters limit the facts searched to the allowed records' anchors (:mod:`.query`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from graphiti_core import Graphiti
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
from graphiti_core.search.search_filters import SearchFilters

from guardkit_state.index.query import reciprocal_rank_fusion
from guardkit_state.index.words import index_text

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


@dataclass
class Channels:
    """Record keys, best first, as each of graphiti's searches ranked them."""

    edges: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    episodes: list[str] = field(default_factory=list)

    def fused(self) -> dict[str, float]:
        return reciprocal_rank_fusion([(WEIGHTS["edges"], self.edges), (WEIGHTS["nodes"], self.nodes),
                                       (WEIGHTS["episodes"], self.episodes)])


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


async def semantic_channels(graphiti: Graphiti, group: str, query: str, *, anchors: Sequence[str] | None,
                            candidates: int, embedder_kind: str) -> Channels:
    """Run graphiti's hybrid search in ``group`` and map every hit to its record's key.

    ``anchors``: when given, only facts starting at these entities are searched.
    """
    filters = SearchFilters(edge_source_node_uuids=list(anchors)) if anchors is not None else SearchFilters()
    results = await graphiti.search_(index_text(query), config=search_config(candidates, sim_min_score(embedder_kind)),
                                     group_ids=[group],
                                     search_filter=filters)
    return Channels(edges=_keys(e.attributes for e in results.edges),
                    nodes=_keys(n.attributes for n in results.nodes),
                    episodes=[ep.name for ep in results.episodes])


def _keys(attributes: Any) -> list[str]:
    return [str(a["record_key"]) for a in attributes if a.get("record_key")]
