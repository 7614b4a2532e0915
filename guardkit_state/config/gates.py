"""Quality gate profiles: the built-in table (docs/index.md), lookup by task type and complexity, checks.

A profile says which gates apply to a task of a given type and complexity and with which
thresholds. Without ``.guardkit/config/quality-gates.yaml`` the built-in profiles below are used;
they are exactly the table in docs/index.md. The gate check turns a turn's measurements into one
:class:`~guardkit_state.model.GateResult` per gate; a measurement that is missing gives
``passed=None`` (unknown), never a pass.

Units: ``coverage_threshold`` is a fraction (``0.80``), as in docs/index.md and in the config files;
the measured ``coverage`` handed to :func:`check_gates` is a percentage (``96.0``), as GuardKit's
reports write it. :class:`GateResult` shows both sides in percent so they compare at a glance.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from guardkit_state.model import GateResult

log = logging.getLogger("guardkit_state.config.gates")

BUILT_IN = "built-in"

#: Complexity assumed when a task has none (GuardKit's own template writes
#: ``complexity: {{ complexity|default(5) }}``; 36 real tasks say ``complexity: 0``).
DEFAULT_COMPLEXITY = 5
MIN_COMPLEXITY = 1
MAX_COMPLEXITY = 10

#: The type every unknown task type falls back to.
FALLBACK_TASK_TYPE = "feature"

#: Task-type spellings seen in real GuardKit tasks, mapped to the profile they use. GuardKit's
#: ``implementation``/``enhancement`` aliases, plus the real values ``fix``, ``bugfix``, ``bug``
#: (and ``bug-fix``): a bug fix is feature work for the gates. ``refactor`` shares feature's
#: profile (GuardKit's own REFACTOR profile is arch 60 / coverage 80, the feature 4-6 values).
TASK_TYPE_ALIASES: Mapping[str, str] = {
    "implementation": "feature",
    "enhancement": "feature",
    "fix": "feature",
    "bugfix": "feature",
    "bug-fix": "feature",
    "bug_fix": "feature",
    "bug": "feature",
    "refactor": "feature",
    "refactoring": "feature",
    "test": "testing",
    "tests": "testing",
    "docs": "documentation",
    "doc": "documentation",
    "scaffold": "scaffolding",
}

#: Profile fields that hold a threshold or a switch (each carries its own source).
PROFILE_FIELDS = (
    "arch_review_required",
    "arch_review_threshold",
    "coverage_required",
    "coverage_threshold",
    "tests_required",
    "tests_must_pass",
)


@dataclass(frozen=True)
class GateProfile:
    """The gates for one task type over one complexity range (an index entity, see docs/index.md).

    ``sources`` maps each field of :data:`PROFILE_FIELDS` to where its value came from:
    ``"built-in"``, the config file's path, or ``"override: <path>"``.
    """

    task_type: str
    complexity_range: tuple[int, int]
    arch_review_required: bool
    arch_review_threshold: int
    coverage_required: bool
    coverage_threshold: float
    tests_required: bool
    tests_must_pass: bool
    effective_from: str = ""
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def entity_id(self) -> str:
        """The stable id: ``QG-{task_type}-{low}-{high}``."""
        low, high = self.complexity_range
        return f"QG-{self.task_type}-{low}-{high}"

    def covers(self, complexity: int) -> bool:
        low, high = self.complexity_range
        return low <= complexity <= high

    def source_of(self, name: str) -> str:
        return self.sources.get(name, BUILT_IN)

    def values(self) -> dict[str, Any]:
        """The profile as the config file spells it (no sources)."""
        return {
            "task_type": self.task_type,
            "complexity_range": list(self.complexity_range),
            **{name: getattr(self, name) for name in PROFILE_FIELDS},
            "effective_from": self.effective_from,
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON view: the values, the entity id, and where each value came from."""
        return {"id": self.entity_id, **self.values(),
                "sources": {name: self.source_of(name) for name in PROFILE_FIELDS}}


def _profile(task_type: str, low: int, high: int, arch: int | None, coverage: float | None,
             tests: bool) -> GateProfile:
    return GateProfile(
        task_type=task_type,
        complexity_range=(low, high),
        arch_review_required=arch is not None,
        arch_review_threshold=arch or 0,
        coverage_required=coverage is not None,
        coverage_threshold=coverage or 0.0,
        tests_required=tests,
        tests_must_pass=tests,
        sources=dict.fromkeys(PROFILE_FIELDS, BUILT_IN),
    )


#: The six default profiles of docs/index.md, exactly (the fallback when no quality-gates.yaml exists).
BUILTIN_GATE_PROFILES: tuple[GateProfile, ...] = (
    _profile("scaffolding", 1, 10, None, None, False),
    _profile("feature", 1, 3, 50, 0.70, True),
    _profile("feature", 4, 6, 60, 0.80, True),
    _profile("feature", 7, 10, 70, 0.85, True),
    _profile("testing", 1, 10, None, 0.90, True),
    _profile("documentation", 1, 10, None, None, False),
)


@dataclass(frozen=True)
class GateLookup:
    """The profile chosen for a task, and why (warnings about fallbacks are for the user)."""

    profile: GateProfile
    requested_task_type: str | None
    task_type: str
    requested_complexity: object
    complexity: int
    warnings: tuple[str, ...] = ()


def normalise_task_type(
    task_type: str | None,
    known_types: Iterable[str],
    aliases: Mapping[str, str] = TASK_TYPE_ALIASES,
) -> tuple[str, str | None]:
    """Map a task's ``task_type`` to a profile type: ``(type, warning or None)``.

    Case and surrounding spaces are ignored; an alias maps to its target; anything else falls
    back to ``feature`` with a warning (GuardKit's Coach rejected such tasks on every turn).
    """
    known = set(known_types)
    raw = "" if task_type is None else str(task_type)
    name = raw.strip().lower()
    if name in known:
        return name, None
    target = aliases.get(name)
    if target is not None and target in known:
        return target, None
    if not name:
        return FALLBACK_TASK_TYPE, f"task has no task_type; using the '{FALLBACK_TASK_TYPE}' gate profile"
    return FALLBACK_TASK_TYPE, (
        f"unknown task_type {raw!r}; using the '{FALLBACK_TASK_TYPE}' gate profile "
        f"(known: {', '.join(sorted(known | set(aliases)))})"
    )


def normalise_complexity(complexity: object) -> tuple[int, str | None]:
    """Clamp a task's ``complexity`` into 1-10: ``(value, warning or None)``.

    Missing, zero or unreadable complexity means "not estimated" and uses
    :data:`DEFAULT_COMPLEXITY`; values above 10 are clamped to 10.
    """
    value: int | None
    if isinstance(complexity, bool):
        value = None
    elif isinstance(complexity, int):
        value = complexity
    elif isinstance(complexity, float) and complexity.is_integer():
        value = int(complexity)
    elif isinstance(complexity, str) and complexity.strip().split("/")[0].strip().isdigit():
        value = int(complexity.strip().split("/")[0])  # real tasks write "5/10"
    else:
        value = None
    if value is None or value < MIN_COMPLEXITY:
        return DEFAULT_COMPLEXITY, (
            f"complexity {complexity!r} is not an estimate in {MIN_COMPLEXITY}-{MAX_COMPLEXITY}; "
            f"using {DEFAULT_COMPLEXITY}"
        )
    if value > MAX_COMPLEXITY:
        return MAX_COMPLEXITY, f"complexity {value} is above {MAX_COMPLEXITY}; using {MAX_COMPLEXITY}"
    return value, None


def select_profile(
    profiles: Iterable[GateProfile],
    task_type: str | None,
    complexity: object,
    *,
    aliases: Mapping[str, str] = TASK_TYPE_ALIASES,
) -> GateLookup:
    """Pick the profile for ``task_type`` whose complexity range holds ``complexity``.

    Every warning is logged and returned in :attr:`GateLookup.warnings`.

    Raises:
        LookupError: no profile covers the (normalised) type and complexity; the loader
            refuses such configurations, so this only happens with hand-built profile lists.
    """
    profiles = tuple(profiles)
    kind, type_warning = normalise_task_type(task_type, {p.task_type for p in profiles}, aliases)
    level, level_warning = normalise_complexity(complexity)
    warnings = tuple(w for w in (type_warning, level_warning) if w)
    for warning in warnings:
        log.warning("%s", warning)
    for candidate in profiles:
        if candidate.task_type == kind and candidate.covers(level):
            return GateLookup(candidate, task_type, kind, complexity, level, warnings)
    raise LookupError(f"no gate profile for task_type {kind!r} at complexity {level}")


def with_override(profile: GateProfile, values: Mapping[str, Any], source: str) -> GateProfile:
    """Return ``profile`` with the threshold fields in ``values`` replaced, each marked ``source``."""
    changes = {name: values[name] for name in PROFILE_FIELDS if name in values}
    sources = dict(profile.sources)
    sources.update(dict.fromkeys(changes, source))
    if "effective_from" in values:
        changes["effective_from"] = values["effective_from"]
    return replace(profile, **changes, sources=sources)


def check_gates(
    profile: GateProfile,
    *,
    tests_run: bool | None = None,
    tests_passed: int | bool | None = None,
    tests_failed: int | None = None,
    coverage: float | None = None,
    arch_score: float | None = None,
) -> list[GateResult]:
    """Judge one turn's measurements against ``profile``: one result per gate (tests, coverage, arch_review).

    Args:
        profile: from :meth:`ResolvedConfig.gate_profile`.
        tests_run: whether tests were run (``PlayerReport.tests_run``); ``None`` if unknown.
        tests_passed: passing-test count (``TurnState.tests_passed``) or the Player's boolean.
        tests_failed: failing-test count (``TurnState.tests_failed``).
        coverage: measured line coverage in percent, ``0``-``100`` (``TurnState.coverage``).
        arch_score: architecture review score, ``0``-``100`` (``TurnState.arch_score``).

    A gate the profile does not require has ``required=False`` and ``passed=True`` (it cannot
    fail, as in GuardKit's ``coverage_met`` for non-required coverage). A required gate whose
    measurement is missing has ``passed=None``: unknown is not a pass.

    Raises:
        ValueError: ``coverage`` or ``arch_score`` outside 0-100, or a negative test count.
    """
    if coverage is not None and not 0 <= coverage <= 100:
        raise ValueError(f"coverage {coverage!r} is not a percentage in 0-100")
    if arch_score is not None and not 0 <= arch_score <= 100:
        raise ValueError(f"arch_score {arch_score!r} is not a score in 0-100")
    for name, count in (("tests_passed", tests_passed), ("tests_failed", tests_failed)):
        if isinstance(count, int) and not isinstance(count, bool) and count < 0:
            raise ValueError(f"{name} {count!r} is negative")
    return [
        _tests_gate(profile, tests_run, tests_passed, tests_failed),
        _threshold_gate(profile, "coverage", profile.coverage_required, coverage,
                        round(profile.coverage_threshold * 100, 4)),
        _threshold_gate(profile, "arch_review", profile.arch_review_required, arch_score,
                        profile.arch_review_threshold),
    ]


def gates_verdict(results: Iterable[GateResult]) -> bool | None:
    """All required gates together: ``False`` if any failed, ``None`` if any is unknown, else ``True``."""
    required = [r for r in results if r.required]
    if any(r.passed is False for r in required):
        return False
    if any(r.passed is None for r in required):
        return None
    return True


def _tests_gate(profile: GateProfile, tests_run: bool | None, tests_passed: int | bool | None,
                tests_failed: int | None) -> GateResult:
    # Threshold: the number of failing tests allowed (0 = all must pass); None = they need only run.
    threshold = 0 if profile.tests_must_pass else None
    if not profile.tests_required:
        return GateResult("tests", True, tests_failed, None, profile.source_of("tests_required"),
                          required=False)
    source = profile.source_of("tests_must_pass")  # the "threshold" of this gate
    counts_known = tests_failed is not None and isinstance(tests_passed, int) and not isinstance(tests_passed, bool)
    if tests_run is False or (counts_known and tests_passed == 0 and tests_failed == 0):
        # Required tests that did not run (or ran zero tests) fail the gate.
        return GateResult("tests", False, tests_failed, threshold, source)
    if not profile.tests_must_pass:
        ran = tests_run is True or tests_failed is not None or counts_known
        return GateResult("tests", True if ran else None, tests_failed, threshold, source)
    if tests_failed is not None:
        return GateResult("tests", tests_failed == 0, tests_failed, threshold, source)
    if isinstance(tests_passed, bool):
        return GateResult("tests", tests_passed, None, threshold, source)
    return GateResult("tests", None, None, threshold, source)


def _threshold_gate(profile: GateProfile, gate: str, required: bool, measured: float | None,
                    threshold: float) -> GateResult:
    """The coverage or arch_review gate: the measure at or above ``threshold`` (in its unit); the
    sources are the profile's ``<gate>_required`` and ``<gate>_threshold``."""
    if not required:
        return GateResult(gate, True, measured, None, profile.source_of(f"{gate}_required"), required=False)
    source = profile.source_of(f"{gate}_threshold")
    if measured is None:
        return GateResult(gate, None, None, threshold, source)
    return GateResult(gate, measured >= threshold, measured, threshold, source)
