"""The guardkit-state feature demo (``make demo-feature``): a whole feature, its waves in parallel.

Copies ``examples/feature_project`` to a fresh git repository: three tasks in a GuardKit feature
plan (``.guardkit/features/FEAT-DEMO.yaml``), two in wave 1 and one in wave 2 that needs both.
Runs ``guardkit-state feature-build FEAT-DEMO`` with the task demo's scripted Player and Coach
(``examples/agents/feature_*.py`` give them each task's knowledge), then shows the merges on the
feature branch and the progress written into the plan. Stdlib only; run it with the Python that
has guardkit-state installed.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from run_demo import HERE, Console, conclude, git, guardkit_state, run, run_main
from run_demo import make_project as make_demo_project

FEATURE_ID = "FEAT-DEMO"
BRANCH = f"autobuild/{FEATURE_ID}"
PLAN_REL = Path(".guardkit/features") / f"{FEATURE_ID}.yaml"
def make_project(root: Path) -> Path:
    """Copy the template into ``root/textkit`` and commit it on ``main``."""
    return make_demo_project(root, "feature_project", "textkit",
                             "textkit: acceptance tests and the FEAT-DEMO plan")


def agent(name: str) -> str:
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(HERE / 'agents' / name))}"


def plan_diff(project: Path) -> list[str]:
    """``git diff -U0`` of the plan: the first task's hunks and the execution block (the other tasks
    get the same keys)."""
    lines = git(project, "diff", "-U0", "--no-color", "--", str(PLAN_REL)).stdout.splitlines()
    body = lines[next((i for i, line in enumerate(lines) if line.startswith("@@")), len(lines)):]
    first_merge = next((i for i, line in enumerate(body) if "merge_commit:" in line), None)
    execution = next((i for i, line in enumerate(body) if line == "+execution:"), None)
    if first_merge is None or execution is None:
        return body
    return [*body[:first_merge + 1], "… (the same keys for TASK-FD-002 and TASK-FD-003)", *body[execution - 1:]]


def demo(workdir: Path, console: Console) -> int:
    """Run every step; return 0 when each behaved as the demo expects."""
    problems: list[str] = []
    tool = guardkit_state()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEMO_PLAYER_", "GUARDKIT_"))}

    console.section("A project with a feature plan",
                    "Three tasks: TASK-FD-001 and TASK-FD-002 in wave 1, TASK-FD-003 (needs both) in wave 2.")
    project = make_project(workdir)
    console.note(f"git repository at {project}")
    console.note(f"plan: {PLAN_REL} (GuardKit's format: tasks, dependencies, orchestration.parallel_groups)")

    console.section("Build the feature",
                    "Each task runs its own Player/Coach loop in its own worktree; wave 1's two at the same time.")
    build = [*tool, "feature-build", FEATURE_ID, "--player", agent("feature_player.py"),
             "--coach", agent("feature_coach.py")]
    code = run(console, build, project, env)
    console.note(f"exit code {code}" + (" (every wave merged)" if code == 0 else ""))
    if code != 0:
        problems.append(f"the feature run exited {code}, expected 0")

    console.section("The feature branch",
                    "One merge per approved task, in plan order, whichever agent finished first.")
    merges = ["git", "log", "--first-parent", "--format=%h %s", BRANCH]
    console.command(merges)
    log = git(project, *merges[1:]).stdout.splitlines()
    for line in log:
        console.output(line)
    if sum(line.split(" ", 1)[-1].startswith("Merge ") for line in log) != 3:
        problems.append(f"expected three merges on {BRANCH}")

    console.section("What the run wrote into the plan",
                    "Only the values that changed; comments, quoting and key order kept.")
    console.command(["git", "diff", "-U0", "--", str(PLAN_REL)])
    for line in plan_diff(project):
        console.output(line)

    return conclude(problems, "Done: two tasks ran side by side, one needed a second turn, and wave 2 built on both.",
                    project, f"git log --graph --oneline {BRANCH}")


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(argv, (__doc__ or "").splitlines()[0], "guardkit-feature-demo-", demo)


if __name__ == "__main__":
    sys.exit(main())
