"""Validate task files and per-turn reports on disk: the library behind ``guardkit-state validate``.

A walked directory's task files are the ``*.md`` files GuardKit would load as tasks: named
``TASK-*.md``, or named like a task (``PREFIX-...md``) and declaring an ``id:`` in their
frontmatter. READMEs, ``IMPLEMENTATION-GUIDE.md`` and other notes beside them are not checked (a
file named on the command line is checked whatever its name). A task file is read as the store
reads it (one parse; a repeated key is a warning, read as its last value), and its
``autobuild_state`` (or legacy ``feature_build``) block validated, problems inside the block
reported with the file line they sit on.
A per-turn report is recognised by its name (``player_turn_N.json``, ``coach_turn_N.json``,
``turn_state_turn_N.json``), read as strict JSON and validated after normalisation; its turn
number must match the name. A feature plan (``FEAT-*.yaml``, walked only inside a ``features``
folder) is checked against its schema and its waves are formed as a feature run would form them.
Other files are skipped when a directory is walked.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import astuple, dataclass, field
from pathlib import Path
from typing import Any

from guardkit_state.errors import GuardkitStateError, InputError, SchemaError
from guardkit_state.model import Fields
from guardkit_state.plans.guardkit_keys import Stamp, read_stamp, stamp_problem
from guardkit_state.plans.plan_validation import validate_plan_file
from guardkit_state.store.jsonio import load_json
from guardkit_state.store.layout import FEATURES_DIR, GUARDKIT_DIR, TASKS_DIR
from guardkit_state.store.reads import decode_utf8, read_bytes_capped
from guardkit_state.store.schemas import PathParts, format_pointer, parse_pointer, validate_with_warnings
from guardkit_state.taskfile.discovery import (
    TASK_FILE_NAME,
    declared_id,
    listing_scope,
    task_copies,
    task_id_from_filename,
)
from guardkit_state.taskfile.document import TaskFile, describe_duplicates
from guardkit_state.taskfile.frontmatter import parse_frontmatter
from guardkit_state.taskfile.resolve import Copy, choose, holds_state, plan_paths
from guardkit_state.taskfile.task_facts import remembered, task_cache

log = logging.getLogger("guardkit_state.inspect.validation")

#: ``.guardkit/cache/validate.json``: each file's verdict while it is unchanged.
CACHE_NAME = "validate"
TASK_KIND = "task"
PLAN_KIND = "feature_plan"
_PLAN_FILE = re.compile(r"^FEAT-[A-Za-z0-9][A-Za-z0-9_.-]*\.ya?ml$")
_TURN_FILE = re.compile(r"^(player_turn|coach_turn|turn_state_turn)_(\d+)\.json$", re.ASCII)  # not "٣"
_KIND_OF_STEM = {"player_turn": "player_turn", "coach_turn": "coach_turn", "turn_state_turn": "turn_state"}
_TURN_KEY = {"player_turn": "turn", "coach_turn": "turn", "turn_state": "turn_number"}
#: Directories never walked into (version control and tool caches hold no task state).
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".tox"})


@dataclass(frozen=True)
class Finding:
    """One problem or warning in a file: where (line and/or JSON path) and what."""

    message: str
    line: int | None = None
    pointer: str | None = None

    def location(self, path: Path | str) -> str:
        where = f"{path}:{self.line}" if self.line is not None else str(path)
        return f"{where}: {self.pointer}" if self.pointer else where

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "pointer": self.pointer, "message": self.message}


@dataclass
class FileResult:
    """The verdict on one file."""

    path: Path
    kind: str
    problems: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    #: A task file's id: the one it declares, else its name's (how duplicates are found).
    task_id: str | None = None

    @property
    def valid(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "kind": self.kind, "valid": self.valid,
                "problems": [p.to_dict() for p in self.problems],
                "warnings": [w.to_dict() for w in self.warnings]}


@dataclass(frozen=True)
class DuplicateId(Fields):
    """A task id several checked files declare: every copy, and the one commands read (and why)."""

    task_id: str
    copies: tuple[str, ...]
    read: str
    reason: str

    def describe(self, shown: int = 3) -> str:
        others = [c for c in self.copies if c != self.read]
        listed = ", ".join(others[:shown]) + (f" and {len(others) - shown} more" if len(others) > shown else "")
        return (f"duplicate task id {self.task_id}: {len(self.copies)} copies; commands read {self.read} "
                f"({self.reason}); also {listed}")


@dataclass
class ValidationReport:
    """Every file checked, in the order walked, and the task ids several of them declare."""

    results: list[FileResult] = field(default_factory=list)
    duplicates: list[DuplicateId] = field(default_factory=list)

    @property
    def checked(self) -> int:
        return len(self.results)

    @property
    def invalid(self) -> int:
        return sum(not r.valid for r in self.results)

    @property
    def valid(self) -> int:
        return self.checked - self.invalid

    @property
    def warnings(self) -> int:
        return sum(len(r.warnings) for r in self.results) + len(self.duplicates)

    @property
    def ok(self) -> bool:
        return self.invalid == 0

    def summary(self) -> str:
        files = "file" if self.checked == 1 else "files"
        text = f"checked {self.checked} {files}: {self.valid} valid, {self.invalid} invalid"
        if self.warnings:
            text += f", {self.warnings} warning{'s' if self.warnings != 1 else ''}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"checked": self.checked, "valid": self.valid, "invalid": self.invalid,
                "warnings": self.warnings, "ok": self.ok, "files": [r.to_dict() for r in self.results],
                "duplicate_ids": [d.to_dict() for d in self.duplicates]}


def kind_of(path: Path) -> str | None:
    """``task`` for ``*.md``, ``feature_plan`` for ``FEAT-*.yaml``, the record kind for a per-turn
    report's name, else ``None``."""
    if path.suffix == ".md":
        return TASK_KIND
    if _PLAN_FILE.match(path.name):
        return PLAN_KIND
    match = _TURN_FILE.match(path.name)
    return _KIND_OF_STEM[match.group(1)] if match else None


def is_task_file(path: Path) -> bool:
    """True for a ``*.md`` GuardKit loads as a task: ``TASK-*.md``, or a task-like name
    (``PREFIX-...md``) whose frontmatter declares an ``id:``."""
    name = path.name
    if not name.endswith(".md") or not TASK_FILE_NAME.match(name):
        return False
    return name.startswith("TASK-") or declared_id(path) is not None


def iter_files(paths: Iterable[Path]) -> Iterator[tuple[Path, str]]:
    """``(path, kind)`` for every file to check: named files, and directories walked in order.

    Raises:
        InputError: a path does not exist, or a named file is of no known kind.
    """
    paths = [Path(p) for p in paths]
    for path in paths:  # refuse bad arguments before checking anything
        if not path.exists():
            raise InputError("no such file or directory", path=path,
                             expected="a task file, a per-turn JSON report, or a directory")
        if path.is_file() and kind_of(path) is None:
            raise InputError(
                "not a task file or per-turn report", path=path,
                expected="*.md, FEAT-*.yaml, player_turn_N.json, coach_turn_N.json or turn_state_turn_N.json",
            )
    for path in paths:
        if path.is_file():
            yield path, kind_of(path) or ""
            continue
        yield from _walk(path)


def _walk(top: Path) -> Iterator[tuple[Path, str]]:
    """The files to check below ``top``: a folder's files by name, then its subfolders by name
    (symlinked folders are not followed; a file's type comes with the listing, no stat)."""
    stack = [os.fspath(top)]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:
            continue
        plans_here = os.path.basename(folder) == FEATURES_DIR.name
        subfolders = []
        for entry in entries:
            if entry.is_dir():
                if entry.name not in SKIP_DIRS and not entry.is_symlink():
                    subfolders.append(entry.path)
                continue
            child = Path(entry.path)
            kind = kind_of(child)
            if kind == PLAN_KIND and not plans_here:
                continue  # a FEAT-*.yaml elsewhere is not a plan GuardKit would read
            if kind == TASK_KIND and not is_task_file(child):
                continue  # a README or guide beside the tasks
            if kind is not None and entry.is_file():
                yield child, kind
        stack.extend(reversed(subfolders))


def validate_paths(paths: Iterable[Path]) -> ValidationReport:
    """Check every task file and per-turn report under ``paths``.

    Raises:
        InputError: a path does not exist, or a named file is of no known kind (nothing checked).
    """
    files = list(iter_files(paths))
    with listing_scope():  # tasks/ listed, and the plans' file paths read, once for every id
        results = [validate_file(path, kind) for path, kind in files]
        return ValidationReport(results, duplicate_ids(results))


def duplicate_ids(results: list[FileResult]) -> list[DuplicateId]:
    """Every task id that several checked files declare, once each, naming the copy read.

    Duplicates are normal in GuardKit repositories (planning copies stay in ``backlog/<feature>/``),
    so this is a warning, never a failure: it says which copy every command will read, and why.
    """
    found: list[DuplicateId] = []
    groups: dict[tuple[Path, str], list[FileResult]] = {}
    roots: dict[Path, Path | None] = {}  # folder as given -> its repository
    for result in results:
        if result.kind != TASK_KIND or not TASK_FILE_NAME.match(result.path.name):
            continue
        folder = result.path.parent
        root = roots[folder] if folder in roots else roots.setdefault(folder, _repo_of(folder))
        if root is None:
            continue
        task_id = result.task_id or declared_id(result.path) or task_id_from_filename(result.path.name)
        groups.setdefault((root, task_id), []).append(result)
    for root in {root for root, _ in groups}:
        task_cache(root)  # many copies to judge: whether each holds state comes from status's cache
    for (root, task_id), group in groups.items():
        if len(group) < 2:
            continue
        mine = {r.path.resolve().relative_to(root).as_posix() for r in group}
        try:
            every = {p.relative_to(root).as_posix() for p in task_copies(root, task_id)}
        except GuardkitStateError:
            every = set()
        copies = sorted(every | mine)
        states = [Copy(rel, holds_state(root / rel, root)) for rel in copies]
        winner, reason = choose(states, functools.partial(plan_paths, root))
        found.append(DuplicateId(task_id, tuple(copies), winner.relpath, reason))
    return found


def _repo_of(folder: Path) -> Path | None:
    """The repository a task file in ``folder`` belongs to (the folder holding the ``tasks/`` it is
    under, ``folder`` resolved); None outside one."""
    real = folder.resolve()
    return next((parent.parent for parent in (real, *real.parents) if parent.name == TASKS_DIR), None)


def validate_file(path: Path, kind: str | None = None) -> FileResult:
    """Check one file; ``kind`` defaults to what its name says (see :func:`kind_of`).

    A task file or per-turn report inside a repository is checked once per change of the file:
    the verdict is kept in ``.guardkit/cache/validate.json`` (as ``status`` keeps its summaries)
    and reused while the file is unchanged. A plan is checked every time (its
    waves are formed from it alone, but a plan is one of few).
    """
    path = Path(path)
    kind = kind or kind_of(path) or ""
    absolute = os.path.abspath(path)
    checkout = _checkout_of(os.path.dirname(absolute)) if kind != PLAN_KIND else None
    if checkout is None:
        return _validated(path, kind)

    def check() -> dict[str, Any]:
        result = _validated(path, kind)
        known: dict[str, Any] = {"problems": [list(astuple(f)) for f in result.problems],
                                 "warnings": [list(astuple(f)) for f in result.warnings]}
        if kind == TASK_KIND:
            known["id"] = declared_id(path) or task_id_from_filename(path.name)
        return known

    known = remembered(Path(absolute), checkout, kind, check, key=absolute[len(os.fspath(checkout)) + 1:],
                       cache=CACHE_NAME)
    return FileResult(path, kind, [Finding(*row) for row in known["problems"]],
                      [Finding(*row) for row in known["warnings"]], known.get("id"))


@functools.lru_cache(maxsize=4096)
def _checkout_of(folder: str) -> Path | None:
    """The checkout holding the absolute ``folder`` (the folder above its ``tasks/`` or
    ``.guardkit/``), found from the path as written; None outside one."""
    parts = Path(folder)
    return next((parent.parent for parent in (parts, *parts.parents) if parent.name in (TASKS_DIR, GUARDKIT_DIR)),
                None)


def _validated(path: Path, kind: str) -> FileResult:
    result = FileResult(path, kind)
    try:
        if kind == TASK_KIND:
            _check_task(path, result)
        elif kind == PLAN_KIND:
            _check_plan(path, result)
        else:
            _check_turn_report(path, kind, result)
    except GuardkitStateError as exc:
        listed = exc.problems if isinstance(exc, SchemaError) else []  # a schema's every problem, at its pointer
        if listed:
            result.problems.extend(Finding(text, exc.line, pointer) for pointer, text in listed)
        else:
            result.problems.append(Finding(exc.described(), exc.line, exc.pointer))
    return result


def _check_plan(path: Path, result: FileResult) -> None:
    for problem in validate_plan_file(path):
        found = Finding(problem.message, problem.line, problem.pointer)
        (result.warnings if problem.severity == "warning" else result.problems).append(found)


def _check_turn_report(path: Path, kind: str, result: FileResult) -> None:
    record = validate_with_warnings(kind, load_json(path), path=path)
    result.warnings.extend(_warning(text) for text in record.warnings)
    match = _TURN_FILE.match(path.name)
    key = _TURN_KEY.get(kind)
    if match and key and record.data.get(key) != int(match.group(2)):
        result.problems.append(Finding(
            f"{key} {record.data.get(key)} does not match the file name (expected {int(match.group(2))})",
            pointer=f"$.{key}",
        ))


def _check_task(path: Path, result: FileResult) -> None:
    """Schema-check the state block (every problem, with its line), then load it as the store does."""
    raw = read_bytes_capped(path)
    parsed = parse_frontmatter(decode_utf8(raw, path), path=path, keep_last=True)
    if parsed.duplicates:
        result.warnings.append(Finding(
            f"{describe_duplicates(parsed.duplicates)}: read as the last value (as GuardKit reads it); "
            "guardkit-state will not write to this file until each key is kept once", parsed.duplicates[0].line))
    _check_stamps(parsed, result)
    key = parsed.state_key
    block = parsed.data.get(key) if key else None
    if key is not None and block is not None:

        def at(message: str, parts: PathParts) -> Finding:
            """``message`` about the block's ``parts``, on the file line they sit on."""
            return Finding(message, parsed.line_of(key, *parts), format_pointer((key, *parts)))

        try:
            record = validate_with_warnings("autobuild_state", block, path=path)
        except SchemaError as exc:
            for pointer, text in exc.problems or [(exc.pointer or "$", exc.message)]:
                result.problems.append(at(text, parse_pointer(pointer)))
            return
        for warning in record.warnings:
            pointer, _, message = warning.partition(": ")
            result.warnings.append(at(message, parse_pointer(pointer)))
        _check_turn_sequence(record.data, at, result)
    TaskFile.from_bytes(raw, path, warn=False, parsed=parsed)  # the store's own read: anything else it refuses


def _check_stamps(parsed: Any, result: FileResult) -> None:
    """GuardKit's routing-law stamps on the task and its frontmatter criteria: one GuardKit would
    refuse at load (a home off its list, a toolchain stamp naming no test) is a warning."""
    data = parsed.data
    found: list[tuple[PathParts, Stamp | None]] = [
        (("verifier",), read_stamp(data.get("verifier"), data.get("test_ref")))]
    listed = data.get("acceptance_criteria")
    for index, item in enumerate(listed if isinstance(listed, list) else []):
        if isinstance(item, dict) and "verifier" in item:
            found.append((("acceptance_criteria", index, "verifier"), read_stamp(item)))
    for parts, stamp in found:
        problem = stamp_problem(stamp) if stamp is not None else None
        if problem is None and stamp is None and parts != ("verifier",):
            problem = "an empty verifier stamp"
        if problem is not None:
            result.warnings.append(Finding(f"{problem}: GuardKit refuses to load this task",
                                           parsed.line_of(*parts),
                                           format_pointer(parts)))


def _check_turn_sequence(state: dict[str, Any], at: Callable[[str, PathParts], Finding],
                         result: FileResult) -> None:
    """Turns must be numbered 1..n in order: resume starts at ``len(turns) + 1``."""
    turns = state.get("turns") or []
    for index, entry in enumerate(turns):
        if entry["turn"] != index + 1:
            result.problems.append(at(f"turn {entry['turn']} is item {index + 1} of turns (expected turn {index + 1}:"
                                      " turns are numbered 1, 2, 3 ... in order)", ("turns", index, "turn")))
            break
    current = state.get("current_turn")
    if isinstance(current, int) and current < len(turns):
        result.warnings.append(at(f"current_turn {current} is behind the {len(turns)} recorded turns",
                                  ("current_turn",)))


def _warning(text: str) -> Finding:
    pointer, sep, message = text.partition(": ")
    return Finding(message, pointer=pointer) if sep and pointer.startswith("$") else Finding(text)
