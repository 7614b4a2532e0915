"""The search scan cache after a change: only the files that changed are read again, and the index
is exactly the one a scan of every file builds (turns, task files and the turns they list, plans
giving a task its feature, a loop's worktree copy)."""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from guardkit_state.index import FileIndex, scan_cache, scan_update
from guardkit_state.index.readings import Source
from guardkit_state.index.records import IndexRecord
from guardkit_state.index.scan_cache import search_cache_file, source_fingerprint
from guardkit_state.index.scan_index import ScanIndex, row_line
from guardkit_state.store import stat_cache
from tests.guardkit_fixtures import feedback_turns, task_text
from tests.index_helpers import keys, write_plan, write_task, write_turn

QUERIES = ("coverage", "token refresh", "turn TASK-UPD-002", "feature FEAT-UPD", "status backlog", "lint issue",
           "coach_decision rejected")


@pytest.fixture(autouse=True)
def _settled_at_once(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # Every file counts as settled as soon as it is written (each change below gives its file a
    # signature of its own: see _touched); the racy window is stat_cache's, tested there.
    monkeypatch.setattr(stat_cache, "RACY_NS", 0)
    monkeypatch.setattr(scan_cache, "_MEMO", {})
    yield


_TICK = [1_700_000_000_000_000_000]


def _touched(path: Path) -> Path:
    """``path`` given an mtime no other write had (a change within one clock tick keeps its size
    and mtime otherwise)."""
    _TICK[0] += 1_000_000
    os.utime(path, ns=(_TICK[0], _TICK[0]))
    return path


def _project(root: Path) -> Path:
    write_turn(root, "FEAT-UPD", "TASK-UPD-001", 1, "feedback", feedback="Coverage is low.")
    write_turn(root, "FEAT-UPD", "TASK-UPD-001", 2, "rejected", blockers=("token refresh missing",))
    write_turn(root, "FEAT-UPD", "TASK-UPD-002", 1, "approved")
    write_task(root, "TASK-UPD-001", "Refresh the token", status="in_progress", feature="FEAT-UPD",
               criteria=("AC-001: tokens rotate",))
    write_task(root, "TASK-UPD-003", "Fix the lint issue", status="backlog")
    listed = root / "tasks" / "in_progress" / "TASK-UPD-002.md"  # GuardKit's state block: turns it lists
    listed.write_text(task_text("TASK-UPD-002", "# Two\n", turns=feedback_turns(3, "Coverage below 80%")))
    write_plan(root, "FEAT-UPD", "Updates", [{"id": "TASK-UPD-001"}, {"id": "TASK-UPD-002"}, {"id": "TASK-UPD-003"}])
    write_task(root / ".guardkit" / "worktrees" / "TASK-UPD-003", "TASK-UPD-003", "Fix the lint issue (loop copy)",
               status="in_progress")
    for path in root.rglob("*"):
        if path.is_file():
            _touched(path)
    return root


def _rows(index: ScanIndex) -> tuple[object, ...]:
    """All the index holds, by the records' order (not their positions): each record as kept and its
    phrase, each token's and each field's records (a record left behind at a free position fails)."""
    where, phrases, _ = index.encoded()
    lines = phrases.split(b"\n")
    rank = {position: at for at, position in enumerate(index.order)}
    postings = {token: sorted((rank[position], count) for position, count in index.counts(token).items())
                for token in where["postings"]}
    fields = {name: sorted(rank[position] for position in index.having_field(name)) for name in where["fields"]}
    return [(row_line(index.record(position)), lines[position]) for position in index.order], postings, fields


def _cold(root: Path) -> tuple[object, ...]:
    """The records a scan of every file gives, in order (no cache, nothing remembered)."""
    return _rows(scan_update.update(root, None, None, source_fingerprint(root)).index)


def _next_process() -> None:
    scan_cache._MEMO.clear()


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    read: list[str] = []
    real = scan_update.read_source

    def counted(root: Path, source: Source, group: str) -> object:
        read.append(source.path)
        return real(root, source, group)

    monkeypatch.setattr(scan_update, "read_source", counted)
    return read


def _edit_task(root: Path) -> list[str]:
    path = root / "tasks" / "backlog" / "TASK-UPD-003.md"
    path.write_text(path.read_text().replace("Fix the lint issue", "Fix the coverage gap"))
    _touched(path)
    return ["tasks/backlog/TASK-UPD-003.md"]


def _record_turn(root: Path) -> list[str]:
    _touched(write_turn(root, "FEAT-UPD", "TASK-UPD-001", 3, "approved", feedback="coverage fine now"))
    return [".guardkit/autobuild/TASK-UPD-001/turn_state_turn_3.json"]


def _turn_hiding_a_listed_one(root: Path) -> list[str]:
    _touched(write_turn(root, "FEAT-UPD", "TASK-UPD-002", 2, "rejected", feedback="token refresh broke"))
    return [".guardkit/autobuild/TASK-UPD-002/turn_state_turn_2.json"]


def _delete_turn(root: Path) -> list[str]:
    (root / ".guardkit" / "autobuild" / "TASK-UPD-002" / "turn_state_turn_1.json").unlink()
    return ["tasks/in_progress/TASK-UPD-002.md"]  # its listed turn 1 shows again: read for its record


def _delete_task(root: Path) -> list[str]:
    (root / "tasks" / "backlog" / "TASK-UPD-003.md").unlink()
    return []


def _plan_drops_a_task(root: Path) -> list[str]:
    _touched(write_plan(root, "FEAT-UPD", "Updates", [{"id": "TASK-UPD-001"}, {"id": "TASK-UPD-002"}]))
    # Its task loses the feature: the copy read (its loop's) read again for that record.
    return [".guardkit/features/FEAT-UPD.yaml", ".guardkit/worktrees/TASK-UPD-003/tasks/in_progress/TASK-UPD-003.md"]


CHANGES = {"edit a task file": _edit_task, "record a turn": _record_turn,
           "a turn file hiding a listed turn": _turn_hiding_a_listed_one, "delete a turn file": _delete_turn,
           "delete a task file": _delete_task, "a plan drops a task": _plan_drops_a_task}


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
@pytest.mark.parametrize("remembered", [False, True], ids=["next process", "same server"])
def test_update_after_one_change_answers_as_a_cold_scan(tmp_path: Path, change: Callable[[Path], list[str]],
                                                        remembered: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path)
    FileIndex(root).search("coverage")  # the cache written
    change(root)
    if not remembered:
        _next_process()
    got = {query: [(h.key, h.score) for h in FileIndex(root).search(query, limit=20)] for query in QUERIES}
    assert _rows(scan_cache.cached_index(root)) == _cold(root)
    assert _rows(scan_cache.cached_index(root))[0] == [(row_line(r), _phrase(r)) for r in FileIndex(root).records()]
    _next_process()
    search_cache_file(root).unlink()
    assert got == {query: [(h.key, h.score) for h in FileIndex(root).search(query, limit=20)] for query in QUERIES}


def _phrase(record: IndexRecord) -> bytes:
    return " ".join(record.search_text.lower().split()).encode()


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
def test_update_reads_only_the_files_that_changed(tmp_path: Path, change: Callable[[Path], list[str]],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path)
    read = _counting(monkeypatch)
    FileIndex(root).search("coverage")
    assert len(read) >= 6  # built from every file
    read.clear()
    _next_process()
    FileIndex(root).search("coverage")
    assert read == []  # nothing changed: nothing read
    expected = change(root)
    _next_process()
    FileIndex(root).search("coverage")
    assert sorted(read) == sorted(expected)


def test_a_file_changed_just_now_is_read_again_next_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path)
    FileIndex(root).search("coverage")
    monkeypatch.setattr(stat_cache, "RACY_NS", 10**18)  # every file changed "just now"
    path = root / "tasks" / "in_progress" / "TASK-UPD-001.md"
    path.write_text(path.read_text().replace("Refresh the token", "Flake the token"))
    _touched(path)
    read = _counting(monkeypatch)
    _next_process()
    FileIndex(root).search("flake")
    _next_process()
    hits = FileIndex(root).search("flake")
    # Read at both searches (its signature not kept: a change in the same tick could keep it).
    assert read.count("tasks/in_progress/TASK-UPD-001.md") == 2 and hits[0].task_id == "TASK-UPD-001"


def _random_change(root: Path, rng: random.Random, n: int) -> None:
    tasks = sorted((root / "tasks").rglob("*.md"))
    turns = sorted((root / ".guardkit" / "autobuild").rglob("turn_state_turn_*.json"))
    what = rng.choice(["edit", "edit", "add_task", "add_turn", "remove", "plan", "listed"])
    if what == "edit" and tasks:
        path = rng.choice(tasks)
        word = rng.choice(["lint", "token", "x" * n, "5\u212a kelvin", "café"])  # K: Kelvin, lower-cased "k"
        path.write_text(path.read_text().replace("\n# ", f"\n# coverage {word} "))
        _touched(path)
    elif what == "add_task":
        task = f"TASK-UPD-{rng.randint(1, 9):03d}"
        _touched(write_task(root, task, f"Random {n} token", status=rng.choice(["backlog", "in_progress"]),
                            folder=rng.choice(["backlog", "completed"]), feature=rng.choice([None, "FEAT-UPD"])))
    elif what == "add_turn":
        task = f"TASK-UPD-{rng.randint(1, 4):03d}"
        _touched(write_turn(root, "FEAT-UPD", task, rng.randint(1, 4), rng.choice(["feedback", "approved"]),
                            feedback=f"coverage round {n}"))
    elif what == "remove" and (tasks or turns):
        rng.choice(tasks + turns).unlink()
    elif what == "plan":
        wanted = sorted(rng.sample([f"TASK-UPD-{i:03d}" for i in range(1, 7)], rng.randint(0, 4)))
        _touched(write_plan(root, rng.choice(["FEAT-UPD", "FEAT-TWO"]), f"Plan {n}", [{"id": t} for t in wanted]))
    else:
        path = root / "tasks" / "in_progress" / f"TASK-UPD-00{rng.randint(2, 5)}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(task_text(path.stem, "# Listed\n", turns=feedback_turns(rng.randint(1, 4), f"lint {n}")))
        _touched(path)


@pytest.mark.parametrize("seed", range(6))
def test_random_changes_update_to_the_cold_scan(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    root = _project(tmp_path / "repo")
    FileIndex(root).search("coverage")
    for n in range(12):
        for _ in range(rng.randint(1, 3)):
            _random_change(root, rng, n)
        if rng.random() < 0.5:
            _next_process()
        assert _rows(scan_cache.cached_index(root)) == _cold(root), f"seed {seed}, step {n}"
        query = rng.choice(QUERIES)
        incremental = keys(FileIndex(root).search(query, limit=50))
        shutil.copy(search_cache_file(root), tmp_path / "kept.json")
        _next_process()
        search_cache_file(root).unlink()
        assert incremental == keys(FileIndex(root).search(query, limit=50)), f"seed {seed}, step {n}: {query}"
        shutil.copy(tmp_path / "kept.json", search_cache_file(root))  # the incremental cache goes on
        _next_process()


def test_a_record_whose_text_lower_cases_to_other_words_leaves_the_index_whole(tmp_path: Path) -> None:
    # "5\u212a" (Kelvin) is the word "5" as written, "5k" lower-cased: its record's tokens are read
    # from its own text, not from its phrase, when the record is replaced.
    root = _project(tmp_path)
    _touched(write_task(root, "TASK-UPD-009", "Cooled to 5\u212a, café", status="backlog"))
    FileIndex(root).search("coverage")
    _touched(write_task(root, "TASK-UPD-009", "Warmed to 9, café", status="backlog"))
    _next_process()
    assert _rows(scan_cache.cached_index(root)) == _cold(root)
    assert FileIndex(root).search("warmed")[0].task_id == "TASK-UPD-009"
