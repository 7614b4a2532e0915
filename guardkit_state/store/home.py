"""``.guardkit`` itself, checked before anything is written under it.

A ``.guardkit`` symlink that leads out of the repository would have the loop write its log,
reports and worktrees elsewhere; one that is a regular file failed with an unexpected
``NotADirectoryError`` once the loop tried to write there. Both are refused up front.
"""

from __future__ import annotations

import os
from pathlib import Path

from guardkit_state.errors import NotADirectoryStateError, UnsafePathError
from guardkit_state.store.layout import GUARDKIT_DIR


def check_state_home(root: Path) -> None:
    """Refuse ``root/.guardkit`` when it leaves ``root`` or is not a directory (absent is fine).

    Raises:
        UnsafePathError: a symlink (or a path through one) that resolves outside ``root``.
        NotADirectoryStateError: ``.guardkit`` exists and is a file (or another non-directory).
    """
    home = Path(root) / GUARDKIT_DIR
    if not os.path.lexists(home):
        return
    real_root = os.path.realpath(root)
    real = os.path.realpath(home)
    if os.path.commonpath([real_root, real]) != real_root:
        raise UnsafePathError(f"{GUARDKIT_DIR} is a symlink to {real}, outside the repository; its state, "
                              "reports and worktrees would be written there", path=home,
                              fix=f"replace the symlink by a directory (or a link to one inside {real_root})")
    if not os.path.isdir(home):
        raise NotADirectoryStateError(f"{GUARDKIT_DIR} is a file, not a directory: guardkit-state keeps its "
                                      "state, reports and worktrees in that directory", path=home,
                                      fix="move the file away")


__all__ = ["check_state_home"]
