"""Each group's graph carries one metadata node: what built it, and a guard against a FalkorDB defect.

**The restart defect.** FalkorDB (falkordblite 0.11) rebuilds its edge range indexes when it loads
a snapshot, or when an index is created over existing data, and leaves out every edge whose endpoint
is node id 0. graphiti's own searches filter edges by a property with labels on both ends, so after
a restart a task's first turns, or a whole configuration group, silently vanished from search.
**The workaround**: node 0 of every graph is this metadata node, which has no edges, created first
in an empty graph right after the indexes; a graph whose node 0 is anything else is dropped and
rebuilt by the next ``sync`` (proven by ``tests/test_index_restart.py``). The node also records the
schema, embedder and dimension: a search refuses another embedder, a ``sync`` rebuilds an older schema.
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
    if is_falkor(driver) and node_id != 0:
        raise IndexBackendError(f"index graph {group} was not empty when created (metadata node {node_id})",
                                fix="run 'guardkit-state graphiti rebuild'")
    return GraphMeta(SCHEMA_VERSION, embedder, dimension, node_id if is_falkor(driver) else None)
