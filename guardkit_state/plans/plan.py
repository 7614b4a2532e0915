"""Feature plans (``.guardkit/features/FEAT-*.yaml``): read strictly, exposed as typed views.

A plan is GuardKit's own file: its tasks (``id``, ``file_path``, ``dependencies``, ``status``,
``result``, ``turns_completed`` ...), its waves (``orchestration.parallel_groups``,
``recommended_parallel``) and the progress of a run (``execution``). It is read with the strict
YAML reader (duplicate keys refused with their line, dates kept as the strings they are) and
checked against ``schemas/feature_plan.schema.json`` where a feature run relies on types.

:class:`FeaturePlan`, :class:`PlanTask` and :class:`PlanExecution` are views over the raw
mappings, which they keep: keys this package does not know (``smoke_gates``,
``bootstrap_extras``, a legacy ``waves`` mapping ...) stay as GuardKit wrote them, and a write
(:mod:`guardkit_state.plans.plan_writer`) changes only the values it sets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guardkit_state.errors import (
    FeatureNotFoundError,
    ParseError,
    SchemaError,
    TaskNotFoundError,
)
from guardkit_state.store import layout, safe_paths
from guardkit_state.taskfile.plan_reads import (
    PLAN_PREFIX,
    PLAN_SUFFIX,
    find_plans,
    mark_checked,
    read_plan,
)
from guardkit_state.taskfile.resolve import close_ids

if TYPE_CHECKING:  # YAML and the schema are imported where a plan is parsed or checked
    import yaml

    from guardkit_state.yamltext.strict_yaml import ParsedYaml

PLAN_GLOB = f"{PLAN_PREFIX}*{PLAN_SUFFIX}"


# --------------------------------------------------------------------------- the views


def _whole(value: Any) -> int | None:
    """An integer value as such (``True`` is not a count), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass
class PlanTask:
    """One entry of a plan's ``tasks`` list, read through GuardKit's keys.

    Attributes:
        id: the task id (``TASK-...``).
        index: the entry's position in ``tasks`` (plan order).
        raw: the entry's mapping exactly as read (every key, known or not).
        line: the file line of the entry, when the plan was read from text.
    """

    id: str
    index: int
    raw: dict[str, Any]
    line: int | None = None

    @property
    def name(self) -> str | None:
        return _text(self.raw.get("name"))

    @property
    def file_path(self) -> str | None:
        """The task file, relative to the repository root (GuardKit's ``file_path``)."""
        return _text(self.raw.get("file_path"))

    @property
    def dependencies(self) -> list[str]:
        """The ids this task waits for (an absent or null ``dependencies`` is none)."""
        return list(self.raw.get("dependencies") or [])

    @property
    def status(self) -> str | None:
        return _text(self.raw.get("status"))

    @property
    def result(self) -> dict[str, Any] | str | None:
        """GuardKit's outcome mapping (``total_turns``, ``final_decision``, ``error`` ...); older
        plans wrote a word (``passed``)."""
        value = self.raw.get("result")
        return value if isinstance(value, (dict, str)) else None

    @property
    def final_decision(self) -> str | None:
        """``result.final_decision`` (``approved``, ``max_turns_exceeded`` ...), or a legacy word result."""
        result = self.result
        if isinstance(result, dict):
            return _text(result.get("final_decision"))
        return result

    @property
    def error(self) -> str | None:
        result = self.result
        return _text(result.get("error")) if isinstance(result, dict) else None

    @property
    def turns_completed(self) -> int | None:
        return _whole(self.raw.get("turns_completed"))

    @property
    def started_at(self) -> str | None:
        return _text(self.raw.get("started_at"))

    @property
    def completed_at(self) -> str | None:
        return _text(self.raw.get("completed_at"))


@dataclass
class PlanExecution:
    """A plan's ``execution`` block (the progress of a run), read through GuardKit's keys.

    ``raw`` is the mapping as read. Counters absent from it read as 0, lists as empty.
    """

    raw: dict[str, Any]

    @property
    def current_wave(self) -> int:
        return _whole(self.raw.get("current_wave")) or 0

    @property
    def completed_waves(self) -> list[int]:
        return [wave for wave in self.raw.get("completed_waves") or [] if _whole(wave) is not None]

    @property
    def tasks_completed(self) -> int:
        return _whole(self.raw.get("tasks_completed")) or 0

    @property
    def total_turns(self) -> int:
        return _whole(self.raw.get("total_turns")) or 0

    @property
    def worktree_path(self) -> str | None:
        return _text(self.raw.get("worktree_path"))

    @property
    def started_at(self) -> str | None:
        return _text(self.raw.get("started_at"))

    @property
    def last_updated(self) -> str | None:
        return _text(self.raw.get("last_updated") or self.raw.get("updated"))


@dataclass
class FeaturePlan:
    """A feature plan as read: the raw mapping, its text, and typed views of tasks and progress.

    Attributes:
        path: the file (None for a plan parsed from text alone).
        feature_id: the plan's ``id``, else the file name's stem.
        data: the whole mapping exactly as read.
        tasks: the ``tasks`` entries in plan order.
        execution: the ``execution`` block, None when the plan has none (or it is null).
        text: the text it was read from (a write splices this text).
    """

    path: Path | None
    feature_id: str
    data: dict[str, Any]
    tasks: list[PlanTask]
    execution: PlanExecution | None
    text: str
    #: The strict parse of ``text`` (a write locates keys from it instead of parsing again).
    parsed: ParsedYaml | None = field(default=None, repr=False, compare=False)

    @property
    def node(self) -> yaml.Node | None:
        """The YAML node tree of ``text`` (marks give each value's line); a plan whose data came
        from the cache is parsed for it now."""
        if self.parsed is None and self.text:
            from guardkit_state.yamltext.strict_yaml import parse_yaml

            self.parsed = parse_yaml(self.text, path=self.path, error_type=ParseError)
        return self.parsed.node if self.parsed is not None else None

    @property
    def name(self) -> str | None:
        return _text(self.data.get("name"))

    @property
    def status(self) -> str | None:
        return _text(self.data.get("status"))

    @property
    def orchestration(self) -> dict[str, Any]:
        value = self.data.get("orchestration")
        return value if isinstance(value, dict) else {}

    @property
    def parallel_groups(self) -> list[list[str]] | None:
        """``orchestration.parallel_groups`` (the waves as written), None when absent."""
        groups = self.orchestration.get("parallel_groups")
        return [list(group) for group in groups] if isinstance(groups, list) else None

    @property
    def recommended_parallel(self) -> int | None:
        return _whole(self.orchestration.get("recommended_parallel"))

    @property
    def task_ids(self) -> list[str]:
        return [task.id for task in self.tasks]

    def get(self, task_id: str) -> PlanTask | None:
        """The first entry with id ``task_id``, or None."""
        return next((task for task in self.tasks if task.id == task_id), None)

    def task(self, task_id: str) -> PlanTask:
        """The entry with id ``task_id``.

        Raises:
            TaskNotFoundError: the plan has no such task (the message lists its tasks).
        """
        found = self.get(task_id)
        if found is None:
            shown = ", ".join(self.task_ids[:10]) + (" ..." if len(self.tasks) > 10 else "")
            raise TaskNotFoundError(f"feature plan {self.feature_id} has no task {task_id}", path=self.path,
                                    task_id=task_id, expected=f"one of {shown or '(no tasks)'}")
        return found


# --------------------------------------------------------------------------- reading


def parse_plan(text: str, *, path: Path | str | None = None, parsed: ParsedYaml | None = None,
               check: bool = True) -> FeaturePlan:
    """Read a plan from its text (``parsed``: the strict parse of ``text``, when the caller has it;
    ``check=False`` only for a text whose data was already checked against the schema).

    Raises:
        ParseError: invalid YAML (with its line), or a tag that would construct an object.
        DuplicateKeyError: a mapping repeats a key.
        SchemaError: a value a feature run relies on has the wrong type (every problem listed,
            the first one's JSON path and line on the error).
    """
    from guardkit_state.plans.schema import check_plan_data
    from guardkit_state.yamltext.positions import node_line
    from guardkit_state.yamltext.strict_yaml import parse_yaml

    path = Path(path) if path is not None else None
    if parsed is None:
        parsed = parse_yaml(text, path=path, error_type=ParseError)
    data = parsed.data
    if check:
        check_plan_data(data, node=parsed.node, path=path)
    assert isinstance(data, dict)  # the schema requires an object
    lines = [node_line(parsed.node, ("tasks", index)) for index in range(len(data["tasks"]))]
    return _viewed(path, data, lines, text, parsed)


def load_plan(path: Path | str) -> FeaturePlan:
    """Read and check the plan file ``path`` (capped read, strict UTF-8), parsed once per change of
    the file (:mod:`guardkit_state.taskfile.plan_reads`), checked as :func:`parse_plan` checks a
    text (the schema once per change of the file).

    Raises:
        FileTooLargeError, NotRegularFileError, ParseError, DuplicateKeyError, SchemaError,
        GuardkitStateError (the file cannot be read).
    """
    read = read_plan(Path(path))
    if read.error is not None:
        raise read.error
    if read.duplicates:
        read.strict()  # raises the strict reader's own error, with both lines
    data = read.data
    if not read.checked:
        from guardkit_state.plans.schema import check_plan_data

        try:
            check_plan_data(data, path=read.path)
        except SchemaError:
            check_plan_data(data, node=read.strict().node, path=read.path)  # the same error, with its line
            raise
        mark_checked(read)
    assert isinstance(data, dict) and read.text is not None  # the schema requires an object
    return _viewed(read.path, data, read.lines, read.text, read.strict() if read.parsed_here else None)


def _viewed(path: Path | None, data: dict[str, Any], lines: Sequence[int | None], text: str,
            parsed: ParsedYaml | None) -> FeaturePlan:
    """The views over a checked plan's ``data`` (``lines``: each ``tasks`` entry's file line)."""
    tasks = [PlanTask(entry["id"], index, entry, lines[index] if index < len(lines) else None)
             for index, entry in enumerate(data["tasks"])]
    execution = data.get("execution")
    return FeaturePlan(path, data["id"], data, tasks,
                       PlanExecution(execution) if isinstance(execution, dict) else None, text, parsed)


# --------------------------------------------------------------------------- finding plans


def plan_file(repo_root: Path | str, feature_id: str) -> Path:
    """Where the plan of ``feature_id`` lives (it may not exist).

    Raises:
        InvalidTaskIdError: ``feature_id`` is not a plain id (``/``, ``..``, spaces ...).
    """
    safe_paths.validate_task_id(feature_id)
    return layout.features_dir(repo_root) / f"{feature_id}{PLAN_SUFFIX}"


def find_plan(repo_root: Path | str, ref: str) -> Path:
    """The plan file of ``ref``: a feature id (``FEAT-X``), or a path to a ``.yaml`` plan file
    (absolute, or relative to ``repo_root``).

    Raises:
        FeatureNotFoundError: no such plan (the message lists the plans there are).
        UnsafePathError: a path that leaves the repository.
        InvalidTaskIdError: ``ref`` is neither an id nor a path.
    """
    root = Path(repo_root)
    if ref.endswith(PLAN_SUFFIX) or "/" in ref:
        candidate = Path(ref) if Path(ref).is_absolute() else root / ref
        safe_paths.resolve_inside(root, candidate)  # a symlink or '..' leaving the repository is refused
    else:
        candidate = plan_file(root, ref)
    if candidate.is_file():
        return candidate
    plans = find_plans(root)
    if candidate.parent == layout.features_dir(root):
        # An id typed in another case (feat-cr01): the one plan whose file name spells it otherwise.
        spelled = [path for path in plans if path.name.casefold() == candidate.name.casefold()]
        if len(spelled) == 1:
            return spelled[0]
    known = [path.stem for path in plans]
    shown = ", ".join(known[:10]) + (" ..." if len(known) > 10 else "")
    guesses = close_ids(candidate.stem, known)
    raise FeatureNotFoundError(f"no feature plan {ref} in {layout.features_dir(root)}"
                               + (f" (did you mean {' or '.join(guesses)}?)" if guesses else ""), path=candidate,
                               expected=f"one of {shown}" if known else f"a {PLAN_GLOB} file there")


__all__ = [
    "PLAN_GLOB", "PLAN_PREFIX", "PLAN_SUFFIX", "FeatureNotFoundError", "FeaturePlan",
    "PlanExecution", "PlanTask", "find_plan", "find_plans", "load_plan", "parse_plan", "plan_file",
]
