"""Scripted demo Coach for TASK-DEMO-001 (stdlib only).

It does what a careful reviewer does, without an LLM: runs the project's unit tests in the worktree
(``python -m unittest discover -s tests -t .``), verifies each acceptance criterion from the results
of the test class mapped to it, compares that with the Player's completion promises, and approves
only when every criterion is verified. Otherwise its feedback names each failing criterion, the
failing tests and what to do next.

The Coach prompt guardkit-state writes to ``$GUARDKIT_PROMPT_FILE`` is what an LLM Coach would be
given; this scripted Coach only records that it received it.

Exit codes: 0 decision written (approve or feedback), 2 bad environment, 130 interrupted.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import demo_common as common


@dataclass(frozen=True)
class Check:
    """How one criterion is verified: the test ids (classes) that must all pass, and a hint."""

    tests: tuple[str, ...]
    hint: str


#: Criterion id -> the tests that prove it (the same table as the task's ``## Verification``).
CHECKS: dict[str, Check] = {
    "AC-001": Check(("tests.test_durations.SingleUnitTests",),
                    "parse_duration must convert 45s, 10m, 2h and 1d to seconds"),
    "AC-002": Check(("tests.test_durations.CombinedUnitTests",),
                    "parse_duration must add up every <number><unit> part, allowing spaces between parts"),
    "AC-003": Check(("tests.test_durations.InvalidInputTests",),
                    "parse_duration must check the WHOLE input and raise ValueError(f'...{text!r}...') "
                    "for anything that is not one or more <number><unit> parts"),
    "AC-004": Check(("tests.test_durations.FormatTests",),
                    "format_duration must return the shortest form ('0s' for 0) and round-trip"),
}


def _short(test_id: str) -> str:
    return test_id.rsplit(".", 1)[-1]


def _load_player_report(path: Path | None) -> tuple[dict[str, Any] | None, str | None]:
    if path is None or not path.is_file():
        return None, "no Player report was found"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"the Player report is not valid JSON ({exc})"
    return (data, None) if isinstance(data, dict) else (None, "the Player report is not a JSON object")


def verify(criteria: list[tuple[str, str]], run: common.TestRun,
           player: dict[str, Any] | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """Judge each criterion from the test run; return (criteria_verification, issues, hints)."""
    promised = {p.get("criterion_id"): p.get("status") for p in (player or {}).get("completion_promises") or []
                if isinstance(p, dict)}
    verification: list[dict[str, Any]] = []
    issues: list[dict[str, Any]] = []
    hints: list[str] = []
    for criterion_id, text in criteria:
        check = CHECKS.get(criterion_id)
        tests = run.matching(check.tests) if check else []
        failing = [t for t in tests if run.outcomes[t] != "passed"]
        if check is None:
            ok, notes = False, "no test is mapped to this criterion, so it cannot be verified"
        elif not tests:
            cause = "; ".join(run.load_errors) or "the tests were not collected"
            ok, notes = False, f"none of its tests ran ({', '.join(map(_short, check.tests))}): {cause}"
        elif failing:
            detail = ", ".join(f"{_short(t)} ({run.messages.get(t, run.outcomes[t])})" for t in failing[:3])
            ok, notes = False, f"{len(failing)} of {len(tests)} tests failed: {detail}"
        else:
            ok, notes = True, f"all {len(tests)} tests passed ({', '.join(map(_short, check.tests))})"
        verification.append({"criterion_id": criterion_id, "result": "verified" if ok else "rejected",
                             "notes": notes})
        if ok:
            continue
        issues.append({"severity": "must_fix", "category": "acceptance_criteria",
                       "description": f"{criterion_id} not met ({text}): {notes}"})
        hints.append(f"{criterion_id}: {check.hint}" if check else f"{criterion_id}: add a test for it")
        if promised.get(criterion_id) == "complete":
            issues.append({"severity": "should_fix", "category": "completion_promise",
                           "description": f"the Player promised {criterion_id} complete, but its tests fail"})
    return verification, issues, hints


def coach(root: Path) -> int:
    """Review one turn in ``root`` (the worktree) as described by the environment."""
    task_id = common.require_env("GUARDKIT_TASK_ID")
    turn = int(common.require_env("GUARDKIT_TURN"))
    report_file = Path(common.require_env("GUARDKIT_REPORT_FILE"))
    task_file = Path(common.require_env("GUARDKIT_TASK_FILE"))
    player_path = os.environ.get("GUARDKIT_PLAYER_REPORT_FILE")
    prompt_path = os.environ.get("GUARDKIT_PROMPT_FILE")

    criteria = common.read_criteria(task_file)
    player, player_problem = _load_player_report(Path(player_path) if player_path else None)
    common.say("coach", f"turn {turn}: running {common.TEST_COMMAND}")
    run = common.run_unittests(root)
    verification, issues, hints = verify(criteria, run, player)
    if player_problem:
        issues.append({"severity": "should_fix", "category": "player_report", "description": player_problem})
    if not criteria:
        issues.append({"severity": "must_fix", "category": "task",
                       "description": "the task file has no '## Acceptance Criteria' checkboxes"})

    verified = [v["criterion_id"] for v in verification if v["result"] == "verified"]
    rejected = [v for v in verification if v["result"] == "rejected"]
    approve = bool(criteria) and not rejected
    rationale = (f"{len(verified)} of {len(criteria)} criteria verified by running {len(run.outcomes)} "
                 f"unit tests ({run.passed} passed, {run.failed} failed).")
    decision: dict[str, Any] = {
        "task_id": task_id,
        "turn": turn,
        "decision": "approve" if approve else "feedback",
        "issues": issues,
        "criteria_verification": verification,
        "validation_results": {"tests_passed_count": run.passed, "tests_failed_count": run.failed,
                               "tests_run_count": len(run.outcomes), "command": common.TEST_COMMAND},
        "rationale": rationale,
        "prompt_received": bool(prompt_path and Path(prompt_path).is_file()),
    }
    if not approve:
        # The first line is what summaries show, so it names the failing criteria itself.
        ids = ", ".join(v["criterion_id"] for v in rejected) or "the task"
        lines = [f"- {v['criterion_id']}: {v['notes']}" for v in rejected]
        decision["feedback"] = "\n".join([f"{ids} not met (acceptance tests fail):", *lines])
        decision["what_to_try_next"] = "; ".join(hints) or "add the missing acceptance criteria to the task"
    else:
        decision["lessons"] = [f"All {len(criteria)} criteria verified by their acceptance tests."]
    common.write_json(report_file, decision)
    common.say("coach", f"decision: {decision['decision']} — {rationale}")
    return 0


def main() -> int:
    return common.run_main("coach", coach)


if __name__ == "__main__":
    sys.exit(main())
