"""The always-available index: scan the files and rank the records by word overlap.

It reads every record :mod:`.sources` builds and the configuration's; the query is understood as
every backend understands it (:mod:`.query`), content words ranked by :func:`.words.overlap_score`.
Nothing to build, nothing to go stale.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from guardkit_state.index.base import SearchHit
from guardkit_state.index.query import Filters, ParsedQuery, allowed, exact_answer, parse_query, time_of
from guardkit_state.index.records import IndexRecord, project_groups, resolve_group
from guardkit_state.index.scan_cache import cached_index
from guardkit_state.index.scan_index import DamagedCache, ScanIndex
from guardkit_state.index.words import (
    MISSING_IDENTIFIER,
    TURN_FIELDS,
    field_score,
    is_identifier,
    term_weight,
    word_pairs,
)

log = logging.getLogger("guardkit_state.index")


class FileIndex:
    """Search by scanning the files; nothing to build, nothing to go stale."""

    name = "files"

    def __init__(self, repo_root: Path) -> None:
        self.repo_root = Path(repo_root)

    def records(self) -> list[IndexRecord]:
        """Every record the files define, read from every file (no cache)."""
        # Imported here: a search answered from the cache reads no task file, so loads no reader.
        from guardkit_state.index.readings import read_configuration
        from guardkit_state.index.sources import load_project_records

        records = list(load_project_records(self.repo_root).records)
        config = read_configuration(self.repo_root, project_groups(self.repo_root))
        return records + [config.record(f"config:{i}") for i in range(config.facts["records"])]

    def search(self, query: str, *, groups: Sequence[str] | None = None, limit: int = 10,
               filters: Filters | None = None) -> list[SearchHit]:
        """Records matching ``query``, best first (read from the scan's cache while no file changed:
        :mod:`.scan_cache`)."""
        wanted = {resolve_group(g, self.repo_root) for g in groups} if groups else None
        answer = partial(rank, parse_query(query), filters=filters or Filters(), limit=limit, groups=wanted)
        try:
            return answer(cached_index(self.repo_root))
        except DamagedCache as exc:
            log.debug("search cache damaged, rebuilt: %s", exc)
            return answer(cached_index(self.repo_root, rebuild=True))


def rank(query: ParsedQuery, index: ScanIndex, filters: Filters, *, limit: int,
         groups: set[str] | None = None) -> list[SearchHit]:
    """The file scan's ranking: constrain (identifiers, filters, ``groups``), then score the content words.

    A query with no content words answers the constrained records in their natural order (see
    :func:`.query.exact_answer`); otherwise records scoring above zero, best first. With recency
    asked, the matches come newest first.

    Only the records that can score above zero are scored (:func:`_candidates`): the index says
    which hold a query term, the phrase or a field the query names; every other record scores at
    most zero, so the answer is the one scoring them all would give.
    """
    def admitted(record: IndexRecord) -> bool:
        return (groups is None or record.group_id in groups) and allowed(record, query, filters)

    limit = query.limit(limit)
    if not query.content_terms:
        if not (query.constrained or filters.any):
            return []
        ordered = exact_answer(((r.key, r) for r in index.records if admitted(r)), query)
        return [SearchHit.of(r, 1.0) for _, r in ordered[:limit]]
    phrase = _phrase(query)
    counts = {term: index.counts(term) for term in query.terms}
    holding = index.holding_phrase(phrase) if phrase else set()
    candidates = _candidates(query, index, counts, holding)
    if groups is not None or query.constrained or filters.any:
        candidates = {position for position in candidates if admitted(index.record(position))}
    overlaps = _overlaps(query.terms, counts, candidates)
    # A record's fields add to its score only where a pair of query words starts with a field name.
    fielded = any(name in TURN_FIELDS or index.having_field(name) for name, _ in word_pairs(query.text))
    scored: list[tuple[float, int]] = []
    for position in index.in_order(candidates):  # the records' own order: equal keys keep it (stable sorts)
        score = overlaps[position]
        if fielded:
            score = score + field_score(query.text, index.record(position).fields)
        if position in holding:
            score += PHRASE_BONUS  # the words as written, in order: what a pasted sentence is after
        if score > 0:
            scored.append((score, position))
    if not query.recency and len(scored) > limit:
        # Only the records scoring at least the limit-th best score can be answered: read just those.
        cut = heapq.nlargest(limit, (score for score, _ in scored))[-1]
        scored = [item for item in scored if item[0] >= cut]
    ranked = [(score, index.record(position)) for score, position in scored]
    ranked.sort(key=_best)
    if query.recency:  # newest first; equally recent matches keep their score order
        ranked.sort(key=lambda item: time_of(item[1]), reverse=True)
    return [SearchHit.of(record, score) for score, record in ranked[:limit]]


def _best(item: tuple[float, IndexRecord]) -> tuple[float, str, int, str]:
    """Best first: the score, then the task, turn and key (a fixed order among equals)."""
    return -item[0], item[1].task_id or "", item[1].turn_number or 0, item[1].key


def _overlaps(terms: list[str], counts: dict[str, dict[int, int]], candidates: set[int]) -> dict[int, float]:
    """:func:`.words.overlap_score` of every candidate, summed term by term in the query's order
    (its fold, so each score is the very same number), visiting only the records that hold each
    term (and, for an identifier, every candidate: a missing one costs)."""
    scores = dict.fromkeys(candidates, 0.0)
    for term in terms:
        held = counts[term]
        if is_identifier(term):
            for position in scores:
                found = held.get(position)
                scores[position] += term_weight(found, True) if found else -MISSING_IDENTIFIER
            continue
        for position, found in held.items():
            if position in scores:
                scores[position] += term_weight(found, False)
    return scores


def _candidates(query: ParsedQuery, index: ScanIndex, counts: dict[str, dict[int, int]],
                holding: set[int]) -> set[int]:
    """The records that can score above zero: those holding a query term (the only way the word
    overlap is positive), the phrase (its bonus), or a field a ``name value`` pair of the query
    names (the only way :func:`.words.field_score` is positive)."""
    found = set(holding).union(*counts.values())
    return found.union(*(index.having_field(name) for name, _ in word_pairs(query.text)))


#: Added to a record whose text holds the query's words exactly as written (more than any overlap).
PHRASE_BONUS = 1000.0


def _phrase(query: ParsedQuery) -> str | None:
    """The query as written, as a phrase (two words or more; quotes, case and spacing aside), else None."""
    words = query.text.strip().strip("\"'").lower().split()
    return " ".join(words) if len(words) >= 2 else None
