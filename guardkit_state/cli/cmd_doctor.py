"""``guardkit-state doctor``: is this machine and repository ready for a loop; each problem with its fix."""

from __future__ import annotations

import argparse

from guardkit_state.cli.exit_codes import ExitCode
from guardkit_state.cli.options import add_json_option, add_repo_option
from guardkit_state.cli.output import Output, safe

EXAMPLE = """\
Example:
  guardkit-state doctor
  guardkit-state doctor --player claude --coach codex      # those two must be installed and signed in
  guardkit-state doctor --remote origin                    # and claims can be pushed to origin
  guardkit-state doctor --json | jq '.checks[] | select(.status == "problem")'

Exit status: 0 ready (warnings may remain), 1 something would stop a loop, 2 usage error.
"""
_STYLE = {"ok": "green", "note": "dim", "warning": "yellow", "problem": "red"}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "doctor", help="check this machine and repository for a loop: git, agents, extras, hooks, remote",
        description="Check git; the repository and .guardkit/ (its ignore rules); each agent preset (found, "
        "version, signed in, asked without spending anything); the optional extras; what would refuse a turn "
        "commit or a merge (signing, hooks, merge.verifySignatures, Git LFS), by rehearsing one of each in a "
        "throwaway worktree; stale worktrees and git locks; with --remote, whether claim refs can be pushed "
        "there (a probe claim pushed and deleted). One line per finding; each warning and problem with its fix.",
        epilog=EXAMPLE)
    parser.add_argument("--player", metavar="AGENT", help="the Player a loop will use: a preset (claude, codex, ...) "
                        "must be found and signed in, a shell command's program found")
    parser.add_argument("--coach", metavar="AGENT", help="the Coach a loop will use (as --player)")
    parser.add_argument("--remote", metavar="NAME", help="also check that claim refs can be pushed to this git remote "
                        "(as 'feature-build --remote NAME' workers push them)")
    add_repo_option(parser)
    add_json_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, out: Output) -> int:
    from guardkit_state.inspect.doctor import run_doctor

    agents = [a for a in (args.player, args.coach) if a]
    report = run_doctor(args.repo, agents=agents, remote=args.remote)
    if args.json:
        out.json(report.to_dict())
    else:
        out.line(f"guardkit-state doctor: {safe(report.repo)}")
        for check in report.checks:
            fix = f"; fix: {check.fix}" if check.fix else ""
            out.line(f"  {out.style(f'{check.status:<8}', _STYLE[check.status])} {safe(check.subject)}: "
                     f"{safe(check.detail)}{safe(fix)}")
        problems, warnings = len(report.problems), len(report.warnings)
        tail = f" ({warnings} warning{'s' if warnings != 1 else ''})" if warnings else ""
        out.line(f"ready: a loop can run here{tail}" if report.ready else
                 f"not ready: {problems} problem{'s' if problems != 1 else ''} would stop a loop{tail}")
    return ExitCode.OK if report.ready else ExitCode.NOT_READY
