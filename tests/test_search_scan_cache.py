"""The file scan's cache (``.guardkit/cache/search.json``): the same answers as a scan, invalidated
by any change of a file, and a phrase copied from a turn ranked before task titles sharing its words."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from guardkit_state.index import FileIndex, make_filters, scan_cache, scan_index
from guardkit_state.index.query import Filters, allowed, exact_answer, parse_query, time_of
from guardkit_state.index.scan_cache import search_cache_file, source_fingerprint
from guardkit_state.index.words import field_score, overlap_score
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


def _damage_record_line(data: bytes) -> bytes:
    lines = data.split(b"\n")
    lines[-1] = b'["x"]'  # a record line no version wrote, under the files' very fingerprint
    return b"\n".join(lines)


def _damage_a_tokens_records(data: bytes) -> bytes:
    head, where, rest = data.split(b"\n", 2)
    found = json.loads(where)
    found["postings"]["coverage"] = "1 x|1 1"
    return b"\n".join([head, json.dumps(found).encode(), rest])


def _search_after_damage(tmp_path: Path, damage: Callable[[bytes], bytes], monkeypatch: pytest.MonkeyPatch, *,
                         then: Callable[[Path], object] = lambda root: None) -> None:
    """Search, damage the cache file it wrote, ``then`` change the files, and search as the next process
    would: the answer is a scan's."""
    root = _project(tmp_path)
    FileIndex(root).search("coverage")
    cache = search_cache_file(root)
    cache.write_bytes(damage(cache.read_bytes()))
    then(root)
    monkeypatch.setattr(scan_cache, "_MEMO", {})  # the next process
    assert keys(FileIndex(root).search("coverage")) == _uncached(root, "coverage") != []


@pytest.mark.parametrize("damage", [
    pytest.param(_damage_record_line, id="a record line"),
    pytest.param(_damage_a_tokens_records, id="a token's records"),
    pytest.param(lambda data: data[: len(data) // 2], id="cut short"),
    pytest.param(lambda data: data.replace(b"\n", b" ", 2), id="no lines"),
    pytest.param(lambda data: b"{}", id="another shape"),
    pytest.param(lambda data: b"[" * 100_000 + data, id="a header nested deeper than the parser goes"),
    pytest.param(lambda data: data.replace(b"\n", b"\n" + b"[" * 100_000, 1), id="its index nested too deep"),
])
def test_a_damaged_cache_is_rebuilt_not_believed(tmp_path: Path, damage: Callable[[bytes], bytes],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _search_after_damage(tmp_path, damage, monkeypatch)


def _state_line(change: Callable[[dict[str, Any]], object]) -> Callable[[bytes], bytes]:
    def damage(data: bytes) -> bytes:
        head, where, state, rest = data.split(b"\n", 3)
        found = json.loads(state)
        change(found)
        return b"\n".join([head, where, json.dumps(found).encode(), rest])
    return damage


def _every_fact(value: object) -> Callable[[dict[str, Any]], object]:
    return lambda state: [facts.update(dict.fromkeys(facts, value)) for _, _, _, facts in state["files"].values()]


def _config_records(value: object) -> Callable[[dict[str, Any]], object]:
    return lambda state: state["files"][".guardkit/config"][3].update(records=value)


@pytest.mark.parametrize("damage", [
    pytest.param(lambda data: data.replace(b"\n", b"\n\n" + b"[" * 100_000, 2).replace(b"\n\n", b"\n", 1),
                 id="nested deeper than the parser goes"),
    pytest.param(_state_line(_config_records("many")), id="a count that is no number"),
    pytest.param(_state_line(_config_records(10**12)), id="a count no file gave"),
    pytest.param(_state_line(_config_records(-3)), id="a negative count"),
    *(pytest.param(_state_line(_every_fact(value)), id=f"facts of {value!r}")
      for value in ("x", 5, None, [1], {"a": 1})),
])
def test_a_damaged_state_of_the_files_is_rebuilt_after_a_change(tmp_path: Path, damage: Callable[[bytes], bytes],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # What each file gave (the line read only once a file changed): a cache no version wrote is
    # built again from the files, never a crash, a hang or another answer than a scan's.
    _search_after_damage(tmp_path, damage, monkeypatch, then=lambda root: write_turn(
        root, "FEAT-TOK", "TASK-TOK-004", 1, "feedback", feedback="coverage again"))


def test_a_relative_repository_path_reads_the_same_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path)
    FileIndex(root).search("coverage")
    monkeypatch.chdir(root)
    assert source_fingerprint(Path(".")) == source_fingerprint(root)
    assert all(key.startswith(("tasks/", ".guardkit/")) for key in source_fingerprint(Path(".")))


def test_a_query_reads_only_the_records_it_answers_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path)
    for n in range(3, 40):  # many records holding none of the query's words
        write_turn(root, "FEAT-TOK", "TASK-TOK-005", n, "feedback", feedback=f"Lint issue {n}.")
    FileIndex(root).search("coverage")  # the cache written
    monkeypatch.setattr(scan_cache, "_MEMO", {})  # the next process
    read: list[object] = []
    real = scan_index.record_from_row
    monkeypatch.setattr(scan_index, "record_from_row", lambda row: read.append(row) or real(row))
    hits = FileIndex(root).search("coverage is low", limit=3)
    answered = len(read)
    assert (hits[0].task_id, hits[0].turn_number) == ("TASK-TOK-003", 2)
    # The index says which records hold the words and how often: only the records scoring at least
    # the third answer's score are read (its ties too, for their fixed order), not the 50 others.
    tied = [h for h in FileIndex(root).search("coverage is low", limit=100) if h.score >= hits[-1].score]
    assert len(hits) == 3 and answered == len(tied) < 10
    assert len(scan_cache.cached_index(root).order) > 40


def test_a_phrase_of_word_fragments_is_found_as_the_scan_finds_it(tmp_path: Path) -> None:
    # "fresh tok" shares no word with any record (refresh, token): only the text holding it, as
    # written, makes the turn an answer, as scoring every record's text did.
    root = _project(tmp_path)
    hits = FileIndex(root).search("fresh tok")
    assert (hits[0].task_id, hits[0].turn_number) == ("TASK-TOK-003", 1)


def _scored_one_by_one(root: Path, text: str, filters: Filters, limit: int = 10) -> list[tuple[str, float]]:
    """The scan's rule applied to every record read from the files, one by one (the reference the
    index must agree with): the word overlap of its tokens, its fields, the phrase as written."""
    query = parse_query(text)
    pool = [r for r in FileIndex(root).records() if allowed(r, query, filters)]
    if not query.content_terms:
        return [(r.key, 1.0) for _, r in exact_answer(((r.key, r) for r in pool), query)[:query.limit(limit)]] \
            if query.constrained or filters.any else []
    words = text.strip().strip("\"'").lower().split()
    phrase = " ".join(words) if len(words) >= 2 else None
    scored = []
    for record in pool:
        score = overlap_score(query.terms, record.search_text) + field_score(query.text, record.fields)
        if phrase and phrase in " ".join(record.search_text.lower().split()):
            score += 1000.0
        if score > 0:
            scored.append((score, record))
    scored.sort(key=lambda item: (-item[0], item[1].task_id or "", item[1].turn_number or 0, item[1].key))
    if query.recency:
        scored.sort(key=lambda item: time_of(item[1]), reverse=True)
    return [(r.key, round(score, 4)) for score, r in scored[:query.limit(limit)]]


def test_the_index_answers_as_scoring_every_record_does(tmp_path: Path) -> None:
    from tests.bench.index_queryset import generate, questions

    root = tmp_path / "repo"
    asked = [(q.text, make_filters(**dict(q.filters))) for q in questions(generate(root))]
    asked += [(text, Filters()) for text in (
        "coach_decision rejected flaky", "mode fresh_start", "player_decision implemented tests", "the",
        "flaky tests in parallel runs", "fresh tok", "latency too high", "AC-001 criteria", "which feature",
        "turn 3 of TASK-PAY-003 latency", "last turn with coverage", '"Coverage below the required"')]
    for fresh in (True, False):  # the index built from the files, then read back from the cache
        scan_cache._MEMO.clear()
        if fresh:
            search_cache_file(root).unlink(missing_ok=True)
        for text, filters in asked:
            got = [(h.key, h.score) for h in FileIndex(root).search(text, limit=10, filters=filters)]
            assert got == _scored_one_by_one(root, text, filters), text
