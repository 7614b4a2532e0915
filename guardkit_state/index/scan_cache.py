"""The file scan's cache: every record as searched, and its index, in ``.guardkit/cache/search.json``.

Reading every task file, turn and plan costs seconds on a large repository, and searches ask the
same files again and again. The cache keeps the signature (size, mtime, ctime, inode) of every file
under ``tasks/`` and ``.guardkit/`` (checkout and loop worktrees); any change rebuilds it whole. It
is never trusted over the files: unreadable or another version's, it is rebuilt; unwritable, the
next search scans.

With the records it keeps their index (:class:`ScanIndex`): the records holding each token and how
often, every record's text as a phrase is looked for, and the records having each field. A query
then scores only the records that can score at all (the ranking rule is the scan's own,
:func:`guardkit_state.index.files.rank`): on GuardKit's 3,751 records a phrase of eight words was
~85 ms of tokens counted record by record, and is a few milliseconds through the index.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import os
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from guardkit_state.errors import GuardkitStateError
from guardkit_state.index.records import IndexRecord
from guardkit_state.index.words import tokens
from guardkit_state.store.fsio import atomic_write_bytes, ensure_private_dir
from guardkit_state.store.layout import status_cache_file
from guardkit_state.store.reads import read_bytes_capped
from guardkit_state.store.stat_cache import writes_enabled
from guardkit_state.taskfile.read_scope import generation

#: Bumped whenever a record's or the index's shape changes: an older cache is rebuilt, never misread.
CACHE_VERSION = 3
_READ_LIMIT = 512 * 1024 * 1024
#: The folders of a checkout whose files records come from, and the ones inside them that hold none.
_SOURCES = ("tasks", ".guardkit")
_SKIPPED = frozenset({"cache", "worktrees", ".work", "graphiti", "index", "logs", ".git", "__pycache__"})
_SUFFIXES = (".md", ".json", ".yaml", ".yml")


def search_cache_file(root: Path) -> Path:
    """``.guardkit/cache/search.json``, beside ``status``'s cache."""
    return status_cache_file(root).with_name("search.json")


class DamagedCache(ValueError):
    """A part of the cache read only when a search asks for it does not read back: the cache is
    rebuilt from the files (never believed)."""


class ScanIndex:
    """The scan's records (search-only: their text is held by the index, not by the record) and
    what a query asks of them, each answered without reading every record:

    * :meth:`counts`: the records holding a token (:func:`~guardkit_state.index.words.tokens` of
      their search text), with how many times;
    * :meth:`holding_phrase`: the records whose text, lower-cased with its spacing collapsed, holds
      a phrase;
    * :meth:`having_field`: the records with a field of that name (``coach_decision``).

    Read from the cache, a part is decoded when a query first asks for it (a record's line, a
    token's records). Shared by the threads of a server: what it decodes is only ever added, whole.
    """

    def __init__(self, rows: list[Any], postings: dict[str, Any], fields: dict[str, Any], phrases: bytes) -> None:
        #: Each record, or (from the cache) its JSON line until it is first asked for.
        self._rows = rows
        #: token -> {record position: count}; from the cache, the encoded text until first asked.
        self._postings = postings
        #: field name (lower-cased) -> the positions of the records having it (encoded, from the cache).
        self._fields = fields
        #: Every record's text lower-cased, its spacing collapsed, in UTF-8: one line per record.
        self.phrases = phrases
        self._starts: list[int] | None = None

    def __len__(self) -> int:
        return len(self._rows)

    @classmethod
    def build(cls, records: list[IndexRecord]) -> ScanIndex:
        """The index of ``records`` (read from the files), keeping their search text out of them."""
        postings: dict[str, dict[int, int]] = {}
        fields: dict[str, list[int]] = {}
        lines = []
        for position, record in enumerate(records):
            for token, count in Counter(tokens(record.search_text)).items():
                postings.setdefault(token, {})[position] = count
            for name in dict.fromkeys(key.lower() for key in record.fields):
                fields.setdefault(name, []).append(position)
            lines.append(" ".join(record.search_text.lower().split()))
        return cls([_searched(record) for record in records], dict(postings), dict(fields),
                   _utf8("\n".join(lines)))

    def record(self, position: int) -> IndexRecord:
        """The record at ``position`` (read from its cached line the first time it is asked for).

        Raises:
            DamagedCache: the line does not read back as a record, or there is no such record.
        """
        try:
            row = self._rows[position]
            if isinstance(row, bytes):
                row = self._rows[position] = record_from_dict(json.loads(row))
        except (IndexError, KeyError, TypeError, ValueError) as exc:
            raise DamagedCache(f"record {position}: {exc}") from exc
        found: IndexRecord = row
        return found

    @property
    def records(self) -> list[IndexRecord]:
        """Every record, in order."""
        return [self.record(position) for position in range(len(self._rows))]

    def counts(self, token: str) -> dict[int, int]:
        """The position of every record holding ``token``, with how many times it does."""
        found = self._postings.get(token)
        if isinstance(found, str):
            try:
                found = self._postings[token] = _decode_counts(found)
            except ValueError as exc:
                raise DamagedCache(f"the records of {token!r}: {exc}") from exc
        return found if isinstance(found, dict) else {}

    def having_field(self, name: str) -> list[int]:
        """The positions of the records with a field named ``name`` (lower-cased)."""
        found = self._fields.get(name)
        if isinstance(found, str):
            try:
                found = self._fields[name] = [int(at) for at in found.split()]
            except ValueError as exc:
                raise DamagedCache(f"the records with {name!r}: {exc}") from exc
        return found if isinstance(found, list) else []

    def holding_phrase(self, phrase: str) -> set[int]:
        """The positions of the records whose text (lower-cased, spacing collapsed) holds ``phrase``
        (itself lower-cased, single-spaced, without a line break)."""
        if self._starts is None:
            starts, at = [0], self.phrases.find(b"\n")
            while at >= 0:
                starts.append(at + 1)
                at = self.phrases.find(b"\n", at + 1)
            self._starts = starts
        wanted = _utf8(phrase)  # UTF-8 is self-synchronising: a match in bytes is a match in text
        found: set[int] = set()
        at = self.phrases.find(wanted)
        while at >= 0:
            line = bisect.bisect_right(self._starts, at) - 1
            found.add(line)
            if line + 1 >= len(self._starts):
                break
            at = self.phrases.find(wanted, self._starts[line + 1])  # a record counts once
        return found

    def to_bytes(self, fingerprint: str) -> bytes:
        """The cache file: a header line (the version, ``fingerprint``, how many records, how long
        the phrases are), a line of the tokens' and fields' records, the phrases (a line per
        record), then a JSON line per record. A search parses the header, that line and the lines
        of the records it answers with, nothing else."""
        header = {"version": CACHE_VERSION, "fingerprint": fingerprint, "records": len(self._rows),
                  "phrases": len(self.phrases)}
        where = {"postings": {token: _encode_counts(self.counts(token)) for token in list(self._postings)},
                 "fields": {name: " ".join(map(str, self.having_field(name))) for name in list(self._fields)}}
        rows = [_utf8(json.dumps(record_to_dict(self.record(position)), default=str))
                for position in range(len(self._rows))]
        return b"\n".join([_utf8(json.dumps(header)), _utf8(json.dumps(where)), self.phrases, *rows])

    @classmethod
    def from_bytes(cls, data: bytes, fingerprint: str) -> ScanIndex | None:
        """The index :meth:`to_bytes` wrote for ``fingerprint``; None for another version's, another
        fingerprint's, or one no version wrote."""
        end = data.find(b"\n")
        try:
            header = json.loads(data[:end] if end >= 0 else data)
        except ValueError:
            return None
        if not isinstance(header, dict) or header.get("version") != CACHE_VERSION \
                or header.get("fingerprint") != fingerprint:
            return None  # the usual "changed": said before anything else is parsed
        count, length = header.get("records"), header.get("phrases")
        if end < 0 or not isinstance(count, int) or not isinstance(length, int) or count < 0 or length < 0:
            return None
        # Sliced by offset: the rest of the file (megabytes) is never copied whole.
        start = data.find(b"\n", end + 1) + 1
        rows_at = start + length + 1
        try:
            where = json.loads(data[end + 1:start - 1]) if start > 0 else None
        except ValueError:
            return None
        phrases = data[start:start + length]
        lines = data[rows_at:].split(b"\n") if rows_at < len(data) else []
        if not isinstance(where, dict) or not isinstance(where.get("postings"), dict) \
                or not isinstance(where.get("fields"), dict) or data[start + length:rows_at] not in (b"\n", b"") \
                or len(lines) != count or phrases.count(b"\n") + 1 != max(1, count):
            return None
        return cls(lines, where["postings"], where["fields"], phrases)


def _utf8(text: str) -> bytes:
    # A lone surrogate (never in a decoded file, but a record's text is not checked here) passes.
    return text.encode("utf-8", "surrogatepass")


def _encode_counts(counts: dict[int, int]) -> str:
    """``{3: 1, 7: 2}`` -> ``"3 7|1 2"``: the positions, then their counts."""
    return f"{' '.join(map(str, counts))}|{' '.join(map(str, counts.values()))}"


def _decode_counts(text: str) -> dict[int, int]:
    positions, _, counts = text.partition("|")
    found = dict(zip(map(int, positions.split()), map(int, counts.split()), strict=True))
    return found


#: This process's index, by checkout, with the fingerprint it was read at and the generation of
#: the checkout's watch then (:func:`~guardkit_state.taskfile.read_scope.generation`): a long-running
#: process (the MCP server) searches it again without reading the cache file while no file changed,
#: and without a stat of every file while its watch says nothing changed.
_MEMO: dict[str, tuple[str, int | None, ScanIndex]] = {}


def cached_index(root: Path, load: Callable[[], list[IndexRecord]], *, rebuild: bool = False) -> ScanIndex:
    """The index of the records ``load`` reads from the files of ``root`` (from the cache while no
    file changed; ``rebuild``: from the files, the cache found damaged)."""
    key = os.path.abspath(root)
    watched = generation(Path(key).resolve())  # asked before anything is read: a change meanwhile moves it
    known = _MEMO.get(key)
    if known is not None and not rebuild and watched is not None and known[1] == watched:
        return known[2]
    fingerprint = fingerprint_text(source_fingerprint(root))
    if known is not None and known[0] == fingerprint and not rebuild:
        _MEMO[key] = (fingerprint, watched, known[2])
        return known[2]
    index = None if rebuild else _load(root, fingerprint)
    if index is None:
        index = ScanIndex.build(load())
        _save(root, fingerprint, index)
    _MEMO[key] = (fingerprint, watched, index)
    return index


def fingerprint_text(fingerprint: dict[str, list[int]]) -> str:
    """:func:`source_fingerprint` as one text, the same for the same files whatever order they
    were listed in (compared whole: no parse of thousands of entries to tell nothing changed)."""
    return "\0".join(f"{path}\0{size} {mtime} {ctime} {inode}"
                      for path, (size, mtime, ctime, inode) in sorted(fingerprint.items()))


def source_fingerprint(root: Path) -> dict[str, list[int]]:
    """Every file records may come from, by path relative to ``root``: its signature."""
    root = Path(os.path.abspath(root))  # every walked path then starts with it (a relative "." would not)
    found: dict[str, list[int]] = {}
    checkouts = [root]
    with contextlib.suppress(OSError):
        checkouts += sorted(p for p in (root / ".guardkit" / "worktrees").iterdir() if p.is_dir())
    prefix = len(os.fspath(root)) + 1
    for checkout in checkouts:
        for folder in _SOURCES:
            for entry in _walk(checkout / folder):
                with contextlib.suppress(OSError):
                    stat = entry.stat()
                    found[entry.path[prefix:]] = [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]
    return found


def _walk(top: Path) -> Iterator[os.DirEntry[str]]:
    stack = [str(top)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in _SKIPPED:
                    stack.append(entry.path)
            elif entry.name.endswith(_SUFFIXES):
                yield entry


#: What the scan ranks and answers with, in this order: a record's graph side (its data, facts and
#: entities) is for the Graphiti index, which never reads this cache; its search text is the index's.
_SEARCHED = ("key", "kind", "group_id", "name", "summary", "fields", "source_path", "task_id",
             "feature_id", "turn_number", "completed_at", "criteria")


def _searched(record: IndexRecord) -> IndexRecord:
    """``record`` as the scan keeps it: the fields of :data:`_SEARCHED` (no data, facts, entities
    or search text: the index holds its text)."""
    return record_from_dict(record_to_dict(record))


def record_to_dict(record: IndexRecord) -> list[Any]:
    """The searched fields of ``record`` (see :data:`_SEARCHED`), compactly."""
    return [list(record.criteria) if name == "criteria" else getattr(record, name) for name in _SEARCHED]


def record_from_dict(row: list[Any]) -> IndexRecord:
    """A search-only record (its data, facts, entities and search text empty), from what
    :func:`record_to_dict` wrote; raises KeyError/TypeError/ValueError on anything else."""
    if not isinstance(row, list) or len(row) != len(_SEARCHED):
        raise ValueError("not a cached record")
    values = dict(zip(_SEARCHED, row, strict=True))
    values["criteria"] = tuple(values["criteria"])
    return IndexRecord(data={}, search_text="", **values)


def _load(root: Path, fingerprint: str) -> ScanIndex | None:
    """The cached index, when it was written for ``fingerprint`` by this version; None for a
    damaged cache (a part read only when a search asks for it raises :class:`DamagedCache` then)."""
    try:
        data = read_bytes_capped(search_cache_file(root), limit=_READ_LIMIT)
    except GuardkitStateError:
        return None
    return ScanIndex.from_bytes(data, fingerprint)


def _save(root: Path, fingerprint: str, index: ScanIndex) -> None:
    """Write the cache (never in a process whose cache writes are off, a read-only server's: see
    :func:`~guardkit_state.store.stat_cache.disable_writes`); a failure only costs the next search a scan."""
    if not writes_enabled():
        return
    if not (root / "tasks").is_dir() and not (root / ".guardkit").is_dir():
        return  # not a GuardKit checkout: a read creates nothing
    path = search_cache_file(root)
    with contextlib.suppress(GuardkitStateError, OSError, TypeError, ValueError):
        ensure_private_dir(path.parent)
        atomic_write_bytes(path, index.to_bytes(fingerprint), limit=None)
