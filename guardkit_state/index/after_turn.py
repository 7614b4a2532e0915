"""Indexing after a turn, off the loop's path: start a background ``sync`` and return at once.

The index is a side wing: nothing on the path of a turn imports it. The loop, the feature runner and
a remote worker tell their caller of each recorded turn (a ``TurnRecorded`` event); the CLI plugs the
index in by wrapping that ``on_event`` with :func:`with_indexing`, which calls
:func:`index_turn_best_effort` once a turn is recorded and committed. That starts a detached child
(``python -m guardkit_state.index.after_turn``) on idle CPU and returns: importing graphiti-core
alone takes ~1.3 s, and a dead or stuck backend must never hold up the loop. The child syncs
(catching up every turn not yet indexed) with the index's own embedder. Children coalesce: while
one holds ``.guardkit/index/background.lock``, a new one leaves a marker and exits, and the running
one syncs again — a burst of turns costs one or two syncs. Whatever is missed is caught up by the
next ``graphiti sync``; until then ``search`` sees the index is stale for those turns and scans the
files. Only a configured index is synced (an embedded one exists, or ``GUARDKIT_GRAPHITI_URI`` is
set): none is created behind the user's back.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from guardkit_state.loop.events import Event, EventSink, TurnRecorded
from guardkit_state.process.command import spawn

log = logging.getLogger("guardkit_state.index")

HOOK_LOG = "hook.log"
BACKGROUND_LOCK = "background.lock"
AGAIN_MARKER = "background.again"
#: How far below the loop the background indexer runs when idle scheduling is unavailable.
NICENESS = 19
#: How long the background indexer waits for the index's lock (a search or a sync holding it).
LOCK_WAIT = 120.0
#: The child's exit status when another background indexer already runs (and will sync again).
QUEUED = 3

def with_indexing(on_event: EventSink | None, repo_root: Path) -> EventSink:
    """The loop's ``on_event``: ``on_event`` first, then, for a recorded turn, a background sync of the index."""
    def sink(event: Event) -> None:
        if on_event is not None:
            on_event(event)
        if isinstance(event, TurnRecorded):
            state = event.record.turn_state
            path = next((p for p in event.record.written if p.name.startswith("turn_state_turn_")), None)
            started = time.monotonic()
            outcome = index_turn_best_effort(repo_root, path)
            log.info("index turn %d of %s: %s (%.2fs)", state.turn_number, state.task_id, outcome,
                     time.monotonic() - started)
    return sink


def index_turn_best_effort(repo_root: Path, turn_state_path: Path | None = None, *, budget_seconds: float = 0.0) -> str:
    """Start a background sync of the index after a turn; wait at most ``budget_seconds`` (default: not at all).

    Returns ``"skipped: <why>"``, ``"pending: <what>"`` (running in the background, or queued behind
    the indexer already running), ``"indexed"`` or ``"failed: <why>"`` (these two only when waited
    for). Never raises; failures are logged to the ``guardkit_state.index`` logger and to
    ``.guardkit/index/hook.log``. ``turn_state_path`` is the turn just recorded (the sync covers it
    and anything else not indexed yet).
    """
    try:
        from guardkit_state.index.configured import graphiti_available, graphiti_configured
        from guardkit_state.index.identity import checkout_root
        from guardkit_state.store.layout import index_dir

        root = checkout_root(Path(repo_root))
        if not graphiti_available():
            return "skipped: graphiti extra not installed"
        if not graphiti_configured(root, None):
            return "skipped: no index configured (run 'guardkit-state graphiti sync' to create one)"
        child = _spawn(root, index_dir(root))
        if budget_seconds <= 0:
            return f"pending: indexing in the background (pid {child.pid})"
        try:
            code = child.wait(budget_seconds)
        except subprocess.TimeoutExpired:
            return f"pending: still running in the background (pid {child.pid})"
        if code == 0:
            return "indexed"
        if code == QUEUED:
            return "pending: queued behind the background indexer already running"
        return f"failed: indexer exited with {code} (see {index_dir(root) / HOOK_LOG})"
    except Exception as exc:
        log.warning("indexing after the turn %s failed: %s", turn_state_path, exc)
        return f"failed: {type(exc).__name__}: {exc}"


#: Indexers this process started and has not reaped yet (reaped at the next start, never waited for).
_CHILDREN: set[subprocess.Popen[bytes]] = set()


def _spawn(root: Path, directory: Path) -> subprocess.Popen[bytes]:
    """Start the indexer in its own session, scheduled idle from its first instruction.

    Through ``chrt --idle`` (and ``ionice -c 3``) when they exist, so not even Python's start-up
    competes with the loop (setting ``SCHED_IDLE`` in the child itself would take a ``preexec_fn``,
    unsafe in a process with threads); otherwise the child lowers itself first thing.
    """
    _CHILDREN.difference_update([child for child in _CHILDREN if child.poll() is not None])
    env = dict(os.environ)
    env.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")
    log_path = None
    with contextlib.suppress(OSError):
        directory.mkdir(parents=True, exist_ok=True)
        log_path = directory / HOOK_LOG
    argv = [sys.executable, "-m", "guardkit_state.index.after_turn", "--repo", str(root)]
    ionice = shutil.which("ionice")
    if ionice is not None:  # its disk writes (the snapshot, the manifest) wait for the loop's too
        argv = [ionice, "-c", "3", *argv]
    chrt = shutil.which("chrt")
    if chrt is not None:
        argv = [chrt, "--idle", "0", *argv]
    child = spawn(argv, env=env, output=log_path)
    _CHILDREN.add(child)
    return child


def _child_main(argv: Sequence[str] | None = None) -> int:
    """The background indexer: sync until no turn arrived meanwhile; exit 0 on success."""
    parser = argparse.ArgumentParser(prog="guardkit_state.index.after_turn")
    parser.add_argument("--repo", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _run_when_idle()
    from guardkit_state.errors import LockedError
    from guardkit_state.store.layout import index_dir
    from guardkit_state.store.locks import exclusive_lock

    root = Path(args.repo)
    again = index_dir(root) / AGAIN_MARKER
    while True:
        again.touch()
        try:
            with exclusive_lock(index_dir(root) / BACKGROUND_LOCK, wait=0.0, holder="background indexer"):
                code = _sync_until_quiet(root, again)
        except LockedError:
            log.info("another background indexer runs; it will sync again")
            return QUEUED
        if code != 0 or not again.exists():
            return code
        # A turn arrived between the last check and the lock's release: go round again.


def _run_when_idle() -> None:
    """Take CPU only when nothing else wants it (Linux ``SCHED_IDLE``), else the lowest ``nice``:
    on a 2-core machine a loop's agents and git must never share their cores with the indexer."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # type: ignore[attr-defined,unused-ignore]
    except (AttributeError, OSError):
        with contextlib.suppress(OSError):
            os.nice(NICENESS)


def _sync_until_quiet(root: Path, again: Path) -> int:
    from guardkit_state.index import open_graphiti

    while again.exists():
        again.unlink(missing_ok=True)
        try:
            with open_graphiti(root, lock_wait=LOCK_WAIT) as index:
                report = index.sync()
        except Exception as exc:
            log.error("indexing failed: %s", exc)
            return 1
        log.info("synced (added %d, updated %d, removed %d)", len(report.added), len(report.updated),
                 len(report.removed))
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
