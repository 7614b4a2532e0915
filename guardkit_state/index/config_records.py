"""Configuration records: this project's role constraints, gate profiles and implementation modes.

They come from :func:`guardkit_state.config.load_config` (built-in defaults plus the project's
``.guardkit`` files), so each project's groups hold its own configuration: one project's ``seed``
never replaces another's role constraints on a shared server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from guardkit_state.config import load_config
from guardkit_state.errors import GuardkitStateError, one_line
from guardkit_state.index.records import (
    IMPLEMENTATION_MODES,
    QUALITY_GATE_CONFIGS,
    ROLE_CONSTRAINTS,
    Entity,
    Fact,
    IndexRecord,
    logical_group,
    project_groups,
    stable_uuid,
)


def system_record(group_id: str, key: str, data: dict[str, Any]) -> IndexRecord:
    """A configuration entity (role constraints, a gate profile, an implementation mode)."""
    kind = logical_group(group_id)
    title = str(data.get("role") or data.get("mode") or data.get("task_type") or data.get("name") or key)
    search_text = "\n".join([f"{kind} {key} {title}", *(f"{name}: {_flatten(value)}" for name, value in data.items())])
    entity = Entity(stable_uuid(group_id, f"entity/{key}"), key, "Config", one_line(search_text, 500), record_key=key)
    group_entity = Entity(stable_uuid(group_id, f"group/{group_id}"), kind, "ConfigGroup",
                          f"Configuration group {kind}", shared=True)
    fact = Fact(stable_uuid(group_id, f"fact/{key}"), "DEFINES", f"{title}: {one_line(_flatten(data), 600)}",
                entity, group_entity)
    return IndexRecord(key=key, kind=kind, group_id=group_id, name=key, data=data,
                       summary=f"{kind} {key}: {title}", search_text=search_text,
                       fields={"kind": kind, "id": key}, facts=[fact], entities=[entity])


def load_system_records(repo_root: Path, *,
                        groups: dict[str, str] | None = None) -> tuple[list[IndexRecord], str | None]:
    """Records of the configuration's entities and, when there are none, why.

    Raises:
        GuardkitStateError: the configuration cannot be loaded.
    """
    try:
        config = load_config(Path(repo_root))
    except GuardkitStateError:
        raise
    except Exception as exc:
        raise GuardkitStateError(f"cannot load configuration: {exc}", path=repo_root) from exc
    ids = groups or project_groups(Path(repo_root))
    sections: dict[str, list[Any]] = {ROLE_CONSTRAINTS: list(config.roles.values()),
                                      QUALITY_GATE_CONFIGS: list(config.gate_profiles),
                                      IMPLEMENTATION_MODES: list(config.modes.values())}
    records = [system_record(ids[logical], item.entity_id, item.to_dict())
               for logical, items in sections.items() for item in items]
    if not records:
        return [], "configuration exposes no role constraints, gate profiles or modes"
    return records, None


def _flatten(value: Any) -> str:
    """Nested data as one line of ``key: value; ...`` text."""
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_flatten(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return "; ".join(_flatten(v) for v in value)
    return "" if value is None else str(value)
