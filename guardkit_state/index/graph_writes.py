"""Writing records into a group's graph through graphiti-core's public API, in bulk, without an LLM.

A record becomes an ``EpisodicNode`` (its JSON envelope), its ``EntityNode``s, one ``EntityEdge``
per fact (embedded, ``valid_at`` = when it happened) and a ``MENTIONS`` edge to each entity, saved
with ``add_nodes_and_edges_bulk`` in chunks. Every id is a uuid5 and saves merge by uuid, so a
rewrite is idempotent. A shared entity (task, feature, criterion, gate) is written by the record
defining it and otherwise only when missing, so a turn never overwrites its task's title with a stub.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from graphiti_core.edges import EntityEdge, EpisodicEdge
from graphiti_core.embedder.client import EmbedderClient
from graphiti_core.nodes import EntityNode, EpisodeType, EpisodicNode
from graphiti_core.utils.bulk_utils import add_nodes_and_edges_bulk
from graphiti_core.utils.datetime_utils import utc_now

from guardkit_state.errors import GuardkitStateError
from guardkit_state.index.base import SyncReport
from guardkit_state.index.query import parse_time
from guardkit_state.index.records import Entity, IndexRecord, stable_uuid
from guardkit_state.index.sources import record_from_content

log = logging.getLogger("guardkit_state.index")

SOURCE_DESCRIPTION = "guardkit-state"
#: The extra label of a record's own entity (its turn, task, feature or configuration entry),
#: embedded from the record's whole text: the record-level vector search scans just these.
ANCHOR_LABEL = "RecordAnchor"
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


async def list_episodes(driver: Any, group: str) -> dict[str, EpisodicNode]:
    """Every episode of ``group``, by uuid."""
    episodes = await EpisodicNode.get_by_group_ids(driver, [group])
    return {episode.uuid: episode for episode in episodes}


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
    if dry_run or not (to_write or gone):  # a dry run read ``stored``; otherwise nothing is gone
        report.removed.extend(sorted(stored[u].name for u in gone if stored is not None and u in stored))
        return
    if stored is None:  # the manifest named them: read just their stored content, to delete what they owned
        stored = {ep.uuid: ep for ep in await EpisodicNode.get_by_uuids(gdriver, stale + gone)} if stale or gone else {}
    report.removed.extend(sorted(stored[u].name for u in gone if u in stored))
    keep = set().union(*(r.owned_uuids() for r in to_write)) if to_write else set()
    await delete_records(gdriver, group, [stored[u] for u in stale if u in stored], keep=keep)
    await delete_records(gdriver, group, [stored[u] for u in gone if u in stored])
    await write_records(gdriver, group, to_write, embedder)
