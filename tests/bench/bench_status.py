"""Benchmark: ``guardkit-state status --json`` on a large repository, and the CLI's start-up.

The status repository is GuardKit's shape scaled up to ``files`` task files (:mod:`.guardkit_repo`:
the corpus's plans, task files and reports, then corpus task files under new ids). Without the
corpus a generated mix of the same proportions (~12% with ``autobuild_state``) is used, and the
result says so.

* ``status`` cold (no ``.guardkit/cache/status.json``) and warm (nothing changed since the last
  call), each a subprocess, next to a subprocess that walks ``tasks/`` and reads every file's bytes
  (the floor); peak memory (max RSS) of the status process from ``os.wait4``.
* start-up: ``guardkit-state --help`` and ``guardkit-state show TASK-ID`` against ``python -c pass``.
* reads (:func:`run_reads`): on a repository shaped like GuardKit's (:mod:`.guardkit_repo`: the
  corpus's 41 plans and task files, 3,300 task files), ``show``, ``context`` and ``log`` of a task,
  ``show`` of a feature and ``status``, warm (nothing changed since the last call), each a
  subprocess, beside ``guardkit-state --help`` timed in the same run (``validate`` and ``search``
  on the same repository: :mod:`.bench_first_hour`).
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from guardkit_state.taskfile.discovery import task_id_from_filename

from .common import cli_command, make_task_repo, median_ms, ratio, run_ms, task_text
from .guardkit_repo import FEATURE_ID, GUARDKIT_FILES, TASK_ID, make_guardkit_repo, settle

DEFAULT_FILES = 10_000
_TASK_NAME = re.compile(r"^[A-Z][A-Z0-9]*-[A-Z0-9.]+")

FLOOR_SCRIPT = """
import os, sys
total = 0
stack = [sys.argv[1]]
while stack:
    for entry in os.scandir(stack.pop()):
        if entry.is_dir(follow_symlinks=False):
            stack.append(entry.path)
        elif entry.name.endswith(".md"):
            with open(entry.path, "rb") as handle:
                total += len(handle.read())
print(total)
"""


def _corpus_tasks(corpus: Path | None) -> list[tuple[str, str, bytes]]:
    """(status dir, file name, bytes) of every corpus task file that names its id."""
    if corpus is None or not (corpus / "tasks").is_dir():
        return []
    found = []
    for path in sorted((corpus / "tasks").rglob("*.md")):
        if _TASK_NAME.match(path.name):
            found.append((path.relative_to(corpus / "tasks").parts[0], path.name, path.read_bytes()))
    return found


def make_repo(root: Path, files: int, corpus: Path | None, *, seed: int = 8) -> dict[str, Any]:
    """Write ``files`` task files under ``root/tasks``; returns what was written."""
    rng = random.Random(seed)
    samples = _corpus_tasks(corpus)
    with_state = 0
    total_bytes = 0
    for k in range(files):
        new_id = f"TASK-B{k:05d}"
        if samples:
            status, name, raw = rng.choice(samples)
            old_id = task_id_from_filename(name)
            text = raw.replace(old_id.encode(), new_id.encode())
            name = new_id + name[len(old_id):]
        else:
            status, name = "backlog", f"{new_id}-generated.md"
            text = task_text(new_id).encode()
            if k % 8 == 0:  # ~12%, like the corpus
                text = text.replace(b"\n---\n", b"\nautobuild_state:\n  current_turn: 1\n  turns:\n"
                                    b"  - turn: 1\n    decision: feedback\n---\n", 1)
        path = root / "tasks" / status / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text)
        with_state += b"\nautobuild_state:" in text or b"\nfeature_build:" in text
        total_bytes += len(text)
    return {"files": files, "with_state": with_state, "bytes": total_bytes,
            "source": f"sampled from {corpus / 'tasks'}" if samples else "generated (corpus not found)"}


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, int, int]:
    """Run ``argv``; returns (wall ms, max RSS in KB, exit code). Output goes to a file, not a pipe."""
    with tempfile.TemporaryFile() as sink:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=sink, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = (time.perf_counter() - start) * 1000.0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            sink.seek(0)
            raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {sink.read()[-2000:]!r}")
    return elapsed, usage.ru_maxrss, proc.returncode


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GUARDKIT_STATE_")}
    env["NO_COLOR"] = "1"
    return env


def run_status(*, files: int = DEFAULT_FILES, repeat: int = 5, corpus: Path | None = None) -> dict[str, Any]:
    """Cold and warm ``status --json`` over ``files`` task files; medians, ratios, peak memory."""
    cli = cli_command()
    env = _env()
    with tempfile.TemporaryDirectory(prefix="gks-bench-status-") as tmp:
        root = Path(tmp) / "repo"
        root.mkdir()
        if corpus is not None:  # GuardKit's shape (its plans and task files), scaled up to ``files``
            made = make_guardkit_repo(root, corpus, files=files)
            settle(root)
        else:
            made = make_repo(root, files, corpus)
        cache = root / ".guardkit" / "cache" / "status.json"
        cold: list[float] = []
        warm: list[float] = []
        floor: list[float] = []
        rss: list[int] = []
        argv = [*cli, "status", "--json", "--repo", str(root)]
        _run(argv, root, env)  # warm-up: the OS page cache holds the files for every variant alike
        for _ in range(repeat):
            cache.unlink(missing_ok=True)
            ms, kb, _ = _run(argv, root, env)
            cold.append(ms)
            rss.append(kb)
            ms, kb, _ = _run(argv, root, env)
            warm.append(ms)
            rss.append(kb)
            floor.append(_run([sys.executable, "-c", FLOOR_SCRIPT, str(root / "tasks")], root, env)[0])
        listed = len(__import__("json").loads(subprocess.run(argv, cwd=root, env=env, capture_output=True,
                                                               check=True).stdout))
    row: dict[str, Any] = {**made, "listed": listed, "cold_ms": median_ms(cold), "warm_ms": median_ms(warm),
                           "floor_ms": median_ms(floor), "peak_rss_mb": round(max(rss) / 1024, 1)}
    row["cold/floor"] = ratio(row["cold_ms"], row["floor_ms"])
    row["warm/floor"] = ratio(row["warm_ms"], row["floor_ms"])
    return row


def run_startup(*, repeat: int = 10) -> dict[str, Any]:
    """``guardkit-state --help`` and ``show TASK-ID`` against ``python -c pass``; medians in ms."""
    cli = cli_command()
    env = _env()
    with tempfile.TemporaryDirectory(prefix="gks-bench-cli-") as tmp:
        root = Path(tmp)
        task_id = "TASK-BENCH-001"
        make_task_repo(root, task_id)
        cases = {"python_pass": [sys.executable, "-c", "pass"], "help": [*cli, "--help"],
                 "show": [*cli, "show", task_id]}
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for argv in cases.values():
            _run(argv, root, env)  # warm-up
        for _ in range(repeat):
            for name, argv in cases.items():
                samples[name].append(_run(argv, root, env)[0])
    row: dict[str, Any] = {f"{name}_ms": median_ms(values) for name, values in samples.items()}
    row["help/python"] = ratio(row["help_ms"], row["python_pass_ms"])
    row["show/python"] = ratio(row["show_ms"], row["python_pass_ms"])
    return row


#: The reads timed beside ``--help`` (name, words after the CLI, target: a multiple of the start-up
#: ("x") or seconds ("s")). ``validate`` exits 1 on the corpus (some of its files are invalid).
READS: tuple[tuple[str, tuple[str, ...], tuple[float, str]], ...] = (
    ("show TASK", ("show", TASK_ID), (2.0, "x")),
    ("context TASK", ("context", TASK_ID), (2.0, "x")),
    ("log TASK", ("log", TASK_ID), (2.0, "x")),
    ("show FEAT", ("show", FEATURE_ID), (2.0, "x")),
    ("status", ("status",), (2.5, "x")),
)


def run_reads(*, corpus: Path | None, files: int = GUARDKIT_FILES, repeat: int = 15) -> dict[str, Any]:
    """Each read of :data:`READS`, warm, beside ``--help``, on the GuardKit-shaped repository;
    medians of ``repeat`` interleaved rounds (one subprocess per sample, after two warm-up calls)."""
    if corpus is None:
        return {"skipped": "the GuardKit corpus (../shared/corpus/guardkit) was not found"}
    cli = cli_command()
    env = _env()
    with tempfile.TemporaryDirectory(prefix="gks-bench-reads-") as tmp:
        root = Path(tmp) / "repo"
        made = make_guardkit_repo(root, corpus, files=files)
        settle(root)  # files changed within the last ticks are not cached yet (stat_cache.RACY_NS)
        cases = {"help": [*cli, "--help"], **{name: [*cli, *words] for name, words, _ in READS}}
        for argv in cases.values():
            for _ in range(2):  # warm-up: the caches written, the files in the page cache
                run_ms(argv, root, env)
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(repeat):
            for name, argv in cases.items():
                samples[name].append(run_ms(argv, root, env))
    help_ms = median_ms(samples["help"])
    rows = []
    for name, words, (limit, unit) in READS:
        ms = median_ms(samples[name])
        rows.append({"name": name, "argv": list(words), "ms": ms, "x_help": ratio(ms, help_ms),
                     "target": limit, "unit": unit,
                     "met": (ms / help_ms <= limit) if unit == "x" else ms <= limit * 1000})
    return {**made, "repeat": repeat, "help_ms": help_ms, "reads": rows}



def table_rows(case: Any) -> list[tuple[str, ...]]:
    """The rows ``report.render_table`` adds for the reads case: each read beside ``--help``."""
    if not isinstance(case, dict) or "reads" not in case:
        return []
    where = f"{case['files']:,} task files, {case['plans']} plans, GuardKit-shaped, warm"
    rows = [(f"guardkit-state --help (the start-up the reads are measured against; {where})",
             f"{case['help_ms']:.0f} ms", "", "", "", "", "", "-")]
    for row in case["reads"]:
        target = f"<= {row['target']:g}x --help" if row["unit"] == "x" else f"<= {row['target']:g} s"
        rows.append((f"{row['name']} ({where}; floor: --help)", f"{row['ms']:.0f} ms", f"{case['help_ms']:.0f} ms",
                     f"{row['x_help']:.2f}x", "", "", target, "yes" if row["met"] else "**no**"))
    return rows
