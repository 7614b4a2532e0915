"""``guardkit-state feature-build``: run (or resume) a Player/Coach loop on a task."""

from __future__ import annotations

import argparse
import logging
import math
from typing import Any

from guardkit_state.cli.options import add_json_option, add_repo_option
from guardkit_state.cli.output import Output, safe

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "feature-build",
        help="run a Player/Coach loop on a task, with all state in files",
        description="Run the Player command, then the Coach command, record the turn, commit it, and "
        "repeat until the Coach approves, the loop stalls, or --max-turns is reached. Each turn runs "
        "in the worktree .guardkit/worktrees/TASK-ID (branch autobuild/TASK-ID). Stop it at any "
        "moment and continue with --resume.",
        epilog="Example:\n"
        "  guardkit-state feature-build TASK-AUTH-001 --player 'python agents/player.py' \\\n"
        "      --coach 'python agents/coach.py' --max-turns 5\n"
        "  guardkit-state feature-build TASK-AUTH-001 --player ... --coach ... --resume\n\n"
        "Agents get GUARDKIT_TASK_ID, GUARDKIT_TURN, GUARDKIT_MODE, GUARDKIT_TASK_FILE,\n"
        "GUARDKIT_CONTEXT_FILE and GUARDKIT_REPORT_FILE (the Coach also GUARDKIT_PLAYER_REPORT_FILE\n"
        "and GUARDKIT_PROMPT_FILE) and must write a JSON report to GUARDKIT_REPORT_FILE.\n\n"
        "Exit codes: 0 approved, 1 not approved (max turns or stall), 2 usage or configuration\n"
        "error, 130 interrupted (state saved; continue with --resume).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("task_id", metavar="TASK-ID")
    parser.add_argument("--player", required=True, metavar="CMD", help="the Player command (run through the shell)")
    parser.add_argument("--coach", required=True, metavar="CMD", help="the Coach command (run through the shell)")
    parser.add_argument("--max-turns", type=int, metavar="N", help="turn budget (default: the task's, else 5); "
                        "--resume beyond it is refused unless this raises it")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted loop from its files")
    parser.add_argument("--reopen", action="store_true", help="run turns on a completed, cancelled, archived "
                        "or approved task (refused without it)")
    add_repo_option(parser)
    parser.add_argument("--no-worktree", action="store_true", help="work in the checkout itself, not a worktree")
    parser.add_argument("--base-branch", metavar="BRANCH", help="branch or commit the worktree starts from "
                        "(default: the branch checked out where you run it; a detached HEAD's commit)")
    parser.add_argument("--turn-timeout", type=float, metavar="SECONDS", help="kill an agent running longer than this")
    parser.add_argument("--verbose", "-v", action="store_true", help="also show the autobuild log on the terminal")
    add_json_option(parser, "print the result as JSON at the end")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, out: Output) -> int:
    from guardkit_state.loop.agents import CommandAgent
    from guardkit_state.loop.run import LoopOptions, feature_build

    problem = _option_problem(args)
    if problem is not None:
        out.error(problem)
        return EXIT_USAGE
    if args.verbose:
        handler = logging.StreamHandler(out.stderr)
        handler.setFormatter(logging.Formatter("  log: %(message)s"))
        logging.getLogger("guardkit_state").addHandler(handler)
    options = LoopOptions(max_turns=args.max_turns, resume=args.resume, use_worktree=not args.no_worktree,
                          turn_timeout=args.turn_timeout, base_branch=args.base_branch, reopen=args.reopen)
    progress = _Progress(out, quiet=args.json)
    try:
        result = feature_build(args.repo, args.task_id, CommandAgent(args.player), CommandAgent(args.coach),
                               options, on_event=progress)
    except KeyboardInterrupt:
        if progress.turn is None and not args.resume:
            # Nothing was recorded yet: there is no loop state for --resume to continue from.
            out.error(f"interrupted before the first turn began; nothing was recorded: run "
                      f"'guardkit-state feature-build {args.task_id} --player ... --coach ...' again")
        else:
            out.error(f"interrupted{progress.where()}: state saved; continue with "
                      f"'guardkit-state feature-build {args.task_id} --player ... --coach ... --resume'")
        return EXIT_INTERRUPTED
    if args.json:
        out.json(result.to_dict())
    else:
        verdict = out.style(result.outcome.value if result.outcome else "stopped", "bold",
                            "green" if result.exit_code == 0 else "yellow")
        out.line(f"{args.task_id}: {verdict} — {safe(result.reason)}")
        if result.checkout:
            out.line(f"  checkout: {result.checkout}")
        out.line(f"  review: guardkit-state show {args.task_id} · guardkit-state log {args.task_id}")
    return result.exit_code


def _option_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the options, checked before anything is created (no lock, no .guardkit/)."""
    if args.max_turns is not None and args.max_turns < 1:
        return "--max-turns must be at least 1"
    timeout = args.turn_timeout
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        return f"--turn-timeout must be a finite number of seconds above 0, not {timeout:g}"
    if args.base_branch is not None:
        from guardkit_state.errors import InputError
        from guardkit_state.git.repo import GitRepo
        from guardkit_state.git.worktrees import check_base_branch

        repo = GitRepo.discover(args.repo)
        if repo is not None:
            try:
                check_base_branch(repo, args.base_branch)
            except InputError as exc:
                return exc.message
    return None


class _Progress:
    """Turns loop events into short progress lines on stderr."""

    def __init__(self, out: Output, *, quiet: bool) -> None:
        self.out = out
        self.quiet = quiet
        self.turn: int | None = None
        self.phase = ""

    def where(self) -> str:
        return f" during turn {self.turn} ({self.phase})" if self.turn else ""

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "turn":
            self.turn, self.phase = data["turn"], "starting"
        elif kind == "agent":
            self.phase = data["role"]
        elif kind == "recorded":
            self.phase = "recorded"
        if self.quiet:
            return
        say = self.out.note
        if kind == "note":
            say(f"  note: {safe(data['text'])}")
        elif kind == "advice":
            say(safe(data["text"]).rstrip())
        elif kind == "worktree":
            say(f"worktree {data['path']} (branch {data['branch']})")
        elif kind == "resume":
            say(f"resume: {data['description']}")
        elif kind == "turn":
            say(self.out.style(f"turn {data['turn']}", "bold") + f" · {data['mode']}")
        elif kind == "agent":
            say(f"  {data['role']} running…")
        elif kind == "reuse":
            say(f"  reusing the {' and '.join(data['files'])} report(s) already on disk")
        elif kind == "recorded":
            delta = " ".join(data["criteria_delta"])
            from guardkit_state.turns.ledger import CriteriaCounts  # local: --help must not import the library

            counts = CriteriaCounts(**{k: v for k, v in data["criteria_counts"].items() if k != "total"})
            line = f"  coach: {data['decision']} — {counts.describe('criteria')}"
            say(line + (f" ({delta})" if delta else ""))
            feedback = data["turn_state"].get("coach_feedback")
            if feedback and data["decision"] != "approve":
                say(f"  feedback: {safe(feedback.splitlines()[0])[:160]}")
            commit = data.get("commit") or {}
            if commit.get("sha"):
                say(f"  commit {commit['sha'][:10]}")
