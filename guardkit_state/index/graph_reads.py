"""Reading the Graphiti index: ``search`` and ``status``.

A query's allowed records are worked out from the manifest (its identifiers and filters); with no
content words they are the answer, in their natural order. Otherwise one ``graphiti.search_()``
per group ranks three lists, each by graphiti's own fusion of its methods:

* entities: BM25 over names and summaries + cosine similarity — a record's own entity is embedded
  from the record's whole text, so this is the record-level semantic match;
* facts: BM25 over the fact sentences (a blocker, a piece of feedback, a failed gate), limited to
  the facts starting at the allowed records' anchors;
* episodes: BM25 over the whole record (spelled as :func:`.words.index_text` spells it).

The fact-level vector search is left out: graphiti computes it by brute force over every fact
(~60 ms at 10,000 turns) where the record-level one costs ~13 ms and finds the same records. Each
hit stands for a record; the lists are fused by reciprocal rank, never re-scored by word overlap
(a fact close in meaning keeps its place), and the best records are read back from their episodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from graphiti_core import Graphiti
from graphiti_core.nodes import EpisodicNode
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

from guardkit_state.errors import GuardkitStateError, IndexBackendError
from guardkit_state.index.base import IndexStatus, SearchHit
from guardkit_state.index.graph_connection import GraphConnection
from guardkit_state.index.graph_meta import read_meta
from guardkit_state.index.graph_writes import list_episodes
from guardkit_state.index.manifest import RecordMeta
from guardkit_state.index.query import (
    EPOCH,
    Filters,
    ParsedQuery,
    allowed,
    exact_answer,
    parse_query,
    reciprocal_rank_fusion,
    time_of,
)
from guardkit_state.index.records import SYSTEM_GROUPS, IndexRecord, resolve_group
from guardkit_state.index.records import stable_uuid as _uuid
from guardkit_state.index.retention import retained
from guardkit_state.index.sources import load_project_records, record_from_content
from guardkit_state.index.turn_records import anchor_uuid
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


#: Candidates graphiti returns per list, at least (rank fusion needs some depth).
MIN_CANDIDATES = 30


def _groups(index: GraphConnection, groups: Sequence[str] | None, query: ParsedQuery, filters: Filters) -> list[str]:
    """The groups to search: those asked for, else the project's (and its configuration when seeded)."""
    if groups:
        return list(dict.fromkeys(resolve_group(g, index.repo_root) for g in groups))
    wanted = [index.project_group]
    seeded = index.manifest is not None and index.manifest.seeded
    if seeded and not (query.constrained or filters.any):
        wanted += [index.groups[g] for g in SYSTEM_GROUPS]
    return wanted


def search_index(index: GraphConnection, query_text: str, *, groups: Sequence[str] | None, limit: int,
                 filters: Filters) -> list[SearchHit]:
    """Records matching ``query_text``, best first (see the module docstring)."""
    query = parse_query(query_text)
    limit = query.limit(limit)
    constrained = query.constrained or filters.any
    searched = _groups(index, groups, query, filters)
    manifest = index.manifest
    pool: list[tuple[str, RecordMeta]] | None = None
    if constrained and manifest is not None:
        pool = [(k, m) for k, m in manifest.records.items() if allowed(m, query, filters)]
    if not query.content_terms:
        if not constrained or pool is None:
            return [] if not constrained else _post_filtered(index, query, filters, searched, limit)
        return _read_hits(index, [(index.project_group, key, 1.0) for key, _ in exact_answer(pool, query)[:limit]])

    async def work(driver: Any) -> list[tuple[str, str, float]]:
        ranked: list[tuple[str, str, float]] = []
        for group in searched:
            gdriver = await index.group_driver(driver, group)
            meta = await read_meta(gdriver, group)
            if meta is None or not meta.current:
                if group != index.project_group:
                    continue  # a configuration group never seeded (or seeded by an older version)
                raise IndexBackendError("the index was built by an older version or never synced",
                                        fix="run 'guardkit-state graphiti sync'")
            index.check_meta(meta)
            scoped = pool if group == index.project_group else None
            anchors = [anchor_uuid(group, k, m.kind, m.task, m.feature) for k, m in scoped] if scoped is not None \
                else None
            channels = await semantic_channels(index.graphiti(gdriver), group, query.content_text, anchors=anchors,
                                               candidates=max(MIN_CANDIDATES, limit * 3),
                                               embedder_kind=index.embedder_spec().kind)
            fused = channels.fused()
            if query.kind_hint and manifest is not None and group == index.project_group:
                fused = _prefer_kind(fused, query.kind_hint, manifest.records)
            keep = {k for k, _ in scoped} if scoped is not None else None
            ranked += [(group, key, score) for key, score in fused.items() if keep is None or key in keep]
        return ranked

    ranked = index._run(work)
    ranked.sort(key=lambda item: (-item[2], item[1]))
    if query.recency and manifest is not None:  # stable: equally recent matches keep their rank
        ranked.sort(key=lambda item: _time(manifest.records.get(item[1])), reverse=True)
    return _read_hits(index, ranked[:limit])


def _prefer_kind(fused: dict[str, float], kind: str, metas: dict[str, RecordMeta]) -> dict[str, float]:
    """Fuse one more list: the candidates of the kind the query's words name, in their order."""
    ranked = sorted(fused, key=lambda key: -fused[key])
    preferred = [key for key in ranked if (meta := metas.get(key)) is not None and meta.kind == kind]
    bonus = reciprocal_rank_fusion([(1.0, preferred)])
    return {key: score + bonus.get(key, 0.0) for key, score in fused.items()}


def _time(meta: RecordMeta | None) -> datetime:
    return time_of(meta) if meta is not None else EPOCH


def _read_hits(index: GraphConnection, ranked: Sequence[tuple[str, str, float]]) -> list[SearchHit]:
    """Read the ranked records back from their episodes and make hits of them, in rank order."""
    if not ranked:
        return []

    async def work(driver: Any) -> dict[tuple[str, str], IndexRecord]:
        found: dict[tuple[str, str], IndexRecord] = {}
        for group in dict.fromkeys(g for g, _, _ in ranked):
            uuids = [_uuid(group, key) for g, key, _ in ranked if g == group]
            gdriver = await index.group_driver(driver, group)
            for episode in await EpisodicNode.get_by_uuids(gdriver, uuids):
                record = _record(group, episode)
                if record is not None:
                    found[(group, record.key)] = record
        return found

    records = index._run(work)
    manifest = index.manifest
    hits = []
    for group, key, score in ranked:
        record = records.get((group, key))
        if record is None:
            continue
        meta = manifest.records.get(key) if manifest is not None and group == index.project_group else None
        record.source_path = meta.path if meta is not None else record.source_path
        hits.append(SearchHit.of(record, score))
    return hits


def _record(group: str, episode: EpisodicNode) -> IndexRecord | None:
    try:
        return record_from_content(group, episode.name, episode.content)
    except GuardkitStateError:
        return None


def _post_filtered(index: GraphConnection, query: ParsedQuery, filters: Filters, groups: list[str],
                   limit: int) -> list[SearchHit]:
    """Without a manifest: read every record of the groups and keep those the query allows."""

    async def work(driver: Any) -> list[IndexRecord]:
        out = []
        for group in groups:
            for episode in (await list_episodes(await index.group_driver(driver, group), group)).values():
                record = _record(group, episode)
                if record is not None and allowed(record, query, filters):
                    out.append(record)
        return out

    records = index._run(work)
    ordered = exact_answer(((r.key, r) for r in records), query)
    return [SearchHit.of(r, 1.0) for _, r in ordered[:limit]]


def index_status(index: GraphConnection) -> IndexStatus:
    """Counts per group, the embedder, and how the project group compares with the files."""
    groups = list(index.groups.values())

    async def work(driver: Any) -> tuple[dict[str, int], int, int, dict[str, str], Any]:
        counts: dict[str, int] = {}
        entities = facts = 0
        contents: dict[str, str] = {}
        project_meta = None
        for group in groups:
            gdriver = await index.group_driver(driver, group)
            meta = await read_meta(gdriver, group)
            if group == index.project_group:
                project_meta = meta
            if meta is None:
                counts[group] = 0
                continue
            episodes = await list_episodes(gdriver, group)
            counts[group] = len(episodes)
            if group == index.project_group:
                contents = {uuid: ep.content for uuid, ep in episodes.items()}
            entities += await _count(gdriver, "MATCH (n:Entity) WHERE n.group_id = $group_id RETURN count(n) AS c",
                                     group)
            facts += await _count(gdriver, "MATCH ()-[e:RELATES_TO]->() WHERE e.group_id = $group_id "
                                  "RETURN count(e) AS c", group)
        return counts, entities, facts, contents, project_meta

    counts, entities, facts, contents, meta = index._run(work)
    loaded = load_project_records(index.repo_root, index.project_group)
    keep, dropped = retained(loaded.records, index.repo_root)
    want = {r.uuid: r for r in keep}
    notes = [f"{len(dropped)} turn state(s) kept out of the index by retention"] if dropped else []
    if meta is not None and not meta.current:
        notes.append("the index was built by an older version: 'guardkit-state graphiti sync' rebuilds it")
    manifest = index.manifest
    return IndexStatus(
        backend="graphiti (FalkorDB server)" if index.uri else "graphiti (embedded FalkorDB)", location=index.location,
        groups=counts, entities=entities, facts=facts, files=len(loaded.records),
        stale=sum(1 for u, r in want.items() if u in contents and contents[u] != r.content),
        missing=sum(1 for u in want if u not in contents), extra=sum(1 for u in contents if u not in want),
        notes=notes, embedder=meta.embedder if meta is not None else None,
        dimension=meta.dimension if meta is not None else None,
        synced_at=manifest.synced_at if manifest is not None else None)


async def _count(driver: Any, cypher: str, group: str) -> int:
    rows, _, _ = await driver.execute_query(cypher, group_id=group)
    return int(rows[0]["c"]) if rows else 0
