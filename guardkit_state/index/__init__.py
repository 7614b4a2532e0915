"""Search over turns, tasks, features and configuration: the file scan always, Graphiti when it can answer.

The index is secondary: built from the files, rebuildable from them, never on the loop's path.
:class:`FileIndex` scans the files (nothing to build, never stale); ``GraphitiIndex`` is the
optional graph (embedded FalkorDB under ``.guardkit/index/`` or a server), imported only when used
(graphiti-core costs ~1.3 s). :func:`search` says which answered and why (:mod:`.searching`).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

# Resolved on first use (PEP 562): the loop's callers import ``index.after_turn`` on every run, and
# most runs have no index to feed, so they do not pay for the search modules.
_EXPORTS: dict[str, str] = {
    "EmbedderMismatchError": "guardkit_state.errors",
    "IndexStatus": "guardkit_state.index.base", "SearchHit": "guardkit_state.index.base",
    "SearchIndex": "guardkit_state.index.base", "SearchResult": "guardkit_state.index.base",
    "SyncReport": "guardkit_state.index.base", "FileIndex": "guardkit_state.index.files",
    "Filters": "guardkit_state.index.query", "SYSTEM_GROUPS": "guardkit_state.index.records",
    "TURN_STATES": "guardkit_state.index.records", "project_group_id": "guardkit_state.index.records",
    "Backend": "guardkit_state.index.searching", "graphiti_available": "guardkit_state.index.configured",
    "graphiti_configured": "guardkit_state.index.configured", "make_filters": "guardkit_state.index.searching",
    "search": "guardkit_state.index.searching",
}

if TYPE_CHECKING:
    from guardkit_state.errors import EmbedderMismatchError
    from guardkit_state.index.base import IndexStatus, SearchHit, SearchIndex, SearchResult, SyncReport
    from guardkit_state.index.configured import graphiti_available, graphiti_configured
    from guardkit_state.index.files import FileIndex
    from guardkit_state.index.query import Filters
    from guardkit_state.index.records import SYSTEM_GROUPS, TURN_STATES, project_group_id
    from guardkit_state.index.searching import Backend, make_filters, search


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'guardkit_state.index' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})  # what ``help()`` and completion list: the lazy names too


#: What ``guardkit-state graphiti ACTION`` does to the index besides ``status`` and ``search``.
IndexAction = Literal["seed", "sync", "rebuild", "prune"]

__all__ = [
    "SYSTEM_GROUPS", "TURN_STATES", "Backend", "EmbedderMismatchError", "FileIndex", "Filters", "IndexAction",
    "IndexStatus", "SearchHit", "SearchIndex", "SearchResult", "SyncReport", "graphiti_available",
    "graphiti_configured", "graphiti_status", "make_filters", "open_graphiti", "project_group_id", "search",
    "update_graphiti",
]


def open_graphiti(repo_root: Path, *, uri: str | None = None, embedder: str | None = None,
                  lock_wait: float = 30.0, recover: bool = False) -> Any:
    """A ``GraphitiIndex`` (not yet entered: use it as a context manager).

    ``embedder`` None uses the one the index was built with (the default, ``hashing``, for a new one).

    Raises:
        MissingExtraError: the graphiti extra is not installed.
    """
    from guardkit_state.index.configured import require_graphiti

    # Asked first: graphiti_backend imports graphiti_core before graph_connection, whose guard would
    # turn its absence into the MissingExtraError (a bare ModuleNotFoundError is an "unexpected" crash).
    require_graphiti()
    from guardkit_state.index.graphiti_backend import GraphitiIndex

    return GraphitiIndex(repo_root, uri=uri, embedder=embedder, lock_wait=lock_wait, recover=recover)


def graphiti_status(repo_root: Path, *, uri: str | None = None, embedder: str | None = None) -> IndexStatus:
    """What the Graphiti index holds, per group, and how far it is from the files.

    A read: an embedded index never built is reported as such and is not created by asking.

    Raises:
        MissingExtraError: the graphiti extra is not installed.
    """
    from guardkit_state.index.base import IndexStatus
    from guardkit_state.index.graph_server import embedded_index_exists
    from guardkit_state.index.sources import load_project_records

    graph = open_graphiti(repo_root, uri=uri, embedder=embedder)
    if not graph.uri and not embedded_index_exists(graph.repo_root):
        files = len(load_project_records(graph.repo_root).records)
        return IndexStatus(backend="graphiti (embedded FalkorDB)", location=graph.location, groups={},
                           files=files, missing=files,
                           notes=["no index built yet: 'guardkit-state graphiti sync' builds it"])
    with graph as index:
        status: IndexStatus = index.status()
        return status


def update_graphiti(repo_root: Path, action: IndexAction, *, uri: str | None = None, embedder: str | None = None,
                    dry_run: bool = False, full: bool = False) -> SyncReport:
    """Seed, sync, rebuild or prune the Graphiti index (``dry_run`` for sync and prune: change nothing).

    ``rebuild`` also recovers from an embedded snapshot that cannot be loaded (it is moved aside).

    Raises:
        MissingExtraError: the graphiti extra is not installed.
        EmbedderMismatchError: ``embedder`` differs from the index's own (except for ``rebuild``).
    """
    with open_graphiti(repo_root, uri=uri, embedder=embedder, recover=action == "rebuild") as index:
        run = {"seed": index.seed, "sync": lambda: index.sync(dry_run=dry_run, full=full), "rebuild": index.rebuild,
               "prune": lambda: index.prune(dry_run=dry_run)}
        report: SyncReport = run[action]()
    return report
