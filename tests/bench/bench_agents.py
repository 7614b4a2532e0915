"""Benchmark: the loop's own time per turn with agent presets, beside the same loop with plain agents.

Every run is the real CLI (``python -m guardkit_state feature-build TASK``) on a fresh git project,
two turns (the Coach gives feedback in turn 1 and approves in turn 2):

* **presets** — ``--player claude --coach codex`` with the fake CLIs of ``tests/fake_agents`` on
  ``PATH`` (they print Claude Code's result object and Codex's event lines): prompt building,
  the preset's argv, the agent's start, reading its envelope, the Player's files from git,
  recording and committing;
* **plain** — the same loop with ``tests/fake_agents/plain_agent.py`` as a shell command for both
  roles: the same work and the same reports, written to the report file.

Both start one Python process per agent run. The difference of the medians, per turn, is what the
presets add to a turn; target: <= 100 ms. The two variants run interleaved, so a noisy neighbour
slows them alike.
"""

from __future__ import annotations

import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..agent_fakes import BODY, PRESETS, REL, TASK
from ..agent_fakes import FAKES as FAKES_DIR
from ..guardkit_fixtures import make_repo

TURNS = 2
TARGET_MS = 100.0
RUN_TIMEOUT = 300.0


def _bin(base: Path) -> Path:
    bin_dir = base / "bin"
    bin_dir.mkdir()
    for name in PRESETS:
        exe = bin_dir / name
        exe.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(FAKES_DIR)!r})\n"
                       f"import fake_cli\nsys.exit(fake_cli.main({name!r}))\n")
        exe.chmod(0o755)
    return bin_dir


def _build(root: Path, env: dict[str, str], player: str, coach: str) -> float:
    argv = [sys.executable, "-m", "guardkit_state", "feature-build", TASK, "--repo", str(root),
            "--player", player, "--coach", coach]
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=root, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, check=False)
    elapsed = (time.perf_counter() - started) * 1000
    if proc.returncode != 0:
        raise RuntimeError(f"feature-build {TASK} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return elapsed


def run(repeat: int = 9) -> dict[str, Any]:
    plain_cmd = shlex.join([sys.executable, str(FAKES_DIR / "plain_agent.py")])
    presets: list[float] = []
    plain: list[float] = []
    with tempfile.TemporaryDirectory(prefix="gks-bench-agents-") as tmp:
        base = Path(tmp)
        bin_dir = _bin(base)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARDKIT_", "FAKE_"))}
        env.update(NO_COLOR="1", PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}")
        count = 0

        def project() -> Path:
            nonlocal count
            count += 1
            return make_repo(base / f"p{count}", {REL: BODY})

        _build(project(), env, "claude", "codex")  # warm-up
        for _ in range(repeat):
            presets.append(_build(project(), env, "claude", "codex"))
            plain.append(_build(project(), env, plain_cmd, plain_cmd))
    row: dict[str, Any] = {"turns": TURNS, "repeat": repeat, "presets_ms": round(statistics.median(presets), 1),
                           "plain_ms": round(statistics.median(plain), 1),
                           "samples_ms": {"presets": presets, "plain": plain}}
    row["per_turn_ms"] = round((row["presets_ms"] - row["plain_ms"]) / TURNS, 1)
    return row


def table_rows(case: Any) -> list[tuple[str, ...]]:
    """The agents row of the results table (same columns as ``report.HEADER``)."""
    if not isinstance(case, dict):
        return []
    if "error" in case:
        return [("Agents", "error", "", "", "", "", "", str(case["error"]))]
    met = "yes" if case["per_turn_ms"] <= TARGET_MS else "**no**"
    return [(f"Agents: a {case['turns']}-turn loop, --player claude --coach codex (fake CLIs) "
             "(floor: the same loop, plain scripted agents)",
             f"{case['per_turn_ms']:+.0f} ms/turn ({case['presets_ms']:.0f} ms)", f"{case['plain_ms']:.0f} ms",
             f"{case['presets_ms'] / case['plain_ms']:.2f}x", "", "", f"<= +{TARGET_MS:.0f} ms/turn", met)]


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
