"""Wrap an example agent for the end-to-end tests: log each call, keep its context, optionally stall.

Usage (as a Player or Coach command)::

    python e2e_agent_wrapper.py ROLE LOGDIR -- COMMAND [ARG ...]

Appends one JSON line to ``LOGDIR/agents.jsonl`` when the agent starts (role, turn, mode, process
group) and one when it ends (exit status), copies ``$GUARDKIT_CONTEXT_FILE`` to
``LOGDIR/context_seen_<role>_turn_<N>.md`` (what the agent was handed), and runs the command. When
``E2E_SLOW_ROLE`` and ``E2E_SLOW_TURN`` name this call it sleeps ``E2E_SLOW_SECONDS`` (default 60)
first, so a test can interrupt the loop while this agent is at work. Stdlib only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path


def _append(logdir: Path, record: dict[str, object]) -> None:
    # One write of one line with O_APPEND: concurrent agents never interleave partial lines.
    with open(logdir / "agents.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: e2e_agent_wrapper.py ROLE LOGDIR -- COMMAND [ARG ...]", file=sys.stderr)
        return 2
    role, logdir, command = argv[0], Path(argv[1]), argv[3:]
    turn = os.environ.get("GUARDKIT_TURN", "?")
    context = os.environ.get("GUARDKIT_CONTEXT_FILE")
    if context and Path(context).is_file():
        shutil.copyfile(context, logdir / f"context_seen_{role}_turn_{turn}.md")
    base = {"role": role, "turn": int(turn) if turn.isdigit() else turn,
            "mode": os.environ.get("GUARDKIT_MODE"), "pid": os.getpid(), "pgid": os.getpgid(0)}
    _append(logdir, {"event": "start", **base})
    if os.environ.get("E2E_SLOW_ROLE") == role and os.environ.get("E2E_SLOW_TURN") == turn:
        _append(logdir, {"event": "waiting", **base})
        time.sleep(float(os.environ.get("E2E_SLOW_SECONDS") or 60))
    code = subprocess.run(command, check=False).returncode
    _append(logdir, {"event": "end", "code": code, **base})
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
