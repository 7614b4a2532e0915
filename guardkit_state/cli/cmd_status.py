"""``guardkit-state status``: every task with loop state, one line each; then every feature plan."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from guardkit_state.cli.exit_codes import ExitCode
from guardkit_state.cli.options import add_json_option, add_repo_option
from guardkit_state.cli.output import Output, safe

if TYPE_CHECKING:
    from guardkit_state.inspect.status import FeatureSummary, TaskSummary


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "status",
        help="list every task with loop state (turns, last decision, criteria), and every feature",
        description="Scan tasks/ (and running loops' worktrees) for tasks with autobuild state. "
        "Summaries are cached in .guardkit/cache/status.json, keyed by each file's size and mtime; "
        "the cache is never trusted over a changed file. Feature plans (.guardkit/features/FEAT-*.yaml) "
        "follow, with the progress their plan reports ('show FEAT-ID' reads it from the files and git). "
        "--json prints the list of tasks; with --features, {\"tasks\": [...], \"features\": [...]}.",
        epilog="Example:\n  guardkit-state status\n"
        "  guardkit-state status --json | jq '.[] | select(.last_decision==\"error\")'\n"
        "  guardkit-state status --json --features | jq '.features[] | {feature_id, done, total}'",
    )
    add_repo_option(parser)
    parser.add_argument("--no-cache", action="store_true", help="ignore and do not write the summary cache")
    parser.add_argument("--features", action="store_true",
                        help="with --json: an object with the tasks and the features (the list of tasks "
                        "alone stays the default, for scripts reading it)")
    parser.add_argument("--remote", metavar="NAME", help="every feature's progress on this git remote (workers "
                        "of 'feature-build FEAT-ID --remote NAME'): claims, heartbeats, turns, merges")
    add_json_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, out: Output) -> int:
    if args.remote is not None:
        from guardkit_state.cli.remote_feature import show_remote
        from guardkit_state.plans.plan import find_plans

        return show_remote(args, out, [str(path) for path in find_plans(args.repo)])
    from guardkit_state.inspect.status import feature_status, repo_status

    summaries = repo_status(args.repo, use_cache=not args.no_cache)
    copied = [s.task_id for s in summaries if s.resolved]
    if copied:
        # One line for all: each row is read from the copy 'show' reads; --json says which, per row.
        out.note(f"note: {len(copied)} task(s) have several copies ({', '.join(safe(c) for c in copied[:3])}"
                 f"{', …' if len(copied) > 3 else ''}); each row reads the copy 'show' reads "
                 "(see 'resolved' in --json)")
    if args.json:
        tasks = [s.to_dict() for s in summaries]
        if args.features:
            out.json({"tasks": tasks, "features": [f.to_dict() for f in feature_status(args.repo)]})
        else:
            out.json(tasks)
        return ExitCode.OK
    if not summaries:
        out.line("no tasks with loop state under tasks/")
    else:
        _task_lines(summaries, out)
    features = feature_status(args.repo)
    if features:
        out.line("")
        _feature_lines(features, out)
    return ExitCode.OK


def _task_lines(summaries: list[TaskSummary], out: Output) -> None:
    width = max(len(safe(s.task_id)) for s in summaries)
    status_width = max([12, *(len(safe(s.status or "-")) for s in summaries if not s.error)])
    for s in summaries:
        if s.error:
            out.line(f"{safe(s.task_id):<{width}}  {out.style('unreadable', 'red')}  {safe(s.error)}")
            continue
        decision = safe(s.last_decision or "-")
        where = " (worktree)" if s.in_worktree else ""
        where += f"  ${s.cost_usd:.4f}" if s.cost_usd is not None else ""
        out.line(f"{safe(s.task_id):<{width}}  {safe(s.status or '-'):<{status_width}} {s.turns:>3} turn(s)  "
                 f"{out.decision(decision)}  "
                 f"{_counts(s)}{where}")


def _feature_lines(features: list[FeatureSummary], out: Output) -> None:
    """One line per feature plan: its status, tasks done, waves, turns (as the plan reports them)."""
    out.line(out.style("features", "bold"))
    names = [_handle(f) for f in features]
    width = max(len(name) for name in names)
    status_width = max([12, *(len(safe(f.status or "-")) for f in features if not f.error)])
    for f, name in zip(features, names, strict=True):
        if f.error:
            out.line(f"{name:<{width}}  {out.style('unreadable', 'red')}  {safe(f.error)}")
            continue
        waves = f"wave {f.current_wave}/{f.waves}" if f.waves is not None else "waves ?"
        extra = f" · {f.failed} failed/blocked" if f.failed else ""
        # Skipped and not done: not run because a task they need failed (closed ones are done).
        not_run = f.tasks.get("completed", 0) + f.tasks.get("skipped", 0) - f.done
        extra += f" · {not_run} skipped (a task they need failed)" if not_run > 0 else ""
        out.line(f"{name:<{width}}  {safe(f.status or '-'):<{status_width}} {f.done}/{f.total} task(s) done  "
                 f"{waves}  {f.total_turns} turn(s){extra}")


def _handle(feature: FeatureSummary) -> str:
    """The name 'show', 'log' and 'report' find the plan by: its file's, which its ``id`` may not match."""
    stem = Path(feature.path).stem
    if stem == feature.feature_id:
        return safe(stem)
    return f"{safe(stem)} (id {safe(feature.feature_id)})"


def _counts(summary: TaskSummary) -> str:
    """``3/7 verified · 4 implied by approval``: what the Coach verified and what an approval implied."""
    from guardkit_state.turns.ledger import CriteriaCounts

    return CriteriaCounts(summary.verified, summary.implied_by_approval, summary.rejected, summary.pending).describe()
