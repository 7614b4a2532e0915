"""Best-effort indexing after a turn: never raises, never outlasts its budget.

The loop calls :func:`index_turn_best_effort` once a turn's files are written (the turn is
already complete). The work runs in a detached child process (``python -m
guardkit_state.index.after_turn``): importing graphiti-core alone takes ~1.3 s, and a dead or stuck
backend must not hold up the loop. The parent waits at most ``budget_seconds``; a child still
running then is left to finish on its own (it holds the index lock, so it cannot collide with a
later one). Whatever is missed — a timeout, a failure, no index yet — is caught up by
``guardkit-state graphiti sync``, which converges on the files.

The hook only indexes where an index is configured (an embedded index exists, or
``GUARDKIT_GRAPHITI_URI`` is set); it never creates one behind the user's back.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

log = logging.getLogger("guardkit_state.index")

DEFAULT_BUDGET_SECONDS = 3.0
HOOK_LOG = "hook.log"


def index_turn_best_effort(repo_root: Path, turn_state_path: Path, *,
                           budget_seconds: float = DEFAULT_BUDGET_SECONDS, uri: str | None = None) -> str:
    """Index one ``turn_state_turn_N.json`` if possible within ``budget_seconds``.

    Returns one of ``"indexed"``, ``"skipped: <why>"``, ``"pending: <why>"`` (still running in
    the background) or ``"failed: <why>"``. Never raises; failures are logged to the
    ``guardkit_state.index`` logger.
    """
    started = time.monotonic()
    try:
        from guardkit_state.index import graphiti_available, graphiti_configured

        root = Path(repo_root)
        if not graphiti_available():
            return "skipped: graphiti extra not installed"
        if not graphiti_configured(root, uri):
            return "skipped: no index configured (run 'guardkit-state graphiti sync' to create one)"
        from guardkit_state.index.embedded import index_dir as index_dir_of

        index_dir = index_dir_of(root)
        env = dict(os.environ)
        env.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")
        if uri:
            env["GUARDKIT_GRAPHITI_URI"] = uri
        try:
            log_handle = open(index_dir / HOOK_LOG, "ab")  # noqa: SIM115 - handed to the child
        except OSError:
            log_handle = None
        try:
            child = subprocess.Popen(
                [sys.executable, "-m", "guardkit_state.index.after_turn", "--repo", str(root),
                 str(Path(turn_state_path))],
                stdin=subprocess.DEVNULL, stdout=log_handle or subprocess.DEVNULL,
                stderr=log_handle or subprocess.DEVNULL, env=env, start_new_session=True)
        finally:
            if log_handle is not None:
                log_handle.close()
        remaining = max(0.0, budget_seconds - (time.monotonic() - started))
        try:
            code = child.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            log.warning("indexing %s still running after %.1fs (pid %d); 'graphiti sync' catches up",
                        turn_state_path, budget_seconds, child.pid)
            return f"pending: still running in the background (pid {child.pid})"
        if code == 0:
            return "indexed"
        log.warning("indexing %s failed (exit %d; see %s)", turn_state_path, code, index_dir / HOOK_LOG)
        return f"failed: indexer exited with {code} (see {index_dir / HOOK_LOG})"
    except Exception as exc:
        log.warning("indexing %s failed: %s", turn_state_path, exc)
        return f"failed: {type(exc).__name__}: {exc}"


def _child_main(argv: Sequence[str] | None = None) -> int:
    """The detached indexer: upsert the given turn state files; exit 0 on success."""
    parser = argparse.ArgumentParser(prog="guardkit_state.index.after_turn")
    parser.add_argument("--repo", required=True)
    parser.add_argument("--lock-wait", type=float, default=60.0)
    parser.add_argument("paths", nargs="+")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from guardkit_state.index import open_graphiti

    try:
        with open_graphiti(Path(args.repo), lock_wait=args.lock_wait) as index:
            report = index.index_paths([Path(p) for p in args.paths])
    except Exception as exc:
        log.error("indexing failed: %s", exc)
        return 1
    log.info("indexed %s (added %d, updated %d)", ", ".join(args.paths), len(report.added), len(report.updated))
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
