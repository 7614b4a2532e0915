"""Scripted Coach for the feature demo: the task demo's Coach, with the task's criteria-to-tests map.

Looks up ``$GUARDKIT_TASK_ID`` in :mod:`feature_tasks` and runs ``coach.py``'s review (the unit
tests in the worktree, each criterion judged by its tests) with that task's table. Exit codes as
``coach.py``.
"""

from __future__ import annotations

import os
import sys

import coach
import demo_common as common
from feature_tasks import TASKS


def main() -> int:
    task_id = os.environ.get("GUARDKIT_TASK_ID", "")
    known = TASKS.get(task_id)
    if known is None:
        common.say("coach", f"error: no scripted knowledge of task {task_id!r}")
        return common.EXIT_USAGE
    coach.CHECKS = known.checks  # read by coach.verify at call time: one process reviews one task
    return coach.main()


if __name__ == "__main__":
    sys.exit(main())
