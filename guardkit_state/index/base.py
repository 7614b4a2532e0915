"""The index protocol and the small result records every backend returns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from guardkit_state.index.query import Filters
from guardkit_state.index.records import IndexRecord


@dataclass(frozen=True)
class SearchHit:
    """One search result: which record, how well it matched, and a readable line."""

    key: str
    kind: str
    group_id: str
    score: float
    summary: str
    task_id: str | None = None
    turn_number: int | None = None
    source_path: str | None = None
    feature_id: str | None = None
    #: When the record's turn completed (or its task or feature last changed), as the files say.
    completed_at: str | None = None
    decision: str | None = None

    @classmethod
    def of(cls, record: IndexRecord, score: float) -> SearchHit:
        return cls(key=record.key, kind=record.kind, group_id=record.group_id, score=round(score, 4),
                   summary=record.summary, task_id=record.task_id, turn_number=record.turn_number,
                   source_path=record.source_path, feature_id=record.feature_id,
                   completed_at=record.completed_at, decision=record.decision)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SearchResult:
    """Hits plus which backend answered (``graphiti`` or ``files``) and, for a fallback, why."""

    backend: str
    hits: list[SearchHit]
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "note": self.note, "hits": [h.to_dict() for h in self.hits]}


@dataclass
class SyncReport:
    """What a seed/sync/rebuild/prune did (or, for a dry run, would do), by record key."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    pruned_by_retention: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    dry_run: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"changed": self.changed}


@dataclass
class IndexStatus:
    """Where the index lives, what it holds per group, and how far it is from the files."""

    backend: str
    location: str
    groups: dict[str, int]
    entities: int = 0
    facts: int = 0
    files: int = 0
    stale: int = 0
    missing: int = 0
    extra: int = 0
    notes: list[str] = field(default_factory=list)
    #: The embedder the index was built with, and its vectors' dimension.
    embedder: str | None = None
    dimension: int | None = None
    synced_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class SearchIndex(Protocol):
    """What every index backend offers. The file scan implements search only."""

    name: str

    def search(self, query: str, *, groups: Sequence[str] | None = None, limit: int = 10,
               filters: Filters | None = None) -> list[SearchHit]:
        """Records matching ``query`` (and ``filters``), best first, at most ``limit``."""
        ...
