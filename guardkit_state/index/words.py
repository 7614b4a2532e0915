"""Tokens and relevance scores for search: one word-splitting rule for both backends.

A compound word (``TASK-GE-001``, ``coverage_threshold``) yields its whole form joined by ``_``
(``task_ge_001``), then its parts. FalkorDB's fulltext splits on ``-`` and ``.`` but not ``_``, so
text written to the index and queries sent to it go through :func:`index_text`, which spells out
the same tokens: ``coverage threshold`` finds ``coverage_threshold`` on both backends, and a whole
identifier stays one rare, heavily weighted token. (FalkorDB also stems English words; the scan
does not.)
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Iterable
from itertools import pairwise

_WORD = re.compile(r"[A-Za-z0-9]+(?:[-_.][A-Za-z0-9]+)*")
_PART = re.compile(r"[A-Za-z0-9]+")

#: Words that carry no meaning in a query over turn records.
STOPWORDS = frozenset({"a", "an", "and", "the", "of", "to", "in", "on", "for", "is", "it", "with",
                       "by", "at", "or", "be", "as", "this", "that", "from", "was", "were", "what",
                       "which", "did", "does", "do", "how", "why", "where", "when", "who", "has",
                       "have", "had", "are", "any", "about", "me", "show", "find", "list", "all"})


def tokens(text: str) -> list[str]:
    """Lower-cased tokens of ``text``: each word's canonical whole form, then its parts."""
    out: list[str] = []
    for match in _WORD.finditer(text):
        parts = _PART.findall(match.group().lower())
        out.append("_".join(parts))
        if len(parts) > 1:
            out.extend(parts)
    return out


def index_text(text: str) -> str:
    """``text`` spelled so FalkorDB's fulltext tokenizer sees exactly :func:`tokens`' tokens."""
    return " ".join(tokens(text))


def query_terms(query: str) -> list[str]:
    """Distinct meaningful tokens of a query, in order."""
    return list(dict.fromkeys(token for token in tokens(query) if token not in STOPWORDS))


@functools.lru_cache(maxsize=4096)
def is_identifier(term: str) -> bool:
    """A compound token with a digit (``task_ge_001``, ``ac_002``): matching it exactly matters most.
    (Asked of each query term for every record a scan scores: answered once per term.)"""
    if term.startswith(("task_", "turn_", "feat_")):
        return True
    return "_" in term and any(ch.isdigit() for ch in term)


def overlap_score(terms: Iterable[str], document: str) -> float:
    """Relevance of ``document`` to query ``terms``: weighted term presence, identifiers first.

    Each query term found in the document adds ``1 + log(1 + count)``; an identifier-like term
    adds 4 more, and a missing identifier subtracts 6 (a query naming ``TASK-A-1`` is about that
    task). Deterministic and cheap: the file scan's whole ranking rule (the scan sums it through
    its index: :func:`guardkit_state.index.files.rank`).
    """
    counts = Counter(tokens(document))
    score = 0.0
    for term in terms:
        found = counts.get(term, 0)
        ident = is_identifier(term)
        if found:
            score += term_weight(found, ident)
        elif ident:
            score -= MISSING_IDENTIFIER
    return score


#: What a query's identifier missing from a record takes off its score.
MISSING_IDENTIFIER = 6.0


def term_weight(found: int, ident: bool) -> float:
    """What a query term a record holds ``found`` (> 0) times adds to its score (see :func:`overlap_score`)."""
    return 1.0 + math.log1p(found) + (4.0 if ident else 0.0)


#: Field names of turn state records that a query may name as ``name value``.
TURN_FIELDS = frozenset({"coach_decision", "player_decision", "mode"})


@functools.lru_cache(maxsize=64)
def word_pairs(query: str) -> tuple[tuple[str, str], ...]:
    """The query's consecutive lower-cased word pairs: the ``name value`` pairs a record's fields
    may answer (worked out once per query, not once per record scored)."""
    return tuple(pairwise(m.group().lower() for m in _WORD.finditer(query)))


def field_score(query: str, fields: dict[str, str]) -> float:
    """Bonus for ``name value`` pairs in the query that name a record field exactly.

    ``"coach_decision rejected"`` (or ``coach_decision=rejected``) adds 6 to records whose
    ``coach_decision`` is ``rejected`` and takes 6 from those where it is something else.
    """
    lowered = {k.lower(): str(v).lower() for k, v in fields.items()}
    score = 0.0
    for name, value in word_pairs(query):
        if name in lowered:
            score += 6.0 if lowered[name] == value else -6.0
        elif name in TURN_FIELDS:  # a turn field named, and this record has no such field
            score -= 6.0
    return score
