"""``search``: the Graphiti index when it can answer rightly, else the files — always saying which.

``auto`` answers from the index only when, in this order (all but the last without importing
graphiti-core): the extra is installed, an index is configured and this checkout synced to it; the
embedder asked for, if any, is the index's own (else :class:`EmbedderMismatchError`, exit 2 —
never a silent fallback); no file in the query's scope (its tasks, a feature's tasks, else the
project) changed since the last sync; none of the turns asked about were kept out by retention;
no writer holds the index (no waiting); and the index opens and answers. Otherwise the files are
scanned and the note says why. ``--backend graphiti`` never falls back: it answers (noting
staleness) or fails.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from guardkit_state.errors import EmbedderMismatchError, IndexBackendError, LockedError
from guardkit_state.index.base import SearchResult
from guardkit_state.index.configured import graphiti_available, graphiti_configured, require_graphiti
from guardkit_state.index.embedder_spec import mismatch, parse_embedder
from guardkit_state.index.files import FileIndex
from guardkit_state.index.identity import checkout_root
from guardkit_state.index.manifest import Manifest, freshness, load_manifest, manifest_location
from guardkit_state.index.query import Filters, ParsedQuery, allowed, parse_query, parse_since
from guardkit_state.index.server import configured_uri
from guardkit_state.store.layout import index_dir
from guardkit_state.store.locks import exclusive_lock

log = logging.getLogger("guardkit_state.index")

Backend = Literal["auto", "files", "graphiti"]
SYNC_HINT = "run 'guardkit-state graphiti sync'"


def make_filters(*, task: str | None = None, feature: str | None = None, decision: str | None = None,
                 since: str | None = None) -> Filters:
    """The filters of the command line (``since``: a date, a date-time, or ``24h`` / ``7d`` ...).

    Raises:
        InputError: an unreadable ``since``.
    """
    return Filters(task=task or None, feature=feature or None, decision=(decision or "").lower() or None,
                   since=parse_since(since) if since else None)


def search(repo_root: Path, query: str, *, groups: Sequence[str] | None = None, limit: int = 10,
           backend: Backend = "auto", uri: str | None = None, embedder: str | None = None,
           filters: Filters | None = None) -> SearchResult:
    """Search turns, tasks, features and configuration, saying which backend answered and why.

    Raises:
        EmbedderMismatchError: ``embedder`` is not the one the index was built with.
        InputError: a bad group or embedder name.
        IndexBackendError, LockedError: ``backend="graphiti"`` and the index cannot answer.
    """
    root = Path(repo_root)
    filters = filters or Filters()
    asked = parse_embedder(embedder) if embedder else None
    if backend == "files":
        return SearchResult("files", FileIndex(root).search(query, groups=groups, limit=limit,
                                                                                  filters=filters))
    uri = configured_uri(uri)
    note = _unconfigured(root, uri, backend)
    if note is None:
        checkout = checkout_root(root)
        manifest = load_manifest(checkout, manifest_location(uri))
        if asked is not None and manifest is not None and manifest.embedder != asked.name:
            raise mismatch(manifest.embedder, manifest.dimension, asked.name, asked.known_dimension)
        parsed = parse_query(query)
        reason = _why_not_answer(checkout, manifest, parsed, filters)
        if reason is None or backend == "graphiti":
            answered = _from_index(root, query, uri, embedder, groups, limit, filters, backend, reason)
            if isinstance(answered, SearchResult):
                return answered
            note = answered
        else:
            note = f"{reason}; scanned the files"
    elif backend == "graphiti":
        return SearchResult("graphiti", [], note)
    hits = FileIndex(root).search(query, groups=groups, limit=limit, filters=filters)
    return SearchResult("files", hits, note)


def _unconfigured(root: Path, uri: str | None, backend: Backend) -> str | None:
    """Why there is no index to ask (None when there is one)."""
    if not graphiti_available():
        if backend == "graphiti":
            require_graphiti()
        return "graphiti extra not installed; scanned the files"
    if not graphiti_configured(root, uri):
        if backend == "graphiti":
            return f"no Graphiti index built yet ({SYNC_HINT})"
        return f"no Graphiti index ({SYNC_HINT} to build one); scanned the files"
    return None


def _scope(manifest: Manifest, query: ParsedQuery, filters: Filters) -> set[str] | None:
    """The task ids a query is about (None: the whole project)."""
    tasks = set(query.tasks) | ({filters.task.upper()} if filters.task else set())
    for feature in (*query.features, *([filters.feature] if filters.feature else [])):
        tasks |= {t.upper() for t in manifest.tasks_of_feature(feature)} or {f"{feature}-NO-TASKS"}
    return tasks or None


def _why_not_answer(root: Path, manifest: Manifest | None, query: ParsedQuery, filters: Filters) -> str | None:
    """Why the index must not answer this query (stale, pruned, unsynced, locked), or None."""
    if manifest is None:
        return f"this checkout has not synced the index yet, or it was built by an older version ({SYNC_HINT})"
    scope = _scope(manifest, query, filters)
    fresh = freshness(root, manifest, scope)
    if fresh.stale:
        where = f" for {', '.join(sorted(scope))}" if scope else ""
        return f"the index is stale{where}: {fresh.describe()} ({SYNC_HINT})"
    pruned = [key for key, meta in manifest.pruned.items() if allowed(meta, query, filters)]
    if pruned and (query.constrained or filters.any):
        return (f"{len(pruned)} of the turns asked about are kept out of the index by retention "
                f"(e.g. {pruned[0]})")
    lock = index_dir(root) / "index.lock"
    if manifest.location == "embedded" and lock.exists():
        try:
            with exclusive_lock(lock, wait=0.0, holder="search check"):
                pass
        except LockedError as exc:
            return f"the index is being updated ({exc.message})"
    return None


def _from_index(root: Path, query: str, uri: str | None, embedder: str | None, groups: Sequence[str] | None,
                limit: int, filters: Filters, backend: Backend, reason: str | None) -> SearchResult | str:
    """The index's answer, or (``auto``) the note saying why the files are scanned instead."""
    from guardkit_state.index.graphiti_backend import GraphitiIndex

    try:
        with GraphitiIndex(root, uri=uri, embedder=embedder, lock_wait=0.0 if backend == "auto" else 30.0) as index:
            hits = index.search(query, groups=groups, limit=limit, filters=filters)
        note = f"answered from the index although {reason}" if reason else _pruned_note(index.manifest)
        return SearchResult("graphiti", hits, note)
    except EmbedderMismatchError:
        raise
    except (IndexBackendError, LockedError) as exc:
        if backend == "graphiti":
            raise
        log.warning("graphiti search failed, scanning the files: %s", exc)
        return f"graphiti failed ({exc}); scanned the files"


def _pruned_note(manifest: Any) -> str | None:
    if manifest is not None and manifest.pruned:
        return (f"{len(manifest.pruned)} older turn(s) are kept out of the index by retention; "
                "'--backend files' searches them too")
    return None
