"""The always-available index: scan the files and rank the records by word overlap.

No database and no extra: it reads every record :mod:`.sources` builds (turn files, turns listed
in task files, tasks, feature plans) and the configuration entities. The query is understood as
every backend understands it (:mod:`.query`: identifiers and filters constrain, recency orders);
the content words rank by :func:`.text.overlap_score`. Nothing to build, nothing to go stale;
it costs a read of every file per query (tens of milliseconds for 200 turns, seconds for 10,000).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from guardkit_state.index.base import SearchHit
from guardkit_state.index.config_records import load_system_records
from guardkit_state.index.query import Filters, ParsedQuery, allowed, exact_answer, parse_query, time_of
from guardkit_state.index.records import IndexRecord, resolve_group
from guardkit_state.index.sources import load_project_records
from guardkit_state.index.text import field_score, overlap_score

log = logging.getLogger("guardkit_state.index")


class FileIndex:
    """Search by scanning the files; nothing to build, nothing to go stale."""

    name = "files"

    def __init__(self, repo_root: Path) -> None:
        self.repo_root = Path(repo_root)

    def records(self, groups: Sequence[str] | None = None) -> list[IndexRecord]:
        """Every record the files define, optionally only those of ``groups``."""
        wanted = {resolve_group(g, self.repo_root) for g in groups} if groups else None
        records = list(load_project_records(self.repo_root).records)
        try:
            system, reason = load_system_records(self.repo_root)
        except Exception as exc:
            log.warning("configuration not searchable: %s", exc)
            system, reason = [], str(exc)
        if reason:
            log.debug("system groups: %s", reason)
        records.extend(system)
        if wanted is not None:
            records = [r for r in records if r.group_id in wanted]
        return records

    def search(self, query: str, *, groups: Sequence[str] | None = None, limit: int = 10,
               filters: Filters | None = None) -> list[SearchHit]:
        """Records matching ``query``, best first."""
        return rank_by_overlap(parse_query(query), self.records(groups), filters or Filters(), limit=limit)


def rank_by_overlap(query: ParsedQuery, records: Sequence[IndexRecord], filters: Filters, *,
                    limit: int) -> list[SearchHit]:
    """The file scan's ranking: constrain (identifiers, filters), then score the content words.

    A query with no content words answers the constrained records in their natural order (see
    :func:`.query.natural_order`); otherwise records scoring above zero, best first. With recency
    asked, the matches come newest first.
    """
    pool = [r for r in records if allowed(r, query, filters)]
    limit = query.limit(limit)
    if not query.content_terms:
        if not (query.constrained or filters.any):
            return []
        ordered = exact_answer(((r.key, r) for r in pool), query)
        return [SearchHit.of(r, 1.0) for _, r in ordered[:limit]]
    scored = []
    for record in pool:
        score = overlap_score(query.terms, record.search_text) + field_score(query.text, record.fields)
        if score > 0:
            scored.append((score, record))
    scored.sort(key=lambda item: (-item[0], item[1].task_id or "", item[1].turn_number or 0, item[1].key))
    if query.recency:  # stable: equally recent matches keep their score order
        scored.sort(key=lambda item: time_of(item[1]), reverse=True)
    return [SearchHit.of(record, score) for score, record in scored[:limit]]

__all__ = ["FileIndex", "rank_by_overlap"]
