"""The read caches (``.guardkit/cache/NAME.json``): an entry serves only while its file's signature
is unchanged, a file changed within the racy window is never kept, the cache is saved once when a
read ends and never by a process that switched writes off, and a damaged cache is only a re-read."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from guardkit_state.store import stat_cache
from guardkit_state.store.stat_cache import StatCache, batch, signature_of

from .helpers import killed_and_live_temp_files


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test a new process: no cache loaded, writes on."""
    monkeypatch.setattr(stat_cache, "_LOADED", {})
    monkeypatch.setitem(stat_cache._WRITES, "enabled", True)
    yield


def _settled(path: Path, text: str) -> list[int]:
    """Write ``path`` and date it (mtime and, by a rename, ctime cannot be set back: the racy window
    is opened for the test instead)."""
    path.write_text(text, encoding="utf-8")
    sig = signature_of(path)
    assert sig is not None
    return sig


def test_an_entry_serves_only_while_the_file_is_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stat_cache, "RACY_NS", 0)
    path = tmp_path / "a.md"
    sig = _settled(path, "one")
    cache = StatCache.of(tmp_path, "t", 1)
    cache.put("a.md", sig, "fact", {"n": 1})
    assert cache.entry("a.md", signature_of(path)) == {"sig": sig, "fact": {"n": 1}}
    path.write_text("two", encoding="utf-8")  # same size, new ctime
    assert cache.entry("a.md", signature_of(path)) is None


def test_a_file_changed_within_the_racy_window_is_not_kept(tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    sig = _settled(path, "just now")
    cache = StatCache.of(tmp_path, "t", 1)
    cache.put("a.md", sig, "fact", 1)
    assert cache.entry("a.md", sig) is None and not cache.dirty


def test_a_read_saves_once_at_its_end_and_the_next_process_reads_it(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stat_cache, "RACY_NS", 0)
    path = tmp_path / "a.md"
    sig = _settled(path, "one")
    file = tmp_path / ".guardkit" / "cache" / "t.json"
    with batch():
        StatCache.of(tmp_path, "t", 1).put("a.md", sig, "fact", 7)
        assert not file.exists()  # not before the read ends
    assert json.loads(file.read_text(encoding="utf-8"))["files"]["a.md"] == {"sig": sig, "fact": 7}
    assert (file.parent / ".gitignore").read_text() == "*\n"
    monkeypatch.setattr(stat_cache, "_LOADED", {})  # the next process
    assert StatCache.of(tmp_path, "t", 1).entry("a.md", sig) == {"sig": sig, "fact": 7}
    assert StatCache.of(tmp_path, "t", 2).entry("a.md", sig) is None  # another version: rebuilt, never misread


def test_nothing_is_saved_outside_a_read_or_with_writes_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stat_cache, "RACY_NS", 0)
    sig = _settled(tmp_path / "a.md", "one")
    StatCache.of(tmp_path, "t", 1).put("a.md", sig, "fact", 1)  # a write command: kept in memory only
    assert not (tmp_path / ".guardkit").exists()
    stat_cache.disable_writes()
    with batch():
        StatCache.of(tmp_path, "t", 1).put("a.md", sig, "fact", 2)
    assert not (tmp_path / ".guardkit").exists()


@pytest.mark.parametrize("damage", [b"{not json", b"[]", b'{"version": 1, "files": []}', b"\xff\xfe"])
def test_a_damaged_cache_is_only_a_re_read(tmp_path: Path, damage: bytes) -> None:
    file = tmp_path / ".guardkit" / "cache" / "t.json"
    file.parent.mkdir(parents=True)
    file.write_bytes(damage)
    cache = StatCache.of(tmp_path, "t", 1)
    assert cache.entries == {} and cache.entry("a.md", [1, 2, 3, 4]) is None


def test_retain_forgets_files_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stat_cache, "RACY_NS", 0)
    cache = StatCache.of(tmp_path, "t", 1)
    for name in ("a.md", "b.md"):
        cache.put(name, _settled(tmp_path / name, name), "fact", name)
    os.unlink(tmp_path / "b.md")
    cache.retain(["a.md"])
    assert list(cache.entries) == ["a.md"]


def test_a_save_removes_the_temp_file_a_killed_save_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A kill between a save's temp write and its rename leaves ``.gks-tmp-t.json.<pid>.<ns>`` for good
    # unless a later save sweeps the folder; a live writer's temp file (this process's) is kept.
    monkeypatch.setattr(stat_cache, "RACY_NS", 0)
    folder = tmp_path / ".guardkit" / "cache"
    folder.mkdir(parents=True)
    _, live = killed_and_live_temp_files(folder, "t.json", '{"version": 1, "fi')
    path = tmp_path / "a.md"
    with batch():
        StatCache.of(tmp_path, "t", 1).put("a.md", _settled(path, "one"), "fact", 1)
    assert sorted(p.name for p in folder.iterdir()) == sorted([".gitignore", live.name, "t.json"])
