"""Tokens and relevance scores for search, shared by the file scan and the Graphiti reranker.

Pure functions, no third-party imports: the file-scan search and the offline cross-encoder rank
with the same rule, so a query ranks the same records first whichever backend answers it.

Identifiers are kept whole *and* split: ``TASK-GE-001`` yields ``task-ge-001`` plus ``task``,
``ge`` and ``001``, so ``"turn TASK-GE-001"`` prefers that exact task over ``TASK-GE-0010`` (which
shares only the parts). ``coach_decision`` stays one token (and also yields its parts).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from itertools import pairwise

_WORD = re.compile(r"[A-Za-z0-9]+(?:[-_.][A-Za-z0-9]+)*")
_PART = re.compile(r"[A-Za-z0-9]+")

#: Words that carry no meaning in a query over turn records.
STOPWORDS = frozenset({"a", "an", "and", "the", "of", "to", "in", "on", "for", "is", "it", "with",
                       "by", "at", "or", "be", "as", "this", "that", "from", "was", "were"})


def tokens(text: str) -> list[str]:
    """Lower-cased tokens of ``text``: whole compound words first, then their parts."""
    out: list[str] = []
    for match in _WORD.finditer(text):
        word = match.group().lower()
        out.append(word)
        parts = _PART.findall(word)
        if len(parts) > 1:
            out.extend(parts)
    return out


def query_terms(query: str) -> list[str]:
    """Distinct meaningful tokens of a query, in order."""
    seen: dict[str, None] = {}
    for token in tokens(query):
        if token not in STOPWORDS:
            seen.setdefault(token, None)
    return list(seen)


def is_identifier(term: str) -> bool:
    """A compound token with a digit or dash (``task-ge-001``): matching it exactly matters most."""
    if term.startswith(("task-", "turn-", "feat-")):
        return True
    return ("-" in term or "_" in term) and any(ch.isdigit() for ch in term)


def overlap_score(terms: Iterable[str], document: str, *, doc_counts: Counter[str] | None = None) -> float:
    """Relevance of ``document`` to query ``terms``: weighted term presence, identifiers first.

    Each query term found in the document adds ``1 + log(1 + count)``; an identifier-like term
    adds 4 more, and a missing identifier subtracts 6 (a query naming ``TASK-A-1`` is about that
    task). Deterministic and cheap; it is a reranker, not a language model.
    """
    counts = doc_counts if doc_counts is not None else Counter(tokens(document))
    score = 0.0
    for term in terms:
        found = counts.get(term, 0)
        ident = is_identifier(term)
        if found:
            score += 1.0 + math.log1p(found) + (4.0 if ident else 0.0)
        elif ident:
            score -= 6.0
    return score


#: Field names of turn state records that a query may name as ``name value``.
TURN_FIELDS = frozenset({"coach_decision", "player_decision", "mode"})


def field_score(query: str, fields: dict[str, str]) -> float:
    """Bonus for ``name value`` pairs in the query that name a record field exactly.

    ``"coach_decision rejected"`` (or ``coach_decision=rejected``) adds 6 to records whose
    ``coach_decision`` is ``rejected`` and takes 6 from those where it is something else.
    """
    words = [m.group().lower() for m in _WORD.finditer(query)]
    lowered = {k.lower(): str(v).lower() for k, v in fields.items()}
    score = 0.0
    for name, value in pairwise(words):
        if name in lowered:
            score += 6.0 if lowered[name] == value else -6.0
        elif name in TURN_FIELDS:  # a turn field named, and this record has no such field
            score -= 6.0
    return score
