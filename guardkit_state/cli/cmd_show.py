"""``guardkit-state show``: a task's loop at a glance — status, turns, criteria, resume point."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from guardkit_state.cli.exit_codes import ExitCode
from guardkit_state.cli.options import add_json_option, add_repo_option
from guardkit_state.cli.output import Output, safe

if TYPE_CHECKING:
    from guardkit_state.inspect.task_view import TaskView

ICON_STYLE = {"verified": ("✓", "green"), "rejected": ("✗", "red"), "pending": ("○", "dim")}
DECISION_STYLE = {"approve": "green", "feedback": "yellow", "reject": "red", "error": "red"}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "show",
        help="show a task's loop: status, turns, criteria, resume point",
        description="Show the loop state of one task, read from its files (the running loop's "
        "worktree copy when there is one).",
        epilog="Example:\n  guardkit-state show TASK-AUTH-001\n  guardkit-state show TASK-AUTH-001 --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("task_id", metavar="TASK-ID", help="a task id, or the path of a task file")
    add_repo_option(parser)
    add_json_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, out: Output) -> int:
    from guardkit_state.inspect.task_view import task_view

    view = task_view(args.repo, args.task_id)
    if args.json:
        out.json(view.to_dict())
        return ExitCode.OK
    render(view, out)
    return ExitCode.OK


def render(view: TaskView, out: Output) -> None:
    task, location = view.task, view.location
    out.line(out.style(f"{location.task_id}: {safe(task.title or '')}", "bold"))
    out.line(f"status {safe(task.status)} · {len(view.turns)} turn(s) of {view.max_turns or '?'}"
             f" · criteria {view.counts.describe()}"
             + (f" · outcome {safe(view.outcome)}" if view.outcome else ""))
    out.line(out.style(("worktree copy: " if location.in_worktree else "file: ") + safe(location.task_path), "dim"))
    if view.turns:
        out.line("")
        out.line(out.style("turn  mode              decision  feedback", "bold"))
        for turn in view.turns:
            decision = safe(turn.decision or "?")
            feedback = safe((turn.feedback or "").replace("\n", " "))
            if len(feedback) > 70:
                feedback = feedback[:69] + "…"
            out.line(f"{turn.turn:>4}  {safe(turn.mode or '-'):<16}  "
                     f"{out.style(f'{decision:<8}', DECISION_STYLE.get(decision, 'dim'))}  {feedback}")
    if view.criteria:
        out.line("")
        out.line(out.style("criteria", "bold"))
        for c in view.criteria:
            icon, colour = ICON_STYLE.get(c.status, ("○", "dim"))
            by = f" (turn {c.set_by_turn})" if c.set_by_turn else ""
            status = "implied by approval" if c.implied_by_approval else c.status
            out.line(f"  {out.style(icon, colour)} {c.id}: {safe(c.text)}: {status}{by}")
    if view.stall:
        out.line("")
        out.line(out.style(f"stall: {safe(view.stall.reason)}", "red"))
    out.line("")
    out.line(f"next: {safe(view.resume.describe())}")
