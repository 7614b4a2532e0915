"""The always-available index: scan the files and rank the records by word overlap.

It reads every record :mod:`.sources` builds and the configuration's; the query is understood as
every backend understands it (:mod:`.query`), content words ranked by :func:`.words.overlap_score`.
Nothing to build, nothing to go stale.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from guardkit_state.index.base import SearchHit
from guardkit_state.index.query import Filters, ParsedQuery, allowed, exact_answer, parse_query, time_of
from guardkit_state.index.records import IndexRecord, resolve_group
from guardkit_state.index.scan_cache import cached_records
from guardkit_state.index.words import field_score, is_identifier, may_hold, overlap_score

log = logging.getLogger("guardkit_state.index")


class FileIndex:
    """Search by scanning the files; nothing to build, nothing to go stale."""

    name = "files"

    def __init__(self, repo_root: Path) -> None:
        self.repo_root = Path(repo_root)
        #: False: the scan's cache is read, never written (a read-only MCP server writes nothing).

    def records(self, groups: Sequence[str] | None = None) -> list[IndexRecord]:
        """Every record the files define, optionally only those of ``groups``."""
        return _in_groups(self._read_records(), groups, self.repo_root)

    def _read_records(self) -> list[IndexRecord]:
        # Imported here: a search answered from the cache reads no task file, so loads no reader.
        from guardkit_state.index.config_records import load_system_records
        from guardkit_state.index.sources import load_project_records

        records = list(load_project_records(self.repo_root).records)
        try:
            system, reason = load_system_records(self.repo_root)
        except Exception as exc:
            log.warning("configuration not searchable: %s", exc)
            system, reason = [], str(exc)
        if reason:
            log.debug("system groups: %s", reason)
        records.extend(system)
        return records

    def search(self, query: str, *, groups: Sequence[str] | None = None, limit: int = 10,
               filters: Filters | None = None) -> list[SearchHit]:
        """Records matching ``query``, best first (read from the scan's cache while no file changed:
        :mod:`.scan_cache`)."""
        cached = cached_records(self.repo_root, self._read_records)
        records = _in_groups([record for record, _ in cached], groups, self.repo_root)
        words = {id(record): text for record, text in cached}
        return rank_by_overlap(parse_query(query), records, filters or Filters(), limit=limit,
                               tokens_of=lambda record: words.get(id(record)))


def _in_groups(records: list[IndexRecord], groups: Sequence[str] | None, root: Path) -> list[IndexRecord]:
    if not groups:
        return records
    wanted = {resolve_group(g, root) for g in groups}
    return [r for r in records if r.group_id in wanted]


def rank_by_overlap(query: ParsedQuery, records: Sequence[IndexRecord], filters: Filters, *, limit: int,
                    tokens_of: Callable[[IndexRecord], str | None] | None = None) -> list[SearchHit]:
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
    phrase = _phrase(query)
    phrase_words = phrase.split() if phrase else []
    # The cache keeps each record's tokens (index_text, one space between two): no tokenising here.
    # With the spaces doubled, " term " is found at every token equal to it, side by side or not,
    # by str.count, without a list of the record's words.
    spaced_terms = [(term, f" {term} ") for term in query.terms]
    for record in pool:
        known = tokens_of(record) if tokens_of is not None else None
        counts = None
        if known is not None and may_hold(query.terms, known):
            spaced = f" {known.replace(' ', '  ')} "
            counts = Counter({term: spaced.count(padded) for term, padded in spaced_terms})  # only what is scored
        overlap = overlap_score(query.terms, record.search_text, doc_counts=counts) \
            if known is None or counts is not None else -6.0 * sum(is_identifier(term) for term in query.terms)
        score = overlap + field_score(query.text, record.fields)
        if phrase:
            lowered = record.search_text.lower()
            # Each word of the phrase in the text first: most records have not all, and are not re-spaced.
            if all(word in lowered for word in phrase_words) and phrase in " ".join(lowered.split()):
                score += PHRASE_BONUS  # the words as written, in order: what a pasted sentence is after
        if score > 0:
            scored.append((score, record))
    scored.sort(key=lambda item: (-item[0], item[1].task_id or "", item[1].turn_number or 0, item[1].key))
    if query.recency:  # stable: equally recent matches keep their score order
        scored.sort(key=lambda item: time_of(item[1]), reverse=True)
    return [SearchHit.of(record, score) for score, record in scored[:limit]]


#: Added to a record whose text holds the query's words exactly as written (more than any overlap).
PHRASE_BONUS = 1000.0


def _phrase(query: ParsedQuery) -> str | None:
    """The query as written, as a phrase (two words or more; quotes, case and spacing aside), else None."""
    words = query.text.strip().strip("\"'").lower().split()
    return " ".join(words) if len(words) >= 2 else None
