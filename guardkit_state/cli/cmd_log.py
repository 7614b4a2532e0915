"""``guardkit-state log TASK-ID``: one line per turn, from the turn commits on git; ``log FEAT-ID``:
the feature branch's merges, then each task's turns."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from guardkit_state.cli.exit_codes import ExitCode
from guardkit_state.cli.options import add_json_option, add_repo_option
from guardkit_state.cli.output import Output, safe

if TYPE_CHECKING:
    from guardkit_state.inspect.feature_log import FeatureLog
    from guardkit_state.inspect.review import TurnLog

EXAMPLE = """\
Example:
  guardkit-state log TASK-AUTH-001
  guardkit-state log TASK-AUTH-001 --json
  guardkit-state log FEAT-AUTH          # the feature branch's merges, then each task's turns
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "log", help="show a task's turns: commit, decision, mode, criteria delta",
        description="Show the turns of a task from its turn commits (branch autobuild/TASK-ID, the "
                    "feature branch autobuild/FEAT-ID once a feature merged it, or the current branch after "
                    "a merge) and its turn_state files. Given a feature, list the merges on its branch "
                    "(commit, task, wave, when) and each task's turns.",
        epilog=EXAMPLE)
    parser.add_argument("task_id", metavar="TASK-ID|FEAT-ID", help="exact task id, or a feature id or plan file")
    add_repo_option(parser)
    add_json_option(parser)
    parser.set_defaults(handler=show_log)


def show_log(args: argparse.Namespace, out: Output) -> int:
    from guardkit_state.store.layout import names_feature

    if names_feature(args.task_id):
        from guardkit_state.inspect.feature_log import read_feature_log

        out.result(read_feature_log(args.repo, args.task_id), render_feature_log)
        return ExitCode.OK
    from guardkit_state.inspect.review import read_turn_log  # git and YAML load only when the command runs

    out.result(read_turn_log(args.repo, args.task_id), render_turns)
    return ExitCode.OK


def render_feature_log(log: FeatureLog, out: Output) -> None:
    """The merges on the feature branch, the merge queue's steps, then each task's turns."""
    out.line(out.style(f"{safe(log.feature_id)}: {log.tally.describe()}", "bold"))
    out.line(out.style(f"merges on {safe(log.branch)}", "bold"))
    for note in log.notes:
        out.line(out.style(f"  {safe(note)}", "dim"))  # why the merges section is empty, beside it
    for m in log.merges:
        wave = f"wave {m.wave}" if m.wave is not None else "wave ?"
        task = safe(m.task_id) if m.task_id else f"(merged by hand: {safe(m.subject)})"
        out.line(f"  {out.style(m.sha[:10], 'yellow')} {wave:<7} {safe(m.date)}  {task}")
    if not log.merges and not log.notes:
        out.line("  no merges yet")
    if log.queue:
        # Every candidate the merge queue built, its gate result, and the tasks it sent back.
        out.line(out.style("merge queue", "bold"))
        for step in log.queue:
            out.line(f"  {safe(step.describe())}")
    for turns in log.tasks:
        out.line("")
        standing = log.standing_of(turns.task_id)
        render_turns(turns, out, heading=True, status=standing.status if standing is not None else None)


def render_turns(result: TurnLog, out: Output, *, heading: bool = False, status: str | None = None) -> None:
    """One line per turn; where the turns were read from goes to stderr (or a heading line)."""
    # Under a heading (a feature's log) the notes are that task's section: why it has no turns
    # belongs on stdout beside it, or 'log FEAT-X > file' keeps empty sections without a reason.
    say = out.line if heading else out.note
    if heading:
        where = f" ({safe(status)})" if status is not None else ""
        out.line(out.style(f"{safe(result.task_id)}{where}: turns from {safe(result.source)}", "bold"))
    else:
        out.note(f"{safe(result.task_id)}: turns from {safe(result.source)}")
    for note in result.notes:
        say(out.style(safe(note), "dim") if heading else safe(note))
    for e in result.entries:
        sha = e.sha[:10] if e.sha else "(no commit)"
        delta = " ".join(e.delta) or "-"
        verified = "" if e.verified_count is None else f" verified={e.verified_count}"
        out.line(f"turn {e.turn:<3} {out.style(sha, 'yellow')} {safe(e.decision or '?'):<9} "
                 f"{safe(e.mode or '?'):<17} {safe(e.date or '')} {safe(delta)}{verified}")
    if not result.entries and not result.notes:
        say("no turns recorded")
