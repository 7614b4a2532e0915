"""Ranking with graphiti's own hybrid retrieval, fused with the records a query names exactly.

One ``graphiti.search_()`` call per group asks three things at once, each ranked by graphiti's
reciprocal rank fusion of its methods:

* entities (nodes): BM25 over names and summaries + cosine similarity of their embeddings — a
  record's own entity (its turn, task or feature) is embedded from the record's whole text, so
  this is the record-level semantic match;
* facts (edges): BM25 over the fact sentences (fact-level precision: a blocker, a piece of
  feedback, a failed gate);
* episodes: BM25 over the whole record (its text spelled as :func:`.words.index_text` spells it).

Facts keep their embeddings (``graphiti.search()`` uses them), but the fact-level vector search is
left out of this configuration: graphiti computes it by brute force over every fact, ~60 ms at
10,000 turns (33,000 facts), where the record-level one costs ~13 ms and finds the same records.

Each hit stands for a record (an edge's ``record_key``, a node's ``record_key``, an episode's
name). The three lists are fused again, record by record, with reciprocal rank fusion. Nothing is
re-scored by word overlap: a fact that shares no word with the query but is close in meaning
(with a real embedder) keeps its place.

Exact identifiers (task, feature, criterion, turn) and filters select the records the answer may
hold (:mod:`.query`); they are pushed into graphiti: the facts searched are limited to those whose
source is an allowed record's anchor entity (every fact starts at its record's anchor).

This module imports graphiti-core; import it only from the Graphiti backend.
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
