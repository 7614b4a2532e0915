"""``guardkit-state show``: a task's loop at a glance — status, turns, criteria, resume point — or a
feature's waves × tasks and what runs next."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from guardkit_state.cli.exit_codes import ExitCode
from guardkit_state.cli.options import add_json_option, add_repo_option
from guardkit_state.cli.output import Output, safe

if TYPE_CHECKING:
    from guardkit_state.inspect.feature_view import FeatureView
    from guardkit_state.inspect.task_view import TaskView
    from guardkit_state.plans.merge_queue_log import QueueStep

ICON_STYLE = {"verified": ("✓", "green"), "rejected": ("✗", "red"), "pending": ("○", "dim")}
#: The merge queue's steps ``show FEAT-X`` lists (the newest; ``--json`` has every one the plan keeps).
QUEUE_SHOWN = 20
TASK_STATUS_STYLE = {"completed": "green", "approved": "green", "in_progress": "yellow", "blocked": "red",
                     "failed": "red", "pending": "dim", "skipped": "dim"}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "show",
        help="show a task's loop (status, turns, criteria, resume point) or a feature's waves",
        description="Show the loop state of one task, read from its files (the running loop's "
        "worktree copy when there is one; after a feature run, the feature's copy). Given a feature "
        "(FEAT-ID or a plan's .yaml), show its waves × tasks from the files and git, and what runs next.",
        epilog="Example:\n  guardkit-state show TASK-AUTH-001\n  guardkit-state show TASK-AUTH-001 --json\n"
        "  guardkit-state show FEAT-AUTH --json",
    )
    parser.add_argument("task_id", metavar="TASK-ID|FEAT-ID",
                        help="a task id or task file's path; a feature id or plan file's path")
    add_repo_option(parser)
    add_json_option(parser)
    parser.add_argument("--remote", metavar="NAME", help="a feature shared through this git remote: who holds "
                        "which task, since when, the last heartbeat, turns done, what waits (fetches)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, out: Output) -> int:
    from guardkit_state.store.layout import names_feature

    if args.remote is not None:
        from guardkit_state.cli.remote_feature import show_remote

        return show_remote(args, out, [args.task_id])
    if names_feature(args.task_id):
        from guardkit_state.inspect.feature_view import feature_view

        out.result(feature_view(args.repo, args.task_id), render_feature)
        return ExitCode.OK
    from guardkit_state.inspect.task_view import task_view

    out.result(task_view(args.repo, args.task_id), render)
    return ExitCode.OK


def render(view: TaskView, out: Output) -> None:
    task, location = view.task, view.location
    out.line(out.style(f"{location.task_id}: {safe(task.title or '')}", "bold"))
    out.line(f"status {safe(task.status)} · {len(view.turns)} turn(s) of {view.max_turns or '?'}"
             f" · criteria {view.counts.describe()}"
             + (f" · outcome {safe(view.outcome)}" if view.outcome else ""))
    label = {"main": "file: ", "worktree": "worktree copy: "}.get(location.source)
    shown = f"{label}{location.task_path}" if label else f"read from {location.describe()}"
    out.line(out.style(safe(shown), "dim"))
    if view.turns:
        out.line("")
        out.line(out.style("turn  mode              decision  feedback", "bold"))
        for turn in view.turns:
            decision = safe(turn.decision or "?")
            feedback = safe((turn.feedback or "").replace("\n", " "))
            if len(feedback) > 70:
                feedback = feedback[:69] + "…"
            out.line(f"{turn.turn:>4}  {safe(turn.mode or '-'):<16}  "
                     f"{out.decision(decision)}  {feedback}")
    for taken in view.takeovers:
        if isinstance(taken, dict):
            out.line(f"taken over after {taken.get('turns_done')} turn(s) by {safe(str(taken.get('by')))} from "
                     f"{safe(str(taken.get('from')))} at {taken.get('at')} (lease ended {taken.get('lease_until')})")
    if view.criteria:
        out.line("")
        out.line(out.style("criteria", "bold"))
        for c in view.criteria:
            icon, colour = ICON_STYLE.get(c.status, ("○", "dim"))
            by = f" (turn {c.set_by_turn})" if c.set_by_turn else ""
            status = "implied by approval" if c.implied_by_approval else c.status
            homed = f" · verifier {safe(c.verifier)}" + (f" ({safe(c.test_ref)})" if c.test_ref else "") \
                if c.verifier else ""
            out.line(f"  {out.style(icon, colour)} {c.id}: {safe(c.text)}: {status}{by}{homed}")
    if view.stall:
        out.line("")
        out.line(out.style(f"stall: {safe(view.stall.reason)}", "red"))
    if view.verifier is not None:
        stamp = view.verifier
        extra = "".join(f" · {key} {safe(', '.join(map(str, value)) if isinstance(value, list) else str(value))}"
                        for key in ("test_ref", "test_paths") if (value := stamp.get(key)) is not None)
        out.line(f"{out.style('verifier', 'bold')} {safe(str(stamp['verifier']))}{extra}")
    if view.evidence is not None:
        number, _, summary = view.evidence
        out.line(f"{out.style('coach evidence', 'bold')} (turn {number}): {safe(summary)}")
    if view.cost is not None and view.cost.turns:
        out.line("")
        out.line(f"{out.style('agents', 'bold')} {safe(view.cost.describe())}")
        from guardkit_state.inspect.agent_costs import describe_run

        for cost_turn in view.cost.turns:
            for role, run in cost_turn.runs.items():
                out.line(f"  turn {cost_turn.turn} {role}: {safe(describe_run(run))}")
    out.line("")
    out.line(f"next: {safe(view.resume.describe())}")


def render_feature(view: FeatureView, out: Output) -> None:
    """Waves × tasks: one line per task (status, turns, outcome, criteria, merge), then what runs next."""
    out.line(out.style(f"{view.feature_id}: {safe(view.name or '')}", "bold"))
    out.line(f"plan status {safe(view.plan_status or '-')} · {view.tally.describe()} · "
             f"{len(view.waves)} wave(s) from {view.wave_source}")
    from guardkit_state.features.standing import branch_note

    where = branch_note(view.branch, view.started, view.tally) \
        + (f" · worktree {view.worktree}" if view.worktree and view.started else "")
    out.line(out.style(safe(where), "dim"))
    for key, said in view.settings:  # GuardKit's run keys, as the plan holds them
        out.line(out.style(f"{key.replace('_', ' ')}: {safe(said)}", "dim"))
    for note in view.notes:
        out.note(f"note: {safe(note)}")
    width = max((len(safe(row.task_id)) for row in view.tasks), default=8)
    for number in range(1, len(view.waves) + 1):
        out.line("")
        out.line(out.style(f"wave {number}", "bold"))
        for row in view.wave(number):
            status = out.style(f"{safe(row.status):<11}", TASK_STATUS_STYLE.get(row.status, "dim"))
            criteria = row.criteria.describe() if row.criteria is not None else "criteria ?"
            merged = f" · merged {row.merge_commit[:10]}" if row.merge_commit else " · merged" if row.merged else ""
            conflicts = f" · conflicts: {safe(', '.join(row.conflicts))}" if row.conflicts else ""
            outcome = f" · {safe(row.outcome)}" if row.outcome and row.status not in ("completed",) else ""
            if row.outcome == "dependency_failed":  # which failed task it needs (--no-stop-on-failure)
                outcome = f" · {safe(row.reason)}"
            out.line(f"  {safe(row.task_id):<{width}}  {status} {row.turns:>2} turn(s)  {criteria}"
                     f"{outcome}{merged}{conflicts}")
            if row.error:
                # Why the task file could not be read (not found, not valid YAML ...), under its row.
                out.line(out.style(f"  {'':<{width}}  {safe(row.error)}", "red"))
    if view.smoke_gate is not None or view.smoke_runs:
        out.line("")
        if view.smoke_gate is not None:
            out.line(f"smoke gate {safe(view.smoke_gate.describe())}")
        for run in view.smoke_runs:
            style = {"passed": "green", "warning": "yellow"}.get(run.outcome, "red")
            out.line(out.style(f"  {safe(run.describe())} · {run.seconds:.1f} s · {safe(run.at)}", style))
    render_queue(view.queue_steps, out)
    out.line("")
    out.line(f"next: {safe(view.next.text)}")
    if view.next.command:
        out.line(out.style(f"  {safe(view.next.command)}", "dim"))


def render_queue(steps: list[QueueStep], out: Output, *, shown: int = QUEUE_SHOWN) -> None:
    """The merge queue's steps (the last ``shown``): each candidate and its gate result, what was sent back."""
    if not steps:
        return
    out.line("")
    earlier = len(steps) - shown
    out.line("merge queue" + (f" (the last {shown} of {len(steps)} steps; --json has all)" if earlier > 0 else ""))
    for step in steps[-shown:]:
        red = step.step in ("sent_back", "halted") or step.gate in ("failed", "timed_out")
        styles = ("yellow",) if red else ("dim",) if step.reused else ()
        out.line(out.style(f"  {safe(step.describe())}", *styles))
