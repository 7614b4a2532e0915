"""The real GuardKit corpus laid out as a repository: every task ``status`` lists opens.

``../shared/corpus/guardkit/tasks`` is copied to a temporary git repository's ``tasks/`` and its
feature plans to ``.guardkit/features/``, as GuardKit keeps them. ``status --json`` runs through the
real CLI; every id it lists goes through ``show`` and ``context`` (in-process through the CLI's own
entry point, a sample as real subprocesses): each opens, or fails with a typed one-line error.
Duplicate ids must resolve by the rules, and ``status`` and ``show`` must agree on the copy.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from guardkit_state.cli.app import run as cli_run
from guardkit_state.errors import GuardkitStateError
from guardkit_state.taskfile.discovery import task_copies
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.taskfile.resolve import search_rank

from .conftest import writable_copy

pytestmark = [pytest.mark.corpus, pytest.mark.slow]

CLI = Path(sys.executable).parent / "guardkit-state"
GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.com"}


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | GIT_ENV | {"NO_COLOR": "1"}


@pytest.fixture(scope="module")
def corpus_repo(corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus-repo") / "repo"
    writable_copy(corpus_dir / "tasks", root / "tasks")
    writable_copy(corpus_dir / "features", root / ".guardkit" / "features")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "corpus"]):
        subprocess.run(["git", *args], cwd=root, env=clean_env(), check=True, capture_output=True)
    return root


@pytest.fixture(scope="module")
def rows(corpus_repo: Path) -> list[dict[str, Any]]:
    result = subprocess.run([str(CLI), "status", "--json", "--repo", str(corpus_repo)], capture_output=True,
                            text=True, env=clean_env(), timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    listed: list[dict[str, Any]] = json.loads(result.stdout)
    assert len(listed) > 100  # the corpus holds ~200 tasks with loop state
    return listed


def run_in_process(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_run(list(argv))
    return code, out.getvalue(), err.getvalue()


def assert_opens_or_typed_error(code: int, stderr: str, what: str) -> None:
    assert "Traceback" not in stderr and "unexpected" not in stderr, f"{what}: {stderr}"
    if code != 0:
        errors = [line for line in stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and code in (1, 2), f"{what}: exit {code}: {stderr}"


def test_every_listed_task_opens_with_show_and_context(corpus_repo: Path, rows: list[dict[str, Any]]) -> None:
    failures: dict[str, str] = {}
    for row in rows:
        task_id = row["task_id"]
        code, out, err = run_in_process("show", task_id, "--json", "--repo", str(corpus_repo))
        assert_opens_or_typed_error(code, err, f"show {task_id}")
        if code == 0:
            shown = json.loads(out)
            # status and show read the same copy
            assert (shown["resolved"] or {}).get("path", row["path"]) == row["path"], task_id
            assert len(shown["turns"]) == row["turns"], task_id
        elif row["error"] is None:
            failures[f"show {task_id}"] = err.strip()
        code, out, err = run_in_process("context", task_id, "--json", "--repo", str(corpus_repo))
        assert_opens_or_typed_error(code, err, f"context {task_id}")
        if code == 0:
            assert json.loads(out)["turn"] >= 1
        elif row["error"] is None:
            failures[f"context {task_id}"] = err.strip()
    # Only files status itself reports unreadable may fail to open; GuardKit's own files all read
    # (a repeated key is read as its last value, as GuardKit reads it).
    assert failures == {}
    assert [row["task_id"] for row in rows if row["error"] is not None] == []


def test_a_sample_through_the_real_cli(corpus_repo: Path, rows: list[dict[str, Any]]) -> None:
    duplicated = [r for r in rows if r["resolved"]][:6]
    sample = duplicated + rows[:: max(1, len(rows) // 6)][:6]
    for row in sample:
        for command in (["show", row["task_id"]], ["context", row["task_id"]], ["log", row["task_id"]],
                        ["show", row["path"], "--json"]):
            result = subprocess.run([str(CLI), *command, "--repo", str(corpus_repo)], capture_output=True,
                                    text=True, env=clean_env(), timeout=120, check=False)
            assert_opens_or_typed_error(result.returncode, result.stderr, " ".join(command))
            if row["resolved"] and command[0] == "show" and len(command) == 2:
                notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
                assert len(notes) == 1 and row["resolved"]["path"] in notes[0], result.stderr


def test_duplicate_ids_resolve_by_the_rules(corpus_repo: Path, rows: list[dict[str, Any]]) -> None:
    planned = set()
    for plan in (corpus_repo / ".guardkit" / "features").glob("FEAT-*.yaml"):
        data = yaml.safe_load(plan.read_text(encoding="utf-8")) or {}
        planned |= {str(t.get("file_path")) for t in data.get("tasks") or [] if isinstance(t, dict)}
    checked = 0
    for row in rows:
        if not row["resolved"]:
            continue
        copies = [p.relative_to(corpus_repo).as_posix() for p in task_copies(corpus_repo, row["task_id"])]
        assert sorted([row["resolved"]["path"], *row["resolved"]["others"]]) == sorted(copies)
        pool = [c for c in copies if holds_state(corpus_repo / c)] or copies
        assert row["path"] in pool, f"{row['task_id']}: a copy without state won over one with state"
        named = [c for c in pool if c in planned]
        expected = min(named or pool, key=search_rank)
        assert row["path"] == expected, f"{row['task_id']}: {row['resolved']}"
        checked += 1
    assert checked >= 10  # the corpus has dozens of duplicated ids among its tasks with state


def holds_state(path: Path) -> bool:
    try:
        return TaskFile.load(path).state is not None
    except GuardkitStateError:
        return b"\nautobuild_state:" in path.read_bytes() or b"\nfeature_build:" in path.read_bytes()
