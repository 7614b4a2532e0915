"""Benchmark: one feature built by several machines through a git remote (``feature-build --remote``).

* **workers** — the feature of the many-machines tests (6 independent tasks and one that depends
  on two of them), every Player taking ``SLEEP`` seconds, built through a bare remote (``file://``)
  by 3 worker processes, each in a clone of its own, and by 1 worker alone. Target: 3 workers <=
  0.5x one worker. (On one machine the workers share its CPUs; the agents mostly sleep.)
* **scaling** — the curve: a feature of 18 independent tasks and one joining them (every Player
  taking ``SCALE_SLEEP`` = 1 s), built by 1, 2, 4 and 6 workers, as ratios to one worker. Target:
  6 workers <= 0.30x (the limit is about 0.17x: three rounds of six and the joining task, against
  nineteen). Beside the curve, where each worker's time went: its process start-up (from its
  start to its first look), looks at the remote, fetches, claims, pushes, its task loops, merges,
  waits on another worker's merge and waits with nothing to claim (``--json``'s ``seconds``).
* **cost** — what the scaling feature costs the machine, figures a noisy neighbour does not move: the
  git processes its workers spawn (a ``git`` first on PATH logs each) and the CPU seconds (user+sys)
  of the workers and all they ran, for 1 and 6 workers. On two cores the 6-worker run is bound by
  this CPU.
* **claim+push** — what the protocol adds, on loopback ``git daemon``, each a real ``git push`` to
  the daemon: per turn, the push of its commit to the task branch (with its lease, and the task's
  turn ledger in the same atomic push); per task, its
  claim (commit-tree and push; ``ls-remote`` only when the push fails) and its release. Target: <= 150 ms per turn.

The variants run interleaved, so a noisy neighbour slows them alike; each is the median of five
runs (a run's ratio moves by +-0.02 between runs on a 2-core machine).
"""

from __future__ import annotations

import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..feature_support import FEATURE_ID, TaskSpec, agent_command, git, make_feature
from ..remote_support import clone, git_daemon, make_bare

SLEEP = 2.0
WORKERS_TARGET = 0.5  # x one worker
SCALE_SLEEP = 1.0
SCALE_COUNTS = (1, 2, 4, 6)
SCALE_INDEPENDENT = 18
SCALE_TARGET = 0.30  # 6 workers, x one worker
TURN_OVERHEAD_TARGET_MS = 150.0
RUN_TIMEOUT = 900.0


def _tasks(sleep: float) -> list[TaskSpec]:
    independent = [TaskSpec(f"TASK-FB-{n:03d}", sleep=sleep) for n in range(1, 7)]
    return [*independent, TaskSpec("TASK-FB-007", dependencies=["TASK-FB-001", "TASK-FB-004"], sleep=sleep)]


def _build(base: Path, name: str, workers: int, sleep: float, tasks: list[TaskSpec] | None = None,
           spent: list[dict[str, float]] | None = None, path: str | None = None,
           cpu: list[float] | None = None) -> float:
    """Wall time (ms) for ``workers`` worker processes to build the feature through a fresh remote;
    each worker's seconds by kind (its ``--json`` result, and its start-up) appended to ``spent``."""
    project = make_feature(base, tasks or _tasks(sleep), name=name)
    bare = _bare(base, name, project.root)
    machines = [clone(bare.as_uri(), base / f"{name}-machine-{n}") for n in range(workers)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARDKIT_", "FEATURE_"))}
    env.update(project.env(), NO_COLOR="1")
    if path is not None:
        env["PATH"] = path
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-m", "guardkit_state", "feature-build", FEATURE_ID, "--repo",
                               str(machine), "--player", agent_command("player.py"), "--coach",
                               agent_command("coach.py"), "--remote", "origin", "--poll", "0.2", "--json"],
                              cwd=machine, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for machine in machines]

    def finish(proc: subprocess.Popen[str]) -> tuple[str, str, float]:
        out, err = proc.communicate(timeout=RUN_TIMEOUT)
        return out, err, time.perf_counter()

    with ThreadPoolExecutor(len(procs)) as pool:  # each worker's end timed as it comes
        ends = list(pool.map(finish, procs))
    if cpu is not None:  # every worker waited for: their CPU and their children's, git's included
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 2))
    for proc, (out, err, ended) in zip(procs, ends, strict=True):
        if proc.returncode != 0:
            raise RuntimeError(f"a worker exited {proc.returncode}: {err[-2000:]}")
        seconds = json.loads(out)["seconds"]
        # Its process start-up: its wall time less what it accounted for (from its first look on).
        seconds["startup"] = round(ended - started - sum(seconds.values()), 3)
        if spent is not None:
            spent.append(seconds)
    return (time.perf_counter() - started) * 1000


def _bare(base: Path, name: str, seed: Path) -> Path:
    home = base / f"{name}-remote"
    home.mkdir()
    return make_bare(home, seed)


def run_workers(repeat: int = 5, sleep: float = SLEEP) -> dict[str, Any]:
    one: list[float] = []
    three: list[float] = []
    with tempfile.TemporaryDirectory(prefix="gks-bench-remote-") as tmp:
        base = Path(tmp)
        for n in range(repeat):
            three.append(_build(base, f"three{n}", 3, sleep))
            one.append(_build(base, f"one{n}", 1, sleep))
    row: dict[str, Any] = {"tasks": 7, "sleep_s": sleep, "repeat": repeat, "one_ms": _median(one),
                           "three_ms": _median(three), "samples_ms": {"one": one, "three": three}}
    row["three/one"] = round(row["three_ms"] / row["one_ms"], 2)
    return row


def _scale_tasks(sleep: float, independent: int) -> list[TaskSpec]:
    parts = [TaskSpec(f"TASK-FB-{n:03d}", sleep=sleep) for n in range(1, independent + 1)]
    return [*parts, TaskSpec(f"TASK-FB-{independent + 1:03d}", dependencies=[t.task_id for t in parts], sleep=sleep)]


def run_scaling(repeat: int = 5, sleep: float = SCALE_SLEEP, counts: tuple[int, ...] = SCALE_COUNTS,
                independent: int = SCALE_INDEPENDENT) -> dict[str, Any]:
    """The curve: each worker count's median wall time (its rounds interleaved with the others',
    the order turned each round, so a noisy neighbour slows them alike), as a ratio to one worker;
    and per count, each kind of time averaged over its workers and rounds."""
    walls: dict[int, list[float]] = {n: [] for n in counts}
    spent: dict[int, list[dict[str, float]]] = {n: [] for n in counts}
    with tempfile.TemporaryDirectory(prefix="gks-bench-scale-") as tmp:
        base = Path(tmp)
        for round_number in range(repeat):
            order = counts[round_number % len(counts):] + counts[:round_number % len(counts)]
            for n in order:
                walls[n].append(_build(base, f"s{round_number}w{n}", n, sleep, _scale_tasks(sleep, independent),
                                       spent[n]))
    one = _median(walls[counts[0]])
    curve = []
    for n in counts:
        kinds = sorted({kind for seconds in spent[n] for kind in seconds})
        per_worker = {kind: round(statistics.fmean(s.get(kind, 0.0) for s in spent[n]), 2) for kind in kinds}
        curve.append({"workers": n, "ms": _median(walls[n]), "ratio": round(_median(walls[n]) / one, 3),
                      "samples_ms": [round(w) for w in walls[n]], "per_worker_s": per_worker})
    return {"tasks": independent + 1, "sleep_s": sleep, "repeat": repeat, "load": os.getloadavg(), "curve": curve}


def run_cost(repeat: int = 2, sleep: float = SCALE_SLEEP, counts: tuple[int, ...] = (1, 6),
             independent: int = SCALE_INDEPENDENT) -> dict[str, Any]:
    """The scaling feature's git processes (counted by a logging ``git`` first on PATH) and CPU seconds
    (its runs without that wrapper, which costs a shell per call), per worker count: medians."""
    real = shutil.which("git")
    assert real is not None
    rows = []
    with tempfile.TemporaryDirectory(prefix="gks-bench-cost-") as tmp:
        base = Path(tmp)
        log, wrapper = base / "git-calls.log", base / "bin" / "git"
        wrapper.parent.mkdir()
        wrapper.write_text(f'#!/bin/sh\necho "$1" >> {shlex.quote(str(log))}\nexec {shlex.quote(real)} "$@"\n')
        wrapper.chmod(0o755)
        counting = f"{wrapper.parent}{os.pathsep}{os.environ.get('PATH', '')}"
        for n in counts:
            calls: list[int] = []
            cpu: list[float] = []
            for round_number in range(repeat):
                log.unlink(missing_ok=True)
                _build(base, f"c{round_number}w{n}", n, sleep, _scale_tasks(sleep, independent), path=counting)
                calls.append(len(log.read_text().splitlines()))
                _build(base, f"u{round_number}w{n}", n, sleep, _scale_tasks(sleep, independent), cpu=cpu)
            rows.append({"workers": n, "git_processes": int(statistics.median(calls)),
                         "cpu_s": round(statistics.median(cpu), 2), "samples": {"git": calls, "cpu_s": cpu}})
    return {"tasks": independent + 1, "sleep_s": sleep, "repeat": repeat, "load": os.getloadavg(), "rows": rows}


def run_claim_push(repeat: int = 15) -> dict[str, Any]:
    from guardkit_state.git.repo import GitRepo
    from guardkit_state.remote.branches import RemoteBranches
    from guardkit_state.remote.claims import ClaimBoard
    from guardkit_state.remote.ledgers import RemoteLedgers

    claims: list[float] = []
    pushes: list[float] = []
    releases: list[float] = []
    with tempfile.TemporaryDirectory(prefix="gks-bench-claims-") as tmp:
        base = Path(tmp)
        seed = base / "seed"
        seed.mkdir()
        git(seed, "init", "-q", "-b", "main")
        (seed / "a.txt").write_text("a\n")
        git(seed, "add", ".")
        git(seed, "commit", "-qm", "seed")
        bare = make_bare(base, seed)
        with git_daemon(base) as daemon:
            machine = clone(daemon.url(bare.name), base / "machine")
            repo = GitRepo.discover(machine)
            assert repo is not None
            board, branches = ClaimBoard(repo, "origin", "bench"), RemoteBranches(repo, "origin")
            ledgers = RemoteLedgers(repo, "origin", "FEAT-B")
            git(machine, "branch", "autobuild/TASK-B-001")
            expected = None
            for n in range(repeat + 1):
                started = time.perf_counter()
                held = board.claim("FEAT-B", f"TASK-B-{n:03d}", lease=60)
                claimed = time.perf_counter()
                (machine / "a.txt").write_text(f"turn {n}\n")
                git(machine, "commit", "-qam", f"turn {n}")  # not timed: the loop makes this commit anyway
                git(machine, "branch", "-f", "autobuild/TASK-B-001", "HEAD")
                pushing = time.perf_counter()
                tip = repo.text("rev-parse", "HEAD")
                expected = branches.push("autobuild/TASK-B-001", expected,
                                         also=(ledgers.refspec("TASK-B-001", tip),))  # as a worker pushes
                pushed = time.perf_counter()
                assert held is not None and board.release(held)
                released = time.perf_counter()
                if n:  # the first round warms the daemon and the page cache
                    claims.append((claimed - started) * 1000)
                    pushes.append((pushed - pushing) * 1000)
                    releases.append((released - pushed) * 1000)
    return {"repeat": repeat, "claim_ms": _median(claims), "push_ms": _median(pushes),
            "release_ms": _median(releases),
            "per_turn_ms": _median(pushes), "per_task_ms": round(_median(claims) + _median(releases), 1),
            "samples_ms": {"claim": claims, "push": pushes, "release": releases}}


def _median(samples: list[float]) -> float:
    return round(statistics.median(samples), 1)


def run(*, quick: bool = False) -> dict[str, Any]:
    return {"workers": run_workers(repeat=1, sleep=0.2) if quick else run_workers(),
            "scaling": run_scaling(repeat=1, sleep=0.2, counts=(1, 2), independent=4) if quick else run_scaling(),
            "cost": run_cost(repeat=1, sleep=0.2, counts=(1,), independent=2) if quick else run_cost(),
            "claim_push": run_claim_push(repeat=3) if quick else run_claim_push()}


def table_rows(case: Any) -> list[tuple[str, ...]]:
    """The many-machines rows of the results table (same columns as ``report.HEADER``)."""
    if not isinstance(case, dict):
        return []
    if "error" in case:
        return [("Remote", "error", "", "", "", "", "", str(case["error"]))]
    rows: list[tuple[str, ...]] = []
    workers = case.get("workers")
    if isinstance(workers, dict):
        met = "yes" if workers["three/one"] <= WORKERS_TARGET else "**no**"
        rows.append((f"Feature through a remote: 6+1 tasks ({workers['sleep_s']:g} s Player), 3 workers "
                     "(floor: 1 worker)", f"{workers['three_ms']:.0f} ms", f"{workers['one_ms']:.0f} ms",
                     f"{workers['three/one']:.2f}x", "", "", f"<= {WORKERS_TARGET:g}x", met))
    rows += _scaling_rows(case.get("scaling"))
    cost = case.get("cost")
    if isinstance(cost, dict):
        rows += [(f"Feature through a remote: {cost['tasks'] - 1}+1 tasks, {row['workers']} worker(s): git processes "
                  f"and CPU (user+sys, workers and all they ran)", f"{row['git_processes']} git, {row['cpu_s']:.1f} s",
                  "", "", "", "", "", "-") for row in cost["rows"]]
    claim = case.get("claim_push")
    if isinstance(claim, dict):
        met = "yes" if claim["per_turn_ms"] <= TURN_OVERHEAD_TARGET_MS else "**no**"
        rows.append(("Remote: a turn's push to its task branch, with its lease (git daemon, loopback)",
                     f"{claim['per_turn_ms']:.0f} ms", "", "", "", "", f"<= {TURN_OVERHEAD_TARGET_MS:.0f} ms", met))
        rows.append(("Remote: a task's claim (one push) and release, once per task",
                     f"{claim['per_task_ms']:.0f} ms ({claim['claim_ms']:.0f}+{claim['release_ms']:.0f})",
                     "", "", "", "", "", "-"))
    return rows


#: How each kind of a worker's time is named beside the curve.
_KINDS = (("startup", "start-up"), ("look", "looks"), ("fetch", "fetches"), ("claim", "claims"), ("push", "pushes"),
          ("run", "task loops"), ("merge", "merges"), ("merge_wait", "merge waits"), ("wait", "waits"),
          ("step", "reading the tasks"), ("start", "its set-up"))


def _scaling_rows(scaling: Any) -> list[tuple[str, ...]]:
    if not isinstance(scaling, dict):
        return []
    rows: list[tuple[str, ...]] = []
    one = scaling["curve"][0]
    for point in scaling["curve"]:
        spent = point["per_worker_s"]
        where = ", ".join(f"{label} {spent[kind]:.2f} s" for kind, label in _KINDS if kind in spent)
        target = f"<= {SCALE_TARGET:g}x" if point["workers"] == 6 else ""
        met = ("yes" if point["ratio"] <= SCALE_TARGET else "**no**") if target else "-"
        rows.append((f"Feature through a remote: {scaling['tasks'] - 1}+1 tasks ({scaling['sleep_s']:g} s Player), "
                     f"{point['workers']} worker(s) (floor: 1 worker); per worker: {where}",
                     f"{point['ms']:.0f} ms", f"{one['ms']:.0f} ms", f"{point['ratio']:.2f}x", "", "", target, met))
    return rows


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
