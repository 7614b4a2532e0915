"""``guardkit-state status``: every task with loop state, one line each."""

from __future__ import annotations

import argparse

from .options import add_json_option, add_repo_option
from .output import Output, safe

DECISION_STYLE = {"approve": "green", "feedback": "yellow", "reject": "red", "error": "red"}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "status",
        help="list every task with loop state: turns, last decision, criteria",
        description="Scan tasks/ (and running loops' worktrees) for tasks with autobuild state. "
        "Summaries are cached in .guardkit/cache/status.json, keyed by each file's size and mtime; "
        "the cache is never trusted over a changed file.",
        epilog="Example:\n  guardkit-state status\n"
        "  guardkit-state status --json | jq '.[] | select(.last_decision==\"error\")'",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_repo_option(parser)
    parser.add_argument("--no-cache", action="store_true", help="ignore and do not write the summary cache")
    add_json_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, out: Output) -> int:
    from ..status import repo_status

    summaries = repo_status(args.repo, use_cache=not args.no_cache)
    if args.json:
        out.json([s.to_dict() for s in summaries])
        return 0
    if not summaries:
        out.line("no tasks with loop state under tasks/")
        return 0
    width = max(len(s.task_id) for s in summaries)
    for s in summaries:
        if s.error:
            out.line(f"{s.task_id:<{width}}  {out.style('unreadable', 'red')}  {safe(s.error)}")
            continue
        decision = s.last_decision or "-"
        where = " (worktree)" if s.in_worktree else ""
        out.line(f"{s.task_id:<{width}}  {s.status or '-'!s:<12} {s.turns:>3} turn(s)  "
                 f"{out.style(f'{decision:<8}', DECISION_STYLE.get(decision, 'dim'))}  "
                 f"{s.verified}/{s.total} verified{where}")
    return 0
