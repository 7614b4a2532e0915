"""Implementation modes (docs/index.md) and the advisory mode suggestion.

Three modes: ``direct`` (complexity 1-3), ``task_work`` (3-7) and ``autobuild`` (5-10). The ranges
overlap on purpose (they say where a mode is *reasonable*), so a suggestion needs a tie-break:
among the modes whose range holds the complexity, the one whose range centre is nearest wins,
and an exact tie goes to the lower-ceremony mode (the "least ceremony" principle). That
gives direct 1-3, task_work 4-6, autobuild 7-10 — the same bands as the feature gate profiles —
and every other mode whose range also holds the complexity is listed as an alternative.

Advice only: nothing here blocks or changes how a task runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from guardkit_state.config.gates import BUILT_IN, MAX_COMPLEXITY, MIN_COMPLEXITY
from guardkit_state.model import Fields
from guardkit_state.store.layout import WORKTREES_DIR, branch_for

CEREMONY_ORDER = ("minimal", "standard", "full")


@dataclass(frozen=True)
class ImplementationMode(Fields):
    """One way of doing a task (an index entity, see docs/index.md)."""

    mode: str
    invocation_method: str
    result_location_pattern: str
    state_recovery_strategy: str
    when_to_use: tuple[str, ...]
    pitfalls: tuple[str, ...]
    complexity_range: tuple[int, int]
    ceremony_level: str
    source: str = BUILT_IN

    @property
    def entity_id(self) -> str:
        """The stable id: ``MODE-{mode}``."""
        return f"MODE-{self.mode}"

    def covers(self, complexity: int) -> bool:
        low, high = self.complexity_range
        return low <= complexity <= high

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "id": self.entity_id, **super().to_dict()}  # its fields, the id second


#: The three default modes (docs/index.md).
BUILTIN_MODES: Mapping[str, ImplementationMode] = {
    "direct": ImplementationMode(
        mode="direct",
        invocation_method="inline",
        result_location_pattern="files edited in place in the current checkout",
        state_recovery_strategy="git_check_first",
        when_to_use=("Simple file ops", "Config changes", "Doc updates"),
        pitfalls=("Don't use for complex implementations", "Check git status first"),
        complexity_range=(1, 3),
        ceremony_level="minimal",
    ),
    "task_work": ImplementationMode(
        mode="task_work",
        invocation_method="sdk_query",
        result_location_pattern=f"{WORKTREES_DIR.as_posix()}/FEAT-XXX/ (the feature's worktree, not TASK-XXX)",
        state_recovery_strategy="resume_from_checkpoint",
        when_to_use=("Feature work needing quality gates", "Multi-file changes"),
        pitfalls=(
            "MUST use SDK query(), NOT subprocess (ADR-FB-001)",
            "Paths use FEAT-XXX worktree ID, not TASK-XXX (ADR-FB-002)",
            "Implementation plan MUST exist before execution (ADR-FB-003)",
        ),
        complexity_range=(3, 7),
        ceremony_level="standard",
    ),
    "autobuild": ImplementationMode(
        mode="autobuild",
        invocation_method="orchestrated",
        result_location_pattern=f"{WORKTREES_DIR.as_posix()}/TASK-XXX/ on branch {branch_for('TASK-XXX')}",
        state_recovery_strategy="resume_from_checkpoint",
        when_to_use=("Multi-task features needing player-coach adversarial cooperation",),
        pitfalls=("Requires feature-plan output", "Don't mix with manual edits during execution"),
        complexity_range=(5, 10),
        ceremony_level="full",
    ),
}


@dataclass(frozen=True)
class ModeAdvice:
    """An advisory mode suggestion for one complexity, with the reasoning and the alternatives."""

    mode: ImplementationMode
    complexity: int
    alternatives: tuple[str, ...] = ()
    reason: str = ""
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"suggested_mode": self.mode.mode, "complexity": self.complexity,
                "ceremony_level": self.mode.ceremony_level, "alternatives": list(self.alternatives),
                "reason": self.reason, "notes": list(self.notes), "mode": self.mode.to_dict(),
                "advisory": True}

    def render(self) -> str:
        """The three-line display: mode and ceremony, two reasons to use it, first pitfall."""
        lines = [f"Suggested mode: {self.mode.mode} ({self.mode.ceremony_level} ceremony)",
                 f"   {', '.join(self.mode.when_to_use[:2])}"]
        if self.mode.pitfalls:
            lines.append(f"   Pitfall: {self.mode.pitfalls[0]}")
        return "\n".join(lines)


def _centre(mode: ImplementationMode) -> float:
    low, high = mode.complexity_range
    return (low + high) / 2


def _ceremony_rank(mode: ImplementationMode) -> int:
    level = mode.ceremony_level
    return CEREMONY_ORDER.index(level) if level in CEREMONY_ORDER else len(CEREMONY_ORDER)


def suggest_mode(
    complexity: int | None,
    modes: Mapping[str, ImplementationMode] | Iterable[ImplementationMode] = BUILTIN_MODES,
) -> ModeAdvice | None:
    """Suggest a mode for a task of ``complexity`` (advisory; never blocks anything).

    Returns ``None`` when the task has no usable estimate (missing, ``0``, not a number): "no suggestion
    displayed" rather than a guess. Values above 10 are treated as 10.
    Overlapping ranges: nearest range centre wins, an exact tie goes to the lower ceremony.
    """
    if isinstance(complexity, bool) or not isinstance(complexity, int) or complexity < MIN_COMPLEXITY:
        return None
    pool = list(modes.values()) if isinstance(modes, Mapping) else list(modes)
    notes: list[str] = []
    level = complexity
    if level > MAX_COMPLEXITY:
        notes.append(f"complexity {complexity} is above {MAX_COMPLEXITY}; treated as {MAX_COMPLEXITY}")
        level = MAX_COMPLEXITY
    matching = [m for m in pool if m.covers(level)]
    if not matching:
        return None
    best = min(matching, key=lambda m: (abs(_centre(m) - level), _ceremony_rank(m)))
    others = tuple(m.mode for m in matching if m is not best)
    low, high = best.complexity_range
    reason = f"complexity {level} is in {best.mode}'s range {low}-{high}"
    if others:
        tied = any(abs(_centre(m) - level) == abs(_centre(best) - level) for m in matching if m is not best)
        reason += (f"; also in the range of {', '.join(others)} — {best.mode}'s range is centred nearest to "
                   f"{level}" + (" (a tie goes to less ceremony)" if tied else ""))
    return ModeAdvice(best, level, others, reason, tuple(notes))
