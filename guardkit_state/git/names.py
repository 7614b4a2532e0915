"""Ids checked before a loop or a feature makes anything: git must take ``autobuild/ID`` as a branch
name, and the file system must hold every file name made from the id.

Without these checks an id such as ``TASK-A.lock`` or ``TASK-A.`` failed with git's raw "not a
valid branch name" after ``.guardkit/worktrees`` was made, and a 245-character id only once both
agents had run ("File name too long", writing a temp file named after it).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from guardkit_state.errors import InvalidTaskIdError, shorten
from guardkit_state.git.runner import execute
from guardkit_state.store.layout import BRANCH_PREFIX

#: What the longest file name made from an id adds to it: a temp file of the task's lock,
#: ``.gks-tmp-<ID>.lock.<pid>.<ns>`` (9 + 5 + 1 + 7 + 1 + 19), and a little room.
NAME_OVERHEAD = 48
#: Ids git takes in ``autobuild/ID`` without asking it (one process less per loop): letters, digits,
#: dashes, dots and underscores, a letter first, no ``..``, no ``.`` or ``.lock`` at the end. Any
#: other id is git's to judge.
_PLAIN_BRANCH_ID = re.compile(r"(?!.*\.\.)(?!.*\.lock$)[A-Za-z][A-Za-z0-9._-]*(?<!\.)")
#: Used when the file system does not say its name limit.
DEFAULT_NAME_MAX = 255


def longest_id(root: Path) -> int:
    """The longest id whose file names fit the file system at ``root``."""
    try:
        name_max = os.pathconf(root, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = DEFAULT_NAME_MAX
    return max(1, (name_max if name_max > 0 else DEFAULT_NAME_MAX) - NAME_OVERHEAD)


def check_loop_ids(root: Path, ids: Iterable[str], *, git: bool = True) -> None:
    """Refuse any of ``ids`` git cannot use in ``autobuild/ID`` or the file system cannot hold.

    Raises:
        InvalidTaskIdError: naming the id (escaped and cut) and what would be accepted.
    """
    limit = longest_id(root)
    for task_id in ids:
        if len(task_id) > limit:
            raise InvalidTaskIdError(f"id {shorten(repr(task_id))} is {len(task_id)} characters long; file names "
                                     f"made from it would not fit this file system", task_id=None,
                                     expected=f"an id of at most {limit} characters")
        if not git or _PLAIN_BRANCH_ID.fullmatch(task_id):
            continue
        status, _, _ = execute(root, ["git", "check-ref-format", "--branch", f"{BRANCH_PREFIX}{task_id}"])
        if status != 0:
            raise InvalidTaskIdError(f"id {shorten(repr(task_id))} cannot name a git branch "
                                     f"({BRANCH_PREFIX}{shorten(task_id)})", task_id=None,
                                     expected="an id git accepts in a branch name: no '.lock' or '.' at the end, "
                                              "no '..', '@{', '~', '^', ':', '?', '*', '[' or '\\'")


__all__ = ["DEFAULT_NAME_MAX", "NAME_OVERHEAD", "check_loop_ids", "longest_id"]
