"""What the index holds: records built from the files, with stable ids, groups and facts.

Four kinds of record, the same list for every backend: a turn (:mod:`.turn_records`), a task or a
feature plan (:mod:`.task_records`), a configuration entity (:mod:`.config_records`). Every id is
a uuid5 of the group and the record's key, so writing a record twice overwrites it and a rebuilt
index has exactly the ids it had before.

**Groups** use ``[A-Za-z0-9_]`` only (FalkorDB keyword search silently returns nothing for a group
id containing ``-``) and are namespaced by the checkout's project (:mod:`.identity`):
``{project}__turn_states`` holds turns, tasks and features (one graph, so a turn, its task and its
feature are connected); ``{project}__role_constraints``, ``__quality_gate_configs`` and
``__implementation_modes`` hold this project's configuration.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guardkit_state.errors import InputError
from guardkit_state.index.identity import project_identity
from guardkit_state.index.words import index_text

TURN_STATES = "turn_states"
ROLE_CONSTRAINTS = "role_constraints"
QUALITY_GATE_CONFIGS = "quality_gate_configs"
IMPLEMENTATION_MODES = "implementation_modes"
SYSTEM_GROUPS = (ROLE_CONSTRAINTS, QUALITY_GATE_CONFIGS, IMPLEMENTATION_MODES)
LOGICAL_GROUPS = (TURN_STATES, *SYSTEM_GROUPS)
#: Record kinds besides turns (``turn_states``) and configuration (their group's name).
TASK = "task"
FEATURE = "feature"

NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://guardkit-state/index")
_GROUP_OK = re.compile(r"^[A-Za-z0-9_]+$")


def stable_uuid(group_id: str, key: str) -> str:
    """The uuid of ``key`` in ``group_id``: the same inputs give the same id on every machine."""
    return str(uuid.uuid5(NAMESPACE, f"{group_id}/{key}"))


def logical_group(group: str) -> str:
    """``proj_1a2b__role_constraints`` -> ``role_constraints`` (a name without ``__`` is returned as is)."""
    return group.rsplit("__", 1)[-1]


def project_group_id(repo_root: Path) -> str:
    """``{project}__turn_states`` for the checkout at ``repo_root`` (a read: nothing is written)."""
    return f"{project_identity(repo_root)}__{TURN_STATES}"


def project_groups(repo_root: Path, *, create: bool = False) -> dict[str, str]:
    """Logical group name -> this checkout's group id; ``create`` stores the identity (writers)."""
    project = project_identity(repo_root, create=create)
    return {logical: f"{project}__{logical}" for logical in LOGICAL_GROUPS}


def resolve_group(name: str, repo_root: Path) -> str:
    """This project's group id for a ``--group`` value (``turn_states``, ``role_constraints`` or a full id).

    Raises:
        InputError: characters outside ``[A-Za-z0-9_]``, or another project's group.
    """
    if not _GROUP_OK.match(name):
        raise InputError(f"invalid group {name!r}", expected="a group id of [A-Za-z0-9_] only, "
                         f"e.g. {', '.join(LOGICAL_GROUPS)}")
    groups = project_groups(repo_root)
    if name in groups:
        return groups[name]
    if name in groups.values():
        return name
    raise InputError(f"unknown group {name!r}", expected=f"one of {', '.join(LOGICAL_GROUPS)}")


@dataclass(frozen=True)
class Entity:
    """A graph entity a record mentions (a turn, a task, a feature, a criterion, a gate).

    ``record_key``: the record a hit on it stands for (None for a gate, which stands for none).
    """

    uuid: str
    name: str
    label: str
    summary: str
    record_key: str | None = None
    #: Shared entities (a task, a criterion, a gate) outlive any one record; they are removed only
    #: when no fact points at them any more.
    shared: bool = False
    #: The record that defines a shared entity writes it; the others write it only when missing.
    defines: bool = False


@dataclass(frozen=True)
class Fact:
    """One edge ``source -[name]-> target`` with its sentence. The source is always the record's own
    anchor entity, so a search can be limited to some records by their anchors."""

    uuid: str
    name: str
    fact: str
    source: Entity
    target: Entity


@dataclass
class IndexRecord:
    """One thing the index holds: a turn state, a task, a feature or a configuration entity.

    ``content`` is the Graphiti episode's content: the record's data and its search text spelled
    for the fulltext index (the index keeps nothing that is not in it). ``search_text`` is what the
    file scan scores; ``fields`` are exact values a query may name (``coach_decision rejected``).
    """

    key: str
    kind: str
    group_id: str
    name: str
    data: dict[str, Any]
    summary: str
    search_text: str
    fields: dict[str, str] = field(default_factory=dict)
    facts: list[Fact] = field(default_factory=list)
    entities: list[Entity] = field(default_factory=list)
    source_path: str | None = None
    task_id: str | None = None
    feature_id: str | None = None
    turn_number: int | None = None
    #: When it happened (a turn's completion, a task's or feature's last update): ISO 8601 text.
    completed_at: str | None = None
    #: Criterion ids (``AC-001``) the record mentions.
    criteria: tuple[str, ...] = ()

    @property
    def uuid(self) -> str:
        return stable_uuid(self.group_id, self.key)

    @property
    def content(self) -> str:
        # Sorted keys: an unchanged file gives the same text, so the same hash.
        return json.dumps({"kind": self.kind, "key": self.key, "data": self.data, "text": index_text(self.search_text)},
                          ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(self.content.encode("utf-8")).hexdigest()

    @property
    def decision(self) -> str | None:
        return self.fields.get("coach_decision") or None

    def all_entities(self) -> list[Entity]:
        """Its anchor(s) and every fact's endpoints, each once."""
        found: dict[str, Entity] = {e.uuid: e for e in self.entities}
        for fact in self.facts:
            found.setdefault(fact.source.uuid, fact.source)
            found.setdefault(fact.target.uuid, fact.target)
        return list(found.values())

    def owned_uuids(self) -> set[str]:
        """Ids written for this record alone (episode, its own entities, its facts)."""
        owned = {self.uuid} | {fact.uuid for fact in self.facts}
        return owned | {entity.uuid for entity in self.all_entities() if not entity.shared}


