"""The file scan's index of its records: each word's records, the records' texts, each field's records.

A query scores only the records that can score at all (the ranking rule is the scan's own,
:func:`guardkit_state.index.files.rank`): on GuardKit's 3,751 records a phrase of eight words was
~85 ms of tokens counted record by record, and is a few milliseconds through the index.

Each record has a **position**; what a position holds changes only where a file changed
(:mod:`.scan_cache` removes the records of the files that changed and adds their new ones, and a
free position is used again), so the positions are not the records' order: :attr:`ScanIndex.order`
is (the order a scan of every file gives them), and a query takes its records in that order.
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
import json
from collections import Counter
from typing import Any

from guardkit_state.index.records import IndexRecord
from guardkit_state.index.words import tokens


class DamagedCache(ValueError):
    """A part of the cache read only when a search asks for it does not read back: the cache is
    rebuilt from the files (never believed)."""


class ScanIndex:
    """The scan's records (search-only) and what a query asks of them, each answered without
    reading every record:

    * :meth:`counts`: the records holding a token (:func:`~guardkit_state.index.words.tokens` of
      their search text), with how many times;
    * :meth:`holding_phrase`: the records whose text, lower-cased with its spacing collapsed, holds
      a phrase;
    * :meth:`having_field`: the records with a field of that name (``coach_decision``).

    Read from the cache, a part is decoded when a query first asks for it (a record's line, a
    token's records). Shared by the threads of a server: what it decodes is only ever added, whole;
    a change is made to a :meth:`copy`, never to an index a query may be reading.
    """

    def __init__(self, rows: list[Any], postings: dict[str, Any], fields: dict[str, Any], phrases: bytes,
                 order: list[int] | str | None = None) -> None:
        #: Each position's record, or (from the cache) its JSON line until first asked for; None: free.
        self._rows = rows
        #: token -> {position: count}; from the cache, the encoded text until first asked.
        self._postings = postings
        #: field name (lower-cased) -> the positions of the records having it (encoded, from the cache).
        self._fields = fields
        #: Every position's text lower-cased, its spacing collapsed, in UTF-8: one line per position.
        self._phrases = phrases
        #: The positions in the records' order (None: every position, in order; text: from the cache).
        self._order = order
        self._starts: list[int] | None = None
        self._rank: dict[int, int] | None = None
        #: While changed (a :meth:`copy`): the phrase of each position, the free positions, and the
        #: tokens' and fields' records this copy made (changed in place; the others are shared).
        self._lines: list[bytes] | None = None
        self._joined = True
        self._free: list[int] = []
        self._owned: set[str] = set()

    @classmethod
    def empty(cls) -> ScanIndex:
        """An index of no record, to :meth:`add` to."""
        empty = cls([], {}, {}, b"")
        empty._lines = []
        return empty

    @property
    def positions(self) -> int:
        """How many positions there are, free ones included."""
        return len(self._rows)

    @property
    def phrases(self) -> bytes:
        """Every position's text lower-cased, its spacing collapsed, in UTF-8: one line per position."""
        if not self._joined and self._lines is not None:
            self._phrases = b"\n".join(self._lines)
            self._joined = True
        return self._phrases

    # ------------------------------------------------------------------ reading

    def record(self, position: int) -> IndexRecord:
        """The record at ``position`` (read from its cached line the first time it is asked for).

        Raises:
            DamagedCache: the line does not read back as a record, or there is no such record.
        """
        try:
            row = self._rows[position]
            if isinstance(row, bytes):
                row = self._rows[position] = record_from_row(json.loads(row))
        except (IndexError, KeyError, TypeError, ValueError) as exc:
            raise DamagedCache(f"record {position}: {exc}") from exc
        if not isinstance(row, IndexRecord):
            raise DamagedCache(f"record {position}: none there")
        return row

    @property
    def order(self) -> list[int]:
        """Every record's position, in the records' order."""
        if self._order is None:
            return [position for position, row in enumerate(self._rows) if row is not None]
        if isinstance(self._order, str):
            try:
                self._order = [int(at) for at in self._order.split()]
            except ValueError as exc:
                raise DamagedCache(f"the records' order: {exc}") from exc
        return self._order

    @property
    def records(self) -> list[IndexRecord]:
        """Every record, in order."""
        return [self.record(position) for position in self.order]

    def in_order(self, positions: set[int]) -> list[int]:
        """``positions`` in the records' order."""
        if self._order is None:
            return sorted(positions)
        if self._rank is None:
            self._rank = {position: at for at, position in enumerate(self.order)}
        rank = self._rank
        return sorted(positions, key=lambda position: rank.get(position, len(rank)))

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
        wanted = utf8(phrase)  # UTF-8 is self-synchronising: a match in bytes is a match in text
        found: set[int] = set()
        at = self.phrases.find(wanted)
        while at >= 0:
            line = bisect.bisect_right(self._starts, at) - 1
            found.add(line)
            if line + 1 >= len(self._starts):
                break
            at = self.phrases.find(wanted, self._starts[line + 1])  # a record counts once
        return found

    # ------------------------------------------------------------------ changing (a copy)

    def copy(self) -> ScanIndex:
        """An index to change: what a change replaces is copied first, the rest shared."""
        order = list(self.order) if self._order is not None else None
        copied = ScanIndex(list(self._rows), dict(self._postings), dict(self._fields), self.phrases, order)
        copied._lines = self.phrases.split(b"\n") if self._rows else []
        copied._free = [position for position, row in enumerate(self._rows) if row is None]
        return copied

    def remove(self, position: int) -> None:
        """Free ``position``: its record leaves every token's, field's and phrase's records.

        Raises:
            DamagedCache: its cached line does not read back (its tokens cannot be known).
        """
        record = self.record(position)
        assert self._lines is not None, "changed only through copy()"
        # A text whose tokens are its phrase's is kept only as its phrase (see row_line).
        text = record.search_text or self._lines[position].decode("utf-8", "surrogatepass")
        for token in Counter(tokens(text)):
            held = self._own_counts(token)
            held.pop(position, None)
            if not held:
                del self._postings[token]
                self._owned.discard(f"t{token}")
        for name in _field_names(record):
            having = self._own_field(name)
            if position in having:
                having.remove(position)
            if not having:
                del self._fields[name]
                self._owned.discard(f"f{name}")
        self._rows[position] = None
        heapq.heappush(self._free, position)
        self._line(position, b"")

    def add(self, record: IndexRecord, line: bytes) -> int:
        """Put ``record`` (``line``: its :func:`row_line`) at the first free position, which it returns."""
        position = heapq.heappop(self._free) if self._free else len(self._rows)
        if position == len(self._rows):
            self._rows.append(line)
        else:
            self._rows[position] = line
        for token, count in Counter(tokens(record.search_text)).items():
            self._own_counts(token)[position] = count
        for name in _field_names(record):
            bisect.insort(self._own_field(name), position)
        self._line(position, utf8(" ".join(record.search_text.lower().split())))
        return position

    def _own_counts(self, token: str) -> dict[int, int]:
        """The records of ``token``, as this copy's own (copied the first time it changes them)."""
        if f"t{token}" not in self._owned:
            self._postings[token] = dict(self.counts(token))
            self._owned.add(f"t{token}")
        found: dict[int, int] = self._postings[token]
        return found

    def _own_field(self, name: str) -> list[int]:
        """The records with field ``name``, as this copy's own (copied the first time it changes them)."""
        if f"f{name}" not in self._owned:
            self._fields[name] = list(self.having_field(name))
            self._owned.add(f"f{name}")
        found: list[int] = self._fields[name]
        return found

    def reorder(self, order: list[int]) -> None:
        """The records' order, as positions; every record's position exactly once."""
        self._order = None if order == list(range(len(self._rows))) else order
        self._rank = None

    def _line(self, position: int, text: bytes) -> None:
        assert self._lines is not None, "changed only through copy()"
        if position == len(self._lines):
            self._lines.append(text)
        else:
            self._lines[position] = text
        self._joined = False
        self._starts = None

    # ------------------------------------------------------------------ the cache's text

    def encoded(self) -> tuple[dict[str, Any], bytes, list[bytes]]:
        """What the cache keeps of the index: its tokens', fields' and order's line, the phrases, a
        line per position (a part never decoded is written back as it was read)."""
        order = self._order if self._order is None or isinstance(self._order, str) else " ".join(map(str, self._order))
        where = {"postings": {token: found if isinstance(found, str) else _encode_counts(found)
                              for token, found in self._postings.items()},
                 "fields": {name: found if isinstance(found, str) else " ".join(map(str, found))
                            for name, found in self._fields.items()},
                 "order": order}
        rows = [b"null" if row is None else row if isinstance(row, bytes) else row_line(row) for row in self._rows]
        return where, self.phrases, rows

    @classmethod
    def decoded(cls, where: Any, phrases: bytes, rows: list[bytes]) -> ScanIndex | None:
        """The index :meth:`encoded` gave; None for anything else."""
        if not isinstance(where, dict) or not isinstance(where.get("postings"), dict) \
                or not isinstance(where.get("fields"), dict) or not isinstance(where.get("order"), (str, type(None))) \
                or phrases.count(b"\n") + 1 != max(1, len(rows)):
            return None
        return cls([None if row == b"null" else row for row in rows], where["postings"], where["fields"], phrases,
                   where["order"])


def utf8(text: str) -> bytes:
    # A lone surrogate (never in a decoded file, but a record's text is not checked here) passes.
    return text.encode("utf-8", "surrogatepass")


def _field_names(record: IndexRecord) -> list[str]:
    return list(dict.fromkeys(key.lower() for key in record.fields))


def _encode_counts(counts: dict[int, int]) -> str:
    """``{3: 1, 7: 2}`` -> ``"3 7|1 2"``: the positions, then their counts."""
    return f"{' '.join(map(str, counts))}|{' '.join(map(str, counts.values()))}"


def _decode_counts(text: str) -> dict[int, int]:
    positions, _, counts = text.partition("|")
    found = dict(zip(map(int, positions.split()), map(int, counts.split()), strict=True))
    return found


#: What the scan ranks and answers with, in this order, then the search text: a record's graph side
#: (its data, facts and entities) is for the Graphiti index, which never reads this cache.
_SEARCHED = ("key", "kind", "group_id", "name", "summary", "fields", "source_path", "task_id",
             "feature_id", "turn_number", "completed_at", "criteria", "search_text")


def row_line(record: IndexRecord) -> bytes:
    """The searched fields of ``record`` (see :data:`_SEARCHED`) as one line of JSON: what the cache
    keeps of it (with :func:`digest`, what tells two records apart).

    Its search text is kept only when its tokens are not those of its phrase (lower-cased, spacing
    collapsed: :meth:`ScanIndex.holding_phrase`'s line, which the index holds anyway). Tokens are
    made of ASCII characters alone, which lower-casing keeps ASCII; they differ only where
    lower-casing turns another character into ASCII (``"\u212a"``, the Kelvin sign, is ``"k"``).
    """
    row = [list(record.criteria) if name == "criteria" else getattr(record, name) for name in _SEARCHED]
    text = record.search_text
    if text.isascii() or text.lower().encode("ascii", "ignore") == text.encode("ascii", "ignore").lower():
        row[-1] = ""
    return utf8(json.dumps(row, default=str))


def digest(record: IndexRecord, line: bytes) -> str:
    """What tells ``record`` (``line``: its :func:`row_line`) from another, its text included."""
    return hashlib.blake2b(line + b"\0" + utf8(record.search_text), digest_size=16).hexdigest()


def record_from_row(row: list[Any]) -> IndexRecord:
    """A search-only record (no data, facts or entities), from the JSON :func:`row_line` wrote;
    raises KeyError/TypeError/ValueError on anything else."""
    if not isinstance(row, list) or len(row) != len(_SEARCHED):
        raise ValueError("not a cached record")
    values = dict(zip(_SEARCHED, row, strict=True))
    values["criteria"] = tuple(values["criteria"])
    if not isinstance(values["search_text"], str) or not isinstance(values["fields"], dict):
        raise ValueError("not a cached record")
    return IndexRecord(data={}, **values)
