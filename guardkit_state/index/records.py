"""What the index holds: records built from the files, with stable ids, groups and facts.

Pure apart from :func:`discover_turn_state_files` / :func:`load_turn_state_records`, which read
the repository. Every backend indexes the same :class:`IndexRecord` list, and every id is a uuid5
of the group and the record's key, so writing a record twice overwrites it instead of adding a
copy, and a rebuilt index has exactly the ids it had before.

Groups use ``[A-Za-z0-9_]`` only (FalkorDB keyword search silently returns nothing for a group id
containing ``-``): the system groups ``role_constraints``, ``quality_gate_configs`` and
``implementation_modes``, and one project group ``{project}__turn_states`` where ``project`` is
the repository directory's name with every other character replaced by ``_``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guardkit_state.errors import GuardkitStateError, InputError, ParseError
from guardkit_state.model import TurnState, turn_state_id
from guardkit_state.store.jsonio import load_record

log = logging.getLogger("guardkit_state.index")

TURN_STATES = "turn_states"
ROLE_CONSTRAINTS = "role_constraints"
QUALITY_GATE_CONFIGS = "quality_gate_configs"
IMPLEMENTATION_MODES = "implementation_modes"
SYSTEM_GROUPS = (ROLE_CONSTRAINTS, QUALITY_GATE_CONFIGS, IMPLEMENTATION_MODES)

#: Namespace of every uuid the index writes (uuid5 of ``"{group_id}/{key}"``).
NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://guardkit-state/index")

_GROUP_OK = re.compile(r"^[A-Za-z0-9_]+$")
_TURN_FILE = re.compile(r"^turn_state_turn_(\d+)\.json$")


def stable_uuid(group_id: str, key: str) -> str:
    """The uuid of ``key`` in ``group_id``: the same inputs give the same id on every machine."""
    return str(uuid.uuid5(NAMESPACE, f"{group_id}/{key}"))


def sanitize_group_part(name: str) -> str:
    """``my-app.v2`` -> ``my_app_v2``: only ``[A-Za-z0-9_]`` survive; never empty."""
    cleaned = re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_")
    return cleaned or "project"


def project_group_id(repo_root: Path) -> str:
    """``{project}__turn_states`` for the repository at ``repo_root``."""
    return f"{sanitize_group_part(Path(repo_root).resolve().name)}__{TURN_STATES}"


def resolve_group(name: str, repo_root: Path) -> str:
    """Map a ``--group`` value to a group id: ``turn_states`` means this project's group.

    Raises:
        InputError: a group id with characters outside ``[A-Za-z0-9_]``.
    """
    if name == TURN_STATES:
        return project_group_id(repo_root)
    if not _GROUP_OK.match(name):
        raise InputError(f"invalid group {name!r}", expected="a group id of [A-Za-z0-9_] only, "
                         f"e.g. turn_states, {', '.join(SYSTEM_GROUPS)}")
    return name


@dataclass(frozen=True)
class Entity:
    """A graph entity a record mentions (a task, a turn, a criterion, a piece of feedback)."""

    uuid: str
    name: str
    label: str
    summary: str
    #: Shared entities (a task, a criterion) outlive any one record; they are removed only when
    #: no fact points at them any more.
    shared: bool = False


@dataclass(frozen=True)
class Fact:
    """One edge ``source -[name]-> target`` with its sentence, as ``graphiti.search()`` returns."""

    uuid: str
    name: str
    fact: str
    source: Entity
    target: Entity


@dataclass
class IndexRecord:
    """One thing the index holds: a turn state or a configuration entity.

    ``content`` is the canonical JSON written as the Graphiti episode's content (the whole record:
    the index keeps nothing that is not in it). ``search_text`` is what rerankers and the file
    scan score. ``fields`` are exact-valued attributes a query may name (``coach_decision
    rejected``).
    """

    key: str
    kind: str
    group_id: str
    name: str
    content: str
    summary: str
    search_text: str
    fields: dict[str, str] = field(default_factory=dict)
    facts: list[Fact] = field(default_factory=list)
    source_path: str | None = None
    task_id: str | None = None
    feature_id: str | None = None
    turn_number: int | None = None
    completed_at: str | None = None

    @property
    def uuid(self) -> str:
        return stable_uuid(self.group_id, self.key)

    @property
    def content_hash(self) -> str:
        return content_hash(self.content)

    def owned_uuids(self) -> set[str]:
        """Ids written for this record alone (episode, its own entities, its facts)."""
        owned = {self.uuid}
        for fact in self.facts:
            owned.add(fact.uuid)
            for entity in (fact.source, fact.target):
                if not entity.shared:
                    owned.add(entity.uuid)
        return owned


def content_hash(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def canonical_json(data: dict[str, Any]) -> str:
    """Stable JSON text for a record (sorted keys) so an unchanged file hashes the same."""
    return json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)


# --------------------------------------------------------------------------- turn states


def turn_record(data: dict[str, Any], group_id: str, *, source_path: str | None = None) -> IndexRecord:
    """Build the record of one turn state dict (``TurnState.to_dict()`` shape).

    The key is the canonical ``TURN-{feature}-{task}-T{n}`` (GuardKit's own ``TURN-{feature}-{n}``
    collides across tasks); the file's own ``id`` stays in the content untouched.
    """
    state = TurnState.from_dict(data)
    key = turn_state_id(state.feature_id, state.task_id, state.turn_number)
    feature = state.feature_id or "NOFEAT"
    task, n = state.task_id, state.turn_number
    coach = str(state.coach_decision or "")
    player = str(state.player_decision or "")
    summary = (f"turn_state {feature} {task} turn {n}: coach_decision={coach} "
               f"player_decision={player} mode={state.mode}")
    if state.coach_feedback:
        summary += f" feedback={_clip(state.coach_feedback, 120)}"
    if state.blockers_found:
        summary += f" blockers={len(state.blockers_found)}"

    lines = [f"turn_state {feature} {task} turn {n} {key}",
             f"coach_decision {coach} player_decision {player} mode {state.mode}",
             f"summary: {state.player_summary}"]
    if state.progress_summary:
        lines.append(f"progress: {state.progress_summary}")
    if state.coach_feedback:
        lines.append(f"coach_feedback: {state.coach_feedback}")
    if state.blockers_found:
        lines.append("blockers: " + "; ".join(map(str, state.blockers_found)))
    if state.lessons_from_turn:
        lines.append("lessons: " + "; ".join(map(str, state.lessons_from_turn)))
    if state.what_to_try_next:
        lines.append(f"what_to_try_next: {state.what_to_try_next}")
    for criterion, status in state.acceptance_criteria_status.items():
        lines.append(f"criterion {criterion}: {status}")
    if state.files_modified:
        lines.append("files: " + " ".join(map(str, state.files_modified)))

    task_entity = Entity(stable_uuid(group_id, f"task/{task}"), task, "Task",
                         f"Task {task} of feature {feature}", shared=True)
    turn_entity = Entity(stable_uuid(group_id, f"turn/{key}"), key, "Turn", summary)
    facts = [Fact(stable_uuid(group_id, f"fact/{key}/has_turn"), "HAS_TURN",
                  f"{task} turn {n} ({feature}): coach_decision {coach}, player_decision {player}, "
                  f"mode {state.mode}. {_clip(state.player_summary, 300)}",
                  task_entity, turn_entity)]
    for criterion, status in state.acceptance_criteria_status.items():
        crit_id = criterion.split(":", 1)[0].strip() or criterion
        crit = Entity(stable_uuid(group_id, f"criterion/{task}/{crit_id}"), f"{task} {crit_id}",
                      "Criterion", f"{task} {criterion}", shared=True)
        facts.append(Fact(stable_uuid(group_id, f"fact/{key}/criterion/{crit_id}"), "CRITERION_STATUS",
                          f"{task} turn {n}: criterion {criterion} is {status}", turn_entity, crit))
    items: list[tuple[str, str, str]] = []
    if state.coach_feedback:
        items.append(("feedback", "RECEIVED_FEEDBACK", f"Coach feedback on {task} turn {n}: {state.coach_feedback}"))
    items += [("blocker", "HIT_BLOCKER", f"Blocker in {task} turn {n}: {b}") for b in state.blockers_found]
    items += [("lesson", "LEARNED", f"Lesson from {task} turn {n}: {lesson}") for lesson in state.lessons_from_turn]
    if state.what_to_try_next:
        items.append(("next", "TRY_NEXT", f"What to try after {task} turn {n}: {state.what_to_try_next}"))
    for i, (kind, predicate, sentence) in enumerate(items):
        target = Entity(stable_uuid(group_id, f"{kind}/{key}/{i}"), f"{kind} {task} T{n} #{i + 1}",
                        kind.capitalize(), _clip(sentence, 500))
        facts.append(Fact(stable_uuid(group_id, f"fact/{key}/{kind}/{i}"), predicate, sentence,
                          turn_entity, target))

    return IndexRecord(
        key=key, kind=TURN_STATES, group_id=group_id, name=key, content=canonical_json(data),
        summary=summary, search_text="\n".join(lines),
        fields={"coach_decision": coach, "player_decision": player, "mode": str(state.mode),
                "task_id": task, "feature_id": feature, "turn": str(n)},
        facts=facts, source_path=source_path, task_id=task, feature_id=state.feature_id,
        turn_number=n, completed_at=state.completed_at or state.started_at,
    )


def discover_turn_state_files(repo_root: Path) -> dict[tuple[str, int], Path]:
    """Every ``turn_state_turn_N.json`` of the repository, keyed by (task dir, N).

    A running loop's worktree copy (``.guardkit/worktrees/TASK/.guardkit/autobuild/TASK/``) wins
    over the main checkout's copy of the same turn: it is the newer truth until merged.
    """
    root = Path(repo_root)
    found: dict[tuple[str, int], Path] = {}
    patterns = (".guardkit/autobuild/*/turn_state_turn_*.json",
                ".guardkit/worktrees/*/.guardkit/autobuild/*/turn_state_turn_*.json")
    for pattern in patterns:  # worktrees second, so they overwrite
        for path in sorted(root.glob(pattern)):
            match = _TURN_FILE.match(path.name)
            if match and path.is_file():
                found[(path.parent.name, int(match.group(1)))] = path
    return found


def load_turn_state_dict(path: Path) -> dict[str, Any]:
    """Read one turn state file as its canonical dict (strict JSON, validated and normalised).

    Raises:
        ParseError, SchemaError: the file is not a valid turn state.
    """
    return TurnState.from_dict(load_record("turn_state", path)).to_dict()


@dataclass
class LoadResult:
    """Records built from the files, and the files that could not be read (with why)."""

    records: list[IndexRecord]
    problems: list[GuardkitStateError]


def load_turn_state_records(repo_root: Path) -> LoadResult:
    """Records for every turn state file; unreadable files are reported, not fatal."""
    root = Path(repo_root)
    group = project_group_id(root)
    records: dict[str, IndexRecord] = {}
    problems: list[GuardkitStateError] = []
    for path in discover_turn_state_files(root).values():
        try:
            record = turn_record(load_turn_state_dict(path), group,
                                 source_path=str(path.relative_to(root)))
        except GuardkitStateError as exc:
            log.warning("skipping %s: %s", path, exc)
            problems.append(exc)
            continue
        records[record.key] = record
    return LoadResult(sorted(records.values(), key=lambda r: r.key), problems)


# --------------------------------------------------------------------------- system groups


def system_record(group_id: str, key: str, data: dict[str, Any]) -> IndexRecord:
    """A configuration entity (role constraints, a gate profile, an implementation mode)."""
    title = str(data.get("role") or data.get("mode") or data.get("task_type") or data.get("name") or key)
    text_parts = [f"{group_id} {key} {title}"]
    for name, value in data.items():
        text_parts.append(f"{name}: {_flatten(value)}")
    search_text = "\n".join(text_parts)
    entity = Entity(stable_uuid(group_id, f"entity/{key}"), key, "Config", _clip(search_text, 500))
    group_entity = Entity(stable_uuid(group_id, f"group/{group_id}"), group_id, "ConfigGroup",
                          f"System group {group_id}", shared=True)
    fact = Fact(stable_uuid(group_id, f"fact/{key}"), "DEFINES", f"{title}: {_clip(_flatten(data), 600)}",
                group_entity, entity)
    return IndexRecord(key=key, kind=group_id, group_id=group_id, name=key, content=canonical_json(data),
                       summary=f"{group_id} {key}: {title}", search_text=search_text,
                       fields={"kind": group_id, "id": key}, facts=[fact])


def record_from_content(group_id: str, name: str, content: str) -> IndexRecord:
    """Rebuild a record from what the index stored (the episode's name and JSON content).

    Raises:
        ParseError: the content is not a JSON object.
    """
    try:
        data = json.loads(content)
    except json.JSONDecodeError as exc:
        raise ParseError(f"index episode {name!r} holds invalid JSON", pointer="$") from exc
    if not isinstance(data, dict):
        raise ParseError(f"index episode {name!r} is not a JSON object", pointer="$")
    if group_id.endswith(f"__{TURN_STATES}"):
        return turn_record(data, group_id)
    return system_record(group_id, name, data)


def load_system_records(repo_root: Path) -> tuple[list[IndexRecord], str | None]:
    """Records of the configuration entities from ``guardkit_state.config.load_config``.

    Returns the records and, when none could be produced, the reason (the config module is not
    available, or exposes nothing recognisable). The defaults live in ``config``; nothing here
    duplicates them.
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
    records: list[IndexRecord] = []
    aliases = {
        ROLE_CONSTRAINTS: ("role_constraints", "roles"),
        QUALITY_GATE_CONFIGS: ("quality_gate_configs", "quality_gates", "gate_profiles", "gates", "profiles"),
        IMPLEMENTATION_MODES: ("implementation_modes", "modes"),
    }
    for group_id, names in aliases.items():
        items = _first_attr(loaded, names)
        for i, item in enumerate(_iter_items(items)):
            data = _as_dict(item)
            if data is None:
                continue
            key = str(getattr(item, "entity_id", None) or data.get("entity_id") or data.get("id")
                      or data.get("role") or data.get("mode") or data.get("name") or f"{group_id}-{i + 1}")
            records.append(system_record(group_id, key, data))
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
    import dataclasses

    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        return dataclasses.asdict(item)
    return None


def _flatten(value: Any) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_flatten(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return "; ".join(_flatten(v) for v in value)
    return "" if value is None else str(value)


def _clip(text: object, limit: int) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
