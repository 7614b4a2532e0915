"""The file scan's cache (``.guardkit/cache/search.json``): the same answers as a scan, invalidated
by any change of a file, and a phrase copied from a turn ranked before task titles sharing its words."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from guardkit_state.index import FileIndex
from guardkit_state.index.scan_cache import search_cache_file, source_fingerprint
from tests.index_helpers import keys, write_task, write_turn

PHRASE = "the refresh token is never rotated after logout"


def _project(root: Path) -> Path:
    # Two task titles share most of the phrase's words; one turn's feedback holds it exactly.
    write_task(root, "TASK-TOK-001", "Refresh token rotated after logout, never stale", status="backlog")
    write_task(root, "TASK-TOK-002", "The refresh token after logout is never rotated twice", status="backlog")
    write_turn(root, "FEAT-TOK", "TASK-TOK-003", 1, "feedback", feedback=f"Blocking: {PHRASE}. Fix and retest.")
    write_turn(root, "FEAT-TOK", "TASK-TOK-003", 2, "feedback", feedback="Coverage is low.")
    return root


def _uncached(root: Path, query: str) -> list[str]:
    search_cache_file(root).unlink(missing_ok=True)
    hits = keys(FileIndex(root).search(query))
    search_cache_file(root).unlink(missing_ok=True)
    return hits


def test_an_exact_phrase_from_a_turn_ranks_first(tmp_path: Path) -> None:
    root = _project(tmp_path)
    hits = FileIndex(root).search(PHRASE)
    assert hits[0].task_id == "TASK-TOK-003" and hits[0].turn_number == 1
    assert {h.task_id for h in hits[1:3]} == {"TASK-TOK-001", "TASK-TOK-002"}
    # Quotes, case and spacing do not matter.
    assert FileIndex(root).search(f'"{PHRASE.upper()}"  ')[0].turn_number == 1


def test_the_cache_answers_as_the_scan_does_and_follows_every_change(tmp_path: Path) -> None:
    root = _project(tmp_path)
    first = keys(FileIndex(root).search("coverage"))
    assert search_cache_file(root).is_file()
    assert keys(FileIndex(root).search("coverage")) == first == _uncached(root, "coverage")

    # A file changed (same size, same mtime: ctime and inode still tell), added, removed.
    turn = root / ".guardkit" / "autobuild" / "TASK-TOK-003" / "turn_state_turn_2.json"
    stat = turn.stat()
    turn.write_text(turn.read_text().replace("Coverage is low.", "Latency is up!!"))
    os.utime(turn, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    FileIndex(root).search("coverage")  # fills the cache again
    assert keys(FileIndex(root).search("latency")) == _uncached(root, "latency") != []
    write_turn(root, "FEAT-TOK", "TASK-TOK-004", 1, "feedback", feedback="latency again")
    assert "TASK-TOK-004" in {h.task_id for h in FileIndex(root).search("latency")}
    (root / ".guardkit" / "autobuild" / "TASK-TOK-004" / "turn_state_turn_1.json").unlink()
    assert "TASK-TOK-004" not in {h.task_id for h in FileIndex(root).search("latency")}


def test_a_damaged_cache_is_rebuilt_not_believed(tmp_path: Path) -> None:
    root = _project(tmp_path)
    FileIndex(root).search("coverage")
    cache = json.loads(search_cache_file(root).read_text())
    cache["records"] = [["x"]]  # the files' very fingerprint, records no version wrote
    search_cache_file(root).write_text(json.dumps(cache))
    assert keys(FileIndex(root).search("coverage")) == _uncached(root, "coverage") != []


def test_a_relative_repository_path_reads_the_same_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path)
    FileIndex(root).search("coverage")
    monkeypatch.chdir(root)
    assert source_fingerprint(Path(".")) == source_fingerprint(root)
    assert all(key.startswith(("tasks/", ".guardkit/")) for key in source_fingerprint(Path(".")))
