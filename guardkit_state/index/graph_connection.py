"""A connection to the Graphiti graph of one checkout: the embedded FalkorDB or a server, its groups' drivers,
the embedder in force, and each group's metadata node.

**Embedded FalkorDB (falkordblite), not Kuzu.** Measured here (``tests/bench/bench_index.py``):
FalkorDB-lite filters groups exactly (each group is its own graph) and keeps digits in fulltext
tokens; Kuzu 0.11.3 is deprecated in graphiti-core, creates no fulltext indexes, drops digits from
tokens and applies the group filter after the top-k, so a group-filtered search silently misses hits.

A FalkorDB server (``falkor://``) or Neo4j (``bolt://``) is reached given ``--uri`` or
``GUARDKIT_GRAPHITI_URI`` (:mod:`.graph_server`). The embedded server is private to one process at a
time: every operation holds ``.guardkit/index/index.lock``. graphiti-core (~1.3 s to import) is
imported only by the ``graph*`` modules.

**Each group's graph carries one metadata node**: what built it, and a guard against a FalkorDB
defect. **The restart defect.** FalkorDB (falkordblite 0.11) rebuilds its edge range indexes when it loads
a snapshot, or when an index is created over existing data, and leaves out every edge whose endpoint
is node id 0. graphiti's own searches filter edges by a property with labels on both ends, so after
a restart a task's first turns, or a whole configuration group, silently vanished from search.
**The workaround**: node 0 of every graph is this metadata node, which has no edges, created first
in an empty graph right after the indexes; a graph whose node 0 is anything else is dropped and
rebuilt by the next ``sync`` (proven by ``tests/test_index_restart.py``). The node also records the
schema, embedder and dimension: a search refuses another embedder, a ``sync`` rebuilds an older schema.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self, TypeVar

os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")

try:
    from graphiti_core import Graphiti
    from graphiti_core.driver.driver import GraphDriver
    from graphiti_core.nodes import EpisodicNode
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from guardkit_state.extras import missing_extra_error

    raise missing_extra_error("graphiti", "the Graphiti index",
                              missing=(exc.name or "graphiti-core").partition(".")[0]) from exc

from guardkit_state.errors import GuardkitStateError, IndexBackendError
from guardkit_state.index.base import IndexStatus
from guardkit_state.index.embedder_spec import DEFAULT_EMBEDDER, EmbedderSpec, mismatch, parse_embedder
from guardkit_state.index.graph_clients import (
    ANCHOR_LABEL,
    FastFalkorSearch,
    OverlapCrossEncoder,
    RefusingLLMClient,
    make_embedder,
)
from guardkit_state.index.graph_server import (
    FALKOR_DIR,
    FALKOR_SCHEMES,
    EmbeddedFalkor,
    check_reachable,
    configured_uri,
    move_aside_snapshot,
    parse_uri,
    redact,
)
from guardkit_state.index.identity import checkout_root
from guardkit_state.index.manifest import Manifest, load_manifest, manifest_location
from guardkit_state.index.records import TURN_STATES, project_groups
from guardkit_state.index.retention import retained
from guardkit_state.index.sources import load_project_records
from guardkit_state.store.layout import index_dir
from guardkit_state.store.locks import exclusive_lock

log = logging.getLogger("guardkit_state.index")
# graphiti-core logs every failed query at ERROR before raising; we translate the exception, so
# keep its records away from Python's last-resort stderr handler (a configured app still sees them).
logging.getLogger("graphiti_core").addHandler(logging.NullHandler())

T = TypeVar("T")
LOCK_NAME = "index.lock"


META_LABEL = "GuardkitIndexMeta"
#: Bumped whenever what the index stores changes shape: an older graph is rebuilt by ``sync``.
SCHEMA_VERSION = 4


@dataclass(frozen=True)
class GraphMeta:
    """What a group's metadata node says."""

    schema: int
    embedder: str
    dimension: int
    node_id: int | None = None

    @property
    def current(self) -> bool:
        """Written by this version's rules (schema, and the node-0 guard on FalkorDB)."""
        return self.schema == SCHEMA_VERSION and self.node_id in (0, None)


def is_falkor(driver: Any) -> bool:
    return str(getattr(driver, "provider", "")).lower().endswith("falkordb")


async def read_meta(driver: Any, group: str) -> GraphMeta | None:
    """The metadata node of ``group`` (``driver`` bound to the group's graph), or None."""
    rows, _, _ = await driver.execute_query(
        f"MATCH (m:{META_LABEL}) WHERE m.group_id = $group_id "
        "RETURN m.schema AS schema, m.embedder AS embedder, m.dimension AS dimension, id(m) AS node_id",
        group_id=group)
    if not rows:
        return None
    row = rows[0]
    node_id = int(row["node_id"]) if is_falkor(driver) and row.get("node_id") is not None else None
    return GraphMeta(int(row.get("schema") or 0), str(row.get("embedder") or ""), int(row.get("dimension") or 0),
                     node_id)


async def drop_graph(driver: Any, group: str) -> None:
    """Delete everything of ``group``: its whole graph on FalkorDB (indexes too), its nodes on Neo4j."""
    if is_falkor(driver):
        if group in await driver.client.list_graphs():  # names as text: FalkorDB decodes every response
            await driver.client.select_graph(group).delete()
        return
    await driver.execute_query("MATCH (n) WHERE n.group_id = $group_id DETACH DELETE n", group_id=group)


async def create_graph(driver: Any, group: str, embedder: str, dimension: int) -> None:
    """A fresh graph for ``group``: indexes, then the metadata node as node 0.

    Raises:
        IndexBackendError: the metadata node did not become node 0 (the graph was not empty).
    """
    await driver.build_indices_and_constraints()
    rows, _, _ = await driver.execute_query(
        f"CREATE (m:{META_LABEL} {{group_id: $group_id, schema: $schema, embedder: $embedder, "
        "dimension: $dimension}) RETURN id(m) AS node_id",
        group_id=group, schema=SCHEMA_VERSION, embedder=embedder, dimension=dimension)
    node_id = int(rows[0]["node_id"]) if rows else -1
    if is_falkor(driver) and node_id != 0:
        raise IndexBackendError(f"index graph {group} was not empty when created (metadata node {node_id})",
                                fix="run 'guardkit-state graphiti rebuild'")


class GraphConnection:
    """The graph of one checkout (embedded, or a server given ``uri``); a context manager.

    Every operation runs one event loop with its own connection; the embedded server lives from
    ``__enter__`` to ``__exit__``. ``embedder`` None means "the one the index was built with" (the
    default for a new index); naming another is refused, except by ``rebuild``. ``recover`` lets
    the embedded server start over when its snapshot cannot be loaded (``rebuild`` uses it).
    """

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
        return manifest_location(self.uri)

    def __enter__(self) -> Self:
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
            server.start()  # (a failed start left it stopped and without its socket folder: it starts afresh)
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
                raise IndexBackendError("the embedded index is not open (use the index as a context manager)")
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
            gdriver = driver.clone(database=group) if is_falkor(driver) else driver
            await _settle_init(gdriver, self.location)
            if is_falkor(gdriver):
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

    def status(self) -> IndexStatus:
        """Counts per group, the embedder, and how the project group compares with the files."""
        groups = list(self.groups.values())

        async def work(driver: Any) -> tuple[dict[str, int], int, int, dict[str, str], Any]:
            counts: dict[str, int] = {}
            entities = facts = 0
            contents: dict[str, str] = {}
            project_meta = None
            for group in groups:
                gdriver = await self.group_driver(driver, group)
                meta = await read_meta(gdriver, group)
                if group == self.project_group:
                    project_meta = meta
                if meta is None:
                    counts[group] = 0
                    continue
                episodes = await list_episodes(gdriver, group)
                counts[group] = len(episodes)
                if group == self.project_group:
                    contents = {uuid: ep.content for uuid, ep in episodes.items()}
                entities += await _count(gdriver, "MATCH (n:Entity) WHERE n.group_id = $group_id "
                                         "RETURN count(n) AS c", group)
                facts += await _count(gdriver, "MATCH ()-[e:RELATES_TO]->() WHERE e.group_id = $group_id "
                                      "RETURN count(e) AS c", group)
            return counts, entities, facts, contents, project_meta

        counts, entities, facts, contents, meta = self._run(work)
        loaded = load_project_records(self.repo_root, self.project_group)
        keep, dropped = retained(loaded.records, self.repo_root)
        want = {r.uuid: r for r in keep}
        notes = [f"{len(dropped)} turn state(s) kept out of the index by retention"] if dropped else []
        if meta is not None and not meta.current:
            notes.append("the index was built by an older version: 'guardkit-state graphiti sync' rebuilds it")
        manifest = self.manifest
        return IndexStatus(
            backend="graphiti (FalkorDB server)" if self.uri else "graphiti (embedded FalkorDB)",
            location=self.location, groups=counts, entities=entities, facts=facts, files=len(loaded.records),
            stale=sum(1 for u, r in want.items() if u in contents and contents[u] != r.content),
            missing=sum(1 for u in want if u not in contents), extra=sum(1 for u in contents if u not in want),
            notes=notes, embedder=meta.embedder if meta is not None else None,
            dimension=meta.dimension if meta is not None else None,
            synced_at=manifest.synced_at if manifest is not None else None)


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


async def list_episodes(driver: Any, group: str) -> dict[str, EpisodicNode]:
    """Every episode of ``group``, by uuid."""
    episodes = await EpisodicNode.get_by_group_ids(driver, [group])
    return {episode.uuid: episode for episode in episodes}


async def _count(driver: Any, cypher: str, group: str) -> int:
    rows, _, _ = await driver.execute_query(cypher, group_id=group)
    return int(rows[0]["c"]) if rows else 0
