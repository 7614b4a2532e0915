"""Apply ``.guardkit/config/entity-overrides.yaml`` to the gate profiles and role constraints.

The rule: role lists are extended (``*_additions``), never replaced; a gate override
replaces threshold values on the profile of that task type whose ``complexity_range`` matches
exactly (every profile of the type when the override names no range). An override that matches
nothing is an error, not a silent no-op: a typo in a range must not leave the old threshold in force.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from guardkit_state.config.gates import GateProfile, with_override
from guardkit_state.errors import ConfigError
from guardkit_state.store.schemas import format_pointer


def apply_gate_overrides(
    profiles: Iterable[GateProfile],
    gate_overrides: Mapping[str, Mapping[str, Any]],
    *,
    source: str,
    path: Path,
) -> tuple[GateProfile, ...]:
    """Return ``profiles`` with the ``quality_gate_configs`` section of an override file applied.

    Args:
        profiles: the profiles in force (built-in or from quality-gates.yaml).
        gate_overrides: ``{task_type: {"overrides": [{complexity_range?, <field>: value...}]}}``,
            already schema-validated.
        source: provenance written on each replaced value (``"override: <path>"``).
        path: the override file, for errors.

    Raises:
        ConfigError: an unknown task type, or a ``complexity_range`` matching no profile.
    """
    result = list(profiles)
    types = sorted({p.task_type for p in result})
    for task_type, section in gate_overrides.items():
        if task_type not in types:
            raise ConfigError(
                f"override for unknown gate profile type {task_type!r}",
                path=path, pointer=format_pointer(("quality_gate_configs", task_type)),
                expected=f"one of {', '.join(types)}",
            )
        for index, override in enumerate(section["overrides"]):
            wanted = override.get("complexity_range")
            hits = [i for i, p in enumerate(result) if p.task_type == task_type
                    and (wanted is None or list(p.complexity_range) == list(wanted))]
            if not hits:
                ranges = ", ".join(f"[{p.complexity_range[0]}, {p.complexity_range[1]}]"
                                   for p in result if p.task_type == task_type)
                raise ConfigError(
                    f"complexity_range {list(wanted or [])} matches no {task_type!r} profile",
                    path=path, pointer=format_pointer(("quality_gate_configs", task_type, "overrides", index,
                                            "complexity_range")),
                    expected=f"one of the profile ranges {ranges}",
                )
            for i in hits:
                result[i] = with_override(result[i], override, source)
    return tuple(result)
