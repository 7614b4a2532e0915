"""Writing a feature plan's progress: one writer at a time, verified, atomic.

The task loops of a wave run in parallel and report to one place. :func:`modify_plan` holds the
plan's lock (an ``flock``: exclusive between threads and processes alike, released when its
holder dies, so a SIGKILLed run never leaves it held), reads the plan as it is on disk, asks the
caller what to change *given that plan* (so a counter is incremented from the value on disk,
never from a stale copy), splices and verifies the new text (:mod:`plan_splice`), and replaces
the file atomically. Two tasks finishing at the same instant both land, one after the other.

Just before the rename the file is checked again: if someone else (an editor, a ``git checkout``)
changed it since it was read, nothing is replaced and the change is redone on the new text.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from guardkit_state.errors import FileBusyError, GuardkitStateError
from guardkit_state.features.plan_splice import PlanUpdate, splice_plan
from guardkit_state.plans.plan import FeaturePlan, parse_plan
from guardkit_state.store import fsio
from guardkit_state.store.locks import exclusive_lock
from guardkit_state.taskfile.document import read_settled

#: How long a writer waits for the plan's lock by default (a plan write takes milliseconds; this
#: only bounds a wait behind a writer that is itself stuck).
LOCK_WAIT = 30.0
#: How often a write is redone when the file keeps changing under it before giving up.
WRITE_ATTEMPTS = 50
#: The lock files' folder, beside the plans (ignored by git: it holds a ``.gitignore`` of ``*``).
LOCKS_DIR = ".locks"


@dataclass(frozen=True)
class PlanWrite:
    """The outcome of a write: the plan as it now stands on disk, and whether it was changed."""

    plan: FeaturePlan
    changed: bool


def plan_lock_file(plan_path: Path | str) -> Path:
    """The lock file serialising writers of the plan ``plan_path``: ``<plans>/.locks/<name>.lock``.

    Deliberately not the lock a task loop takes (a run holding its own lock can still write its
    plan), and keyed by the plan file, so each copy of a plan has its own writer.
    """
    path = Path(plan_path)
    return path.parent / LOCKS_DIR / f"{path.name}.lock"


#: The plan locks each thread holds: a thread inside :func:`plan_lock` may call :func:`modify_plan`
#: (a second ``flock`` on a new descriptor would wait for the thread itself).
_HELD = threading.local()


@contextlib.contextmanager
def plan_lock(plan_path: Path | str, *, wait: float = LOCK_WAIT) -> Iterator[None]:
    """Hold the plan's writer lock for the block (waiting up to ``wait`` seconds for it).

    Re-entrant within a thread: an orchestrator step that holds it may still write the plan.

    Raises:
        LockedError: another writer held it for the whole ``wait``.
    """
    lock = plan_lock_file(plan_path)
    key = os.path.realpath(lock)
    held: set[str] = _HELD.__dict__.setdefault("paths", set())
    if key in held:
        yield
        return
    fsio.ensure_private_dir(lock.parent)
    with exclusive_lock(lock, wait=wait, holder=f"feature plan writer ({Path(plan_path).name})"):
        held.add(key)
        try:
            yield
        finally:
            held.discard(key)


def modify_plan(path: Path | str, *changes: Callable[[FeaturePlan], PlanUpdate | None],
                wait: float = LOCK_WAIT) -> PlanWrite:
    """Apply ``change(plan)`` to the plan file under its lock; returns the plan as written.

    ``change`` receives the plan as it is on disk and returns what to set (or None: nothing).
    It runs while the lock is held and again if the file changed under the write, so it must
    be quick, depend only on the plan it is given, and not modify it (the plan's data is the
    reference the new text is verified against). Nothing is written for a no-op.

    Several changes are applied in order, each to the plan the one before made (each splice
    verified), and written once: a run's steps that follow one another cost one write.

    Raises:
        LockedError: another writer held the lock for ``wait`` seconds.
        FileBusyError: the file kept changing under the write; nothing was written.
        ParseError, DuplicateKeyError, SchemaError: the plan on disk is not readable as a plan.
        TaskNotFoundError, FeaturePlanError: the update names an unknown task, or a layout the
            splice cannot edit.
        WriteVerificationError, SchemaError: the new text would not be exactly the update (or
            would be invalid); nothing was written.
        GuardkitStateError: the write failed (the original file is untouched).
    """
    path = Path(path)
    with plan_lock(path, wait=wait):
        raw = fsio.read_bytes_capped(path)
        for attempt in range(WRITE_ATTEMPTS):
            plan = _read(path, raw)
            written = _applied(path, plan, changes)
            if written is plan:
                return PlanWrite(plan, False)
            fsio.crash_point("plan.before_write")
            if fsio.atomic_write_text(path, written.text, precondition=partial(_holds, path, raw)):
                fsio.crash_point("plan.after_write")
                _remember(path, written.text.encode("utf-8"), written)
                return PlanWrite(written, True)
            # Someone else saved the file between our read and our rename (the lock binds only
            # guardkit-state's writers): wait until their save is complete, then redo the change.
            time.sleep(random.uniform(0, min(0.002 * (attempt + 1), 0.05)))
            raw = read_settled(path)
    raise FileBusyError(f"the feature plan kept changing while it was written ({WRITE_ATTEMPTS} attempts); "
                        "nothing was overwritten: try again", path=path, expected="a moment without other writers")


def _applied(path: Path, plan: FeaturePlan, changes: tuple[Callable[[FeaturePlan], PlanUpdate | None], ...]) \
        -> FeaturePlan:
    """``plan`` with every change applied in order (``plan`` itself when none changes anything)."""
    for change in changes:
        update = change(plan)
        if update is None or update.is_empty:
            continue
        result = splice_plan(plan.text, update, path=path, parsed=plan.parsed)
        if result.changed:
            # The verification read the new text in full and checked it against the schema.
            plan = parse_plan(result.text, path=path, parsed=result.parsed, check=False)
    return plan


def update_plan(path: Path | str, update: PlanUpdate, *, wait: float = LOCK_WAIT) -> PlanWrite:
    """Apply a fixed ``update`` to the plan file under its lock (see :func:`modify_plan`)."""
    return modify_plan(path, lambda _plan: update, wait=wait)


#: The plan each file held after this process last wrote it, by real path: while the file still
#: holds exactly those bytes the next write starts from that (verified) reading instead of parsing
#: the file again, which is most of a write's cost on a long plan.
_WRITTEN: dict[str, tuple[bytes, FeaturePlan]] = {}
_WRITTEN_LIMIT = 64


def _read(path: Path, raw: bytes) -> FeaturePlan:
    known = _WRITTEN.get(os.path.realpath(path))
    if known is not None and known[0] == raw:
        return known[1]
    return parse_plan(fsio.decode_utf8(raw, path), path=path)


def _remember(path: Path, raw: bytes, plan: FeaturePlan) -> None:
    if len(_WRITTEN) >= _WRITTEN_LIMIT:
        _WRITTEN.pop(next(iter(_WRITTEN)), None)
    _WRITTEN[os.path.realpath(path)] = (raw, plan)


def _holds(path: Path, expected: bytes) -> bool:
    """True when ``path`` still holds ``expected`` (a missing or unreadable file does not)."""
    try:
        return fsio.read_bytes_capped(path) == expected
    except GuardkitStateError:
        return False


__all__ = ["LOCK_WAIT", "PlanWrite", "modify_plan", "plan_lock", "plan_lock_file", "update_plan"]
