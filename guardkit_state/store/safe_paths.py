"""Names and paths that come from outside: a task id safe to build paths from, and a path kept
inside its repository (after symlinks)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from guardkit_state.errors import InvalidTaskIdError, UnsafePathError

_TASK_ID = re.compile(r"[A-Za-z][A-Za-z0-9]*(-[A-Za-z0-9._]+)+")


def is_task_id(text: object) -> bool:
    """Whether ``text`` is a plain id like ``TASK-AUTH-001`` (:func:`validate_task_id` takes it)."""
    return isinstance(text, str) and _TASK_ID.fullmatch(text) is not None and ".." not in text


def validate_task_id(task_id: str) -> str:
    """Return ``task_id`` if it is a plain id like ``TASK-AUTH-001``; raise otherwise."""
    if not is_task_id(task_id):
        shown = repr(task_id)[:80]
        raise InvalidTaskIdError(
            f"invalid task id {shown}",
            task_id=None,
            expected="letters, digits and dashes like TASK-AUTH-001 (no '/', '..', NUL or spaces)",
        )
    return task_id


def resolve_inside(root: Path, candidate: Path) -> Path:
    """Resolve ``candidate`` (following symlinks) and refuse it if it leaves ``root``."""
    root_real = Path(os.path.realpath(root))
    real = Path(os.path.realpath(candidate))
    if real != root_real and root_real not in real.parents:
        raise UnsafePathError(
            f"path resolves outside the repository (to {real})",
            path=candidate,
            expected=f"a path inside {root_real}",
        )
    return real
