"""Recorded history is the store's: an agent's edit to the turns or criteria the loop recorded in
the task file is undone before the turn is written and committed.

The Player works in the worktree that holds the task file, so it can rewrite turn 1's
``decision`` or a criterion's status; the turn's splice keeps whatever else the file says (that
is how an editor's save is never lost), so the edit would be committed as history. Before each
turn is written, the task file's ``id``, ``autobuild_state.turns`` and ``criteria`` are compared with
the loop's own last write (:class:`~guardkit_state.taskfile.document.TaskFile` in memory); when
they differ, the frontmatter the loop wrote is put back (the body, the agent's to change, is
kept) and the caller is told which entry was changed.
"""

from __future__ import annotations

import os
from dataclasses import asdict

from guardkit_state.errors import GuardkitStateError, shorten
from guardkit_state.model import AutobuildState
from guardkit_state.store import fsio, reads
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.taskfile.frontmatter import split_frontmatter


def restore_recorded_history(task: TaskFile, *, own_checkout: bool) -> str | None:
    """Put back the recorded turns and criteria of ``task`` (the loop's last write) if the file on
    disk changed them; return what was changed (one line), or None when nothing was.

    ``own_checkout``: the file is in the loop's own worktree. Only there is a removed file put back;
    in the user's checkout a removed or moved task file is the user's doing, and the turn's write
    reports it (never re-created behind the user's back).
    """
    if not task.is_stale():
        return None  # the file is the loop's last write, byte for byte
    if not os.path.lexists(task.path):
        if not own_checkout:
            return None
        # Deleted (or moved away) by an agent: the turn's write would fail, and --resume would find
        # only the base branch's copy, without the turns. The loop's last write is put back.
        fsio.atomic_write_text(task.path, task.text)
        return "the task file itself (removed)"
    try:
        raw = reads.read_bytes_capped(task.path)
    except GuardkitStateError:
        return None  # unreadable: the turn's own write reports it
    text = raw.decode("utf-8", "replace")
    try:
        theirs = TaskFile.from_bytes(raw, task.path)
    except GuardkitStateError:
        on_disk: AutobuildState | None = None
        changed: str | None = "the frontmatter no longer parses"
    else:
        on_disk = theirs.state
        # The id names the task to every reader (a feature finds its task's copy by it).
        changed = (f"the task's id ({shorten(repr(task.task_id), 40)} → {shorten(repr(theirs.task_id), 40)})"
                   if theirs.task_id != task.task_id else _changed_entry(task.state, on_disk))
        if changed is None:
            return None
    ours = task.split
    try:
        body = split_frontmatter(text, path=task.path).body if on_disk is not None else None
    except GuardkitStateError:
        body = None
    restored = (ours.bom + ours.opening + ours.yaml_text + ours.closing + body) if body is not None else task.text
    fsio.atomic_write_text(task.path, restored)
    return changed


def _changed_entry(ours: AutobuildState | None, theirs: AutobuildState | None) -> str | None:
    """The first recorded entry ``theirs`` changed, removed or added, described; None when equal."""
    our_turns = ours.turns if ours is not None else []
    their_turns = theirs.turns if theirs is not None else []
    for mine, other in zip(our_turns, their_turns, strict=False):
        if mine != other:
            fields = [k for k, v in asdict(mine).items() if asdict(other).get(k) != v]
            shown = ", ".join(f"{k} {shorten(repr(asdict(mine)[k]), 40)} → {shorten(repr(asdict(other)[k]), 40)}"
                              for k in fields[:3])
            return f"turn {mine.turn}'s entry ({shown})"
    if len(their_turns) != len(our_turns):
        return f"the list of turns ({len(our_turns)} recorded, {len(their_turns)} in the file)"
    our_criteria = ours.criteria if ours is not None else {}
    their_criteria = theirs.criteria if theirs is not None else {}
    for key in sorted(set(our_criteria) | set(their_criteria)):
        if our_criteria.get(key) != their_criteria.get(key):
            return (f"criterion {shorten(repr(key), 40)} ({shorten(repr(our_criteria.get(key)), 40)} → "
                    f"{shorten(repr(their_criteria.get(key)), 40)})")
    return None


__all__ = ["restore_recorded_history"]
