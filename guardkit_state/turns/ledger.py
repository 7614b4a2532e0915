"""The criteria ledger: cumulative acceptance-criteria status across turns.

GuardKit lost verified criteria between turns: a Player whose turn-1 work met every criterion was
re-judged from scratch when later turns omitted their promises, and the loop stalled. The ledger
remembers: a criterion verified in turn N stays verified until the Coach explicitly rejects it in a
later turn (a regression), and every status records the turn that set it. Pure functions only.

Only the task's own criteria are counted: a Coach verdict on an id the task does not have (ids are
matched exactly, as :func:`~guardkit_state.taskfile.criteria_text.extract_criteria` names them)
stays in the Coach's report file but never enters the ledger, else a Coach could inflate
"1/1 verified" to "3001/3001" by inventing ids. A task whose criteria cannot be read from it
(none parsed) has nothing to check against and keeps every id a verdict names.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from guardkit_state.model import CoachDecision, Criterion, LedgerEntry

#: How many ignored criterion ids a warning names before it says "and N more".
NAMED_IDS = 5

ICONS = {"verified": "✓", "rejected": "✗", "pending": "○"}
#: The note of a criterion an approval verified without an itemised verdict (files written before
#: ``implied_by_approval`` existed are recognised by it).
APPROVAL_NOTE = "approved by the Coach"


@dataclass(frozen=True)
class CriteriaCounts:
    """How many criteria stand where, told apart honestly.

    ``verified``: by an itemised Coach verdict; ``implied_by_approval``: the Coach approved the task
    without itemising them; ``pending``: nothing is known about them yet.
    """

    verified: int = 0
    implied_by_approval: int = 0
    rejected: int = 0
    pending: int = 0

    @property
    def total(self) -> int:
        return self.verified + self.implied_by_approval + self.rejected + self.pending

    def to_dict(self) -> dict[str, int]:
        return {**asdict(self), "total": self.total}

    def describe(self, noun: str = "") -> str:
        """``3/7 verified · 4 implied by approval`` (rejected ones named too, when there are any);
        ``noun`` goes before "verified" (``3/7 criteria verified ...``)."""
        text = f"{self.verified}/{self.total} {noun + ' ' if noun else ''}verified"
        if self.implied_by_approval:
            text += f" · {self.implied_by_approval} implied by approval"
        if self.rejected:
            text += f" · {self.rejected} rejected"
        return text


def _carried(cid: str, old: Mapping[str, Any], text_hash: str | None) -> LedgerEntry:
    """``cid``'s entry as an earlier turn left it (implied by an approval: as it says, else by its note)."""
    status, notes, implied = old.get("status", "pending"), old.get("notes", ""), old.get("implied_by_approval")
    implied = bool(implied) if implied is not None else old.get("status") == "verified" and notes == APPROVAL_NOTE
    return LedgerEntry(cid, status, old.get("set_by_turn"), text_hash, notes, implied)


@dataclass(frozen=True)
class CriteriaLedger:
    """Status of every criterion, in the task's order, with provenance.

    ``known`` is the task's own criterion ids; ``None`` when the task lists none, and then any id
    a verdict names is taken in (there is nothing to check against).
    """

    entries: tuple[LedgerEntry, ...] = field(default_factory=tuple)
    known: frozenset[str] | None = field(default=None, compare=False)

    @classmethod
    def start(
        cls, criteria: Iterable[Criterion], previous: Mapping[str, Mapping[str, Any]] | None = None
    ) -> CriteriaLedger:
        """A ledger for ``criteria``, carrying over ``previous`` provenance (from the last turn state).

        A criterion whose text changed since it was judged (its hash differs) goes back to
        ``pending``, visibly, with a note. Ids judged earlier but not in the task (an edited task,
        or a verdict on a made-up id recorded before such verdicts were ignored) are dropped: their
        verdicts stay in the Coach's report files. A task without criteria keeps every earlier id.
        """
        criteria = list(criteria)
        known = frozenset(criterion.id for criterion in criteria) or None
        previous = previous or {}
        entries: list[LedgerEntry] = []
        for criterion in criteria:
            old = previous.get(criterion.id)
            entry = LedgerEntry(criterion.id, "pending", None, criterion.text_hash)
            if old:
                if old.get("text_hash") in (None, criterion.text_hash):
                    entry = _carried(criterion.id, old, criterion.text_hash)
                else:
                    entry.notes = "criterion text changed; judged again"
            entries.append(entry)
        if known is None:  # no criteria of its own: every id judged earlier is kept
            entries += [_carried(cid, old, old.get("text_hash")) for cid, old in previous.items()]
        return cls(tuple(entries), known)

    def ignored_ids(self, coach: CoachDecision) -> list[str]:
        """The ids ``coach`` judges that the task does not have (in report order, each once):
        :meth:`apply_coach` passes over their verdicts."""
        if self.known is None:
            return []
        return list(dict.fromkeys(v.criterion_id for v in coach.criteria_verification
                                  if v.criterion_id not in self.known))

    def apply_coach(self, turn: int, coach: CoachDecision) -> CriteriaLedger:
        """The ledger after the Coach's decision of ``turn``.

        Explicit verdicts set the status (a later ``rejected`` demotes a verified criterion); an
        approval verifies every criterion it does not itemise that is pending or was rejected in an
        earlier turn, marked as implied by the approval (the Coach approving the task says so of them);
        otherwise silence keeps the old status. A verdict on an id the task does not have
        (:meth:`ignored_ids`) changes nothing.
        """
        by_id = {e.criterion_id: e for e in self.entries}
        order = [e.criterion_id for e in self.entries]
        for verdict in coach.criteria_verification:
            if self.known is not None and verdict.criterion_id not in self.known:
                continue
            old = by_id.get(verdict.criterion_id)
            if old is None:
                order.append(verdict.criterion_id)
                old = LedgerEntry(verdict.criterion_id)
            if old.status != verdict.result or old.implied:
                by_id[verdict.criterion_id] = replace(old, status=verdict.result, set_by_turn=turn,
                                                      notes=verdict.notes, implied=False)
            else:
                by_id[verdict.criterion_id] = old
        ledger = replace(self, entries=tuple(by_id[cid] for cid in order))
        if coach.decision != "approve":
            return ledger
        return ledger.imply_approval(turn, itemised={v.criterion_id for v in coach.criteria_verification})

    def imply_approval(self, turn: int, *, itemised: Collection[str] = ()) -> CriteriaLedger:
        """The ledger after an approval in ``turn``: every criterion not ``itemised`` by it that is
        pending, or was rejected in an earlier turn, verified as implied. An approval that rejects a
        criterion itself is no approval (:func:`~guardkit_state.turns.turn_state.apply_criteria_verdict`);
        one that passes over an earlier rejection in silence approves that criterion too, so an
        approved task never counts a criterion rejected."""
        return replace(self, entries=tuple(
            replace(e, status="verified", set_by_turn=turn, notes=APPROVAL_NOTE, implied=True)
            if e.status in ("pending", "rejected") and e.criterion_id not in itemised else e
            for e in self.entries))

    def statuses(self) -> dict[str, str]:
        return {e.criterion_id: e.status for e in self.entries}

    def implied(self) -> frozenset[str]:
        """The criteria verified only because the Coach approved the task (not itemised)."""
        return frozenset(e.criterion_id for e in self.entries if e.status == "verified" and e.implied)

    def provenance(self) -> dict[str, dict[str, Any]]:
        return {e.criterion_id: e.to_dict() for e in self.entries}

    @property
    def verified_count(self) -> int:
        """Criteria verified, itemised or implied by an approval (see :meth:`counts` to tell them apart)."""
        return sum(1 for e in self.entries if e.status == "verified")

    def counts(self) -> CriteriaCounts:
        return CriteriaCounts(
            verified=sum(1 for e in self.entries if e.status == "verified" and not e.implied),
            implied_by_approval=sum(1 for e in self.entries if e.status == "verified" and e.implied),
            rejected=sum(1 for e in self.entries if e.status == "rejected"),
            pending=sum(1 for e in self.entries if e.status not in ("verified", "rejected")),
        )

    def get(self, criterion_id: str) -> LedgerEntry | None:
        return next((e for e in self.entries if e.criterion_id == criterion_id), None)

    def delta(self, before: CriteriaLedger) -> list[str]:
        """Changes since ``before`` as ``+AC-002`` (newly verified) / ``-AC-001`` (demoted) tokens."""
        old = before.statuses()
        out: list[str] = []
        for entry in self.entries:
            was = old.get(entry.criterion_id, "pending")
            if entry.status == "verified" and was != "verified":
                out.append(f"+{entry.criterion_id}")
            elif was == "verified" and entry.status != "verified":
                out.append(f"-{entry.criterion_id}")
        return out


def ignored_ids_note(task_id: str, ignored: Sequence[str], known: Iterable[str] = ()) -> str:
    """What a turn's warning says of verdicts on ids ``task_id`` does not have: the first
    :data:`NAMED_IDS` named, then "and N more" (a Coach may invent thousands)."""
    named = ", ".join(ignored[:NAMED_IDS])
    if len(ignored) > NAMED_IDS:
        named += f" and {len(ignored) - NAMED_IDS} more"
    own = list(known)
    mine = f" (its criteria: {', '.join(own[:NAMED_IDS])}{' ...' if len(own) > NAMED_IDS else ''})" if own else ""
    return (f"the Coach judged {len(ignored)} criterion id(s) {task_id} does not have{mine}: {named}; "
            "those verdicts are kept in the Coach's report but not counted")


def criteria_lines(criteria: Iterable[Criterion], statuses: Mapping[str, str], *,
                   implied: Collection[str] = ()) -> list[str]:
    """``  ✓ AC-001: text: verified`` lines (the format GuardKit's prompts use), task order, then unknown ids.

    A criterion in ``implied`` (verified only because the Coach approved the task) reads
    ``implied by approval``, as ``show`` and the report say it.
    """
    lines: list[str] = []
    listed: set[str] = set()

    def word(cid: str, status: str) -> str:
        return IMPLIED_WORDS if status == "verified" and cid in implied else status

    for criterion in criteria:
        status = statuses.get(criterion.id, "pending")
        listed.add(criterion.id)
        lines.append(f"  {ICONS.get(status, '○')} {criterion.id}: {criterion.text}: {word(criterion.id, status)}")
    for cid, status in statuses.items():
        if cid not in listed:
            lines.append(f"  {ICONS.get(status, '○')} {cid}: {word(cid, status)}")
    return lines


#: How a criterion verified only by the Coach's approval is named (show, context, the report).
IMPLIED_WORDS = "implied by approval"
