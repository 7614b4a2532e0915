"""Benchmark: the first hour's read commands on a repository of GuardKit's size and shape.

GuardKit's own repository holds ~3,300 task files (and ~160 ``IMPLEMENTATION-GUIDE.md`` and
README files beside them) and 41 plans. The repository here is built from the corpus
(:mod:`.guardkit_repo`: its plans, task files, guides and reports, scaled up to 3,334 task files);
without the corpus it is made as :func:`bench_status.make_repo` makes it (a generated mix) with one
guide and one README per 20 task files, and the result says so. Timed by subprocess, beside
``guardkit-state --help`` in the same run:

* ``validate tasks/``: cold (no ``.guardkit/cache/validate.json``: every task file parsed and its
  state block checked; guides skipped) and warm (nothing changed since), against a subprocess
  that reads every file's bytes (the floor);
* ``search PHRASE --backend files``: cold (no ``.guardkit/cache/search.json``) and warm (nothing
  changed since), against ``python -c pass``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from .bench_status import FLOOR_SCRIPT, _env, _run, make_repo
from .common import cli_command, median_ms, ratio, run_ms
from .guardkit_repo import make_guardkit_repo, settle

GUARDKIT_FILES = 3_334


def _guides(root: Path, files: int) -> int:
    """One ``IMPLEMENTATION-GUIDE.md`` and one ``README.md`` per 20 task files, in feature folders."""
    made = 0
    for k in range(max(1, files // 20)):
        folder = root / "tasks" / "backlog" / f"feature-{k:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "IMPLEMENTATION-GUIDE.md").write_text(f"# Guide {k}\n\nWave 1: TASK-B{k:05d}\n")
        (folder / "README.md").write_text(f"# Feature {k}\n")
        made += 2
    return made


def _repository(root: Path, files: int, corpus: Path | None) -> dict[str, Any]:
    """The corpus-shaped repository (its guides counted), else the generated mix with guides."""
    if corpus is not None:
        made = make_guardkit_repo(root, corpus, files=files, commit=False)
        made["guides"] = sum(1 for path in (root / "tasks").rglob("*.md") if not _is_task_name(path.name))
        settle(root)
        return made
    made = make_repo(root, files, corpus)
    made["guides"] = _guides(root, files)
    return made


def _is_task_name(name: str) -> bool:
    from guardkit_state.taskfile.discovery import TASK_FILE_NAME

    return bool(TASK_FILE_NAME.match(name)) and not name.startswith(("IMPLEMENTATION-", "README"))


def run_validate(*, files: int = GUARDKIT_FILES, repeat: int = 3, corpus: Path | None = None) -> dict[str, Any]:
    """``validate tasks/`` over a GuardKit-size repository, cold and warm; medians, the ratio to the
    floor, and ``--help`` in the same run."""
    cli = cli_command()
    env = _env()
    with tempfile.TemporaryDirectory(prefix="gks-bench-validate-") as tmp:
        root = Path(tmp)
        made = _repository(root, files, corpus)
        argv = [*cli, "validate", str(root / "tasks")]
        cache = root / ".guardkit" / "cache" / "validate.json"
        cold: list[float] = []
        ours: list[float] = []
        floor: list[float] = []
        helps: list[float] = []
        run_ms(argv, root, env)  # warm-up: the page cache holds the files for both
        for _ in range(repeat):
            cache.unlink(missing_ok=True)
            cold.append(run_ms(argv, root, env))
            ours.append(run_ms(argv, root, env))
            floor.append(_run([sys.executable, "-c", FLOOR_SCRIPT, str(root / "tasks")], root, env)[0])
            helps.append(run_ms([*cli, "--help"], root, env))
    row: dict[str, Any] = {**made, "validate_cold_ms": median_ms(cold), "validate_ms": median_ms(ours),
                           "floor_ms": median_ms(floor), "help_ms": median_ms(helps)}
    row["validate/floor"] = ratio(row["validate_ms"], row["floor_ms"])
    return row



def table_rows(case: Any) -> list[tuple[str, ...]]:
    """The rows ``report.render_table`` adds for this module's cases."""
    if not isinstance(case, dict) or "validate_ms" not in case:
        return []
    shape = "GuardKit-shaped" if str(case.get("source", "")).startswith("built from") else "generated"
    label = f"{case['files']:,} task files + {case['guides']:,} guides/READMEs, {shape}"
    rows = [(f"validate tasks/, cold ({label}; floor: reading every file)", f"{case['validate_cold_ms']:,.0f} ms",
             f"{case['floor_ms']:,.0f} ms", "", "", "", "<= 3 s",
             "yes" if case["validate_cold_ms"] <= 3000 else "**no**"),
            ("validate tasks/, nothing changed (beside: --help)", f"{case['validate_ms']:,.0f} ms",
             f"{case['help_ms']:,.0f} ms", f"{case['validate_ms'] / case['help_ms']:.1f}x --help", "", "", "<= 1 s",
             "yes" if case["validate_ms"] <= 1000 else "**no**")]
    if "search_warm_ms" in case:
        files = f"{case['search_files']:,} task files"
        rows.append((f"search PHRASE --backend files, cold ({files}; floor: python -c pass)",
                     f"{case['search_cold_ms']:,.0f} ms", f"{case['python_ms']:,.0f} ms", "", "", "", "", "-"))
        rows.append(("search PHRASE --backend files, warm (cache, nothing changed; beside: --help)",
                     f"{case['search_warm_ms']:,.0f} ms", f"{case['search_help_ms']:,.0f} ms",
                     f"{case['search_warm_ms'] / case['search_help_ms']:.1f}x --help", "", "", "<= 0.25 s",
                     "yes" if case["search_warm_ms"] <= 250 else "**no**"))
        if "search_changed_ms" in case:
            rows.append(("search PHRASE --backend files, right after one task file changed (beside: --help)",
                         f"{case['search_changed_ms']:,.0f} ms", f"{case['search_help_ms']:,.0f} ms",
                         f"{case['search_changed_ms'] / case['search_help_ms']:.1f}x --help", "", "", "", "-"))
    return rows


#: A phrase as a user copies it from a Coach's feedback in the corpus (GuardKit's loop wrote it).
PHRASE = "tests did not pass during task-work execution"


def run_search(*, files: int = GUARDKIT_FILES, repeat: int = 3, corpus: Path | None = None) -> dict[str, Any]:
    """``search PHRASE --backend files`` cold (no cache) and warm (nothing changed since), against
    ``python -c pass`` (the floor: what any command costs to start)."""
    cli = cli_command()
    env = _env()
    with tempfile.TemporaryDirectory(prefix="gks-bench-search-") as tmp:
        root = Path(tmp)
        made = _repository(root, files, corpus)
        cache = root / ".guardkit" / "cache" / "search.json"
        argv = [*cli, "search", PHRASE, "--backend", "files", "--repo", str(root)]
        cold: list[float] = []
        warm: list[float] = []
        changed: list[float] = []
        floor: list[float] = []
        helps: list[float] = []
        run_ms(argv, root, env)
        edited = edited_task(root)
        for _ in range(repeat):
            cache.unlink(missing_ok=True)
            cold.append(run_ms(argv, root, env))
            warm.append(run_ms(argv, root, env))
            floor.append(run_ms([sys.executable, "-c", "pass"], root, env))
            helps.append(run_ms([*cli, "--help"], root, env))
        for turn in range(repeat):
            text = edited.read_text(encoding="utf-8")
            edited.write_text(f"{text}\nEdited by the bench, {turn}.\n", encoding="utf-8")
            changed.append(run_ms(argv, root, env))  # right after the change: the file read again, the rest kept
            settle(root)  # the next change starts from a cache holding every file as read
            run_ms(argv, root, env)
    row: dict[str, Any] = {"search_files": made["files"], "search_cold_ms": median_ms(cold),
                           "search_warm_ms": median_ms(warm), "search_changed_ms": median_ms(changed),
                           "python_ms": median_ms(floor), "search_help_ms": median_ms(helps)}
    row["warm/cold"] = ratio(row["search_warm_ms"], row["search_cold_ms"])
    return row


def edited_task(root: Path) -> Path:
    """The task file a change is made to between searches (one of the backlog's, always the same)."""
    found = sorted((root / "tasks" / "backlog").rglob("*.md"))
    return found[min(5, len(found) - 1)]


def run_all(*, files: int = GUARDKIT_FILES, repeat: int = 3, corpus: Path | None = None) -> dict[str, Any]:
    """Every case of this module, one dict."""
    return {**run_validate(files=files, repeat=repeat, corpus=corpus),
            **run_search(files=files, repeat=repeat, corpus=corpus)}
