"""Configuration entities (docs/index.md): quality gates, role constraints, implementation modes.

The loop's one entry point is :func:`load_config`::

    from guardkit_state.config import load_config, check_gates, render_coach_prompt

    config = load_config(repo_root)                      # ConfigError on a malformed file
    profile = config.gate_profile(task_type, complexity)
    results = check_gates(profile, tests_run=True, tests_passed=12, tests_failed=0,
                          coverage=83.0, arch_score=72)  # list[GateResult], one per gate
    prompt = render_coach_prompt(config, task_id=..., title=..., task_type=..., complexity=...,
                                 criteria=[...], previous_turn=turn_state_or_None, turn=n)

Every value carries its provenance: ``"built-in"``, the path of ``quality-gates.yaml``, or
``"override: <path of entity-overrides.yaml>"``.
"""

from __future__ import annotations

from guardkit_state.config.gates import (
    BUILTIN_GATE_PROFILES,
    TASK_TYPE_ALIASES,
    GateLookup,
    GateProfile,
    check_gates,
    gates_verdict,
    normalise_complexity,
    normalise_task_type,
    select_profile,
)
from guardkit_state.config.loader import ResolvedConfig, default_config, load_config
from guardkit_state.config.modes import BUILTIN_MODES, ImplementationMode, ModeAdvice, suggest_mode
from guardkit_state.config.prompt import render_coach_prompt, render_player_role_section
from guardkit_state.config.roles import BUILTIN_ROLE_CONSTRAINTS, RoleConstraints, Rule
from guardkit_state.store.layout import OVERRIDES_FILE, QUALITY_GATES_FILE

__all__ = [
    "BUILTIN_GATE_PROFILES",
    "BUILTIN_MODES",
    "BUILTIN_ROLE_CONSTRAINTS",
    "OVERRIDES_FILE",
    "QUALITY_GATES_FILE",
    "TASK_TYPE_ALIASES",
    "GateLookup",
    "GateProfile",
    "ImplementationMode",
    "ModeAdvice",
    "ResolvedConfig",
    "RoleConstraints",
    "Rule",
    "check_gates",
    "default_config",
    "gates_verdict",
    "load_config",
    "normalise_complexity",
    "normalise_task_type",
    "render_coach_prompt",
    "render_player_role_section",
    "select_profile",
    "suggest_mode",
]
