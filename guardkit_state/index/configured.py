"""Whether there is an index to keep: the graphiti extra installed, and an index configured.

Asked after every recorded turn (:mod:`guardkit_state.index.after_turn`), so it imports only the
two small modules that answer it, never the search machinery.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from guardkit_state.extras import missing_extra_error
from guardkit_state.index.embedded import embedded_index_exists
from guardkit_state.index.identity import checkout_root
from guardkit_state.index.server import configured_uri


def graphiti_available() -> bool:
    """True when the graphiti extra is installed (checked without importing it)."""
    return importlib.util.find_spec("graphiti_core") is not None


def require_graphiti() -> None:
    """Raises :class:`~guardkit_state.errors.MissingExtraError` (naming the command that installs it
    into this copy) when the graphiti extra is missing."""
    if not graphiti_available():
        raise missing_extra_error("graphiti", "the Graphiti index", missing="graphiti-core")


def graphiti_configured(repo_root: Path, uri: str | None = None) -> bool:
    """True when a URI is given/set or an embedded index was built for ``repo_root``."""
    return configured_uri(uri) is not None or embedded_index_exists(checkout_root(Path(repo_root)))


__all__ = ["graphiti_available", "graphiti_configured", "require_graphiti"]
