"""Configuration records: this project's role constraints, gate profiles and implementation modes.

They come from :func:`guardkit_state.config.load_config` (built-in defaults plus the project's
``.guardkit/config`` files), so each project's groups hold its own configuration: one project's
``seed`` never replaces another's role constraints on a shared server.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from guardkit_state.errors import GuardkitStateError
from guardkit_state.index.records import (
    IMPLEMENTATION_MODES,
    QUALITY_GATE_CONFIGS,
    ROLE_CONSTRAINTS,
    Entity,
    Fact,
    IndexRecord,
    clip,
    flatten,
    logical_group,
    project_groups,
    stable_uuid,
)


def system_record(group_id: str, key: str, data: dict[str, Any]) -> IndexRecord:
    """A configuration entity (role constraints, a gate profile, an implementation mode)."""
    kind = logical_group(group_id)
    title = str(data.get("role") or data.get("mode") or data.get("task_type") or data.get("name") or key)
    text_parts = [f"{kind} {key} {title}"]
    for name, value in data.items():
        text_parts.append(f"{name}: {flatten(value)}")
    search_text = "\n".join(text_parts)
    entity = Entity(stable_uuid(group_id, f"entity/{key}"), key, "Config", clip(search_text, 500), record_key=key)
    group_entity = Entity(stable_uuid(group_id, f"group/{group_id}"), kind, "ConfigGroup",
                          f"Configuration group {kind}", shared=True)
    fact = Fact(stable_uuid(group_id, f"fact/{key}"), "DEFINES", f"{title}: {clip(flatten(data), 600)}",
                entity, group_entity)
    return IndexRecord(key=key, kind=kind, group_id=group_id, name=key, data=data,
                       summary=f"{kind} {key}: {title}", search_text=search_text,
                       fields={"kind": kind, "id": key}, facts=[fact], entities=[entity])


def load_system_records(repo_root: Path, *,
                        groups: dict[str, str] | None = None) -> tuple[list[IndexRecord], str | None]:
    """Records of the configuration entities from ``guardkit_state.config.load_config``.

    Returns the records and, when none could be produced, the reason. The defaults live in
    ``config``; nothing here duplicates them.
    """
    try:
        from guardkit_state import config as config_module
        load_config = config_module.load_config
    except (ImportError, AttributeError):
        return [], "guardkit_state.config.load_config is not available; system groups not seeded"
    try:
        loaded = load_config(Path(repo_root))
    except GuardkitStateError:
        raise
    except Exception as exc:
        raise GuardkitStateError(f"cannot load configuration: {exc}", path=repo_root) from exc
    ids = groups or project_groups(Path(repo_root))
    aliases = {
        ROLE_CONSTRAINTS: ("role_constraints", "roles"),
        QUALITY_GATE_CONFIGS: ("quality_gate_configs", "quality_gates", "gate_profiles", "gates", "profiles"),
        IMPLEMENTATION_MODES: ("implementation_modes", "modes"),
    }
    records: list[IndexRecord] = []
    for logical, names in aliases.items():
        for i, item in enumerate(_iter_items(_first_attr(loaded, names))):
            data = _as_dict(item)
            if data is None:
                continue
            key = str(getattr(item, "entity_id", None) or data.get("entity_id") or data.get("id")
                      or data.get("role") or data.get("mode") or data.get("name") or f"{logical}-{i + 1}")
            records.append(system_record(ids[logical], key, data))
    if not records:
        return [], "configuration exposes no role constraints, gate profiles or modes"
    return records, None


def _first_attr(obj: Any, names: tuple[str, ...]) -> Any:
    for name in names:
        if isinstance(obj, dict) and name in obj:
            return obj[name]
        if hasattr(obj, name):
            value = getattr(obj, name)
            return value() if callable(value) else value
    return None


def _iter_items(items: Any) -> list[Any]:
    if items is None:
        return []
    if isinstance(items, dict):
        return list(items.values())
    if isinstance(items, (list, tuple)):
        return list(items)
    return [items]


def _as_dict(item: Any) -> dict[str, Any] | None:
    if isinstance(item, dict):
        return item
    if hasattr(item, "to_dict"):
        result = item.to_dict()
        return result if isinstance(result, dict) else None
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        return dataclasses.asdict(item)
    return None


__all__ = ["load_system_records", "system_record"]
