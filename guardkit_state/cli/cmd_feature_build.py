"""``guardkit-state feature-build``: run (or resume) a Player/Coach loop on a task.

Progress comes from the loop as typed events (:mod:`guardkit_state.loop.events`), each shown by
:func:`guardkit_state.cli.event_lines.event_lines`; a Ctrl-C is said by ``guardkit_state.cli.main``
from the loop's own :class:`~guardkit_state.loop.run.LoopInterrupted`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from guardkit_state.cli.exit_codes import ExitCode
from guardkit_state.cli.options import add_json_option, add_repo_option, seconds, turn_count, usd
from guardkit_state.cli.output import Output, safe
from guardkit_state.cli.remote_feature import add_remote_options
from guardkit_state.errors import InputError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "feature-build",
        help="run a Player/Coach loop on a task, or a feature's waves of tasks, with all state in files",
        description="Run the Player command, then the Coach command, record the turn, commit it, and "
        "repeat until the Coach approves, the loop stalls, or --max-turns is reached. Each turn runs "
        "in the worktree .guardkit/worktrees/TASK-ID (branch autobuild/TASK-ID). Stop it at any "
        "moment and continue with --resume. Given a feature (FEAT-ID or a plan's .yaml), run its "
        "waves: each wave's tasks in parallel, each in its own worktree, merged into autobuild/FEAT-ID "
        "in plan order.",
        epilog="Example:\n"
        "  guardkit-state feature-build TASK-AUTH-001 --player claude --coach codex --max-turns 5\n"
        "  guardkit-state feature-build TASK-AUTH-001 --player 'python agents/player.py' \\\n"
        "      --coach 'python agents/coach.py' --max-cost 5\n"
        "  guardkit-state feature-build TASK-AUTH-001 --player ... --coach ... --resume\n"
        "  guardkit-state feature-build FEAT-AUTH --player ... --coach ... --max-parallel 3\n"
        "  guardkit-state feature-build FEAT-AUTH --player ... --coach ... --remote origin   (on each machine)\n"
        "  guardkit-state feature-build FEAT-AUTH --release TASK-AUTH-002 --remote origin   (a quarantined task)\n"
        "  (then: guardkit-state show FEAT-AUTH · guardkit-state log FEAT-AUTH)\n\n"
        "A shell command gets GUARDKIT_TASK_ID, GUARDKIT_TURN, GUARDKIT_MODE, GUARDKIT_TASK_FILE,\n"
        "GUARDKIT_PROMPT_FILE (its whole prompt), GUARDKIT_CONTEXT_FILE, GUARDKIT_CRITERIA_FILE,\n"
        "GUARDKIT_SCHEMA_FILE and GUARDKIT_REPORT_FILE (the Coach also GUARDKIT_PLAYER_REPORT_FILE and\n"
        "GUARDKIT_DIFF_FILE) and writes a JSON report to GUARDKIT_REPORT_FILE (docs/agents.md).\n\n"
        "Exit codes: 0 approved, 1 not approved (max turns, stall, the same agent failure twice,\n"
        "--max-cost reached; a feature: stopped, or completed without a failed task under\n"
        "--no-stop-on-failure), 2 usage or configuration\n"
        "error, 70 a fault of guardkit-state itself (a bug: the error names its crash log), 130\n"
        "interrupted (state saved; continue with --resume).",
    )
    parser.add_argument("task_id", metavar="TASK-ID|FEAT-ID",
                        help="a task id (or task file), or a feature id (or its plan's .yaml file)")
    # Required, but for --release (which runs no agent): checked in run().
    parser.add_argument("--player", metavar="NAME|CMD",
                        help="the Player (required): an agent preset ({presets}; see 'guardkit-state agents') or a "
                        "shell command")
    parser.add_argument("--coach", metavar="NAME|CMD",
                        help="the Coach (required): an agent preset (it runs read-only) or a shell command")
    parser.add_argument("--continue-session", action="store_true",
                        help="the Player goes on with the agent session of its previous turn ({continuing_presets} "
                        "presets; also after --resume)")
    parser.add_argument("--max-cost", type=usd, metavar="USD",
                        help="stop cleanly once the agents' reported cost reaches this (per task; for a feature, "
                        "for the whole feature)")
    stopping = parser.add_mutually_exclusive_group()
    stopping.add_argument("--no-stop-on-failure", dest="stop_on_failure", action="store_false", default=None,
                          help="features only: a task that ends without approval does not stop the feature; the "
                          "tasks that need it are skipped, the others run (exit 1: completed without them)")
    stopping.add_argument("--stop-on-failure", dest="stop_on_failure", action="store_true", default=None,
                          help="features only: a task that ends without approval stops the feature, whatever the "
                          "plan's stop_on_failure says (the default, where the plan says nothing)")
    parser.add_argument("--max-turns", type=turn_count, metavar="N", help="turn budget (default: the task's, else 5); "
                        "--resume beyond it is refused unless this raises it")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted loop from its files")
    parser.add_argument("--reopen", action="store_true", help="run turns on a completed, cancelled, archived "
                        "or approved task (refused without it)")
    add_repo_option(parser)
    parser.add_argument("--no-worktree", action="store_true", help="work in the checkout itself, not a worktree")
    parser.add_argument("--base-branch", metavar="BRANCH", help="branch or commit the worktree starts from "
                        "(default: the branch checked out where you run it; a detached HEAD's commit)")
    parser.add_argument("--turn-timeout", type=seconds, metavar="SECONDS",
                        help="kill an agent running longer than this")
    parser.add_argument("--verbose", "-v", action="store_true", help="also show the autobuild log on the terminal")
    parser.add_argument("--max-parallel", type=turn_count, metavar="N", help="features only (FEAT-ID): task "
                        "loops run at once (default: the plan's recommended_parallel, capped by the CPUs); "
                        "ignored, with a note, for a task")
    add_remote_options(parser)
    parser.add_argument("--report", type=Path, metavar="FILE",
                        help="rewrite this HTML report (see 'guardkit-state report') when each turn starts and "
                        "ends, atomically: a browser tab left open on it shows progress on reload")
    add_json_option(parser, "print the result as JSON at the end")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, out: Output) -> int:
    from guardkit_state.cli.feature_output import run_feature
    from guardkit_state.store.layout import names_feature

    if args.release is not None:  # a quarantined task of a feature built through a remote, released
        from guardkit_state.cli.remote_feature import run_release

        return run_release(args, out)
    missing = [flag for flag in ("--player", "--coach") if getattr(args, flag[2:]) is None]
    if missing:
        raise InputError(f"the following arguments are required: {', '.join(missing)}")
    from guardkit_state.agents import agent_for

    # Checked before anything is written: an agent that cannot run is a usage error, not two failed
    # turns on a branch of their own.
    agents = (agent_for(args.player, args.repo, option="--player"), agent_for(args.coach, args.repo, option="--coach"))
    if args.remote is not None:  # this machine's worker on a feature shared through a git remote
        from guardkit_state.cli.remote_feature import run_remote

        return run_remote(args, out, agents)
    if names_feature(args.task_id):  # FEAT-ID or a plan's .yaml: its waves of tasks, in parallel
        return run_feature(args, out, agents)
    from guardkit_state.cli.live_report import run_with_progress
    from guardkit_state.loop.run import LoopOptions, run_task_loop

    for name, flag in (("max_parallel", "--max-parallel"), ("stop_on_failure", "--[no-]stop-on-failure")):
        if getattr(args, name) is not None:
            out.note(f"note: {flag} applies to features (FEAT-ID) only; a task runs one loop, so it is ignored")
    options = LoopOptions(max_turns=args.max_turns, resume=args.resume, use_worktree=not args.no_worktree,
                          turn_timeout=args.turn_timeout, base_branch=args.base_branch, reopen=args.reopen,
                          max_cost=args.max_cost, continue_session=args.continue_session, argv=args.argv)

    result = run_with_progress(args, out, lambda sink: run_task_loop(args.repo, args.task_id, *agents, options,
                                                                      on_event=sink), feature=False)
    if args.json:
        out.json(result.to_dict())
    else:
        word = result.outcome.value if result.outcome else "stopped"
        word += ", not committed" if result.commit_error else ""  # exit 1: git refused the turn commit
        verdict = out.style(word, "bold", "green" if result.exit_code == 0 else "yellow")
        out.line(f"{args.task_id}: {verdict} — {safe(result.reason)}")
        if result.checkout:
            out.line(f"  checkout: {safe(result.checkout)}")
        out.line(f"  review: guardkit-state show {args.task_id} · guardkit-state log {args.task_id}")
    return ExitCode(result.exit_code)
