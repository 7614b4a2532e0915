"""What each agent is told: the Player's and the Coach's prompts, built from the task (pure functions).

Every agent — a preset or a shell command — gets the same briefing from turn 1: the task's title
and body, its criteria with their own ids, the continuation context (from turn 2 the previous
Coach's issues and criterion notes under "MUST ADDRESS"), its role constraints, the quality gates,
and the exact output contract with the task's ids filled in. The Coach also gets the turn's diff.
The output schemas here are what a CLI with schema-enforced output is given (strict: every object
closes its properties, the criterion ids are an enum), and what a shell agent finds in
``GUARDKIT_SCHEMA_FILE``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from guardkit_state.model import Criterion

#: Longest diff quoted in the Coach's prompt; the whole diff is in ``GUARDKIT_DIFF_FILE``. Kept well
#: under the 128 KiB a single command-line argument may hold (presets pass the prompt as one).
MAX_PROMPT_DIFF_CHARS = 40_000


def criteria_document(task_id: str, criteria: Sequence[Criterion], statuses: dict[str, str]) -> dict[str, Any]:
    """``GUARDKIT_CRITERIA_FILE``: the task's criteria with their ids, texts and cumulative status."""
    return {"task_id": task_id, "criteria": [
        {"id": c.id, "text": c.text, "status": statuses.get(c.id, "pending")} for c in criteria]}


def player_output_schema(criterion_ids: Sequence[str]) -> dict[str, Any]:
    """The Player report's shape as a strict JSON Schema (the loop fills in task id and turn)."""
    text_list = {"type": "array", "items": {"type": "string"}}
    promise = _closed({
        "criterion_id": _id_enum(criterion_ids),
        "status": {"type": "string", "enum": ["complete", "partial", "incomplete"]},
        "evidence": {"type": "string"},
    })
    return _closed({
        "summary": {"type": "string"},
        "files_modified": text_list, "files_created": text_list, "tests_written": text_list,
        "tests_run": {"type": "boolean"}, "tests_passed": {"type": "boolean"},
        "implementation_notes": {"type": "string"}, "concerns": text_list,
        "requirements_addressed": text_list, "requirements_remaining": text_list,
        "completion_promises": {"type": "array", "items": promise},
    })


def coach_output_schema(criterion_ids: Sequence[str]) -> dict[str, Any]:
    """The Coach decision's shape as a strict JSON Schema, the task's criterion ids as an enum."""
    issue = _closed({
        "severity": {"type": "string", "enum": ["must_fix", "should_fix", "nit"]},
        "category": {"type": "string"},
        "description": {"type": "string"},
        "suggestion": {"type": "string"},
    })
    verdict = _closed({
        "criterion_id": _id_enum(criterion_ids),
        "result": {"type": "string", "enum": ["verified", "rejected"]},
        "notes": {"type": "string"},
    })
    results = _closed({
        "tests_passed_count": {"type": "integer"},
        "tests_failed_count": {"type": "integer"},
        "coverage": {"type": ["number", "null"]},
    })
    return _closed({
        "decision": {"type": "string", "enum": ["approve", "feedback"]},
        "issues": {"type": "array", "items": issue},
        "criteria_verification": {"type": "array", "items": verdict},
        "validation_results": results,
        "rationale": {"type": "string"},
    })


def _closed(properties: dict[str, Any]) -> dict[str, Any]:
    # Codex's --output-schema is strict: every object lists all its properties as required and
    # allows no others. Claude's --json-schema accepts the same.
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def _id_enum(criterion_ids: Sequence[str]) -> dict[str, Any]:
    return {"type": "string", "enum": list(criterion_ids)} if criterion_ids else {"type": "string"}


def output_contract(role: str, *, task_id: str, turn: int, criteria: Sequence[Criterion],
                    report_file: str) -> str:
    """``## Output contract``: where the report goes and its exact JSON, the task's ids filled in."""
    ids = [c.id for c in criteria]
    if role == "coach":
        example: dict[str, Any] = {
            "task_id": task_id, "turn": turn, "decision": "approve | feedback",
            "issues": [{"severity": "must_fix | should_fix | nit", "category": "correctness",
                        "description": "what is wrong", "suggestion": "what to do"}],
            "criteria_verification": [{"criterion_id": cid, "result": "verified | rejected",
                                       "notes": "evidence"} for cid in ids],
            "validation_results": {"tests_passed_count": 0, "tests_failed_count": 0, "coverage": None},
            "rationale": "why",
        }
        rules = ["`decision` is `approve` only when every criterion is verified; otherwise `feedback`.",
                 "`result` is exactly `verified` or `rejected`; judge every criterion, by its id."]
    else:
        example = {
            "task_id": task_id, "turn": turn, "summary": "one line: what this turn did",
            "files_modified": [], "files_created": [], "tests_written": [], "tests_run": True, "tests_passed": True,
            "implementation_notes": "what you did and why", "concerns": [], "requirements_addressed": [],
            "requirements_remaining": [],
            "completion_promises": [{"criterion_id": cid, "status": "complete | partial | incomplete",
                                     "evidence": "how it is met"} for cid in ids],
        }
        rules = ["`status` is `complete`, `partial` or `incomplete`, one promise per criterion, by its id.",
                 "The files you changed are read from git; list them anyway."]
    known = ", ".join(ids) if ids else "(the task lists no criteria)"
    return "\n".join([
        "## Output contract",
        f"Write exactly one JSON object to `{report_file}` (`$GUARDKIT_REPORT_FILE`), or end your reply "
        "with it alone in a ```json fenced block. Its shape:",
        "```json", json.dumps(example, indent=2, ensure_ascii=False), "```",
        *(f"- {rule}" for rule in rules),
        f"- Criterion ids are exactly: {known}.",
    ])


def _task_sections(task_id: str, title: str, body: str, criteria: Sequence[Criterion],
                   statuses: dict[str, str]) -> list[str]:
    lines = ["## The criteria, by id (with their status so far)"]
    lines += [f"- {c.id}: {' '.join(c.text.split())}" + (f" [{statuses[c.id]}]" if c.id in statuses else "")
              for c in criteria] or ["(none listed in the task)"]
    return [f"## Task {task_id}: {title}", body.strip() or "(the task file has no body)", "\n".join(lines)]


def player_prompt(*, task_id: str, title: str, body: str, turn: int, mode: str, criteria: Sequence[Criterion],
                  statuses: dict[str, str], context: str, gates: str, report_file: str) -> str:
    """The Player's whole prompt for ``turn`` (``context`` carries its role section and MUST ADDRESS)."""
    head = (f"# Player: {task_id} — turn {turn} ({mode})\n"
            "You are the Player: implement the task in the current directory (a git worktree of its "
            "own). Work only there; the loop commits your changes after the Coach's review.")
    sections = [head, *_task_sections(task_id, title, body, criteria, statuses),
                "## Continuation context\n" + context.strip(), gates,
                output_contract("player", task_id=task_id, turn=turn, criteria=criteria, report_file=report_file)]
    return "\n\n".join(s for s in sections if s) + "\n"


def coach_prompt(*, coach_sections: str, task_id: str, title: str, body: str, turn: int,
                 criteria: Sequence[Criterion], must_address: Sequence[str], player_summary: str,
                 diff: str, report_file: str) -> str:
    """The Coach's whole prompt: its role, gates and criteria (``coach_sections``), the task, the diff."""
    head = ("You are the Coach: validate the Player's work against the acceptance criteria. You are "
            "read-only: do not change any file in the worktree (the loop checks, and a change is an error).")
    sections = [coach_sections.strip(), head, f"## Task {task_id}: {title}", body.strip()]
    if must_address:
        sections.append("## What the previous Coach asked for\n" + "\n".join(must_address))
    sections.append("## Player's summary\n" + (player_summary.strip() or "(none)"))
    quoted = diff if len(diff) <= MAX_PROMPT_DIFF_CHARS else (
        diff[:MAX_PROMPT_DIFF_CHARS] + f"\n… ({len(diff) - MAX_PROMPT_DIFF_CHARS} more characters in "
        "$GUARDKIT_DIFF_FILE)")
    sections.append("## This turn's changes (git diff)\n```diff\n" + (quoted.rstrip() or "(no changes)") + "\n```")
    sections.append(output_contract("coach", task_id=task_id, turn=turn, criteria=criteria, report_file=report_file))
    return "\n\n".join(s for s in sections if s) + "\n"


__all__ = ["MAX_PROMPT_DIFF_CHARS", "coach_output_schema", "coach_prompt", "criteria_document", "output_contract",
           "player_output_schema", "player_prompt"]
