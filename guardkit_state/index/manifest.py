"""What the index was built from: ``.guardkit/index/manifest*.json``, read before the index is opened.

Written under the index lock after every write (one per location: embedded, or each server URI),
it records the embedder, each source file's signature (so :func:`freshness` tells from a few
``stat`` calls whether the files in a query's scope changed), every indexed record's facets (so
filters are resolved locally and pushed into graphiti's search) and the turns retention keeps out.
The index stays the authority: ``sync`` converges it whatever the manifest says, and a missing or
unreadable manifest only means "unknown, scan the files".
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from guardkit_state.index.graph_server import redact
from guardkit_state.index.records import FEATURE, TASK, IndexRecord
from guardkit_state.index.turn_records import turn_state_files
from guardkit_state.store.fsio import atomic_write_text, remove_stale_temp_files
from guardkit_state.store.layout import index_dir
from guardkit_state.store.stat_cache import signature_of

MANIFEST_VERSION = 1
Signature = list[int]


@dataclass
class RecordMeta:
    """What a filter needs to know about one indexed record, without reading the index."""

    kind: str
    task: str | None
    feature: str | None
    turn: int | None
    when: str | None
    decision: str | None
    path: str | None
    hash: str
    criteria: list[str] = field(default_factory=list)
    fields: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, record: IndexRecord) -> RecordMeta:
        return cls(record.kind, record.task_id, record.feature_id, record.turn_number, record.completed_at,
                   record.decision, record.source_path, record.content_hash[:16], list(record.criteria),
                   dict(record.fields))

    # The attributes query.allowed() reads, named as on IndexRecord.
    @property
    def task_id(self) -> str | None:
        return self.task

    @property
    def feature_id(self) -> str | None:
        return self.feature

    @property
    def turn_number(self) -> int | None:
        return self.turn

    @property
    def completed_at(self) -> str | None:
        return self.when


@dataclass
class Manifest:
    """The local record of one index location (see the module docstring)."""

    location: str
    group: str
    embedder: str
    dimension: int
    synced_at: str
    sources: dict[str, Signature] = field(default_factory=dict)
    records: dict[str, RecordMeta] = field(default_factory=dict)
    #: Turns retention keeps out of the index (they are still in the files).
    pruned: dict[str, RecordMeta] = field(default_factory=dict)
    #: Configuration groups written (``seed``), with their signature sources included in ``sources``.
    seeded: bool = False
    #: Words in more than a quarter of the project's records (see :func:`common_terms`).
    common_terms: list[str] = field(default_factory=list)
    version: int = MANIFEST_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"), sort_keys=True) + "\n"

    def tasks_of_feature(self, feature: str) -> set[str]:
        return {m.task for m in self.records.values() if m.task and (m.feature or "").upper() == feature.upper()}


def manifest_location(uri: str | None) -> str:
    """The manifest's key for an index: ``embedded``, or the server URI without its password."""
    return redact(uri) if uri else "embedded"


def manifest_path(repo_root: Path, location: str) -> Path:
    """``manifest.json`` for the embedded index, ``manifest-<hash>.json`` for a server URI."""
    if location == "embedded":
        return index_dir(repo_root) / "manifest.json"
    return index_dir(repo_root) / f"manifest-{hashlib.sha256(location.encode()).hexdigest()[:12]}.json"


def load_manifest(repo_root: Path, location: str) -> Manifest | None:
    """The manifest, or None when there is none or it cannot be read (then nothing is known)."""
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
        raw = json.loads(manifest_path(repo_root, location).read_text(encoding="utf-8"))
        if raw.get("version") != MANIFEST_VERSION:
            return None
        raw["records"] = {k: RecordMeta(**v) for k, v in raw["records"].items()}
        raw["pruned"] = {k: RecordMeta(**v) for k, v in raw["pruned"].items()}
        return Manifest(**raw)
    return None


def save_manifest(repo_root: Path, manifest: Manifest) -> None:
    path = manifest_path(repo_root, manifest.location)
    path.parent.mkdir(parents=True, exist_ok=True)
    # A killed indexer's write (this manifest's, the identity file's) left its temp file here, where no
    # run's tidy-up looks: swept at each save (only what a dead writer left).
    remove_stale_temp_files(path.parent)
    atomic_write_text(path, manifest.to_json(), limit=None)


#: A word in more than this share of the records tells them apart too little to search for.
COMMON_SHARE = 0.25


def common_terms(records: Sequence[IndexRecord]) -> list[str]:
    """Tokens found in more than :data:`COMMON_SHARE` of ``records`` (``tests``, ``turn``, ``coach``).

    Fulltext searches leave them out when the query has rarer words: BM25 gives them almost no
    weight, yet scoring them means scoring nearly every record (~100 ms at 10,000 turns).
    """
    from collections import Counter

    from guardkit_state.index.words import tokens

    counts = Counter(token for record in records for token in set(tokens(record.search_text)))
    total = len(records)
    return sorted(t for t, n in counts.items() if total >= 20 and n > total * COMMON_SHARE)


# --------------------------------------------------------------------------- file signatures


def source_signatures(repo_root: Path, paths: Iterable[str]) -> dict[str, Signature]:
    """Signatures of ``paths`` (relative to ``repo_root``: :func:`~guardkit_state.store.stat_cache.signature`,
    which an in-place edit, an atomic replace or a touch all change); files that vanished are left out."""
    signed = {rel: signature_of(os.path.join(repo_root, rel)) for rel in paths}
    return {rel: sig for rel, sig in signed.items() if sig is not None}


# --------------------------------------------------------------------------- freshness


@dataclass
class Freshness:
    """How the files in a query's scope differ from what the index was built from."""

    changed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    @property
    def stale(self) -> bool:
        return bool(self.changed or self.added or self.removed)

    def describe(self) -> str:
        parts = [f"{len(v)} {k}" for k, v in (("changed", self.changed), ("new", self.added),
                                              ("removed", self.removed)) if v]
        shown = (self.added or self.changed or self.removed)[0]
        return f"{', '.join(parts)} file(s) since the last sync (e.g. {shown})"


def freshness(repo_root: Path, manifest: Manifest, tasks: set[str] | None = None) -> Freshness:
    """Compare the files in scope (every file, or those of ``tasks``) with the manifest."""
    root = Path(repo_root)
    if tasks is None:
        # Imported here: a check of a few tasks loads no reader.
        from guardkit_state.index.readings import CONFIG_FILES, source_paths

        current = source_signatures(root, source_paths(root))
        known = {p: s for p, s in manifest.sources.items() if p not in CONFIG_FILES}
    else:
        wanted = {t.upper() for t in tasks}
        in_scope = {m.path for m in manifest.records.values()
                    if m.path and (m.task or "").upper() in wanted and m.kind in (TASK, "turn_states")}
        in_scope |= {os.path.relpath(path, root) for path in turn_state_files(root, sorted(tasks))}
        in_scope |= {m.path for m in manifest.records.values() if m.kind == FEATURE and m.path}
        current = source_signatures(root, in_scope)
        known = {p: s for p, s in manifest.sources.items() if p in in_scope}
    return Freshness(changed=[path for path, sig in current.items() if known.get(path) not in (None, sig)],
                     added=[path for path in current if known.get(path) is None],
                     removed=sorted(set(known) - set(current)))
