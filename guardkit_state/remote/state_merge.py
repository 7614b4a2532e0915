"""Three-way merge of loop state as data: a task file's frontmatter, a feature plan.

Pure functions, data in and data out (the text around them is :mod:`merge_driver`'s job). The
rules, in the order they apply to each value:

* the same on both sides, or changed on one side only: that value;
* two mappings: merged key by key (a key deleted on one side and untouched on the other is
  deleted);
* a task file's ``turns`` merged by turn number, a plan's ``tasks`` by id, and each entry as a
  mapping; entries keep the order of their numbers (turns) or of ours, then theirs (tasks);
* a status or outcome changed both ways moves forward: the value further along its order
  (:data:`TASK_STATUS_ORDER` ...); two values at one step (``completed`` and ``failed``) conflict;
* ``current_turn`` is the larger, ``last_updated`` the later; the other "latest state" values of a
  state block (``outcome``, ``outcome_reason``, a criterion's status) follow the side whose history
  holds the later turn, when one does;
* anything else changed differently on both sides is a **conflict**: never a silent pick. The
  merge then yields two values, the conflicts resolved as ours and as theirs, for the caller to
  write between conflict markers.

Recorded history only grows: in a task file, a side that deletes a recorded turn (its entry, the
``turns`` list, the whole state block) or un-verifies a criterion the base holds verified, without
recording a later turn (a Coach finding a regression does that), is a conflict even where that
side alone changed, named with what it drops.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from guardkit_state.model import LEGACY_STATE_KEY, STATE_KEY, STATE_KEYS


class _Missing:
    """A key absent from one version (distinct from a ``null`` value)."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()

#: A task's ``status`` (its folder's name): later steps are further along. Same rank = no order.
TASK_STATUS_ORDER: Final[dict[str, int]] = {
    "backlog": 0, "design_approved": 1, "in_progress": 2, "in_review": 3, "blocked": 3,
    "review_complete": 4, "completed": 5, "archived": 6, "cancelled": 6, "obsolete": 6,
}
#: A plan task's ``status``.
PLAN_TASK_STATUS_ORDER: Final[dict[str, int]] = {
    "pending": 0, "in_progress": 1, "completed": 2, "failed": 2, "blocked": 2, "skipped": 2,
}
#: A plan's own ``status``.
PLAN_STATUS_ORDER: Final[dict[str, int]] = {
    "planned": 0, "pending": 0, "in_progress": 1, "completed": 2, "failed": 2, "partial": 2,
}
#: A criterion in a state block's ledger: ``pending`` is before any verdict.
CRITERION_ORDER: Final[dict[str, int]] = {"pending": 0, "verified": 1, "rejected": 1}
#: A state block's ``outcome``: ``null`` (running) before any ending.
OUTCOME_ORDER: Final[dict[Any, int]] = {None: 0, "approved": 1, "max_turns_exceeded": 1, "unrecoverable_stall": 1}


@dataclass(frozen=True)
class Conflict:
    """One value changed differently on both sides."""

    path: str  # e.g. ``autobuild_state.turns[turn=3].decision``
    base: Any
    ours: Any
    theirs: Any
    #: Why it conflicts when not a value changed both ways (recorded history one side drops).
    reason: str | None = None

    def describe(self) -> str:
        if self.reason is not None:
            return f"{self.path}: {self.reason}"
        return f"{self.path}: ours {_show(self.ours)}, theirs {_show(self.theirs)} (base {_show(self.base)})"


@dataclass
class MergedData:
    """The merge of one document: ``as_ours == as_theirs`` when there is no conflict."""

    as_ours: Any
    as_theirs: Any
    conflicts: list[Conflict] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.conflicts


def merge_task_frontmatter(base: Any, ours: Any, theirs: Any) -> MergedData:
    """Merge three versions of a task file's frontmatter (mappings; ``None`` for none)."""
    return _merge_document(base, ours, theirs, _TaskRules())


def merge_plan(base: Any, ours: Any, theirs: Any) -> MergedData:
    """Merge three versions of a feature plan (mappings)."""
    return _merge_document(base, ours, theirs, _PlanRules())


# --------------------------------------------------------------------------- the walk


def _merge_document(base: Any, ours: Any, theirs: Any, rules: _Rules) -> MergedData:
    conflicts: list[Conflict] = []
    as_ours, as_theirs = _merge(_or_empty(base), _or_empty(ours), _or_empty(theirs), (), rules, conflicts)
    return MergedData(as_ours, as_theirs, conflicts)


def _or_empty(value: Any) -> Any:
    return {} if value is None or value is MISSING else value


Path = tuple[str, ...]


def _merge(base: Any, ours: Any, theirs: Any, path: Path, rules: _Rules,
           conflicts: list[Conflict]) -> tuple[Any, Any]:
    """(merged resolving conflicts as ours, merged resolving them as theirs)."""
    if _equal(ours, theirs):
        return ours, ours
    for side, kept, changed in (("theirs", ours, theirs), ("ours", theirs, ours)):
        if not _equal(kept, base):
            continue
        lost = rules.dropped(path, base, changed, side)
        if not lost:
            return changed, changed
        nested = _nested(base, ours, theirs, path, rules, conflicts)
        if nested is not None:
            return nested  # the entries inside say what is dropped
        conflicts.append(Conflict(_spell(path), base, ours, theirs, f"{side} {lost}"))
        return ours, theirs
    nested = _nested(base, ours, theirs, path, rules, conflicts)
    if nested is not None:
        return nested
    forward = rules.forward(path, ours, theirs)
    if forward is not MISSING:
        return forward, forward
    conflicts.append(Conflict(_spell(path), base, ours, theirs))
    return ours, theirs


def _nested(base: Any, ours: Any, theirs: Any, path: Path, rules: _Rules,
            conflicts: list[Conflict]) -> tuple[Any, Any] | None:
    """The merge of two keyed lists or two mappings, entry by entry; None for other values."""
    keyed = rules.list_key(path)
    if keyed is not None and all(isinstance(v, list) for v in (ours, theirs)) and isinstance(base, (list, _Missing)):
        return _merge_keyed(base if isinstance(base, list) else [], ours, theirs, keyed, path, rules, conflicts)
    if isinstance(ours, dict) and isinstance(theirs, dict) and isinstance(base, (dict, _Missing)):
        return _merge_mapping(base if isinstance(base, dict) else {}, ours, theirs, path, rules, conflicts)
    return None


def _merge_mapping(base: dict[Any, Any], ours: dict[Any, Any], theirs: dict[Any, Any], path: Path,
                   rules: _Rules, conflicts: list[Conflict]) -> tuple[Any, Any]:
    rules = rules.entering(path, base, ours, theirs)
    keys = list(ours) + [key for key in theirs if key not in ours]
    merged_o: dict[Any, Any] = {}
    merged_t: dict[Any, Any] = {}
    for key in keys:
        value_o, value_t = _merge(base.get(key, MISSING), ours.get(key, MISSING), theirs.get(key, MISSING),
                                  (*path, str(key)), rules, conflicts)
        if value_o is not MISSING:
            merged_o[key] = value_o
        if value_t is not MISSING:
            merged_t[key] = value_t
    return merged_o, merged_t


def _merge_keyed(base: list[Any], ours: list[Any], theirs: list[Any], key: str, path: Path,
                 rules: _Rules, conflicts: list[Conflict]) -> tuple[Any, Any]:
    """Lists of mappings identified by ``key`` (a turn's number, a task's id)."""
    b, o, t = (_index(items, key) for items in (base, ours, theirs))
    if b is None or o is None or t is None:  # an entry without its key, or a key twice: as a whole
        conflicts.append(Conflict(_spell(path), base, ours, theirs))
        return ours, theirs
    order = list(o) + [ident for ident in t if ident not in o]
    if key == "turn":
        order.sort(key=lambda ident: (not isinstance(ident, int), ident if isinstance(ident, int) else 0))
    merged_o: list[Any] = []
    merged_t: list[Any] = []
    for ident in order:
        value_o, value_t = _merge(b.get(ident, MISSING), o.get(ident, MISSING), t.get(ident, MISSING),
                                  (*path, f"[{key}={ident}]"), rules, conflicts)
        if value_o is not MISSING:
            merged_o.append(value_o)
        if value_t is not MISSING:
            merged_t.append(value_t)
    return merged_o, merged_t


def _equal(a: Any, b: Any) -> bool:
    """The same YAML value: ``1``, ``True`` and ``1.0`` differ (Python's ``==`` calls them equal);
    a mapping's key order does not matter."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _index(items: list[Any], key: str) -> dict[Any, Any] | None:
    index: dict[Any, Any] = {}
    for item in items:
        if not isinstance(item, dict) or key not in item or item[key] in index:
            return None
        ident = item[key]
        if not isinstance(ident, (str, int)) or isinstance(ident, bool):
            return None
        index[ident] = item
    return index


def _spell(path: Path) -> str:
    return ".".join(path).replace(".[", "[") or "(document)"


def _show(value: Any) -> str:
    return "(absent)" if value is MISSING else repr(value)


def _ranked(order: dict[Any, int], ours: Any, theirs: Any) -> Any:
    """The value further along ``order``; MISSING when either is unknown or both are at one step."""
    try:
        rank_o, rank_t = order.get(ours), order.get(theirs)
    except TypeError:  # an unhashable value: not a status
        return MISSING
    if rank_o is None or rank_t is None or rank_o == rank_t:
        return MISSING
    return ours if rank_o > rank_t else theirs


# --------------------------------------------------------------------------- the rules per kind


class _Rules:
    """Which lists are keyed and which scalars move forward, by path."""

    def list_key(self, path: Path) -> str | None:
        return None

    def forward(self, path: Path, ours: Any, theirs: Any) -> Any:
        return MISSING

    def entering(self, path: Path, base: dict[Any, Any], ours: dict[Any, Any], theirs: dict[Any, Any]) -> _Rules:
        return self

    def dropped(self, path: Path, base: Any, changed: Any, side: str) -> str | None:
        """What recorded history ``side`` drops by changing ``base`` into ``changed`` (one phrase), or None."""
        return None


def _last_turn(block: Any) -> int:
    turns = block.get("turns") if isinstance(block, dict) else None
    numbers = [entry.get("turn") for entry in turns or [] if isinstance(entry, dict)]
    return max((n for n in numbers if isinstance(n, int) and not isinstance(n, bool)), default=0)


class _TaskRules(_Rules):
    def __init__(self, later: str | None = None, grown: frozenset[str] = frozenset()) -> None:
        self.later = later  # inside a state block: "ours"/"theirs" holds the later turn, or None
        self.grown = grown  # inside a state block: the sides holding a turn later than the base's last

    def entering(self, path: Path, base: dict[Any, Any], ours: dict[Any, Any], theirs: dict[Any, Any]) -> _Rules:
        if path in ((STATE_KEY,), (LEGACY_STATE_KEY,)):
            last_b, last_o, last_t = _last_turn(base), _last_turn(ours), _last_turn(theirs)
            grown = frozenset(side for side, last in (("ours", last_o), ("theirs", last_t)) if last > last_b)
            return _TaskRules("ours" if last_o > last_t else "theirs" if last_t > last_o else None, grown)
        return self

    def dropped(self, path: Path, base: Any, changed: Any, side: str) -> str | None:
        turns_b, verified_b = _recorded(path, base)
        turns_c, verified_c = _recorded(path, changed)
        lost_turns = sorted(turns_b - turns_c)
        # A later turn may un-verify a criterion (the Coach found a regression): that is history too.
        grew = side in self.grown if len(path) > 1 else _last_turn_at(path, changed) > _last_turn_at(path, base)
        lost_verified = [] if grew else sorted(verified_b - verified_c)
        parts = []
        if lost_turns:
            parts.append(f"deletes recorded turn{'s' if len(lost_turns) > 1 else ''} "
                         + ", ".join(str(n) for n in lost_turns))
        if lost_verified:
            parts.append(f"un-verifies {', '.join(lost_verified)} (verified in the base) without a later turn")
        return " and ".join(parts) + ": a merge never drops recorded history" if parts else None

    def list_key(self, path: Path) -> str | None:
        return "turn" if len(path) == 2 and path[0] in (STATE_KEY, LEGACY_STATE_KEY) and path[1] == "turns" else None

    def forward(self, path: Path, ours: Any, theirs: Any) -> Any:
        if path == ("status",):
            return _ranked(TASK_STATUS_ORDER, ours, theirs)
        if not path or path[0] not in (STATE_KEY, LEGACY_STATE_KEY):
            return MISSING
        tail = path[1:]
        if tail == ("current_turn",) and all(_whole(v) for v in (ours, theirs)):
            return max(ours, theirs)
        if tail == ("last_updated",) and all(isinstance(v, str) for v in (ours, theirs)):
            return max(ours, theirs)  # ISO timestamps written by one writer: the text orders them
        latest = tail in (("outcome",), ("outcome_reason",)) or (len(tail) == 2 and tail[0] == "criteria")
        if latest and self.later is not None:
            return ours if self.later == "ours" else theirs
        if tail == ("outcome",):
            return _ranked(OUTCOME_ORDER, ours, theirs)
        if len(tail) == 2 and tail[0] == "criteria":
            return _ranked(CRITERION_ORDER, ours, theirs)
        return MISSING


class _PlanRules(_Rules):
    def list_key(self, path: Path) -> str | None:
        return "id" if path == ("tasks",) else None

    def forward(self, path: Path, ours: Any, theirs: Any) -> Any:
        if path == ("status",):
            return _ranked(PLAN_STATUS_ORDER, ours, theirs)
        if len(path) == 3 and path[0] == "tasks" and path[2] == "status":
            return _ranked(PLAN_TASK_STATUS_ORDER, ours, theirs)
        if len(path) == 3 and path[0] == "tasks" and path[2] == "turns_completed":
            return max(ours, theirs) if all(_whole(v) for v in (ours, theirs)) else MISSING
        if len(path) == 2 and path[0] == "execution":
            name = path[1]
            if name in ("current_wave", "tasks_completed", "tasks_failed", "total_turns"):
                return max(ours, theirs) if all(_whole(v) for v in (ours, theirs)) else MISSING
            if name == "completed_waves" and all(isinstance(v, list) for v in (ours, theirs)):
                try:
                    return sorted(set(ours) | set(theirs))
                except TypeError:
                    return MISSING
            if name in ("last_updated", "completed_at") and all(isinstance(v, str) for v in (ours, theirs)):
                return max(ours, theirs)
        return MISSING


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_NOTHING: Final[tuple[frozenset[int], frozenset[str]]] = (frozenset(), frozenset())


def _recorded(path: Path, value: Any) -> tuple[frozenset[int], frozenset[str]]:
    """The turn numbers and the verified criterion ids that ``value``, at ``path`` of a task's
    frontmatter, records (the document, a state block, its ``turns`` or one entry, its ``criteria``
    or one criterion)."""
    if not path:
        if not isinstance(value, dict):
            return _NOTHING
        found = [_recorded((key,), value[key]) for key in STATE_KEYS if key in value]
        return (frozenset().union(*(t for t, _ in found)), frozenset().union(*(c for _, c in found)))
    if path[0] not in STATE_KEYS:
        return _NOTHING
    tail = path[1:]
    if not tail:
        if not isinstance(value, dict):
            return _NOTHING
        return (_recorded((*path, "turns"), value.get("turns"))[0],
                _recorded((*path, "criteria"), value.get("criteria"))[1])
    if tail == ("turns",) and isinstance(value, list):
        return frozenset(e["turn"] for e in value if isinstance(e, dict) and _whole(e.get("turn"))), frozenset()
    if len(tail) == 2 and tail[0] == "turns" and isinstance(value, dict) and _whole(value.get("turn")):
        return frozenset((value["turn"],)), frozenset()
    if tail == ("criteria",) and isinstance(value, dict):
        return frozenset(), frozenset(str(key) for key, status in value.items() if status == "verified")
    if len(tail) == 2 and tail[0] == "criteria" and value == "verified":
        return frozenset(), frozenset((tail[1],))
    return _NOTHING


def _last_turn_at(path: Path, value: Any) -> int:
    """The last turn recorded in ``value``: the document (its state blocks) or one state block."""
    if not path:
        return max((_last_turn(value.get(key)) for key in STATE_KEYS), default=0) if isinstance(value, dict) else 0
    return _last_turn(value)


__all__ = [
    "CRITERION_ORDER", "MISSING", "OUTCOME_ORDER", "PLAN_STATUS_ORDER", "PLAN_TASK_STATUS_ORDER",
    "TASK_STATUS_ORDER", "Conflict", "MergedData", "merge_plan", "merge_task_frontmatter",
]
