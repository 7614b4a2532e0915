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
import sys
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from guardkit_state.store import layout, stat_cache

if TYPE_CHECKING:
    from guardkit_state.store.tree_watch import Watched

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


#: The folders of ``.guardkit/`` no read answers from: the caches (written at the end of a read),
#: the loop's log, the Graphiti index, and the worktrees (each watched as a checkout of its own).
_UNREAD = frozenset({"cache", "logs", "index", "graphiti", "worktrees"})


def watch_reads(root: Path | str) -> None:
    """From now on this process watches what its reads of the checkout ``root`` answer from
    (:mod:`guardkit_state.store.tree_watch`): ``tasks/``, ``.guardkit/`` (its caches, log and index
    aside), each loop worktree's ``tasks/`` and ``.guardkit/``, and git's refs, worktrees, the loop's
    turn-commit ledgers and the files at the top of its folder (``HEAD``, ``packed-refs``). A
    long-running process only (the MCP server): a reader keeps what it derived while
    :func:`generation` stays the same."""
    from guardkit_state.store import tree_watch

    checkout = Path(root).resolve()
    tree_watch.start(os.fspath(checkout), partial(_watched, checkout))


def generation(root: Path | str) -> int | None:
    """The number that moves whenever anything :func:`watch_reads` watches for ``root`` changed;
    None when this process does not watch it (a command), or cannot trust its watch."""
    # A process that watches has imported the watch; a command never loads it (nor ctypes).
    tree_watch = sys.modules.get("guardkit_state.store.tree_watch")
    return None if tree_watch is None else tree_watch.generation(os.fspath(root))


def _watched(checkout: Path) -> list[Watched]:
    from guardkit_state.git.checkouts import common_git_dir, worktrees_home
    from guardkit_state.store.tree_watch import Watched
    home = worktrees_home(checkout) / layout.WORKTREES_DIR
    checkouts = [checkout]
    with contextlib.suppress(OSError):
        with os.scandir(home) as listing:
            checkouts += sorted(Path(entry.path) for entry in listing if entry.is_dir(follow_symlinks=False))
    found = [Watched(os.fspath(home), deep=False)]
    for tree in checkouts:  # a checkout alone (a tasks/ or .guardkit/ created), its tasks/ and .guardkit/
        found += [Watched(os.fspath(tree), deep=False), Watched(os.fspath(tree / layout.TASKS_DIR)),
                  Watched(os.fspath(tree / layout.GUARDKIT_DIR), skip=_UNREAD)]
    git = common_git_dir(checkout)
    if git is not None:  # the refs, the worktrees' heads, the loop's turn-commit ledgers
        ours = layout.TURN_COMMITS_IN_GIT_DIR.parts[0]
        found += [Watched(os.fspath(git), deep=False), *(Watched(os.fspath(git / name))
                                                          for name in ("refs", "worktrees", "reftable", ours))]
    return found


__all__ = ["generation", "listing_scope", "resolved_root", "scoped", "watch_reads"]
