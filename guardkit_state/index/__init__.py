"""Search over turn states and configuration: the file scan always, Graphiti when available.

The index is secondary: built from the files, rebuildable from them at any time, never on the
loop's critical path. Two backends implement :class:`SearchIndex`:

* :class:`FileIndex` (``files``) — scans the files; no extra, nothing to build.
* ``GraphitiIndex`` (``graphiti``) — the optional Graphiti graph, embedded FalkorDB under
  ``.guardkit/index/`` or a server given ``--uri``/``GUARDKIT_GRAPHITI_URI``. Imported only
  when used (graphiti-core costs ~1.3 s to import).

:func:`search` picks Graphiti when it is installed and configured (an embedded index exists, or
a URI is set) and otherwise scans the files, and says which it used.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from guardkit_state.errors import IndexBackendError, MissingExtraError
from guardkit_state.index.base import IndexStatus, SearchHit, SearchIndex, SearchResult, SyncReport
from guardkit_state.index.files import FileIndex
from guardkit_state.index.records import SYSTEM_GROUPS, TURN_STATES, project_group_id

log = logging.getLogger("guardkit_state.index")

Backend = Literal["auto", "files", "graphiti"]

__all__ = [
    "SYSTEM_GROUPS",
    "TURN_STATES",
    "FileIndex",
    "IndexStatus",
    "SearchHit",
    "SearchIndex",
    "SearchResult",
    "SyncReport",
    "graphiti_available",
    "graphiti_configured",
    "open_graphiti",
    "open_index",
    "project_group_id",
    "search",
]


def graphiti_available() -> bool:
    """True when the graphiti extra is installed (checked without importing it)."""
    return importlib.util.find_spec("graphiti_core") is not None


def graphiti_configured(repo_root: Path, uri: str | None = None) -> bool:
    """True when a URI is given/set or an embedded index was built for ``repo_root``."""
    from guardkit_state.index.embedded import configured_uri, embedded_index_exists

    return configured_uri(uri) is not None or embedded_index_exists(Path(repo_root))


def open_graphiti(repo_root: Path, *, uri: str | None = None, embedder: str = "hashing",
                  lock_wait: float = 30.0) -> Any:
    """A ``GraphitiIndex`` (not yet entered: use it as a context manager).

    Raises:
        MissingExtraError: the graphiti extra is not installed.
    """
    if not graphiti_available():
        raise MissingExtraError("the Graphiti index is not installed",
                                expected="pip install 'guardkit-state[graphiti]'")
    from guardkit_state.index.graphiti_backend import GraphitiIndex

    return GraphitiIndex(repo_root, uri=uri, embedder=embedder, lock_wait=lock_wait)


def open_index(repo_root: Path, *, backend: Backend = "auto", uri: str | None = None,
               embedder: str = "hashing") -> Any:
    """The index to search: ``files``, ``graphiti``, or ``auto`` (Graphiti when usable).

    A Graphiti index is returned unopened (a context manager); the file index needs no opening.
    """
    if backend == "files":
        return FileIndex(repo_root)
    if backend == "graphiti" or (graphiti_available() and graphiti_configured(repo_root, uri)):
        return open_graphiti(repo_root, uri=uri, embedder=embedder)
    return FileIndex(repo_root)


def search(repo_root: Path, query: str, *, groups: Sequence[str] | None = None, limit: int = 10,
           backend: Backend = "auto", uri: str | None = None, embedder: str = "hashing") -> SearchResult:
    """Search turn states and configuration, saying which backend answered.

    ``auto`` uses Graphiti when installed and configured, and falls back to scanning the files
    when it is not, or when it fails (the note says why). ``graphiti`` never falls back.
    """
    root = Path(repo_root)
    if backend == "files":
        return SearchResult("files", FileIndex(root).search(query, groups=groups, limit=limit))
    note: str | None
    if backend == "auto" and not graphiti_available():
        note = "graphiti extra not installed; scanned the files"
    elif backend == "auto" and not graphiti_configured(root, uri):
        note = "no Graphiti index (run 'guardkit-state graphiti sync' to build one); scanned the files"
    elif graphiti_available() and not graphiti_configured(root, uri):
        # Opening an embedded index creates it; a search must not, so an unbuilt one finds nothing.
        return SearchResult("graphiti", [], "no Graphiti index built yet (run 'guardkit-state graphiti sync')")
    else:
        try:
            with open_graphiti(root, uri=uri, embedder=embedder) as index:
                return SearchResult("graphiti", index.search(query, groups=groups, limit=limit))
        except IndexBackendError as exc:
            if backend == "graphiti":
                raise
            log.warning("graphiti search failed, scanning the files: %s", exc)
            note = f"graphiti failed ({exc}); scanned the files"
    return SearchResult("files", FileIndex(root).search(query, groups=groups, limit=limit), note)
