"""``guardkit-state feature-build FEAT-X``: a whole feature, its waves of tasks in parallel.

Reached through ``feature-build`` when its argument names a feature (``FEAT-...``, or a plan's
``.yaml`` file). Calls :func:`~guardkit_state.features.build.build_feature` and renders its
events, each task loop's progress prefixed with the task's id; a Ctrl-C is said by
``guardkit_state.cli.main`` from the run's own :class:`~guardkit_state.features.result.FeatureInterrupted`,
or from :class:`~guardkit_state.features.result.FeatureNotStarted` when it came before the run began.
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

from guardkit_state.cli.exit_codes import ExitCode
from guardkit_state.cli.output import Output, safe
from guardkit_state.errors import GuardkitStateError, InputError
from guardkit_state.features.result import FeatureInterrupted, FeatureNotStarted, FeatureResult

if TYPE_CHECKING:
    from guardkit_state.agents.protocol import Agent
#: Options of ``feature-build`` that concern one task's loop only.
_TASK_ONLY = (("no_worktree", "--no-worktree"), ("reopen", "--reopen"))


def run_feature(args: argparse.Namespace, out: Output, agents: tuple[Agent, Agent]) -> int:
    """Run (or resume) the feature named by ``args.task_id`` with ``agents`` (Player, Coach); the exit
    code of its result."""
    try:
        return _run_feature(args, out, agents)
    except FeatureInterrupted:
        raise  # the run began: it says what it stopped and how to continue
    except KeyboardInterrupt as stop:
        # Stopped outside the run (its modules loading, its plan and tasks being checked, its lock
        # awaited): whether --resume can continue is for the files to say, i.e. the feature branch.
        raise _not_started(args.repo, args.task_id, args.argv) from stop


def _not_started(repo: Path | str, ref: str, argv: tuple[str, ...] | None) -> FeatureNotStarted:
    """The interruption of a run of ``ref`` that had not begun, told by whether its branch exists."""
    from guardkit_state.git.repo import GitRepo
    from guardkit_state.plans.plan import find_plan, load_plan
    from guardkit_state.store.layout import branch_for

    feature, started = ref, False
    with contextlib.suppress(GuardkitStateError, OSError):
        root = Path(repo).resolve()
        feature = load_plan(find_plan(root, ref)).feature_id
        git = GitRepo.discover(root)
        started = git is not None and git.branch_exists(branch_for(feature))
    return FeatureNotStarted(feature, started=started, argv=argv)


def _run_feature(args: argparse.Namespace, out: Output, agents: tuple[Agent, Agent]) -> int:
    from guardkit_state.features.build import FeatureOptions, build_feature

    for name, flag in _TASK_ONLY:
        if getattr(args, name, None):
            raise InputError(f"{flag} applies to one task's loop; a feature's tasks always run in worktrees "
                             "of their own")
    options = FeatureOptions(max_parallel=args.max_parallel, max_turns=args.max_turns, resume=args.resume,
                             base_branch=args.base_branch, turn_timeout=args.turn_timeout, max_cost=args.max_cost,
                             continue_session=args.continue_session, stop_on_failure=args.stop_on_failure,
                             argv=args.argv)

    from guardkit_state.cli.live_report import run_with_progress

    result = run_with_progress(args, out, lambda sink: build_feature(args.repo, args.task_id, *agents, options,
                                                                      on_event=sink), feature=True)
    out.result(result, render_result)
    return ExitCode(result.exit_code)


def render_result(result: FeatureResult, out: Output) -> None:
    """The end of a feature run (stdout): its verdict, then one line per task."""
    good = result.status == "completed"
    verdict = out.style(result.verdict, "bold", "green" if good else "yellow")
    out.line(f"{result.feature_id}: {verdict} — {safe(result.reason)}")
    width = max((len(task.task_id) for task in result.tasks), default=0)
    for task in result.tasks:
        merge = f"  merge {task.merge_commit[:10]}" if task.merge_commit else ""
        outcome = task.outcome or "-"
        out.line(f"  {safe(task.task_id):<{width}}  wave {task.wave}  {task.status:<11} {outcome:<19} "
                 f"{task.turns} turn(s){merge}")
    if result.worktree:
        out.line(f"  branch {safe(result.branch)} in {safe(result.worktree)}")


__all__ = ["render_result", "run_feature"]
