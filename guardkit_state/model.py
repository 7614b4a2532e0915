"""The records guardkit-state reads and writes.

Each record is a dataclass built from the *canonical* dict shape (what ``schemas.py`` returns after
validation and normalisation of legacy aliases) and turned back into it by ``to_dict``. Unknown
fields that producers add are kept in ``extra`` and written back unchanged.
"""

from __future__ import annotations

import copy
import functools
import hashlib
from collections.abc import Collection, Mapping
from dataclasses import Field, dataclass, field, fields
from enum import Enum
from pathlib import PurePath
from typing import Any, ClassVar, Literal

SCHEMA_VERSION = 1

CriterionState = Literal["verified", "rejected", "pending"]


class TurnMode(str, Enum):  # noqa: UP042 - str() and format() of members must not change
    """How a turn started: afresh, continuing the work, or recovering from an interruption."""

    FRESH_START = "fresh_start"
    CONTINUING_WORK = "continuing_work"
    RECOVERING_STATE = "recovering_state"


class Outcome(str, Enum):  # noqa: UP042 - str() and format() of members must not change
    """How a loop ended, and the task status each outcome sets."""

    APPROVED = "approved"
    MAX_TURNS_EXCEEDED = "max_turns_exceeded"
    UNRECOVERABLE_STALL = "unrecoverable_stall"
    #: The same agent failure (missing binary, authentication, quota) twice in a row.
    AGENT_FAILED = "agent_failed"
    #: ``--max-cost`` reached.
    COST_LIMIT_REACHED = "cost_limit_reached"

    @property
    def task_status(self) -> str:
        return "in_review" if self is Outcome.APPROVED else "blocked"


@functools.lru_cache(maxsize=4096)  # every turn hashes the same few criteria again
def text_hash(text: str) -> str:
    """Short stable hash of a criterion's text (whitespace-normalised), to notice edits."""
    normal = " ".join(text.split())
    return hashlib.sha256(normal.encode("utf-8")).hexdigest()[:12]


def _pop_known(data: Mapping[str, Any], names: Collection[str]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in names}


def _copied(value: Any) -> Any:
    """A mapping of a record's list as a dict of its own (its values are JSON scalars), else a deep copy."""
    if isinstance(value, dict) and all(type(v) in _SCALAR_TYPES for v in value.values()):
        return dict(value)
    return copy.deepcopy(value)


#: The types of JSON scalars (not to be confused with a record's ``_SCALARS``, its scalar fields).
_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})


def json_ready(value: Any) -> Any:
    """``value`` as JSON data: a record by its ``to_dict()``, an enum by its value, a path as text,
    a tuple as a list (mappings and lists item by item); anything else as it is."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [json_ready(item) for item in value]
    if isinstance(value, dict):
        return {key: json_ready(item) for key, item in value.items()}
    return value


class Fields:
    """A dataclass whose JSON view is its fields, in their order (:func:`json_ready`): a record that
    says no more than its fields needs no ``to_dict`` of its own to keep in step with them."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    def to_dict(self) -> dict[str, Any]:
        return {f.name: json_ready(getattr(self, f.name)) for f in fields(self)}


class _Record(Fields):
    """A record the store reads and writes: its fields in their order (a versioned one after its
    ``schema_version``), then ``extra``, the keys producers added, written back as they came.

    A field of ``_WHEN_SET`` is written only when it is not None, one of ``_WHEN_ANY`` only when it is
    not empty: files written before such a field existed read back byte for byte.
    """

    extra: dict[str, Any]
    _VERSIONED: ClassVar[bool] = True
    _WHEN_SET: ClassVar[tuple[str, ...]] = ()
    _WHEN_ANY: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def _keys(cls) -> tuple[tuple[str, ...], frozenset[str]]:
        """The record's fields but ``extra``, and the keys of its JSON they hold (worked out once per class)."""
        keys = cls.__dict__.get("_KEYS")
        if keys is None:
            names = tuple(f.name for f in fields(cls) if f.name != "extra")
            keys = (names, frozenset({*names, "schema_version"} if cls._VERSIONED else names))
            setattr(cls, "_KEYS", keys)  # noqa: B010 - a class attribute of this class, not a base's
        return keys

    @classmethod
    def _extra(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        """The keys of ``data`` that are none of the record's own (its ``extra``)."""
        return _pop_known(data, cls._keys()[1])

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema_version": SCHEMA_VERSION} if self._VERSIONED else {}
        when_set, when_any = self._WHEN_SET, self._WHEN_ANY
        for name in self._keys()[0]:
            value = getattr(self, name)
            if (value is None and name in when_set) or (not value and name in when_any):
                continue
            if isinstance(value, list):  # lists and mappings copied; records in a list by their own view
                value = [item.to_dict() if isinstance(item, _Record) else item for item in value]
            out[name] = dict(value) if isinstance(value, dict) else value
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class Criterion:
    """One acceptance criterion of a task: its id (``AC-1``, ``AC-001``) and its text."""

    id: str
    text: str
    checked: bool = False
    #: The criterion as written, label included, when ``text`` leaves the label out. The hash is of
    #: this: taking the label as the id must not make an already-judged criterion look edited.
    written: str | None = field(default=None, compare=False)
    #: GuardKit's routing-law stamp on a frontmatter criterion (``verifier:``, ``test_ref:``), as written.
    verifier: str | None = field(default=None, compare=False)
    test_ref: str | None = field(default=None, compare=False)

    @property
    def text_hash(self) -> str:
        return text_hash(self.written if self.written is not None else self.text)


@dataclass
class CompletionPromise(_Record):
    criterion_id: str
    criterion_text: str = ""
    status: Literal["complete", "partial", "incomplete"] = "incomplete"
    evidence: str = ""
    test_file: str | None = None
    implementation_files: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    _VERSIONED = False
    _WHEN_SET = ("test_file",)
    _WHEN_ANY = ("implementation_files",)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompletionPromise:
        return cls(
            criterion_id=data["criterion_id"],
            criterion_text=data.get("criterion_text") or "",
            status=data.get("status", "incomplete"),
            evidence=data.get("evidence") or "",
            test_file=data.get("test_file"),
            implementation_files=list(data.get("implementation_files") or []),
            extra=cls._extra(data),
        )


@dataclass
class PlayerReport(_Record):
    """The Player's report for one turn (``player_turn_N.json``)."""

    task_id: str
    turn: int
    files_modified: list[str] = field(default_factory=list)
    files_created: list[str] = field(default_factory=list)
    tests_written: list[str] = field(default_factory=list)
    tests_run: bool = False
    tests_passed: bool = False
    implementation_notes: str = ""
    concerns: list[str] = field(default_factory=list)
    requirements_addressed: list[str] = field(default_factory=list)
    requirements_remaining: list[str] = field(default_factory=list)
    completion_promises: list[CompletionPromise] | None = None
    summary: str | None = None
    test_output_summary: str | None = None
    tests_passed_count: int | None = None
    tests_failed_count: int | None = None
    coverage: float | None = None
    lessons: list[str] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    _LISTS = ("files_modified", "files_created", "tests_written", "concerns",
              "requirements_addressed", "requirements_remaining", "lessons", "blockers")
    _SCALARS = ("summary", "test_output_summary", "tests_passed_count", "tests_failed_count", "coverage")
    _WHEN_SET = ("completion_promises", *_SCALARS)
    _WHEN_ANY = ("lessons", "blockers")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PlayerReport:
        promises = data.get("completion_promises")
        return cls(
            task_id=data["task_id"],
            turn=int(data["turn"]),
            tests_run=bool(data.get("tests_run", False)),
            tests_passed=bool(data.get("tests_passed", False)),
            implementation_notes=data.get("implementation_notes") or "",
            completion_promises=None if promises is None else [CompletionPromise.from_dict(p) for p in promises],
            extra=cls._extra(data),
            **{name: list(data.get(name) or []) for name in cls._LISTS},  # type: ignore[arg-type]
            **{name: data.get(name) for name in cls._SCALARS},  # type: ignore[arg-type]
        )

    @property
    def headline(self) -> str:
        """One-line summary: ``summary`` if given, else the first sentence of the notes."""
        if self.summary:
            return self.summary.strip()
        notes = self.implementation_notes.strip()
        if not notes:
            changed = self.files_created + self.files_modified
            return f"Changed {len(changed)} file(s): {', '.join(changed[:3])}" if changed else ""
        first = notes.split("\n", 1)[0]
        for stop in (". ", ": "):
            if stop in first:
                first = first.split(stop, 1)[0] + ("." if stop == ". " else "")
                break
        return first[:300]


@dataclass
class CriterionVerification(_Record):
    criterion_id: str
    result: Literal["verified", "rejected"]
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    _VERSIONED = False

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CriterionVerification:
        return cls(data["criterion_id"], data["result"], data.get("notes") or "", cls._extra(data))


@dataclass
class CoachDecision(_Record):
    """The Coach's decision for one turn (``coach_turn_N.json``)."""

    task_id: str
    turn: int
    decision: Literal["approve", "feedback", "reject"]
    issues: list[dict[str, Any]] = field(default_factory=list)
    criteria_verification: list[CriterionVerification] = field(default_factory=list)
    validation_results: dict[str, Any] = field(default_factory=dict)
    rationale: str = ""
    feedback: str | None = None
    what_to_try_next: str | None = None
    lessons: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    _WHEN_SET = ("feedback", "what_to_try_next")
    _WHEN_ANY = ("lessons",)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CoachDecision:
        return cls(
            task_id=data["task_id"],
            turn=int(data["turn"]),
            decision=data["decision"],
            issues=list(data.get("issues") or []),
            criteria_verification=[CriterionVerification.from_dict(c) for c in data.get("criteria_verification") or []],
            validation_results=dict(data.get("validation_results") or {}),
            rationale=data.get("rationale") or "",
            feedback=data.get("feedback"),
            what_to_try_next=data.get("what_to_try_next"),
            lessons=list(data.get("lessons") or []),
            extra=cls._extra(data),
        )

    @property
    def feedback_text(self) -> str | None:
        """What the Player must hear: explicit feedback, else the blocking issues, else the rationale."""
        if self.decision == "approve":
            return None
        if self.feedback:
            return self.feedback
        issue_lines = [f"- {i.get('description') or i.get('message') or i}" for i in self.issues
                       if str(i.get("severity", "must_fix")) in ("must_fix", "error", "critical", "high")]
        if issue_lines:
            return "\n".join(issue_lines)
        return self.rationale or None


@dataclass
class LedgerEntry:
    """The cumulative status of one criterion, and which turn set it."""

    criterion_id: str
    status: CriterionState = "pending"
    set_by_turn: int | None = None
    text_hash: str | None = None
    notes: str = ""
    #: Verified only because the Coach approved the task, not by an itemised verdict on it.
    implied: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "set_by_turn": self.set_by_turn,
                               "text_hash": self.text_hash, "notes": self.notes}
        if self.implied:
            out["implied_by_approval"] = True
        return out


@dataclass
class GateResult(Fields):
    """One quality gate's verdict on a turn (filled by :mod:`guardkit_state.config`)."""

    gate: str
    passed: bool | None
    actual: float | int | bool | None
    threshold: float | int | bool | None
    source: str = "built-in"
    required: bool = True  # False: the profile does not require this gate (it cannot fail)


@dataclass
class TurnState(_Record):
    """The assembled state of one finished turn, ``turn_state_turn_N.json`` (``docs/file-formats.md``)."""

    id: str
    feature_id: str | None
    task_id: str
    turn_number: int
    mode: str
    player_summary: str
    player_decision: Literal["implemented", "failed", "blocked"]
    coach_decision: Literal["approved", "feedback", "rejected", "error"]
    coach_feedback: str | None
    blockers_found: list[str] = field(default_factory=list)
    progress_summary: str = ""
    acceptance_criteria_status: dict[str, str] = field(default_factory=dict)
    criteria_provenance: dict[str, dict[str, Any]] = field(default_factory=dict)
    files_modified: list[str] = field(default_factory=list)
    tests_passed: int | None = None
    tests_failed: int | None = None
    coverage: float | None = None
    arch_score: float | None = None
    started_at: str | None = None
    completed_at: str | None = None
    duration_seconds: float | None = None
    lessons_from_turn: list[str] = field(default_factory=list)
    what_to_try_next: str | None = None
    feedback_signature: str | None = None
    verified_count: int = 0
    gate_results: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    #: The Coach's issues (description, suggestion, severity, category): the next turn must address them.
    coach_issues: list[dict[str, Any]] = field(default_factory=list)
    #: The Coach's note on each criterion it judged (id -> note), for the next turn's context.
    criteria_notes: dict[str, str] = field(default_factory=dict)
    #: Per role ("player", "coach"): agent, model, session id, cost in USD, tokens, duration.
    agent_runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The role whose agent failed, when the turn is an error because of an agent ("player"/"coach").
    failed_role: str | None = None
    #: Criterion results written as synonyms and how they were read ({criterion_id, written, read_as}).
    verdict_words: list[dict[str, Any]] = field(default_factory=list)
    #: Why a quality gate overturned the Coach's approval (one line), when one did.
    gate_override: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _WHEN_ANY = ("coach_issues", "criteria_notes", "agent_runs", "failed_role", "verdict_words", "gate_override")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TurnState:
        # Nothing mutable is shared with ``data``: it may be a record the store keeps (TurnStore.peek).
        known = {name: data[name] for name in cls._keys()[0] if name in data and name not in cls._WHEN_ANY}
        for name in ("blockers_found", "files_modified", "lessons_from_turn"):
            known[name] = list(known.get(name) or [])
        known["gate_results"] = [_copied(g) for g in known.get("gate_results") or []]
        known["acceptance_criteria_status"] = dict(known.get("acceptance_criteria_status") or {})
        known["criteria_provenance"] = {k: _copied(v) for k, v in (known.get("criteria_provenance") or {}).items()}
        known.setdefault("progress_summary", "")
        known["verified_count"] = int(known.get("verified_count") or 0)
        for name in cls._WHEN_ANY:
            if data.get(name) is not None:
                known[name] = _copied(data[name])
        extra = cls._extra(data)
        return cls(**known, extra=copy.deepcopy(extra) if extra else extra)


def turn_state_id(feature_id: str | None, task_id: str, turn: int) -> str:
    """``TURN-{feature_id}-{task_id}-T{n}`` (GuardKit's turn id); tasks without a feature use ``NOFEAT``."""
    return f"TURN-{feature_id or 'NOFEAT'}-{task_id}-T{turn}"


# --------------------------------------------------------------------------- the task file's state block
# Written by hand as often as by tools: read through its JSON Schema (``schemas/autobuild_state``,
# ``taskfile/frontmatter.py``), which names a bad value by its key; the records below take the
# checked, canonical data (numbers an editor quoted, ``turn: '1'``, are those numbers by then).

#: The state block's key: GuardKit's, and the older loop's legacy name (read and written back as is).
#: Here, with the records, so that finding task files needs no YAML.
STATE_KEY = "autobuild_state"
LEGACY_STATE_KEY = "feature_build"
STATE_KEYS = (STATE_KEY, LEGACY_STATE_KEY)


@dataclass
class TurnEntry(_Record):
    """One item of ``autobuild_state.turns`` in the task frontmatter: a readable summary."""

    turn: int
    decision: str
    feedback: str | None = None
    timestamp: str | None = None
    player_summary: str | None = None
    player_success: bool | None = None
    coach_success: bool | None = None
    mode: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _VERSIONED = False
    _WHEN_SET = ("mode",)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TurnEntry:
        """An entry of a state block checked against its schema."""
        return cls(data["turn"], data["decision"], extra=cls._extra(data),
                   **{name: data.get(name) for name in cls._keys()[0][2:]})  # the fields after these two

    def to_dict(self) -> dict[str, Any]:
        """Key order follows GuardKit's own entries (``mode``, when set, second), then ours, so files stay familiar."""
        return {"turn": self.turn, **({"mode": self.mode} if self.mode is not None else {}), **super().to_dict()}


@dataclass
class AutobuildState:
    """The ``autobuild_state`` (or legacy ``feature_build``) block of a task's frontmatter."""

    key: str = STATE_KEY
    current_turn: int = 0
    max_turns: int | None = None
    worktree_path: str | None = None
    base_branch: str | None = None
    started_at: str | None = None
    last_updated: str | None = None
    criteria: dict[str, str] = field(default_factory=dict)
    turns: list[TurnEntry] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    _KNOWN = ("current_turn", "max_turns", "worktree_path", "base_branch", "started_at", "last_updated",
              "criteria", "turns")

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, key: str = STATE_KEY) -> AutobuildState:
        """The state block checked against its schema (``taskfile.frontmatter.checked_state``)."""
        scalars = {name: data.get(name) for name in cls._KNOWN[1:6]}
        return cls(key=key, current_turn=data.get("current_turn") or 0, criteria=dict(data.get("criteria") or {}),
                   turns=[TurnEntry.from_dict(entry) for entry in data.get("turns") or []],
                   extra=_pop_known(data, cls._KNOWN), **scalars)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"current_turn": self.current_turn, "max_turns": self.max_turns,
                               "worktree_path": self.worktree_path, "base_branch": self.base_branch,
                               "started_at": self.started_at, "last_updated": self.last_updated}
        out.update(self.extra)
        if self.criteria:
            out["criteria"] = dict(self.criteria)
        out["turns"] = [t.to_dict() for t in self.turns]
        return out

    @property
    def next_turn(self) -> int:
        """GuardKit's own resume rule: the turn after the last recorded one."""
        return len(self.turns) + 1
