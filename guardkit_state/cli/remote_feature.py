"""``feature-build FEAT-X --remote NAME``: this machine's worker on a feature shared through a remote."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from guardkit_state.cli.exit_codes import ExitCode
from guardkit_state.cli.output import Output, safe
from guardkit_state.errors import InputError

if TYPE_CHECKING:
    from guardkit_state.agents.protocol import Agent

#: Options of a one-machine run that a worker does not take (the remote decides what to run).
_NOT_FOR_WORKERS = (("no_worktree", "--no-worktree"), ("reopen", "--reopen"), ("resume", "--resume"),
                    ("max_parallel", "--max-parallel"), ("base_branch", "--base-branch"), ("report", "--report"))


def add_remote_options(parser: argparse.ArgumentParser) -> None:
    from guardkit_state.cli.options import seconds, turn_count

    parser.add_argument("--remote", metavar="NAME", help="features only: build together with other machines "
                        "through this git remote (claims, a push per turn, merges under a merge claim; "
                        "see docs/features.md). Run the same command on every machine; it resumes by itself")
    parser.add_argument("--lease", type=seconds, default=120.0, metavar="SECONDS",
                        help="with --remote: how long a claim lives without a heartbeat (default 120, at most 86400)")
    parser.add_argument("--poll", type=seconds, default=2.0, metavar="SECONDS",
                        help="with --remote: how often a waiting worker looks at the remote again (default 2; "
                        "while another worker merges a wave, after 0.05 s at first, slowing down to this)")
    parser.add_argument("--quarantine-after", type=turn_count, default=3, metavar="N",
                        help="with --remote: a task whose runs ended in a dead worker or a crashed loop N times "
                        "(counted on the remote) is claimed no more until --release (default 3)")
    parser.add_argument("--release", metavar="TASK-ID", help="with a feature: release a quarantined task on the "
                        "remote (--remote NAME, default origin) so workers claim it again, and exit; no agents run")


def run_release(args: argparse.Namespace, out: Output) -> int:
    """``feature-build FEAT --release TASK [--remote NAME]``: a quarantined task claimable again."""
    from guardkit_state.remote.quarantine import release_task
    from guardkit_state.store.layout import names_feature

    if not names_feature(args.task_id):
        raise InputError(f"--release takes the task's feature (FEAT-ID or a plan's .yaml), not the task {args.task_id}")
    done = release_task(args.repo, args.task_id, args.release, args.remote or "origin")
    if args.json:
        out.json(done.to_dict())
        return ExitCode.OK
    out.line(f"{done.task}: {out.style('released' if done.released else 'nothing to release', 'bold')} — "
             f"{safe(done.reason)}")
    for run in done.cleared:
        out.line(f"  cleared: {safe(run.reason)} ({safe(run.at)})")
    return ExitCode.OK


def run_remote(args: argparse.Namespace, out: Output, agents: tuple[Agent, Agent]) -> int:
    from guardkit_state.cli.options import log_on_stderr
    from guardkit_state.index.after_turn import with_indexing
    from guardkit_state.remote.worker import WorkerOptions, run_worker
    from guardkit_state.store.layout import names_feature

    if not names_feature(args.task_id):
        raise InputError(f"--remote builds a feature (FEAT-ID or a plan's .yaml), not the task {args.task_id}")
    for name, flag in _NOT_FOR_WORKERS:
        if getattr(args, name, None):
            raise InputError(f"{flag} does not apply with --remote: every worker resumes from the remote by itself")
    if args.verbose:
        log_on_stderr(out)
    options = WorkerOptions(remote=args.remote, lease=args.lease, poll=args.poll, max_turns=args.max_turns,
                            turn_timeout=args.turn_timeout, max_cost=args.max_cost,
                            continue_session=args.continue_session, quarantine_after=args.quarantine_after,
                            stop_on_failure=args.stop_on_failure)
    result = run_worker(args.repo, args.task_id, *agents, options,
                        on_note=lambda text: None if args.json else out.note(safe(text)),
                        on_event=with_indexing(None, args.repo))
    if args.json:
        out.json(result.to_dict())
    else:
        word = "done" if result.done else f"completed without {', '.join(result.without)}" if result.without \
            else "stopped"
        verdict = out.style(word, "bold", "green" if result.done else "yellow")
        out.line(f"{result.feature}: {verdict} — {safe(result.reason)}")
        out.line(f"  this worker ran: {', '.join(result.ran) or 'nothing'}; merged: "
                 f"{', '.join(result.merged) or 'nothing'}")
    return ExitCode.OK if result.done else ExitCode.FAILED


def show_remote(args: argparse.Namespace, out: Output, features: list[str]) -> int:
    """``show FEAT --remote NAME`` / ``status --remote NAME``: progress read from the remote."""
    from guardkit_state.remote.overview import describe_age, remote_progress
    from guardkit_state.store.layout import names_feature

    for ref in features:
        if not names_feature(ref):
            raise InputError(f"--remote shows a feature (FEAT-ID or a plan's .yaml), not the task {ref}")
    found = [remote_progress(args.repo, ref, args.remote) for ref in features]
    if args.json:
        out.json([feature.to_dict() for feature in found] if len(features) != 1 or args.command == "status"
                 else found[0].to_dict())
        return ExitCode.OK
    if not found:
        out.line("no feature plans under .guardkit/features/")
    for feature in found:
        done = sum(task.state == "merged" for task in feature.tasks)
        out.line(out.style(f"{feature.feature}", "bold") + f" on '{safe(feature.remote)}': {done}/"
                 f"{len(feature.tasks)} merged" + (f"; merging: {safe(feature.merger)}" if feature.merger else ""))
        for task in feature.tasks:
            line = f"  wave {task.wave}  {task.task_id:<16} {task.state:<8} turns {task.turns}"
            if task.holder is not None:
                line += (f"  held by {safe(task.holder)} since {describe_age(task.claimed_at)}, "
                         f"heartbeat {describe_age(task.heartbeat_at)}")
            elif task.outcome:
                line += f"  ({safe(task.outcome)})"
            out.line(line)
            for run in task.failed_runs:  # why its runs ended badly (a quarantined task: a person releases it)
                out.line(f"      failed run: {safe(run.reason)} ({safe(run.at)})")
            if task.held is not None:  # a ref in its claim's way, its file unreadable: a person clears it
                out.line(f"      held: {safe(task.held)}")
            if task.state == "quarantined" and task.failed_runs:  # (an unreadable file is no run to release)
                out.line(f"      release it: guardkit-state feature-build {feature.feature} --release {task.task_id} "
                         f"--remote {safe(feature.remote)}")
            for ref, subject in task.kept:  # a turn its branch moved under on the remote (docs/features.md)
                out.line(f"      kept: {safe(ref)} ({safe(subject)})")
        if feature.queue:
            out.line("  merge queue:")
            for step in feature.queue:
                out.line(f"    {safe(step.describe())}")
    return ExitCode.OK
