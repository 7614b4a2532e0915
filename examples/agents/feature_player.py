"""Scripted Player for the feature demo: the task demo's Player, told which task it works on.

``guardkit-state feature-build FEAT-DEMO`` runs one task loop per task, each in its own worktree;
this Player looks up ``$GUARDKIT_TASK_ID`` in :mod:`feature_tasks` and runs ``player.py``'s turn
with that task's module, first draft and fixes. Exit codes as ``player.py``.
"""

from __future__ import annotations

import os
import sys

import demo_common as common
import player
from feature_tasks import TASKS


def main() -> int:
    task_id = os.environ.get("GUARDKIT_TASK_ID", "")
    known = TASKS.get(task_id)
    if known is None:
        common.say("player", f"error: no scripted knowledge of task {task_id!r}")
        return common.EXIT_USAGE
    # player.play reads these module globals at call time: one process plays one task.
    player.MODULE, player.TEST_FILE, player.DRAFT = known.module, known.test_file, known.draft
    player.FIXES, player.IMPLEMENTED_IF = known.fixes, known.implemented_if
    return player.main()


if __name__ == "__main__":
    sys.exit(main())
