"""What a search asks, understood the same way by both backends.

Identifiers (``TASK-AUTH-001``, ``FEAT-AUTH``, ``AC-002``, ``turn 3``, a turn id), the filters and
``name value`` pairs (``coach_decision rejected``) constrain the answer; ``turn`` beside an
identifier or recency limits it to turns. ``last``/``latest``/``newest``/``most recent`` put the
newest first ("the last turn of TASK-X" is that one turn). The rest are content words; with none,
the answer is the constrained records in their natural order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, TypeAlias, TypeVar

from guardkit_state.errors import InputError
from guardkit_state.index.records import FEATURE, TASK, TURN_STATES, IndexRecord
from guardkit_state.index.words import STOPWORDS, TURN_FIELDS, query_terms, tokens, word_pairs

if TYPE_CHECKING:
    from guardkit_state.index.manifest import RecordMeta

# Identifiers are GuardKit's upper-case ids; a task id has a digit ("task-work" is a word, not an id).
_TASK_ID = re.compile(r"\b(TASK-(?=[A-Z0-9.-]*\d)[A-Z0-9]+(?:[-.][A-Z0-9]+)*)\b")
_FEATURE_ID = re.compile(r"\b(FEAT-[A-Z0-9]+(?:-[A-Z0-9]+)*)\b")
_CRITERION_ID = re.compile(r"\b(AC-\d+)\b", re.I)
_TURN_ID = re.compile(r"\bTURN-[A-Za-z0-9-]*?-(TASK-[A-Za-z0-9-]+?)-T(\d+)\b", re.I)
_TURN_NUMBER = re.compile(r"\bturn\s*#?\s*(\d+)\b", re.I)
_RELATIVE = re.compile(r"^(\d+)\s*([mhdw])$")
_RECENCY = frozenset({"last", "latest", "newest", "recent", "recently", "lately"})
#: Words that shape a query rather than name what it is about.
_STRUCTURAL = frozenset({"turn", "turns", "task", "tasks", "feature", "features", "of", "last", "latest",
                         "newest", "recent", "recently", "lately", "most", "first", "t"})
_KIND_ORDER = {FEATURE: 0, TASK: 1, TURN_STATES: 2}
_SKIP = STOPWORDS | _STRUCTURAL


#: What a filter reads: a record, or the manifest's note of one (its facets, without reading the index).
Facets: TypeAlias = "IndexRecord | RecordMeta"
F = TypeVar("F", IndexRecord, "RecordMeta")


@dataclass(frozen=True)
class Filters:
    """The command line's filters: every record returned satisfies all that are set."""

    task: str | None = None
    feature: str | None = None
    decision: str | None = None
    #: Only records that happened at or after this instant (UTC).
    since: datetime | None = None

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.task, self.feature, self.decision, self.since))


@dataclass(frozen=True)
class ParsedQuery:
    """A query taken apart (see the module docstring)."""

    text: str
    terms: list[str]
    tasks: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    criteria: tuple[str, ...] = ()
    turn: int | None = None
    #: The record kinds the query asks for (``turn TASK-X``: turns), or None for every kind.
    kinds: frozenset[str] | None = None
    recency: bool = False
    #: "the last turn" (one turn, newest): answer just that one.
    newest_only: bool = False
    fields: list[tuple[str, str]] = field(default_factory=list)
    content_terms: list[str] = field(default_factory=list)
    #: A kind of record the words name without an identifier ("which *feature* ..."): preferred.
    kind_hint: str | None = None

    #: The query as the index is asked it: its words as written, identifiers, field pairs,
    #: structure words and stopwords left out (FalkorDB's fulltext ORs every word it is given).
    content_text: str = ""

    def limit(self, asked: int) -> int:
        """How many results to return: one for "the last turn", else as asked."""
        return 1 if self.newest_only else asked

    @property
    def constrained(self) -> bool:
        return bool(self.tasks or self.features or self.criteria or self.turn is not None or self.fields
                    or self.kinds)


def parse_query(text: str) -> ParsedQuery:
    """Take a query apart: identifiers, turn number, recency, field pairs and content words."""
    tasks = [m.group(1).upper() for m in _TASK_ID.finditer(text)]
    turn: int | None = None
    for match in _TURN_ID.finditer(text):
        tasks.append(match.group(1).upper())
        turn = int(match.group(2))
    number = _TURN_NUMBER.search(text)
    turn = int(number.group(1)) if number else turn
    plain = text
    for pattern in (_TURN_ID, _TASK_ID, _FEATURE_ID, _CRITERION_ID):
        plain = pattern.sub(" ", plain)
    words = set(tokens(plain))  # the words besides identifiers ("task" in TASK-X is no word of its own)
    fields = [(name, value) for name, value in word_pairs(text) if name in TURN_FIELDS]  # a turn field named
    features = [f.upper() for f in _FEATURE_ID.findall(text)]
    criteria = [c.upper() for c in _CRITERION_ID.findall(text)]
    named = {t for ident in (*tasks, *features, *criteria) for t in tokens(ident)}
    named |= {t for pair in fields for t in tokens(" ".join(pair))}
    terms = query_terms(text)
    recency = bool(words & _RECENCY) or "most recent" in text.lower()
    content = [t for t in terms if t not in named and t not in _STRUCTURAL and not t.isdigit()]
    return ParsedQuery(
        text=text, terms=terms, tasks=tuple(dict.fromkeys(tasks)), features=tuple(dict.fromkeys(features)),
        criteria=tuple(dict.fromkeys(criteria)), turn=turn,
        kinds=_kinds(words, bool(tasks or features or criteria or recency or turn is not None)),
        recency=recency, newest_only=recency and "turn" in words and "turns" not in words and turn is None,
        fields=fields, content_terms=content, kind_hint=_kind_hint(words),
        content_text=" ".join(w for w in plain.split() if (t := tokens(w)) and t[0] not in _SKIP and t[0] not in named))


_KIND_WORDS = ((TURN_STATES, {"turn", "turns"}), (TASK, {"task", "tasks"}), (FEATURE, {"feature", "features"}))


def _kind_hint(words: set[str]) -> str | None:
    named = [kind for kind, names in _KIND_WORDS if words & names]
    return named[0] if len(named) == 1 else None


def _kinds(words: set[str], pointed: bool) -> frozenset[str] | None:
    """``turn TASK-X`` / ``last turn``: turns; ``task TASK-X``: the task; ``feature FEAT-X``: the plan."""
    if not pointed:
        return None
    for kind, names in _KIND_WORDS:
        if words & names:
            return frozenset({kind})
    return None


def parse_since(value: str, *, now: datetime | None = None) -> datetime:
    """``2026-01-05``, ``2026-01-05T10:00:00Z``, or a span back from now: ``30m``, ``24h``, ``7d``, ``2w``.

    Raises:
        InputError: anything else.
    """
    text = value.strip()
    relative = _RELATIVE.match(text.lower())
    if relative:
        unit = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[relative.group(2)]
        return (now or datetime.now(UTC)) - timedelta(**{unit: int(relative.group(1))})
    parsed = parse_time(text)
    if parsed is None:
        raise InputError(f"--since {value!r} is not a date, a date-time or a span",
                         expected="e.g. 2026-01-05, 2026-01-05T10:00:00Z, 24h, 7d, 2w")
    return parsed


def parse_time(text: str | None) -> datetime | None:
    """An ISO 8601 date or date-time as an aware UTC datetime (naive times are taken as UTC)."""
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


EPOCH = datetime.min.replace(tzinfo=UTC)


def time_of(record: Facets) -> datetime:
    """When ``record`` happened (the earliest instant when the files do not say)."""
    return parse_time(record.completed_at) or EPOCH


def allowed(record: Facets, query: ParsedQuery, filters: Filters) -> bool:
    """True when ``record`` satisfies the filters and every identifier and field the query names."""
    if filters.task and (record.task_id or "").upper() != filters.task.upper():
        return False
    if filters.feature and (record.feature_id or "").upper() != filters.feature.upper():
        return False
    if filters.decision and (record.kind != TURN_STATES or (record.decision or "") != filters.decision.lower()):
        return False
    if filters.since is not None:
        when = parse_time(record.completed_at)
        if when is None or when < filters.since:
            return False
    return matches_query(record, query)


def matches_query(record: Facets, query: ParsedQuery) -> bool:
    """True when ``record`` is one the query's identifiers, turn number and field pairs name."""
    if query.turn is not None and record.kind != TURN_STATES:
        return False
    if query.kinds is not None and record.kind not in query.kinds:
        return False
    if query.tasks and (record.task_id or "").upper() not in query.tasks:
        return False
    if query.features and (record.feature_id or "").upper() not in query.features:
        return False
    if query.turn is not None and record.turn_number != query.turn:
        return False
    if query.criteria and not set(query.criteria) & {c.upper() for c in record.criteria}:
        return False
    return all(record.fields.get(name, "").lower() == value for name, value in query.fields)


def exact_answer(pool: Iterable[tuple[str, F]], query: ParsedQuery) -> list[tuple[str, F]]:
    """The answer to a query with no content words: the ``(key, record)`` pairs it names, in their
    natural order: features, then tasks, then turns oldest first (with recency, all newest first).

    A bare identifier (``TASK-X``, ``FEAT-X``) asks for its history: its turns when it has any.
    """
    records = list(pool)
    if query.kinds is None and not query.content_terms:
        records = [kr for kr in records if kr[1].kind == TURN_STATES] or records
    if query.recency:
        return sorted(records, key=lambda kr: (time_of(kr[1]), kr[1].turn_number or 0, kr[0]), reverse=True)
    return sorted(records, key=lambda kr: (_KIND_ORDER.get(kr[1].kind, 3), kr[1].task_id or "",
                                           kr[1].turn_number or 0, kr[0]))


def reciprocal_rank_fusion(rankings: Sequence[tuple[float, Sequence[str]]], *, k: float = 20.0) -> dict[str, float]:
    """Reciprocal rank fusion: each ``(weight, keys best first)`` list adds ``weight / (k + rank)``."""
    scores: dict[str, float] = {}
    for weight, keys in rankings:
        for rank, key in enumerate(dict.fromkeys(keys), 1):
            scores[key] = scores.get(key, 0.0) + weight / (k + rank)
    return scores
