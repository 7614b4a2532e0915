"""The turns' clock: the time a turn records, and the pauses that wait out an editor's in-place save."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from guardkit_state.errors import FileBusyError, ParseError
from guardkit_state.store.turn_files import TurnStore
from guardkit_state.taskfile.document import TaskFile, read_settled


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


#: Pauses before reading again a task file that looks half-saved: growing, so that an editor
#: descheduled in the middle of an in-place save on a busy machine is waited out as well.
RESETTLE_PAUSES = (0.005, 0.02, 0.05, 0.1, 0.2, 0.4)


def looks_half_saved(task: TaskFile, store: TurnStore) -> bool:
    """True when ``task`` is empty, or lists fewer turns than ``store`` holds turn states for.

    A file caught mid-way through an in-place save (empty, or cut short) looks like that; so does
    one whose last entry a stale save really dropped (its turn is then rolled forward).
    """
    if not task.text.strip():  # emptied by a save between its truncate and its write: never a task
        return True
    recorded = len(task.state.turns) if task.state else 0
    return store.exists("turn_state", recorded + 1)


def read_task_settled(path: Path, store: TurnStore) -> TaskFile:
    """The task file once it no longer looks half-saved, or once every pause has passed.

    A partial file must never number a turn (nor be refused as a broken task file): it is read
    again after each of :data:`RESETTLE_PAUSES` (under a second in all); an empty one counts as
    unparsable (a save between its truncate and its write). A file that stays unparsable, or stays
    behind the store throughout, is what it is: the parse error is raised (a busy-file error where
    the unparsable bytes kept changing), the view returned (a turn a stale save really dropped is
    then rolled forward).
    """
    error: ParseError | None = None
    task: TaskFile | None = None
    unparsable: set[bytes] = set()
    for pause in (0.0, *RESETTLE_PAUSES):
        time.sleep(pause)
        raw = read_settled(path)
        if not raw.strip():  # caught between an editor's truncate and its write: never a task's bytes
            error, task = ParseError("the task file is empty", path=path,
                                     expected="a task file: its frontmatter and text"), None
            unparsable.add(raw)
            continue
        try:
            task = TaskFile.from_bytes(raw, path)
        except ParseError as exc:
            error, task = exc, None
            unparsable.add(raw)
            continue
        # Only a file that stays behind the store through every pause is taken as it is: on a busy
        # machine an editor can sit between its truncate and its write for tens of milliseconds.
        if not looks_half_saved(task, store):
            return task
    if task is None:
        assert error is not None
        if len(unparsable) > 1:
            # Different bytes each time, none whole: a file being saved over and over, not a broken one.
            raise FileBusyError("the task file kept changing and never read whole; nothing was written",
                                path=path, fix="try again once the other writer is done")
        raise error
    return task


__all__ = ["RESETTLE_PAUSES", "looks_half_saved", "read_task_settled", "utc_now"]
