"""The file scan after a change: only the files that changed read again, the index changed for their records.

The scan's cache (:mod:`.scan_cache`) keeps, beside its index, each source file's reading
(:mod:`.readings`: its facts, with the signature it was read at) and, for each position of the
index, the record there: the file it came from, its name in that file, and a digest of it. After a
change :func:`update`:

1. reads again the files whose signature changed (or that are new); every other file's reading is
   the cached one (a file changed less than two seconds ago is read but not kept as read: the
   next search reads it again, as every read cache does: ``store.stat_cache.RACY_NS``);
2. runs the rules across files (:func:`~guardkit_state.index.sources.combine`) on the readings;
3. keeps each record the rules picked that is already in the index from a file that did not
   change (or, from a file read again, has the same digest); removes the others and adds the new
   ones (a record of an unchanged file not in the index, one a deleted turn file had hidden, is
   built by reading that file again).

The cold build is the same with nothing cached: one implementation, and a test compares the index
a change gave with the one a scan of every file builds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from guardkit_state.index.readings import (
    CONFIG_FILES,
    CONFIG_PATH,
    CONFIGURATION,
    FileReading,
    Source,
    read_configuration,
    read_source,
    source_files,
)
from guardkit_state.index.records import TURN_STATES, IndexRecord, project_groups
from guardkit_state.index.scan_index import DamagedCache, ScanIndex, digest, row_line
from guardkit_state.index.sources import Chosen, combine
from guardkit_state.store.stat_cache import settled, signature_of
from guardkit_state.taskfile.discovery import listing_scope
from guardkit_state.taskfile.resolve import plan_paths


@dataclass
class Updated:
    """The index after :func:`update`, the state to keep beside it (see :func:`state_of`), and
    whether every file read now was kept as read (a file changed just now is read again next time)."""

    index: ScanIndex
    state: dict[str, Any]
    settled: bool


def update(root: Path, index: ScanIndex | None, state: dict[str, Any] | None,
           walk: dict[str, list[int]]) -> Updated:
    """The index of the records of the checkout ``root`` from ``index`` and its ``state`` (None:
    build it from every file), reading only the files whose signature in ``walk`` (path relative
    to ``root`` -> signature; a source file it lacks is stat'ed) is not the one they were read at.

    Raises:
        DamagedCache: a cached part the change needs does not read back (build it from the files).
    """
    groups = project_groups(root)
    if index is None or state is None or state.get("groups") != groups:
        index, state = ScanIndex.empty(), {"groups": groups, "files": {}, "slots": []}
    else:
        index = index.copy()
    kept = _kept(state.get("files"))
    group = groups[TURN_STATES]

    def sig_of(path: str) -> Any:
        return walk[path] if path in walk else signature_of(root / path)

    with listing_scope():  # one listing of tasks/ and of the plans for the whole update
        readings = [_reading(source, kept.get(source.path), sig_of(source.path),
                             partial(read_source, root, source, group))
                    for source in source_files(root)]
        config = _reading(Source(CONFIGURATION, CONFIG_PATH), kept.get(CONFIG_PATH),
                          [sig_of(path) for path in CONFIG_FILES], lambda: read_configuration(root, groups))
        chosen = combine(readings, lambda: plan_paths(root))
    chosen += [Chosen(config, f"config:{i}", "") for i in range(_config_records(config, state))]
    fresh = {reading.source.path: reading for reading in [*readings, config] if reading.build is not None}

    def again(reading: FileReading) -> FileReading:
        if reading.source.path not in fresh:  # an unchanged file whose record is not in the index
            fresh[reading.source.path] = read_source(root, reading.source, group) \
                if reading.source.kind != CONFIGURATION else read_configuration(root, groups)
        return fresh[reading.source.path]

    slots = _slots(state.get("slots"), index.positions)
    _place(index, slots, chosen, again)
    files = {r.source.path: [r.source.kind, r.source.loop, r.sig, r.facts] for r in [*readings, config]}
    return Updated(index, {"groups": groups, "files": files, "slots": slots},
                   all(r.sig is not None for r in [*readings, config]))


def _reading(source: Source, cached: FileReading | None, sig: Any, read: Callable[[], FileReading]) -> FileReading:
    """The cached reading of ``source`` while its file's signature is ``sig``, else the file read now
    (its signature kept only when it has settled)."""
    if cached is not None and cached.sig is not None and cached.sig == sig and cached.source == source:
        return cached
    reading = read()
    parts = sig if source.kind == CONFIGURATION else [sig]
    reading.sig = sig if all(part is None or settled(part) for part in parts) else None
    return reading


def _config_records(config: FileReading, state: dict[str, Any]) -> int:
    """How many records the configuration gave.

    Raises:
        DamagedCache: its cached reading says no count it could have (a count over the positions the
            cache holds would make millions of records of nothing).
    """
    count = config.facts.get("records", 0)
    if type(count) is not int or count < 0 or (config.build is None and count > len(state.get("slots") or ())):
        raise DamagedCache(f"the configuration's count of records: {count!r}")
    return count


def _place(index: ScanIndex, slots: list[Any], chosen: list[Chosen],
           again: Callable[[FileReading], FileReading]) -> None:
    """Make ``index`` hold exactly the ``chosen`` records, in their order (``slots``: what each
    position holds, kept in step)."""
    at = {(slot[0], slot[1]): position for position, slot in enumerate(slots) if slot is not None}
    order: list[int] = []
    new: list[tuple[int, IndexRecord, bytes, list[str]]] = []
    for choice in chosen:
        path = choice.reading.source.path
        position = at.get((path, choice.name))
        if position is not None and choice.reading.build is None:  # indexed, from a file that did not change
            order.append(position)
            continue
        record = (choice.reading if choice.reading.build is not None else again(choice.reading)).record(choice.name)
        line = row_line(record)
        slot = [path, choice.name, digest(record, line)]
        if position is not None and slots[position] == slot:  # read again, and the same record
            order.append(position)
            continue
        new.append((len(order), record, line, slot))
        order.append(-1)  # its position is known once placed
    kept = set(order)  # the positions kept (and -1, which no slot has)
    for position, slot in enumerate(slots):
        if slot is not None and position not in kept:
            index.remove(position)
            slots[position] = None
    for at_order, record, line, slot in new:
        position = index.add(record, line)
        if position == len(slots):
            slots.append(slot)
        else:
            slots[position] = slot
        order[at_order] = position
    index.reorder(order)


def _kept(files: Any) -> dict[str, FileReading]:
    """The cached readings, by path (none: the cache holds none).

    Raises:
        DamagedCache: they do not read back.
    """
    if files is None:
        return {}
    try:
        return {path: FileReading(Source(kind, path, loop), facts, sig)
                for path, (kind, loop, sig, facts) in files.items() if isinstance(facts, dict)}
    except (AttributeError, TypeError, ValueError) as exc:
        raise DamagedCache(f"the files' readings: {exc}") from exc


def _slots(slots: Any, positions: int) -> list[Any]:
    """What each position of the index holds: ``[path, name, digest]`` or None (free).

    Raises:
        DamagedCache: not one per position, or not of that shape.
    """
    if not isinstance(slots, list) or len(slots) != positions or not all(
            slot is None or (isinstance(slot, list) and len(slot) == 3 and all(isinstance(part, str) for part in slot))
            for slot in slots):
        raise DamagedCache("the index's positions do not read back")
    return list(slots)


__all__ = ["Updated", "update"]
