"""Benchmark: a feature's tasks in parallel, and what the feature orchestration costs per task.

Every run is the real CLI (``python -m guardkit_state feature-build``) on a fresh git project made
by :func:`tests.feature_support.make_feature`, with the scripted agents of the feature-build tests
(``tests/feature_agents``: the Player sleeps a fixed time, the Coach approves turn 1).

* **parallel** — a feature of 4 independent tasks whose Player sleeps ``SLEEP`` seconds, at
  ``--max-parallel 4`` and at ``--max-parallel 1`` (serial), next to one such task run alone
  (``feature-build TASK-Y``). Target: parallel <= 1.3x the task alone (serial is about 4x).
* **overhead** — one task with instant agents, run as a one-task feature (its worktree, the
  feature branch and worktree, the task loop in a child process, the merge, the plan writes) and
  alone with ``feature-build TASK-Y``. The difference of the medians is the orchestration's cost
  per task. Target: <= 150 ms.

* **queue** — the merge queue's own cost (:mod:`guardkit_state.features.merge_queue`) beside a plain
  wave merge, in process, on a repository of ``QUEUE_TASKS`` approved task branches: the plain merge
  (no gate: each task merged onto the feature branch), the queue whose candidate passes, and the
  queue with one breaker (the wave's candidate fails, the bisection finds task 3, the rest lands),
  each with the plan bookkeeping a run makes (every step into ``execution.merge_queue``). The gate's
  own time (each ``run_smoke_gate``, a ``/bin/sh`` that exits at once) is taken out: what is left is
  git and bookkeeping. Target: the passing queue <= plain + 150 ms.

The variants of a case run interleaved, so a noisy neighbour slows them alike.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..feature_support import FEATURE_ID, TaskSpec, agent_command, make_feature

SLEEP = 1.0  # seconds each Player takes in the parallelism case
PARALLEL_TASKS = 4
PARALLEL_TARGET = 1.3  # x one task alone
OVERHEAD_TARGET_MS = 150.0
RUN_TIMEOUT = 300.0


def _build(root: Path, target: str, env: dict[str, str], *extra: str) -> float:
    """Wall time (ms) of one ``feature-build`` of ``target`` in ``root``; it must end approved."""
    argv = [sys.executable, "-m", "guardkit_state", "feature-build", target, "--repo", str(root),
            "--player", agent_command("player.py"), "--coach", agent_command("coach.py"), *extra]
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=root, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, check=False)
    elapsed = (time.perf_counter() - started) * 1000
    if proc.returncode != 0:
        raise RuntimeError(f"feature-build {target} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return elapsed


def _env(spec_file: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARDKIT_", "FEATURE_"))}
    env.update(FEATURE_SPEC=str(spec_file), NO_COLOR="1")
    return env


def _tasks(count: int, sleep: float) -> list[TaskSpec]:
    return [TaskSpec(f"TASK-FB-{n:03d}", sleep=sleep) for n in range(1, count + 1)]


class _Projects:
    """Fresh projects in one temp dir, numbered (a feature branch can be built only once)."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.count = 0

    def feature(self, tasks: int, sleep: float, parallel: int) -> float:
        self.count += 1
        project = make_feature(self.base, _tasks(tasks, sleep), recommended=parallel, name=f"f{self.count}")
        return _build(project.root, FEATURE_ID, _env(project.spec_file), "--max-parallel", str(parallel))

    def task_alone(self, sleep: float) -> float:
        self.count += 1
        project = make_feature(self.base, _tasks(1, sleep), name=f"t{self.count}")
        return _build(project.root, "TASK-FB-001", _env(project.spec_file))


def _median(samples: list[float]) -> float:
    return round(statistics.median(samples), 1)


def run_parallel(repeat: int = 5, sleep: float = SLEEP) -> dict[str, Any]:
    alone: list[float] = []
    parallel: list[float] = []
    serial: list[float] = []
    with tempfile.TemporaryDirectory(prefix="gks-bench-feature-") as tmp:
        projects = _Projects(Path(tmp))
        projects.task_alone(sleep)  # warm-up: the interpreter's and git's files in the page cache
        for _ in range(repeat):
            alone.append(projects.task_alone(sleep))
            parallel.append(projects.feature(PARALLEL_TASKS, sleep, PARALLEL_TASKS))
            serial.append(projects.feature(PARALLEL_TASKS, sleep, 1))
    row: dict[str, Any] = {"tasks": PARALLEL_TASKS, "sleep_s": sleep, "repeat": repeat, "alone_ms": _median(alone),
                           "parallel_ms": _median(parallel), "serial_ms": _median(serial),
                           "samples_ms": {"alone": alone, "parallel": parallel, "serial": serial}}
    row["parallel/alone"] = round(row["parallel_ms"] / row["alone_ms"], 2)
    row["serial/alone"] = round(row["serial_ms"] / row["alone_ms"], 2)
    return row


def run_overhead(repeat: int = 11) -> dict[str, Any]:
    alone: list[float] = []
    feature: list[float] = []
    with tempfile.TemporaryDirectory(prefix="gks-bench-feature-") as tmp:
        projects = _Projects(Path(tmp))
        projects.feature(1, 0.0, 1)  # warm-up
        for _ in range(repeat):
            alone.append(projects.task_alone(0.0))
            feature.append(projects.feature(1, 0.0, 1))
    row: dict[str, Any] = {"repeat": repeat, "alone_ms": _median(alone), "feature_ms": _median(feature),
                           "samples_ms": {"alone": alone, "feature": feature}}
    row["overhead_ms"] = round(row["feature_ms"] - row["alone_ms"], 1)
    return row


QUEUE_TASKS = 4
QUEUE_TARGET_MS = 150.0
#: The breaker's gate: task 3's part merged after task 1's fails it.
_BREAKER_GATE = "if [ -e src/1.part ] && [ -e src/3.part ]; then exit 1; fi"


def _queue_once(base: Path, gate: str | None) -> float:
    """One wave of :data:`QUEUE_TASKS` through the queue (``gate`` None: the plain merge); the wall
    time in ms less the gate's own runs."""
    from guardkit_state.features.gate_verdicts import GateVerdicts
    from guardkit_state.features.merge_queue import MergeQueue
    from guardkit_state.features.plan_report import PlanReport
    from guardkit_state.git.merge import merge_message
    from guardkit_state.plans.smoke_gates import SmokeGate

    from ..queue_support import queue_repo

    repo, tasks = queue_repo(base, QUEUE_TASKS)
    plan = base / "FEAT-Q.yaml"
    plan.write_text("id: FEAT-Q\ntasks:\n" + "".join(f"- id: {t.task_id}\n  dependencies: []\n" for t in tasks))

    report = PlanReport(plan)  # as a run records each step (a gate run's at once, the others with the next)
    queue = MergeQueue(repo, "autobuild/FEAT-Q", 1, SmokeGate(None, gate) if gate else None,
                       GateVerdicts(repo, "FEAT-Q"), on_step=report.queue_step, send_back=lambda sent: False,
                       message=lambda task: merge_message("FEAT-Q", task.task_id, branch=f"autobuild/{task.task_id}",
                                                          target="autobuild/FEAT-Q", wave=1))
    started = time.perf_counter()
    landing = queue.land(tasks)
    report.flush()
    elapsed = (time.perf_counter() - started) * 1000 - sum(run.seconds for run in landing.runs) * 1000
    if len(landing.merged) != (QUEUE_TASKS if gate != _BREAKER_GATE else QUEUE_TASKS - 1):
        raise RuntimeError(f"the queue merged {list(landing.merged)}")
    return elapsed


def run_queue(repeat: int = 9) -> dict[str, Any]:
    plain: list[float] = []
    passing: list[float] = []
    breaker: list[float] = []
    with tempfile.TemporaryDirectory(prefix="gks-bench-queue-") as tmp:
        count = 0

        def fresh() -> Path:
            nonlocal count
            count += 1
            where = Path(tmp) / f"r{count}"
            where.mkdir()
            return where

        _queue_once(fresh(), "true")  # warm-up: the modules imported, git's files in the page cache
        for _ in range(repeat):
            plain.append(_queue_once(fresh(), None))
            passing.append(_queue_once(fresh(), "true"))
            breaker.append(_queue_once(fresh(), _BREAKER_GATE))
    row: dict[str, Any] = {"tasks": QUEUE_TASKS, "repeat": repeat, "plain_ms": _median(plain),
                           "queue_ms": _median(passing), "breaker_ms": _median(breaker),
                           "samples_ms": {"plain": plain, "queue": passing, "breaker": breaker}}
    row["queue_over_plain_ms"] = round(row["queue_ms"] - row["plain_ms"], 1)
    row["breaker_over_plain_ms"] = round(row["breaker_ms"] - row["plain_ms"], 1)
    return row


def run(*, quick: bool = False) -> dict[str, Any]:
    """Every case; ``quick`` runs each variant once with short sleeps (checks the runner only)."""
    return {"parallel": run_parallel(repeat=1, sleep=0.2) if quick else run_parallel(),
            "overhead": run_overhead(repeat=1) if quick else run_overhead(),
            "queue": run_queue(repeat=1) if quick else run_queue()}


# --------------------------------------------------------------------------- the table rows


def _x(value: float) -> str:
    return f"{value:.2f}x"


def table_rows(case: Any) -> list[tuple[str, ...]]:
    """The feature rows of the results table (same columns as ``report.HEADER``)."""
    if not isinstance(case, dict):
        return []
    if "error" in case:
        return [("Feature", "error", "", "", "", "", "", str(case["error"]))]
    rows: list[tuple[str, ...]] = []
    par = case.get("parallel")
    if isinstance(par, dict):
        label = f"{par['tasks']} independent tasks ({par['sleep_s']:g} s Player each)"
        met = "yes" if par["parallel/alone"] <= PARALLEL_TARGET else "**no**"
        rows.append((f"Feature: {label}, --max-parallel {par['tasks']} (floor: one task alone)",
                     f"{par['parallel_ms']:.0f} ms", f"{par['alone_ms']:.0f} ms", _x(par["parallel/alone"]),
                     "", "", f"<= {PARALLEL_TARGET:g}x", met))
        rows.append(("Feature: the same, --max-parallel 1 (serial)", f"{par['serial_ms']:.0f} ms",
                     f"{par['alone_ms']:.0f} ms", _x(par["serial/alone"]), "", "", f"~{par['tasks']}x", "-"))
    over = case.get("overhead")
    if isinstance(over, dict):
        met = "yes" if over["overhead_ms"] <= OVERHEAD_TARGET_MS else "**no**"
        rows.append(("Feature: orchestration per task (1-task feature; floor: feature-build TASK-Y alone)",
                     f"+{over['overhead_ms']:.0f} ms ({over['feature_ms']:.0f} ms)", f"{over['alone_ms']:.0f} ms",
                     _x(over["feature_ms"] / over["alone_ms"]), "", "", f"<= +{OVERHEAD_TARGET_MS:.0f} ms", met))
    queue = case.get("queue")
    if isinstance(queue, dict):
        met = "yes" if queue["queue_over_plain_ms"] <= QUEUE_TARGET_MS else "**no**"
        rows.append((f"Feature: merge queue, a wave of {queue['tasks']} whose candidate passes (gate time taken "
                     "out; floor: the plain wave merge)", f"+{queue['queue_over_plain_ms']:.0f} ms "
                     f"({queue['queue_ms']:.0f} ms)", f"{queue['plain_ms']:.0f} ms",
                     _x(queue["queue_ms"] / queue["plain_ms"]), "", "", f"<= +{QUEUE_TARGET_MS:.0f} ms", met))
        rows.append(("Feature: the same with one breaker (candidate, 2 bisecting, the rest; send-back not included)",
                     f"+{queue['breaker_over_plain_ms']:.0f} ms ({queue['breaker_ms']:.0f} ms)",
                     f"{queue['plain_ms']:.0f} ms", _x(queue["breaker_ms"] / queue["plain_ms"]), "", "", "-", "-"))
    return rows


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
