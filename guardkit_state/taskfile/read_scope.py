"""One read command: what it listed or read once, kept for the rest of the command.

A command that reads many tasks (``show FEAT-X`` resolves each task of a feature several times)
runs inside :func:`listing_scope`: each ``tasks/`` folder is then walked once for the whole
command instead of once per lookup, and whatever else is :func:`scoped` (the plans' listings, the
``autobuild/`` branches) computed once. Outside a scope nothing is remembered, so a long-running
process (the feature loop) always sees files created, moved or removed since its last lookup.
The read caches (:mod:`guardkit_state.store.stat_cache`) are saved when the scope ends.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

from guardkit_state.store import stat_cache

_T = TypeVar("_T")
#: What one read-only command already listed or read (see :func:`listing_scope`); None outside one.
_SCOPE: ContextVar[dict[tuple[str, ...], Any] | None] = ContextVar("guardkit_state_listing_scope", default=None)


@contextlib.contextmanager
def listing_scope() -> Iterator[None]:
    """Within the block, each ``tasks/`` folder is walked once, and whatever else is
    :func:`scoped` is computed once: for one read-only command that looks up many tasks.

    Never wrap a loop that writes or waits for agents in it: a listing taken inside the scope
    does not see files created, moved or removed later. A nested scope shares the outer one.
    The read caches (:mod:`guardkit_state.store.stat_cache`) are saved once, when it ends.
    """
    if _SCOPE.get() is not None:
        yield
        return
    token = _SCOPE.set({})
    try:
        with stat_cache.batch():
            yield
    finally:
        _SCOPE.reset(token)


def scoped(key: tuple[str, ...], compute: Callable[[], _T]) -> _T:
    """``compute()``, remembered under ``key`` for the rest of the current :func:`listing_scope`
    (computed every time outside one)."""
    cache = _SCOPE.get()
    if cache is None:
        return compute()
    if key not in cache:
        cache[key] = compute()
    result: _T = cache[key]
    return result


def resolved_root(root: Path | str) -> Path:
    """``root`` resolved (symlinks and ``..`` out): a path walk, done once per scope for each root
    (a feature's view resolves the repository once per task otherwise)."""
    return scoped(("resolved root", os.fspath(root)), Path(root).resolve)


__all__ = ["listing_scope", "resolved_root", "scoped"]
