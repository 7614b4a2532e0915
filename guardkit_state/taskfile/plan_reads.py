"""The feature plans of a checkout, parsed once: per process, and between processes in
``.guardkit/cache/plans.json``.

Every read command looks at the plans (which plan names a task's file, which features list a task,
a feature's tasks and progress), and GuardKit's repository has 41 of them: parsing them all took
most of a ``show``. A plan is parsed here once per change of the file: within a process the parse
is kept with the file's signature (size, mtime, ctime, inode), and between processes its data, the
lines of its ``tasks`` entries and whether it passed the plan schema are kept in the cache
(:mod:`guardkit_state.store.stat_cache`, the mechanism ``status`` keeps its summaries with). A
changed file is parsed again at its next read, in any process.

A plan is read the way PyYAML (and so GuardKit) reads it, a repeated key keeping its last value:
that reading is what finds a task (``tasks[].id``, ``tasks[].file_path``), so a plan the strict
reader refuses still never hides a task. Whether the strict reader accepts it is kept beside:
:meth:`PlanRead.strict` raises the strict reader's own error.

Writes never come through here: a plan is written from the text the writer reads itself
(:mod:`guardkit_state.plans.plan_writer`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guardkit_state.errors import GuardkitStateError, ParseError
from guardkit_state.store import layout, reads
from guardkit_state.store.stat_cache import StatCache, signature_of

if TYPE_CHECKING:  # YAML is imported when a plan is parsed: one answered from the cache needs none
    from guardkit_state.yamltext.strict_yaml import ParsedYaml

#: Plan files are ``FEAT-<something>.yaml`` in the features folder (GuardKit's own glob).
PLAN_PREFIX = "FEAT-"
PLAN_SUFFIX = ".yaml"
CACHE_NAME = "plans"
#: Bumped whenever what an entry holds changes: an older cache is rebuilt, never misread.
CACHE_VERSION = 1


@dataclass(frozen=True)
class PlanListing:
    """What a feature plan says about its tasks: its id, and each entry's ``id`` and ``file_path``."""

    feature_id: str
    tasks: tuple[tuple[str | None, str | None], ...]


@dataclass
class PlanRead:
    """One plan file as read: its text, its data (a repeated key read as its last value) and the
    facts derived from it. Shared by every reader in the process: never change ``data``.

    Attributes:
        path: the file.
        text: its text (None when it could not be read as UTF-8 text).
        data: the parsed data; None when the file is no YAML at all (``error`` says why).
        duplicates: the text repeats a key somewhere (the strict reader refuses it).
        lines: the 1-based file line of each ``tasks`` entry (None where unknown).
        checked: the data passed the plan schema (recorded by the reader above, see :func:`mark_checked`).
        error: why the file could not be read or parsed at all.
    """

    path: Path
    text: str | None
    data: Any
    duplicates: bool = False
    lines: tuple[int | None, ...] = ()
    checked: bool = False
    error: GuardkitStateError | None = None
    _parsed: ParsedYaml | None = field(default=None, repr=False)
    _key: tuple[Path, str, list[int]] | None = field(default=None, repr=False)

    @cached_property
    def listing(self) -> PlanListing | None:
        """The plan's id (its file name's stem without one) and its tasks; None when unreadable."""
        data = self.data
        if not isinstance(data, dict):
            return None
        own, tasks = data.get("id"), data.get("tasks")
        entries = tuple((_text(task.get("id")), _text(task.get("file_path")))
                        for task in (tasks if isinstance(tasks, list) else ()) if isinstance(task, dict))
        return PlanListing(own if isinstance(own, str) and own else self.path.stem, entries)

    @property
    def parsed_here(self) -> bool:
        """True when this process holds the strict parse (node tree) already."""
        return self._parsed is not None

    def strict(self) -> ParsedYaml:
        """The strict parse of the text (node tree included), parsed now when this process has not.

        Raises:
            ParseError, DuplicateKeyError: the strict reader refuses the text.
            GuardkitStateError: the file could not be read.
        """
        if self.error is not None:
            raise self.error
        if self._parsed is None or self.duplicates:
            assert self.text is not None
            from guardkit_state.yamltext.strict_yaml import parse_yaml

            self._parsed = parse_yaml(self.text, path=self.path, error_type=ParseError)
        return self._parsed


def _text(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


#: This process's reads: path -> (signature, read).
_MEMO: dict[str, tuple[list[int], PlanRead]] = {}


def read_plan(path: Path | str) -> PlanRead:
    """The plan file ``path``, parsed once per change (see the module).

    Raises:
        GuardkitStateError: the file cannot be read (missing, a FIFO, too large, not UTF-8 ...).
    """
    path = Path(path)
    sig = signature_of(path)
    key = os.fspath(path)
    memo = _MEMO.get(key)
    if memo is not None and sig is not None and memo[0] == sig:
        return memo[1]
    raw = reads.read_bytes_capped(path)  # raises for a missing file, a FIFO, one too large
    text = reads.decode_utf8(raw, path)
    cache, relpath = _cache_of(path)
    entry = cache.entry(relpath, sig) if cache is not None and relpath is not None else None
    if entry is not None and "plan" in entry:
        known = entry["plan"]
        read = PlanRead(path, text, known["data"], known["dups"], tuple(known["lines"]), bool(entry.get("checked")))
    else:
        read = _parse(path, text)
        if cache is not None and relpath is not None and read.error is None and _storable(read.data):
            cache.put(relpath, sig, "plan", {"data": read.data, "dups": read.duplicates, "lines": list(read.lines)})
    if sig is not None:
        read._key = (path, relpath or "", sig) if cache is not None and relpath is not None else None
        _MEMO[key] = (sig, read)
    return read


def _parse(path: Path, text: str) -> PlanRead:
    from guardkit_state.yamltext.positions import node_line
    from guardkit_state.yamltext.strict_yaml import parse_yaml

    try:
        parsed = parse_yaml(text, path=path, error_type=ParseError, keep_last=True)
    except GuardkitStateError as exc:
        return PlanRead(path, text, None, error=exc)
    tasks = parsed.data.get("tasks") if isinstance(parsed.data, dict) else None
    lines = tuple(node_line(parsed.node, ("tasks", index)) for index in range(len(tasks))) \
        if isinstance(tasks, list) else ()
    dups = bool(parsed.duplicates)
    return PlanRead(path, text, parsed.data, dups, lines, _parsed=None if dups else parsed)


def _storable(data: Any) -> bool:
    """True when ``data`` reads back from JSON as itself (a key that is no string would not)."""
    try:
        return bool(json.loads(json.dumps(data, allow_nan=False)) == data)
    except ValueError:
        return False


def mark_checked(read: PlanRead) -> None:
    """Record that ``read``'s data passed the plan schema: no process checks it again until the
    file changes. Only the plan reader that ran the check calls this."""
    read.checked = True
    if read._key is not None:
        path, relpath, sig = read._key
        cache, _ = _cache_of(path)
        if cache is not None:
            cache.put(relpath, sig, "checked", True)


def _cache_of(path: Path) -> tuple[StatCache | None, str | None]:
    """The cache of the checkout holding ``path`` and its key there, for a plan in its features
    folder (``<checkout>/.guardkit/features/FEAT-X.yaml``); (None, None) for a plan elsewhere."""
    folder = path.parent
    if folder.name != layout.FEATURES_DIR.name or folder.parent.name != layout.GUARDKIT_DIR:
        return None, None
    root = folder.parent.parent
    return StatCache.of(root, CACHE_NAME, CACHE_VERSION), f"{layout.FEATURES_DIR.as_posix()}/{path.name}"


def find_plans(checkout: Path | str) -> list[Path]:
    """Every ``.guardkit/features/FEAT-*.yaml`` of ``checkout`` (regular files), sorted by name."""
    directory = layout.features_dir(checkout)
    try:
        with os.scandir(directory) as listing:
            return sorted(Path(entry.path) for entry in listing
                          if entry.name.startswith(PLAN_PREFIX) and entry.name.endswith(PLAN_SUFFIX)
                          and entry.is_file())
    except OSError:
        return []


def read_plans(checkout: Path | str) -> tuple[PlanRead, ...]:
    """Every plan of ``checkout``, by file name; one that cannot be read is left out (a broken
    plan must not stop a task from being found: ``validate`` and ``show FEAT-X`` name it)."""
    paths = find_plans(checkout)
    found = []
    for path in paths:
        try:
            found.append(read_plan(path))
        except GuardkitStateError:
            continue
    cache, _ = _cache_of(layout.features_dir(checkout) / f"{PLAN_PREFIX}x{PLAN_SUFFIX}")
    if cache is not None:  # the entries of plans since removed go
        cache.retain(f"{layout.FEATURES_DIR.as_posix()}/{path.name}" for path in paths)
    return tuple(found)


__all__ = ["CACHE_NAME", "PLAN_PREFIX", "PLAN_SUFFIX", "PlanListing", "PlanRead", "find_plans", "mark_checked",
           "read_plan", "read_plans"]
