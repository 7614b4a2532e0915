"""Each group's graph carries one metadata node: what built it, and a guard against a FalkorDB defect.

**The restart defect.** FalkorDB (the module falkordblite 0.11 ships) rebuilds its edge range
indexes when it loads a snapshot, or when an index is created over existing data, and the rebuilt
index leaves out every edge whose endpoint is node id 0. Queries that go through that index —
any query filtering edges by a property with a label on either end, which is the shape of
graphiti's own searches (``MATCH (n:Entity)-[e:RELATES_TO]->(m:Entity) WHERE e.group_id IN
...``) — then silently miss those facts: after a restart, a task's first turns, or a whole
configuration group whose facts all touch its first node, vanish from search. A graph written
after its indexes were created is correct until the next load, which is why it showed only
after a restart, and why the embedded index (loaded by every command) always had it.

**The workaround**: node 0 of every graph is this metadata node, which has no edges. It is
created first, in an empty graph, right after the indexes; a graph whose node 0 is anything else
(built before the workaround) is dropped and rebuilt from the files by the next ``sync``. Proven
by ``tests/test_index_restart.py`` against the embedded backend and a separate server process.

The node also records the index schema, the embedder's name and vector dimension, and the
project: a search refuses an index built with another embedder, and a ``sync`` rebuilds a graph of
an older schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from guardkit_state.errors import IndexBackendError

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


def _is_falkor(driver: Any) -> bool:
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
    node_id = int(row["node_id"]) if _is_falkor(driver) and row.get("node_id") is not None else None
    return GraphMeta(int(row.get("schema") or 0), str(row.get("embedder") or ""), int(row.get("dimension") or 0),
                     node_id)


async def drop_graph(driver: Any, group: str) -> None:
    """Delete everything of ``group``: its whole graph on FalkorDB (indexes too), its nodes on Neo4j."""
    if _is_falkor(driver):
        names = await driver.client.list_graphs()
        if group in [n.decode() if isinstance(n, bytes) else str(n) for n in names]:
            await driver.client.select_graph(group).delete()
        return
    await driver.execute_query("MATCH (n) WHERE n.group_id = $group_id DETACH DELETE n", group_id=group)


async def create_graph(driver: Any, group: str, embedder: str, dimension: int) -> GraphMeta:
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
    if _is_falkor(driver) and node_id != 0:
        raise IndexBackendError(f"index graph {group} was not empty when created (metadata node {node_id})",
                                expected="'guardkit-state graphiti rebuild'")
    return GraphMeta(SCHEMA_VERSION, embedder, dimension, node_id if _is_falkor(driver) else None)
