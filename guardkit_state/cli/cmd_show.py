"""``guardkit-state show``: a task's loop at a glance — status, turns, criteria, resume point."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from guardkit_state.cli.options import add_json_option, add_repo_option
from guardkit_state.cli.output import Output, safe

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


def collect(repo: Path, task_id: str) -> dict[str, Any]:
    """Everything ``show`` prints, as data (the ``--json`` output)."""
    from guardkit_state.taskfile.locate import locate_task
    from guardkit_state.turns.history import TaskHistory
    from guardkit_state.turns.resume import resume_point

    location = locate_task(repo, task_id)
    task, store = location.load()
    state = task.state
    point = resume_point(task, store)
    # The ledger and the stall as the recorded turns tell them: turn-state files, else the turns
    # GuardKit's own loop listed in the frontmatter.
    history = TaskHistory(task, store)
    ledger = history.ledger()
    stall = history.stall()
    texts = {c.id: c.text for c in task.criteria}
    return {
        "task_id": location.task_id,
        "title": task.title,
        "path": str(location.task_path),
        "in_worktree": location.in_worktree,
        # Which copy was read and why, and the other copies of the id (empty when it has one file).
        "resolved": location.resolution.to_dict() if location.resolution else None,
        "status": task.status,
        "max_turns": state.max_turns if state else None,
        "outcome": state.extra.get("outcome") if state else None,
        "turns": [t.to_dict() for t in state.turns] if state else [],
        "criteria": [
            {"id": e.criterion_id, "text": texts.get(e.criterion_id, ""), "status": e.status,
             "set_by_turn": e.set_by_turn, "implied_by_approval": e.implied}
            for e in ledger.entries
        ],
        "criteria_counts": ledger.counts().to_dict(),
        "stall": stall.reason if stall else None,
        "resume": point.to_dict(),
    }


def run(args: argparse.Namespace, out: Output) -> int:
    data = collect(args.repo, args.task_id)
    if args.json:
        out.json(data)
        return 0
    out.line(out.style(f"{data['task_id']}: {safe(data['title'] or '')}", "bold"))
    out.line(f"status {safe(data['status'])} · {len(data['turns'])} turn(s) of {data['max_turns'] or '?'}"
             f" · criteria {_describe_counts(data['criteria_counts'])}"
             + (f" · outcome {safe(data['outcome'])}" if data["outcome"] else ""))
    out.line(out.style(("worktree copy: " if data["in_worktree"] else "file: ") + safe(data["path"]), "dim"))
    if data["turns"]:
        out.line("")
        out.line(out.style("turn  mode              decision  feedback", "bold"))
        for turn in data["turns"]:
            decision = safe(turn.get("decision") or "?")
            feedback = safe((turn.get("feedback") or "").replace("\n", " "))
            if len(feedback) > 70:
                feedback = feedback[:69] + "…"
            out.line(f"{turn['turn']:>4}  {safe(turn.get('mode') or '-'):<16}  "
                     f"{out.style(f'{decision:<8}', DECISION_STYLE.get(decision, 'dim'))}  {feedback}")
    if data["criteria"]:
        out.line("")
        out.line(out.style("criteria", "bold"))
        for c in data["criteria"]:
            icon, colour = ICON_STYLE.get(c["status"], ("○", "dim"))
            by = f" (turn {c['set_by_turn']})" if c["set_by_turn"] else ""
            status = "implied by approval" if c["implied_by_approval"] else c["status"]
            out.line(f"  {out.style(icon, colour)} {c['id']}: {safe(c['text'])}: {status}{by}")
    if data["stall"]:
        out.line("")
        out.line(out.style(f"stall: {safe(data['stall'])}", "red"))
    out.line("")
    out.line(f"next: {safe(data['resume']['description'])}")
    return 0


def _describe_counts(counts: dict[str, int]) -> str:
    """``3/7 verified · 4 implied by approval``: verified by the Coach and implied told apart."""
    from guardkit_state.turns.ledger import CriteriaCounts

    return CriteriaCounts(**{k: v for k, v in counts.items() if k != "total"}).describe()
