"""Writing a feature plan's progress: one writer at a time, verified, atomic.

The task loops of a wave run in parallel and report to one place. :func:`modify_plan` holds the
plan's lock (an ``flock``: exclusive between threads and processes alike, released when its
holder dies, so a SIGKILLed run never leaves it held), reads the plan as it is on disk, asks the
caller what to change *given that plan* (so a counter is incremented from the value on disk,
never from a stale copy), splices and verifies the new text (:mod:`plan_splice`), and replaces
the file atomically. Two tasks finishing at the same instant both land, one after the other.

The lock, the check just before the rename and the retries are the task files' own
(:mod:`guardkit_state.yamltext.yaml_writer`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from guardkit_state.plans.plan import FeaturePlan, parse_plan
from guardkit_state.plans.plan_splice import PlanUpdate, splice_plan
from guardkit_state.store import reads
from guardkit_state.yamltext.yaml_writer import recall, remember, write_verified, writer_lock

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


def plan_lock(plan_path: Path | str, *, wait: float = LOCK_WAIT) -> AbstractContextManager[None]:
    """Hold the plan's writer lock for the block (waiting up to ``wait`` seconds for it).

    Re-entrant within a thread: an orchestrator step that holds it may still write the plan.

    Raises:
        LockedError: another writer held it for the whole ``wait``.
    """
    return writer_lock(plan_lock_file(plan_path), wait=wait, holder=f"feature plan writer ({Path(plan_path).name})")


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
        outcome: list[FeaturePlan] = []

        def edit(raw: bytes) -> str | None:
            plan = _read(path, raw)
            written = _applied(path, plan, changes)
            outcome[:] = [written]
            return None if written is plan else written.text

        changed = write_verified(path, reads.read_bytes_capped(path), edit, attempts=WRITE_ATTEMPTS, name="plan",
                                 what="feature plan")
        if changed:
            remember(path, outcome[0].text.encode("utf-8"), outcome[0])
        return PlanWrite(outcome[0], changed)


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


def _read(path: Path, raw: bytes) -> FeaturePlan:
    known = recall(path, raw)
    return known if isinstance(known, FeaturePlan) else parse_plan(reads.decode_utf8(raw, path), path=path)


__all__ = ["LOCK_WAIT", "PlanWrite", "modify_plan", "plan_lock", "plan_lock_file", "update_plan"]
