"""Scripted demo Player for TASK-DEMO-001 (stdlib only).

A stand-in for an LLM coding agent that behaves the same way every run, so the demo and the tests
can rely on it:

* Turn 1 writes ``durations.py`` but forgets input validation, so acceptance criterion AC-003
  fails (a deliberate, honest miss: its completion promise for AC-003 says ``incomplete``).
* Later turns READ ``$GUARDKIT_CONTEXT_FILE`` (the continuation context guardkit-state writes),
  find the criteria the Coach rejected and its feedback, and fix exactly those. Nothing else tells
  the Player what went wrong, so an approval in turn 2 proves the memory crossed the turn.

Hooks for tests and the demo (environment variables):

* ``DEMO_PLAYER_SLEEP=N`` sleep N seconds after editing code, before writing the report (so a demo
  can interrupt a turn half-way); ``DEMO_PLAYER_SLEEP_TURN=T`` limits that to turn T.
* ``DEMO_PLAYER_MODE=crash`` exit 3 without a report; ``hang`` never finish; ``invalid-json`` write
  a report that is not JSON; ``never-fix`` ignore the context (for max-turns and stall tests).

Exit codes: 0 report written, 2 bad environment, 3 simulated crash, 130 interrupted.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import demo_common as common

MODULE = "durations.py"
TEST_FILE = "tests/test_durations.py"

DRAFT = '''"""Parse and format short human durations such as ``1h30m``."""

from __future__ import annotations

import re

#: Seconds per unit, largest first (format_duration relies on the order).
_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_PART = re.compile(r"(\\d+)\\s*([dhms])")


def parse_duration(text: str) -> int:
    """Return the whole seconds in ``text``, e.g. ``"1h30m"`` -> 5400."""
    return sum(int(amount) * _UNITS[unit] for amount, unit in _PART.findall(text))


def format_duration(seconds: int) -> str:
    """Return the shortest string that ``parse_duration`` reads back as ``seconds``."""
    if seconds < 0:
        raise ValueError(f"negative duration: {seconds!r}")
    parts = []
    for unit, size in _UNITS.items():
        amount, seconds = divmod(seconds, size)
        if amount:
            parts.append(f"{amount}{unit}")
    return "".join(parts) or "0s"
'''


@dataclass(frozen=True)
class Fix:
    """A targeted edit that makes one criterion pass: replace ``old`` with ``new`` in the module."""

    old: str
    new: str
    description: str


#: What this Player knows how to repair, by criterion id. Turn 1 deliberately leaves AC-003 out.
FIXES: dict[str, Fix] = {
    "AC-003": Fix(
        old='''_PART = re.compile(r"(\\d+)\\s*([dhms])")


def parse_duration(text: str) -> int:
    """Return the whole seconds in ``text``, e.g. ``"1h30m"`` -> 5400."""
    return sum(''',
        new='''_PART = re.compile(r"(\\d+)\\s*([dhms])")
#: A whole duration: one or more <number><unit> parts and nothing else.
_WHOLE = re.compile(r"\\s*(?:\\d+\\s*[dhms]\\s*)+")


def parse_duration(text: str) -> int:
    """Return the whole seconds in ``text``, e.g. ``"1h30m"`` -> 5400.

    Raises ValueError (quoting the input) when ``text`` is not a duration.
    """
    # findall alone would skip what it cannot read ("10x" -> 0); refuse it instead.
    if not _WHOLE.fullmatch(text):
        raise ValueError(f"not a duration: {text!r} (expected e.g. '1h30m')")
    return sum(''',
        description="parse_duration now validates the whole input and raises ValueError quoting it",
    ),
}

#: How the Player tells, from the code itself, whether a criterion is implemented (honest promises).
IMPLEMENTED_IF: dict[str, str] = {
    "AC-001": "def parse_duration",
    "AC-002": "_PART.findall",
    "AC-003": "_WHOLE.fullmatch",
    "AC-004": "def format_duration",
}

_PREVIOUS_TURN = re.compile(r"^##\s*Previous Turn Summary \(Turn (\d+)\)", re.M)
_REJECTED_LINE = re.compile(r"^\s*✗\s*(AC-\d+)", re.M)
_CRITERION_ID = re.compile(r"\bAC-\d{3}\b")
_COACH_FEEDBACK = re.compile(r"^\*\*Coach feedback\*\*:\s*(.*)$", re.M)
_MUST_ADDRESS = "Last Turn Feedback (MUST ADDRESS):"


@dataclass
class Context:
    """What the Player learned from the continuation context of the previous turn."""

    previous_turn: int | None = None
    rejected: list[str] = field(default_factory=list)  # criterion ids to fix, in order
    feedback: str = ""


def parse_context(text: str) -> Context:
    """Find the previous turn, the rejected criteria and the Coach's feedback in the context markdown.

    Rejected criteria are the ``✗`` lines of the criteria list plus any criterion id the feedback
    names (the MUST ADDRESS block takes precedence as the feedback text when present).
    """
    ctx = Context()
    turn = _PREVIOUS_TURN.search(text)
    if turn:
        ctx.previous_turn = int(turn.group(1))
    feedback_parts: list[str] = []
    if _MUST_ADDRESS in text:
        block = text.split(_MUST_ADDRESS, 1)[1]
        lines: list[str] = []
        for line in block.lstrip("\n").splitlines():
            if line.startswith("#") or (not line.strip() and lines and not lines[-1].strip()):
                break
            lines.append(line)
        feedback_parts.append("\n".join(lines).strip())
    else:
        match = _COACH_FEEDBACK.search(text)
        if match:
            rest = text[match.start(1):].split("\n\n", 1)[0]
            feedback_parts.append(rest.strip())
    ctx.feedback = "\n".join(p for p in feedback_parts if p)
    seen: list[str] = []
    for criterion_id in _REJECTED_LINE.findall(text) + _CRITERION_ID.findall(ctx.feedback):
        if criterion_id not in seen:
            seen.append(criterion_id)
    ctx.rejected = seen
    return ctx


def _uncommitted(root: Path, name: str) -> bool:
    """True when git reports uncommitted changes to ``name`` (False outside a git checkout)."""
    try:
        proc = subprocess.run(["git", "status", "--porcelain", "--", name], cwd=root,
                              capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0 and bool(proc.stdout.strip())


def _sleep_hook(turn: int) -> None:
    seconds = float(os.environ.get("DEMO_PLAYER_SLEEP") or 0)
    only_turn = os.environ.get("DEMO_PLAYER_SLEEP_TURN")
    if seconds > 0 and (not only_turn or int(only_turn) == turn):
        common.say("player", f"code edited; thinking for {seconds:g}s before writing the report")
        time.sleep(seconds)


def play(root: Path) -> int:
    """Run one Player turn in ``root`` (the worktree) as described by the environment."""
    env = os.environ
    task_id = common.require_env("GUARDKIT_TASK_ID")
    turn = int(common.require_env("GUARDKIT_TURN"))
    mode = env.get("GUARDKIT_MODE", "fresh_start")
    report_file = Path(common.require_env("GUARDKIT_REPORT_FILE"))
    task_file = Path(common.require_env("GUARDKIT_TASK_FILE"))
    demo_mode = env.get("DEMO_PLAYER_MODE", "")

    if demo_mode == "crash":
        common.say("player", "simulated crash (DEMO_PLAYER_MODE=crash)")
        return 3
    if demo_mode == "hang":
        common.say("player", "simulated hang (DEMO_PLAYER_MODE=hang)")
        while True:
            time.sleep(3600)

    criteria = common.read_criteria(task_file)
    context_path = env.get("GUARDKIT_CONTEXT_FILE")
    context_text = ""
    if context_path and Path(context_path).is_file():
        context_text = Path(context_path).read_text(encoding="utf-8")
    ctx = parse_context(context_text)

    module = root / MODULE
    created: list[str] = []
    modified: list[str] = []
    notes: list[str] = []
    concerns: list[str] = []
    common.say("player", f"turn {turn} ({mode})")

    if not module.exists():
        module.write_text(DRAFT, encoding="utf-8")
        created.append(MODULE)
        notes.append(f"Wrote {MODULE} with parse_duration and format_duration.")
        common.say("player", f"created {MODULE}")
    else:
        notes.append(f"{MODULE} already exists; continuing from it.")

    if ctx.rejected:
        common.say("player", f"context of turn {ctx.previous_turn}: Coach rejected {', '.join(ctx.rejected)}")
        feedback = " ".join(ctx.feedback.split()) or "(none)"
        feedback = feedback if len(feedback) <= 160 else feedback[:159] + "…"
        notes.append(f"The continuation context of turn {ctx.previous_turn} says the Coach rejected "
                     f"{', '.join(ctx.rejected)}: \"{feedback}\"")
    targets = [] if demo_mode == "never-fix" else ctx.rejected
    if demo_mode == "never-fix" and ctx.rejected:
        concerns.append("DEMO_PLAYER_MODE=never-fix: ignoring the Coach's feedback on purpose")
    for criterion_id in targets:
        fix = FIXES.get(criterion_id)
        source = module.read_text(encoding="utf-8")
        if fix is None:
            concerns.append(f"{criterion_id}: this scripted Player has no fix for it")
        elif fix.new in source:
            # A resumed turn finds the edit of its interrupted attempt: still this turn's change.
            if _uncommitted(root, MODULE):
                if MODULE not in created + modified:
                    modified.append(MODULE)
                notes.append(f"{criterion_id}: the interrupted attempt of this turn already made the fix "
                             f"({fix.description}); kept it.")
            else:
                notes.append(f"{criterion_id}: fix already in place ({fix.description}).")
        elif fix.old in source:
            module.write_text(source.replace(fix.old, fix.new, 1), encoding="utf-8")
            if MODULE not in created and MODULE not in modified:
                modified.append(MODULE)
            notes.append(f"{criterion_id}: {fix.description}.")
            common.say("player", f"fixed {criterion_id}: {fix.description}")
        else:
            concerns.append(f"{criterion_id}: {MODULE} changed in a way this Player cannot patch")

    _sleep_hook(turn)

    if demo_mode == "invalid-json":
        report_file.write_text("this is not JSON {", encoding="utf-8")
        return 0

    run = common.run_unittests(root)
    source = module.read_text(encoding="utf-8")
    promises = []
    for criterion_id, text in criteria:
        marker = IMPLEMENTED_IF.get(criterion_id)
        done = marker is not None and marker in source
        promises.append({
            "criterion_id": criterion_id,
            "criterion_text": text,
            "status": "complete" if done else "incomplete",
            "evidence": (f"implemented in {MODULE}" if done
                         else "not implemented yet" if marker else "this scripted Player does not know this criterion"),
            "test_file": TEST_FILE,
            "implementation_files": [MODULE],
        })
    addressed = [p["criterion_id"] for p in promises if p["status"] == "complete"]
    remaining = [p["criterion_id"] for p in promises if p["status"] != "complete"]
    if remaining and turn == 1 and not ctx.rejected:
        concerns.append(f"First draft: {', '.join(remaining)} not implemented yet (input validation).")
    summary = (f"Fixed {', '.join(t for t in targets if t in FIXES)} from the Coach's feedback"
               if any(t in FIXES for t in targets) else f"Implemented {MODULE} (parse and format)")
    report = {
        "task_id": task_id,
        "turn": turn,
        "files_modified": modified,
        "files_created": created,
        "tests_written": [],
        "tests_run": True,
        "tests_passed": run.failed == 0 and not run.load_errors,
        "implementation_notes": " ".join(notes),
        "concerns": concerns,
        "requirements_addressed": addressed,
        "requirements_remaining": remaining,
        "completion_promises": promises,
        "summary": summary,
        "test_output_summary": f"{run.passed} passed, {run.failed} failed ({common.TEST_COMMAND})",
        "tests_passed_count": run.passed,
        "tests_failed_count": run.failed,
    }
    common.write_json(report_file, report)
    common.say("player", f"report written: {summary}; tests {run.passed} passed, {run.failed} failed")
    return 0


def main() -> int:
    return common.run_main("player", play)


if __name__ == "__main__":
    sys.exit(main())
