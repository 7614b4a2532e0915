"""The optional Graphiti index: offline, embedded by default, idempotent, rebuildable.

No LLM is ever called; embeddings come from the embedder the index records (:mod:`.embedder_spec`,
:mod:`.graph_clients`). :class:`GraphitiIndex` seeds, syncs, prunes and rebuilds the groups of one
checkout, and searches them.

**Writing** (records, :mod:`.records`, straight into Graphiti's graph model, through graphiti-core's
public API, in bulk). A record becomes an ``EpisodicNode`` (its JSON envelope), its ``EntityNode``s, one ``EntityEdge``
per fact (embedded, ``valid_at`` = when it happened) and a ``MENTIONS`` edge to each entity, saved
with ``add_nodes_and_edges_bulk`` in chunks. Every id is a uuid5 and saves merge by uuid, so a
rewrite is idempotent. A shared entity (task, feature, criterion, gate) is written by the record
defining it and otherwise only when missing, so a turn never overwrites its task's title with a stub.

**Reading.** A query's allowed records are worked out from the manifest (its identifiers and filters); with no
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

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from graphiti_core.driver.driver import GraphDriver
from graphiti_core.edges import EntityEdge, EpisodicEdge
from graphiti_core.embedder.client import EmbedderClient
from graphiti_core.nodes import EntityNode, EpisodeType, EpisodicNode
from graphiti_core.utils.bulk_utils import add_nodes_and_edges_bulk
from graphiti_core.utils.datetime_utils import utc_now

from guardkit_state.errors import GuardkitStateError, IndexBackendError
from guardkit_state.index.base import SearchHit, SyncReport
from guardkit_state.index.config_records import load_system_records
from guardkit_state.index.graph_clients import ANCHOR_LABEL, semantic_scores
from guardkit_state.index.graph_connection import (
    GraphConnection,
    drop_graph,
    is_falkor,
    list_episodes,
    read_meta,
)
from guardkit_state.index.manifest import (
    Manifest,
    RecordMeta,
    common_terms,
    save_manifest,
    source_signatures,
)
from guardkit_state.index.query import (
    EPOCH,
    Filters,
    ParsedQuery,
    allowed,
    exact_answer,
    parse_query,
    parse_time,
    reciprocal_rank_fusion,
    time_of,
)
from guardkit_state.index.readings import CONFIG_FILES, source_paths
from guardkit_state.index.records import SYSTEM_GROUPS, Entity, IndexRecord, project_groups, resolve_group, stable_uuid
from guardkit_state.index.retention import retained
from guardkit_state.index.sources import load_project_records, record_from_content
from guardkit_state.index.turn_records import anchor_uuid

log = logging.getLogger("guardkit_state.index")

SOURCE_DESCRIPTION = "guardkit-state"
#: Records per bulk save: bounds one query's size and the memory of one batch.
CHUNK = 400


async def existing_uuids(driver: Any, group: str, uuids: Sequence[str]) -> set[str]:
    """Which of ``uuids`` are entity nodes of ``group`` already."""
    if not uuids:
        return set()
    rows, _, _ = await driver.execute_query(
        "MATCH (n:Entity) WHERE n.group_id = $group_id AND n.uuid IN $uuids RETURN n.uuid AS uuid",
        group_id=group, uuids=list(uuids))
    return {str(row["uuid"]) for row in rows}


async def write_records(driver: Any, group: str, records: Sequence[IndexRecord], embedder: EmbedderClient) -> None:
    """Save ``records`` (all of ``group``) with their entities, facts and mentions."""
    for start in range(0, len(records), CHUNK):
        await _write_chunk(driver, group, records[start:start + CHUNK], embedder)


async def _write_chunk(driver: Any, group: str, records: Sequence[IndexRecord], embedder: EmbedderClient) -> None:
    now = utc_now()
    stubs = {e.uuid for r in records for e in r.all_entities() if e.shared and not e.defines}
    present = await existing_uuids(driver, group, sorted(stubs))
    entities: dict[str, Entity] = {}
    for record in records:
        for entity in record.all_entities():
            if not entity.shared or entity.defines:
                entities[entity.uuid] = entity  # its own, or the record defining it: always written
            elif entity.uuid not in entities and entity.uuid not in present:
                entities[entity.uuid] = entity  # a stub, only where there is nothing yet
    nodes = list(entities.values())
    texts = {e.uuid: r.search_text for r in records for e in r.entities}  # a record's anchor: its whole text
    node_vectors = await embedder.create_batch([texts.get(e.uuid) or f"{e.name} {e.summary}" for e in nodes])
    entity_nodes = [EntityNode(uuid=e.uuid, name=e.name, group_id=group,
                               labels=[e.label, ANCHOR_LABEL] if e.uuid in texts else [e.label], summary=e.summary,
                               name_embedding=v, created_at=now,
                               attributes={"record_key": e.record_key} if e.record_key else {})
                    for e, v in zip(nodes, node_vectors, strict=True)]
    facts = [(record, fact) for record in records for fact in record.facts]
    fact_vectors = await embedder.create_batch([fact.fact for _, fact in facts])
    entity_edges = [EntityEdge(uuid=fact.uuid, group_id=group, source_node_uuid=fact.source.uuid,
                               target_node_uuid=fact.target.uuid, name=fact.name, fact=fact.fact,
                               fact_embedding=vector, episodes=[record.uuid], created_at=now,
                               valid_at=_when(record, now), attributes={"record_key": record.key})
                    for (record, fact), vector in zip(facts, fact_vectors, strict=True)]
    episodes = [EpisodicNode(uuid=r.uuid, name=r.key, group_id=group, source=EpisodeType.json,
                             source_description=f"{SOURCE_DESCRIPTION} {r.kind}", content=r.content,
                             valid_at=_when(r, now), created_at=now, entity_edges=[f.uuid for f in r.facts])
                for r in records]
    mentions = [EpisodicEdge(uuid=stable_uuid(group, f"mentions/{r.key}/{e.uuid}"), group_id=group,
                             source_node_uuid=r.uuid, target_node_uuid=e.uuid, created_at=now)
                for r in records for e in r.all_entities()]
    await add_nodes_and_edges_bulk(driver, episodes, mentions, entity_nodes, entity_edges, embedder)


def _when(record: IndexRecord, default: datetime) -> datetime:
    return parse_time(record.completed_at) or default


async def delete_records(driver: Any, group: str, episodes: Sequence[EpisodicNode], *,
                         keep: set[str] | None = None) -> None:
    """Delete what each stored episode's record owned (except ``keep``), then orphaned shared entities."""
    if not episodes:
        return
    doomed: set[str] = set()
    for episode in episodes:
        doomed.add(episode.uuid)
        try:
            doomed |= record_from_content(group, episode.name, episode.content).owned_uuids()
        except GuardkitStateError as exc:
            log.warning("index episode %s unreadable (%s); removing the episode only", episode.name, exc)
    await delete_uuids(driver, group, doomed - (keep or set()))


async def delete_uuids(driver: Any, group: str, uuids: set[str]) -> None:
    """Delete the edges and nodes with these uuids, then entities no fact points at any more."""
    ids = sorted(uuids)
    await driver.execute_query("MATCH ()-[e]->() WHERE e.uuid IN $uuids DELETE e", uuids=ids)
    await driver.execute_query("MATCH (n) WHERE n.uuid IN $uuids DETACH DELETE n", uuids=ids)
    await driver.execute_query(
        "MATCH (n:Entity) WHERE n.group_id = $group_id AND NOT (n)-[:RELATES_TO]-() DETACH DELETE n",
        group_id=group)


async def apply_changes(gdriver: Any, group: str, desired: list[IndexRecord], report: SyncReport, *,
                        embedder: EmbedderClient, stored: dict[str, EpisodicNode] | None,
                        trusted: dict[str, str] | None, dry_run: bool) -> None:
    """Compare ``desired`` with what the group holds; write the difference (unless a dry run)."""
    want = {r.uuid: r for r in desired}
    to_write: list[IndexRecord] = []
    stale: list[str] = []
    if stored is not None:
        held = {uuid: ep.content for uuid, ep in stored.items()}
        same = {uuid for uuid, r in want.items() if held.get(uuid) == r.content}
    else:
        held = dict.fromkeys(trusted or {}, "")
        same = {uuid for uuid, r in want.items() if (trusted or {}).get(uuid) == r.content_hash[:16]}
    for uuid, record in want.items():
        if uuid in same:
            report.unchanged += 1
        elif uuid in held:
            report.updated.append(record.key)
            stale.append(uuid)
            to_write.append(record)
        else:
            report.added.append(record.key)
            to_write.append(record)
    gone = [uuid for uuid in held if uuid not in want]
    if stored is None:  # the manifest named them (a dry run reads them all): read the content of those to delete
        stored = {ep.uuid: ep for ep in await EpisodicNode.get_by_uuids(gdriver, stale + gone)} if stale or gone else {}
    report.removed.extend(sorted(stored[u].name for u in gone if u in stored))
    if dry_run or not (to_write or gone):
        return
    keep = set().union(*(r.owned_uuids() for r in to_write)) if to_write else set()
    await delete_records(gdriver, group, [stored[u] for u in stale if u in stored], keep=keep)
    await delete_records(gdriver, group, [stored[u] for u in gone if u in stored])
    await write_records(gdriver, group, to_write, embedder)


# --------------------------------------------------------------------------- reading

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
            fused = await semantic_scores(index.graphiti(gdriver), group, query.content_text, anchors=anchors,
                                          candidates=max(MIN_CANDIDATES, limit * 3),
                                          embedder_kind=index.embedder_spec().kind)
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
            uuids = [stable_uuid(group, key) for g, key, _ in ranked if g == group]
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


# --------------------------------------------------------------------------- the index

class GraphitiIndex(GraphConnection):
    """The Graphiti index of one checkout: seed, sync, prune, rebuild, search, status (a context manager)."""

    name = "graphiti"

    def _claim_identity(self) -> None:
        """Writers store the checkout's identity (a read never does)."""
        self.groups = project_groups(self.repo_root, create=True)

    def seed(self) -> SyncReport:
        """Upsert this project's configuration groups (role constraints, gate configs, modes)."""
        self._claim_identity()
        records, reason = load_system_records(self.repo_root, groups=self.groups)
        report = SyncReport(notes=[reason] if reason else [])
        by_group: dict[str, list[IndexRecord]] = {self.groups[g]: [] for g in SYSTEM_GROUPS}
        for record in records:
            by_group.setdefault(record.group_id, []).append(record)
        if not reason:
            for group, items in by_group.items():
                self._converge(group, items, report)
        self._save_snapshot()
        self._write_manifest(seeded=True)
        return report

    def sync(self, *, dry_run: bool = False, full: bool = False) -> SyncReport:
        """Converge the project's turns, tasks and features with the files (retention applied)."""
        self._claim_identity()
        sources = source_signatures(self.repo_root, source_paths(self.repo_root))
        loaded = load_project_records(self.repo_root, self.project_group)
        report = SyncReport(dry_run=dry_run, problems=[str(p) for p in loaded.problems])
        keep, dropped = retained(loaded.records, self.repo_root)
        report.pruned_by_retention = [r.key for r in dropped]
        trusted = None if full else self._trusted_hashes()
        self._converge(self.project_group, keep, report, dry_run=dry_run, trusted=trusted)
        if not dry_run:
            self._save_snapshot()
            self._write_manifest(records=keep, pruned=dropped, sources=sources, common=common_terms(keep))
        return report

    def prune(self, *, dry_run: bool = False) -> SyncReport:
        """Apply retention only: remove indexed turns the policy drops."""
        self._claim_identity()
        loaded = load_project_records(self.repo_root, self.project_group)
        _, dropped = retained(loaded.records, self.repo_root)
        report = SyncReport(dry_run=dry_run, pruned_by_retention=[r.key for r in dropped])
        drop = {r.key for r in dropped}

        async def work(driver: GraphDriver) -> list[EpisodicNode]:
            gdriver = await self.prepare(driver, self.project_group)
            victims = [ep for ep in (await list_episodes(gdriver, self.project_group)).values() if ep.name in drop]
            if not dry_run:
                await delete_records(gdriver, self.project_group, victims)
            return victims

        victims = self._run(work)
        report.removed = sorted(ep.name for ep in victims)
        if not dry_run and victims:
            self._save_snapshot()
            if self.manifest is not None:
                for key in report.removed:
                    meta = self.manifest.records.pop(key, None)
                    if meta is not None:
                        self.manifest.pruned[key] = meta
                save_manifest(self.repo_root, self.manifest)
        return report

    def rebuild(self) -> SyncReport:
        """Drop every group this checkout owns and rebuild them from the files (switching embedder if asked)."""
        self._spec = self.asked or self.embedder_spec()

        async def drop(driver: GraphDriver) -> None:
            if not self.uri and is_falkor(driver):
                # The embedded database is this checkout's alone: graphs under an old identity
                # (the checkout moved, or its first commit came after the first sync) go too.
                for name in await driver.client.list_graphs():  # type: ignore[attr-defined]
                    if str(name) not in self.groups.values():
                        await drop_graph(driver, str(name))
            for group in self.groups.values():
                await self.prepare(driver, group, reset=True)

        self._run(drop)
        self.manifest = None
        report = self.seed()
        synced = self.sync(full=True)
        for name in ("added", "updated", "removed", "problems"):
            getattr(report, name).extend(getattr(synced, name))
        report.unchanged += synced.unchanged
        report.pruned_by_retention = synced.pruned_by_retention
        report.notes += self.notes
        return report

    def _trusted_hashes(self) -> dict[str, str] | None:
        """What the manifest says the index holds (record uuid -> content hash prefix), when it can be trusted."""
        manifest = self.manifest
        if manifest is None or manifest.group != self.project_group:
            return None
        return {stable_uuid(self.project_group, key): meta.hash for key, meta in manifest.records.items()}

    def _converge(self, group: str, desired: list[IndexRecord], report: SyncReport, *, dry_run: bool = False,
                  trusted: dict[str, str] | None = None) -> None:
        """Make ``group`` hold exactly ``desired`` (by uuid and content hash)."""

        async def work(driver: GraphDriver) -> None:
            stored: dict[str, EpisodicNode] | None
            if dry_run:
                gdriver = await self.group_driver(driver, group)
                meta = await read_meta(gdriver, group)
                stored = await list_episodes(gdriver, group) if meta is not None and meta.current else {}
            else:
                gdriver = await self.prepare(driver, group)
                fresh = group in self.created
                self.created.discard(group)
                stored = {} if fresh else None if trusted is not None else await list_episodes(gdriver, group)
            await apply_changes(gdriver, group, desired, report, embedder=self.embedder_client(), stored=stored,
                                trusted=trusted, dry_run=dry_run)

        self._run(work)

    def _write_manifest(self, *, records: list[IndexRecord] | None = None, pruned: list[IndexRecord] | None = None,
                        sources: dict[str, list[int]] | None = None, seeded: bool = False,
                        common: list[str] | None = None) -> None:
        old = self.manifest
        manifest = Manifest(location=self.manifest_key, group=self.project_group, embedder=self.embedder_spec().name,
                            dimension=self._dimension or self.embedder_spec().known_dimension or 0,
                            synced_at=datetime.now(UTC).isoformat(timespec="seconds"),
                            sources=dict(old.sources) if old is not None and old.group == self.project_group else {},
                            records={r.key: RecordMeta.of(r) for r in records} if records is not None
                            else dict(old.records) if old else {},
                            pruned={r.key: RecordMeta.of(r) for r in pruned} if pruned is not None
                            else dict(old.pruned) if old else {},
                            seeded=seeded or bool(old and old.seeded),
                            common_terms=common if common is not None else list(old.common_terms) if old else [])
        if sources is not None:
            config = {p: s for p, s in manifest.sources.items() if p in CONFIG_FILES}
            manifest.sources = sources | config
        if seeded:
            manifest.sources |= source_signatures(self.repo_root, CONFIG_FILES)
        save_manifest(self.repo_root, manifest)
        self.manifest = manifest

    def search(self, query: str, *, groups: Sequence[str] | None = None, limit: int = 10,
               filters: Filters | None = None) -> list[SearchHit]:
        """Records matching ``query`` (and ``filters``), best first (see the module)."""
        return search_index(self, query, groups=groups, limit=limit, filters=filters or Filters())
