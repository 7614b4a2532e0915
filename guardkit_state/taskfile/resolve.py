"""One task resolver: which file is ``TASK-X`` (or the task file a path names) in a repository.

GuardKit keeps planning copies of a task under ``tasks/backlog/<feature>/`` after its working copy
moved on to ``in_progress/``, ``in_review/`` or ``completed/``, so one id often has several files.
Every command, and ``status``, picks among them by the same rules:

1. the copies holding loop state (an ``autobuild_state`` or ``feature_build`` block) win;
2. among the copies left, the one a feature plan (``.guardkit/features/FEAT-*.yaml``,
   ``tasks[].file_path``) names wins;
3. otherwise GuardKit's own search order: ``backlog``, ``in_progress``, ``design_approved``,
   ``in_review``, ``blocked``, ``completed``, then the other folders; within a folder, a file
   directly in it before one in a subfolder, then by path.

A path to a task file (``tasks/.../TASK-X-slug.md``) is accepted wherever an id is: that file is
read, whatever the rules would pick. The resolution says why a copy was chosen and which others
exist, so commands can say so.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from guardkit_state.errors import (
    FileTooLargeError,
    GuardkitStateError,
    InvalidTaskIdError,
    NotRegularFileError,
    TaskNotFoundError,
    shorten,
)
from guardkit_state.store import layout, reads, safe_paths
from guardkit_state.store.layout import TASKS_DIR
from guardkit_state.taskfile.discovery import (
    STATE_MARKERS,
    declared_id,
    ids_in_other_case,
    listed_ids,
    named_for,
    scoped,
    task_copies,
    task_id_from_filename,
)
from guardkit_state.taskfile.plan_reads import PlanListing, read_plans
from guardkit_state.taskfile.read_scope import resolved_root
from guardkit_state.taskfile.task_facts import relative_key, remembered

#: GuardKit's own search order of the status folders; any other folder comes after these.
SEARCH_ORDER = ("backlog", "in_progress", "design_approved", "in_review", "blocked", "completed")


REASON_GIVEN = "the path given"
REASON_ONLY = "the only copy"
REASON_STATE = "holds loop state"
REASON_PLAN = "named by feature plan"
REASON_ORDER = "first in GuardKit's search order"

#: The task file named on the command line, pinned for the rest of that command (see ``pinned``).
_PINNED: ContextVar[Resolution | None] = ContextVar("guardkit_state_pinned_task", default=None)


@dataclass(frozen=True)
class Resolution:
    """The file chosen for a task, why, and the other copies of the same id."""

    task_id: str
    path: Path
    reason: str
    checkout: Path
    others: tuple[Path, ...] = ()

    def relative(self, path: Path) -> str:
        try:
            return path.relative_to(self.checkout).as_posix()
        except ValueError:
            return str(path)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.relative(self.path), "reason": self.reason,
                "others": [self.relative(p) for p in self.others]}

    @property
    def note(self) -> str | None:
        """One line naming the copy read and the others, or ``None`` when it is the only one."""
        if not self.others:
            return None
        others = ", ".join(self.relative(p) for p in self.others)
        return f"{self.task_id}: reading {self.relative(self.path)} ({self.reason}); other copies: {others}"


@dataclass(frozen=True)
class Copy:
    """One candidate file of a task id, as the rules see it."""

    relpath: str  # relative to the checkout, with '/'
    holds_state: bool


def choose(copies: Sequence[Copy], planned: Callable[[], set[str]]) -> tuple[Copy, str]:
    """The winning copy and why. ``planned`` gives the plan-named paths; called only on a tie."""
    if len(copies) == 1:
        return copies[0], REASON_ONLY
    stateful = [c for c in copies if c.holds_state]
    pool, reason = (stateful, REASON_STATE) if stateful else (list(copies), "")
    if len(pool) == 1:
        return pool[0], reason
    named = [c for c in pool if c.relpath in planned()]
    if named:
        pool = named
        reason = f"{reason}; {REASON_PLAN}" if reason else REASON_PLAN
        if len(pool) == 1:
            return pool[0], reason
    best = min(pool, key=lambda c: search_rank(c.relpath))
    return best, f"{reason}; {REASON_ORDER}" if reason else REASON_ORDER


def search_rank(relpath: str) -> tuple[int, str, int, str]:
    """Sort key of ``tasks/<folder>/.../name.md`` in GuardKit's search order."""
    parts = relpath.split("/")
    folder = parts[1] if len(parts) > 2 else ""
    rank = SEARCH_ORDER.index(folder) if folder in SEARCH_ORDER else len(SEARCH_ORDER)
    return rank, folder, len(parts), relpath


def plan_listings(checkout: Path | str) -> tuple[PlanListing, ...]:
    """Every feature plan of ``checkout`` (``.guardkit/features/FEAT-*.yaml``), by file name, as
    :mod:`~guardkit_state.taskfile.plan_reads` reads it (once per change of the file). A plan that
    cannot be read lists nothing: a broken plan must not stop a task from being found. Looked at
    once per :func:`~guardkit_state.taskfile.discovery.listing_scope`."""
    return scoped(("plan listings", os.fspath(checkout)), lambda: tuple(
        read.listing for read in read_plans(checkout) if read.listing is not None))


def plan_paths(checkout: Path) -> set[str]:
    """Every ``tasks[].file_path`` of the feature plans in ``checkout``, relative to it (once per
    :func:`~guardkit_state.taskfile.discovery.listing_scope`)."""
    return scoped(("plan paths", os.fspath(checkout)), lambda: {
        _plain(file_path) for plan in plan_listings(checkout) for _, file_path in plan.tasks if file_path})


def _plain(file_path: str) -> str:
    """A plan's ``file_path`` as the listing spells paths (``Path(x).as_posix()`` without ``./``);
    a path already so (the usual case) is taken as it is, without building a Path."""
    if "//" in file_path or "/./" in file_path or file_path.endswith(("/", "/.")) or "\\" in file_path:
        return Path(file_path).as_posix().removeprefix("./")
    return file_path.removeprefix("./")


def holds_state(path: Path, checkout: Path | None = None) -> bool:
    """True when the file has a state block, or markers of one that fail to parse.

    The same test ``status`` applies, so both pick the same copy: a file whose block is broken
    counts as holding state, and ``show`` then reports its error rather than another copy. With
    ``checkout`` (a main checkout holding ``path``), the answer ``status`` keeps in its cache
    (``state``, beside its summary) is used while the file is unchanged, when this process has
    that cache loaded; else the file is parsed (a parse the reader of the copy chosen reuses).
    """
    if checkout is None:
        return _holds_state(path)
    return remembered(path, checkout, "state", partial(_holds_state, path), cheap=True)


def _holds_state(path: Path) -> bool:
    try:
        raw = reads.read_bytes_capped(path)
    except FileTooLargeError:
        return True  # listed by status as unreadable: show must report on the same file
    except GuardkitStateError:
        return False
    if not any(marker in raw for marker in STATE_MARKERS):
        return False  # most copies: no parse
    return _parses_to_state(path, raw)


def _parses_to_state(path: Path, raw: bytes) -> bool:
    from guardkit_state.taskfile.document import TaskFile  # its reading is kept for the copy's reader

    try:
        return TaskFile.from_bytes(raw, path, warn=False).state is not None
    except GuardkitStateError:
        return True


def resolve_task(repo_root: Path | str, ref: str) -> Resolution:
    """The file of task ``ref`` (an id, or a path to a task file ending in ``.md``) in ``repo_root``.

    Raises:
        InvalidTaskIdError: ``ref`` is neither an id nor a ``.md`` path.
        UnsafePathError: the path leaves the repository.
        NotRegularFileError: the only file named for the task is a FIFO, socket or device.
        TaskNotFoundError: no file matches (says where it looked).
    """
    root = resolved_root(repo_root)
    if isinstance(ref, str) and ref.endswith(".md"):
        return _resolve_path(root, ref)
    task_id = safe_paths.validate_task_id(ref)
    pinned = _PINNED.get()
    if pinned is not None and pinned.task_id == task_id and (
            root == pinned.checkout or (pinned.reason == REASON_GIVEN and root in pinned.checkout.parents)):
        return pinned
    task_id, matches = _matches(root, task_id)
    if len(matches) == 1:
        return Resolution(task_id, matches[0], REASON_ONLY, root)
    copies = {relative_key(m, root): m for m in matches}
    winner, reason = choose([Copy(rel, holds_state(path, root)) for rel, path in copies.items()],
                            lambda: plan_paths(root))
    chosen = copies[winner.relpath]
    return Resolution(task_id, chosen, reason, root, tuple(p for p in matches if p != chosen))


def find_task(repo_root: Path | str, task_id: str) -> Path:
    """The task file for ``task_id`` under ``repo_root/tasks``: ``<id>.md`` or ``<id>-<slug>.md``.

    The id must match exactly (``TASK-ABC-1`` never finds ``TASK-ABC-10-x.md``); a slug file
    whose frontmatter names another id (``TASK-ABC-1-2-x.md`` with ``id: TASK-ABC-1-2``) does not
    count. Symlinks resolving outside the repository are skipped. Several copies are decided by
    the rules of :func:`resolve_task`; a path to a task file is returned as given.

    Raises:
        InvalidTaskIdError: ``task_id`` is not an id.
        NotRegularFileError: the only file named for the task is a FIFO, socket or device.
        TaskNotFoundError: no file matches (says where it looked).
    """
    return resolve_task(repo_root, task_id).path


@contextlib.contextmanager
def pinned(resolution: Resolution | None) -> Iterator[None]:
    """Within the block, the resolution's id resolves to its file (the one named on a command line)."""
    token = _PINNED.set(resolution)
    try:
        yield
    finally:
        _PINNED.reset(token)


def _matches(root: Path, task_id: str) -> tuple[str, list[Path]]:
    """The id as the files spell it, and its files. An id typed in another case (``task-cr-007``)
    is the one file names spell (``TASK-CR-007``) when exactly one id matches so."""
    special: list[Path] = []
    matches = task_copies(root, task_id, special)
    if matches:
        return task_id, matches
    named = [path for path in special if named_for(path.name, task_id)]
    if named:
        # Said plainly rather than "not found": the user sees a file with the task's name.
        raise NotRegularFileError("not a regular file (a FIFO, socket or device): a task file must be "
                                  "a plain file", path=named[0], task_id=task_id)
    spelled = [other for other in ids_in_other_case(root, task_id) if task_copies(root, other)]
    if len(spelled) == 1:
        return spelled[0], task_copies(root, spelled[0])
    shown = shorten(task_id)
    tasks = layout.tasks_dir(root)
    guesses = spelled or close_ids(task_id, listed_ids(root))
    raise TaskNotFoundError(
        f"no task file for {shown} under {tasks}"
        + (f" (did you mean {' or '.join(guesses)}?)" if guesses else ""),
        path=tasks,
        task_id=task_id,
        expected=f"tasks/**/{shown}.md or tasks/**/{shown}-<slug>.md",
    )


def close_ids(ref: str, known: Sequence[str], *, shown: int = 3) -> list[str]:
    """The ids of ``known`` an unknown ``ref`` most likely meant (case aside, a character or two
    off: ``TASK-CR-077`` -> ``TASK-CR-007``), closest first; at most ``shown``."""
    import difflib  # here: only an id no file has asks for it

    folded = {k.casefold(): k for k in known}
    return [folded[k] for k in difflib.get_close_matches(ref.casefold(), list(folded), n=shown, cutoff=0.8)]


def _resolve_path(root: Path, ref: str) -> Resolution:
    """A task named by its file: relative to the current folder, else to the repository."""
    given = Path(ref)
    candidates = [given] if given.is_absolute() else [Path.cwd() / given, root / given]
    # Directories resolved, the file itself not: a symlinked task file is judged by resolve_inside.
    existing = [Path(os.path.realpath(c.parent)) / c.name for c in candidates if os.path.lexists(c)]
    if not existing:
        raise TaskNotFoundError(f"no such task file: {shorten(ref)}", path=given,
                                expected="a task file under tasks/, or a task id")
    path = next((c for c in existing if root in c.parents), existing[0])
    safe_paths.resolve_inside(root, path)
    relative = path.relative_to(root)
    checkout = _checkout_of(root, relative)
    if path.relative_to(checkout).parts[0] != TASKS_DIR:
        raise InvalidTaskIdError(f"not a task file under {TASKS_DIR}/: {shorten(ref)}", path=path,
                                 expected="tasks/<folder>/TASK-ID-slug.md, or a task id")
    if not path.is_file():
        raise NotRegularFileError("not a regular file: a task file must be a plain file", path=path)
    task_id = safe_paths.validate_task_id(declared_id(path) or task_id_from_filename(path.name))
    others = tuple(p for p in task_copies(checkout, task_id) if p != path)
    return Resolution(task_id, path, REASON_GIVEN, checkout, others)


def _checkout_of(root: Path, relative: Path) -> Path:
    """The checkout holding ``relative``: a loop's worktree for ``.guardkit/worktrees/<ID>/...``."""
    worktree = layout.worktree_root_of(relative)
    return root if worktree is None else root / worktree


__all__ = [
    "Copy",
    "PlanListing",
    "Resolution",
    "choose",
    "close_ids",
    "find_task",
    "holds_state",
    "pinned",
    "plan_listings",
    "plan_paths",
    "resolve_task",
    "search_rank",
]
