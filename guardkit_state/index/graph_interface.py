"""Graphiti's search methods for FalkorDB, shaped so a 10,000-turn graph answers in milliseconds.

A driver may carry a ``SearchInterface``: ``Graphiti.search_()`` then runs its own hybrid search
(same methods, filters and fusion) but asks the interface for each method's candidates. graphiti's
FalkorDB queries project every matching row before sorting (10,000 rows carry 10,000 embeddings)
and took ~600 ms per search at 10,000 turns. These rank first and read only the ``limit`` best
rows, start a filtered fact search at the allowed anchors, and leave out the group filters (each
group is its own FalkorDB graph, so they filter nothing and cost half of each search). Results are
graphiti's own model objects. Measured by ``tests/bench/bench_index_queries.py``.
"""

from __future__ import annotations

from typing import Any

from graphiti_core.driver.search_interface.search_interface import SearchInterface
from graphiti_core.edges import get_entity_edge_from_record
from graphiti_core.models.nodes.node_db_queries import EPISODIC_NODE_RETURN
from graphiti_core.nodes import get_entity_node_from_record, get_episodic_node_from_record
from graphiti_core.search.search_filters import (
    edge_search_filter_query_constructor,
    node_search_filter_query_constructor,
)
from graphiti_core.search.search_utils import fulltext_query

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

