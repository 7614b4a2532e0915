"""What was read from a checkout's files, kept between processes while each file is unchanged:
``.guardkit/cache/status.json`` (the task files: ``status``'s summaries, whether a file holds loop
state, a plan task's standing) and the other readers' caches (``validate``).

The mechanism is :mod:`guardkit_state.store.stat_cache`'s; this module gives the task-file readers
one way to use it: :func:`remembered` keeps a fact computed from one file under that file's
signature, taken before the file is read.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from guardkit_state.store import layout
from guardkit_state.store.stat_cache import StatCache, signature_of
from guardkit_state.taskfile.read_scope import scoped

#: The cache of facts read from task files (``.guardkit/cache/status.json``): ``status``'s summaries
#: and :func:`holds_state`'s answers share its entries. Bumped whenever a fact's shape or meaning
#: changes (unreadable files are keyed by the id the resolver finds them by; criteria counts apart):
#: an older cache is rebuilt, never misread.
TASK_CACHE_NAME = "status"
TASK_CACHE_VERSION = 6

_T = TypeVar("_T")


def task_cache(checkout: Path, name: str = TASK_CACHE_NAME) -> StatCache | None:
    """A cache of what was read from a checkout's files: ``status`` (``.guardkit/cache/status.json``:
    ``status``'s summaries, whether each task file holds loop state, a plan task's standing), or
    another reader's (``validate``: its verdicts, kept apart so a ``show`` never loads them).
    None for a loop's worktree (nothing is kept inside one) or a folder without ``tasks/``."""
    def find() -> StatCache | None:
        if checkout.parent.name == layout.WORKTREES_DIR.name and checkout.parent.parent.name == layout.GUARDKIT_DIR:
            return None
        if not layout.tasks_dir(checkout).is_dir():
            return None
        return StatCache.of(checkout, name, TASK_CACHE_VERSION)

    return scoped(("task cache", os.fspath(checkout), name), find)


def remembered(path: Path, checkout: Path, fact: str, compute: Callable[[], _T], *, key: str | None = None,
               cache: str = TASK_CACHE_NAME, cheap: bool = False) -> _T:
    """``compute()`` (JSON-ready, read from ``path`` alone), kept as ``fact`` in a file cache of
    ``checkout`` (:func:`task_cache`: ``status``'s, else ``cache``) and returned from it while
    ``path`` is unchanged.

    The signature is taken before ``compute`` reads the file: a file changed meanwhile is read
    again next time, never kept with what an older text said. Bump :data:`TASK_CACHE_VERSION`
    when what a fact holds changes. ``key``: ``path`` relative to ``checkout``, when the caller has it.
    ``cheap``: ``compute()`` costs less than loading the cache (the head of one file): the cache is
    used only when this process has it loaded already (a server, ``status``, a feature's tasks).
    """
    if cheap and not StatCache.loaded(checkout, cache):
        return compute()
    kept = task_cache(checkout, cache)
    if kept is None:
        return compute()
    if key is None:
        try:
            key = path.relative_to(checkout).as_posix()
        except ValueError:
            return compute()
    sig = signature_of(path)
    entry = kept.entry(key, sig)
    if entry is not None and fact in entry:
        known: _T = entry[fact]
        return known
    value = compute()
    kept.put(key, sig, fact, value)
    return value


__all__ = ["TASK_CACHE_NAME", "TASK_CACHE_VERSION", "remembered", "task_cache"]
