"""Role constraints for the Player and the Coach (docs/index.md), with per-project additions.

Each role has four lists: ``must_do``, ``must_not_do``, ``ask_before``, ``escalate_when``. The
built-in lists are the defaults of docs/index.md. A project can only *add* to them (``*_additions`` in
``entity-overrides.yaml``); nothing replaces a default, so a project cannot quietly drop, say,
"Write implementation code" from what the Coach must not do.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from guardkit_state.config.gates import BUILT_IN
from guardkit_state.model import Fields

log = logging.getLogger("guardkit_state.config.roles")

RULE_KINDS = ("must_do", "must_not_do", "ask_before", "escalate_when")


@dataclass(frozen=True)
class Rule(Fields):
    """One constraint and where it came from (``"built-in"`` or ``"override: <path>"``)."""

    text: str
    source: str = BUILT_IN


@dataclass(frozen=True)
class RoleConstraints:
    """What one role must do, must not do, asks before doing, and escalates (docs/index.md)."""

    role: str
    must_do: tuple[Rule, ...] = ()
    must_not_do: tuple[Rule, ...] = ()
    ask_before: tuple[Rule, ...] = ()
    escalate_when: tuple[Rule, ...] = ()

    @property
    def entity_id(self) -> str:
        """The stable id: ``ROLE-{role}``."""
        return f"ROLE-{self.role}"

    def texts(self, kind: str) -> list[str]:
        """The texts of one list (``kind`` is one of :data:`RULE_KINDS`)."""
        return [rule.text for rule in self._rules(kind)]

    def extended(self, kind: str, texts: Iterable[str], source: str) -> RoleConstraints:
        """A copy with ``texts`` appended to list ``kind``; exact repeats of existing rules are skipped."""
        current = list(self._rules(kind))
        seen = {rule.text for rule in current}
        for text in texts:
            if text in seen:
                log.info("role %s %s: %r is already present; not added twice", self.role, kind, text)
                continue
            seen.add(text)
            current.append(Rule(text, source))
        change: dict[str, Any] = {kind: tuple(current)}
        return replace(self, **change)

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "id": self.entity_id,
                **{kind: [rule.to_dict() for rule in self._rules(kind)] for kind in RULE_KINDS}}

    def _rules(self, kind: str) -> tuple[Rule, ...]:
        if kind not in RULE_KINDS:
            raise KeyError(f"unknown constraint list {kind!r} (expected one of {', '.join(RULE_KINDS)})")
        rules: tuple[Rule, ...] = getattr(self, kind)
        return rules


def _builtin(role: str, **lists: list[str]) -> RoleConstraints:
    return RoleConstraints(role, **{kind: tuple(Rule(text) for text in texts) for kind, texts in lists.items()})


#: The default constraints of docs/index.md, exactly (the fallback without any override file).
BUILTIN_ROLE_CONSTRAINTS: Mapping[str, RoleConstraints] = {
    "player": _builtin(
        "player",
        must_do=["Implement code", "Follow implementation plans", "Write tests",
                 "Report blockers with evidence"],
        must_not_do=["Validate quality gates", "Make architectural decisions without ADR",
                     "Modify quality profiles", "Ask for human guidance mid-feature"],
        ask_before=["Changing architecture from plan", "Modifying external deps",
                    "Skipping acceptance criteria"],
        escalate_when=[],
    ),
    "coach": _builtin(
        "coach",
        must_do=["Validate against acceptance criteria", "Run quality gates",
                 "Provide actionable feedback", "Track AC status"],
        must_not_do=["Write implementation code", "Modify implementation directly",
                     "Make implementation decisions", "Change AC mid-task"],
        ask_before=[],
        escalate_when=["Test failures persist after 3 attempts", "Architecture violations detected",
                       "AC cannot be met as written"],
    ),
}


def apply_role_additions(
    roles: Mapping[str, RoleConstraints],
    additions: Mapping[str, Mapping[str, list[str]]],
    source: str,
) -> dict[str, RoleConstraints]:
    """Extend each role's lists with ``{role: {"must_do_additions": [...], ...}}``; never replace.

    ``additions`` is the already-validated ``role_constraints`` mapping of an override file.
    """
    merged = dict(roles)
    for role, lists in additions.items():
        current = merged.get(role, RoleConstraints(role))
        for key, texts in lists.items():
            current = current.extended(key.removesuffix("_additions"), texts, source)
        merged[role] = current
    return merged

