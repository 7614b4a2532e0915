"""One recorded turn's reports, as data: the Player's report, the Coach's decision and the turn state.

Read from the copy ``show`` reads (the loop's worktree while one exists), each file through the
turn store, so a report is validated as every other reader validates it (GuardKit's private folder,
``.guardkit/autobuild-private/TASK-ID/``, first). A turn GuardKit's own loop recorded only in the
frontmatter has no report files: its turn state is the one the ledger reads from its entry, and
``turn_state_source`` says so. GuardKit's Coach evidence (``coach_evidence_turn_N.json``) is given
as written, with a one-line summary (:func:`describe_evidence`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guardkit_state.errors import InputError
from guardkit_state.taskfile.locate import TaskLocation, locate_task
from guardkit_state.turns.history import TaskHistory


@dataclass(frozen=True)
class TurnReports:
    """What one recorded turn left in the files."""

    location: TaskLocation
    turn: int
    #: ``player_turn_N.json`` as validated, or None (a turn listed only in the frontmatter).
    player: dict[str, Any] | None
    #: ``coach_turn_N.json`` as validated, or None.
    coach: dict[str, Any] | None
    #: The turn state: its file, else the one its frontmatter entry gives.
    turn_state: dict[str, Any] | None
    #: ``"file"`` (turn_state_turn_N.json), ``"frontmatter"`` (its entry alone) or None.
    turn_state_source: str | None
    #: GuardKit's ``coach_evidence_turn_N.json`` as written (gates, tests, honesty, requirements), or None.
    coach_evidence: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        resolution = self.location.resolution
        return {"task_id": self.location.task_id, "turn": self.turn, "player": self.player, "coach": self.coach,
                "turn_state": self.turn_state, "turn_state_source": self.turn_state_source,
                "coach_evidence": self.coach_evidence,
                "coach_evidence_summary": describe_evidence(self.coach_evidence) if self.coach_evidence else None,
                "resolved": resolution.to_dict() if resolution else None, "copy": self.location.to_dict()}


def turn_reports(repo_root: Path | str, task_id: str, turn: int | None = None) -> TurnReports:
    """The reports of recorded turn ``turn`` of ``task_id`` (default: the last recorded turn).

    Raises:
        InputError: ``turn`` is not a recorded turn (1 .. the number recorded), or none is recorded.
        SchemaError, ParseError: a report file is not a valid record (named with its path).
    """
    location = locate_task(repo_root, task_id)
    task, store = location.load()
    recorded = len(task.state.turns) if task.state else 0
    number = recorded if turn is None else turn
    if recorded == 0:
        raise InputError(f"{location.task_id} has no recorded turn yet", task_id=location.task_id,
                         fix="'record' or a loop records one")
    if not 1 <= number <= recorded:
        raise InputError(f"turn {number} is not recorded", task_id=location.task_id, expected=f"1..{recorded}")
    state: dict[str, Any] | None = store.read("turn_state", number)
    source: str | None = "file"
    if state is None:
        derived = TaskHistory(task, None).turn_state(number)
        state, source = (derived.to_dict(), "frontmatter") if derived is not None else (None, None)
    return TurnReports(location, number, store.read("player_turn", number), store.read("coach_turn", number),
                       state, source, store.read_evidence(number))


def describe_evidence(evidence: dict[str, Any]) -> str:
    """One line of what GuardKit's Coach evidence says (pure): ``gates passed · criteria 7/7 met ·
    independent tests: no signal · honesty 1.00 (4 discrepancies)``; the parts it holds, in that order."""
    parts: list[str] = []
    status = evidence.get("gathering_status")
    if isinstance(status, str) and status != "complete":
        error = evidence.get("gathering_error")
        parts.append(f"gathering {status}" + (f": {error}" if isinstance(error, str) and error else ""))
    gates = evidence.get("quality_gates")
    if isinstance(gates, dict) and isinstance(gates.get("all_gates_passed"), bool):
        # ``tests_passed``/``tests_required``, ``coverage_met``/``coverage_required`` ...: a gate not
        # required does not fail the set.
        failed = [name for key, value in gates.items() if value is False and key != "all_gates_passed"
                  for name in [key.removesuffix("_passed").removesuffix("_met")]
                  if name != key and gates.get(f"{name}_required") is not False]
        parts.append("gates passed" if gates["all_gates_passed"] else
                     "gates failed" + (f" ({', '.join(failed)})" if failed else ""))
    met = evidence.get("requirements")
    if isinstance(met, dict) and isinstance(met.get("criteria_total"), int):
        parts.append(f"criteria {met.get('criteria_met')}/{met['criteria_total']} met")
    independent = evidence.get("independent_tests")
    if isinstance(independent, dict):
        said = "no signal" if independent.get("signal_absent") else \
            "passed" if independent.get("tests_passed") else "failed"
        parts.append(f"independent tests: {said}")
    honesty = evidence.get("honesty")
    if isinstance(honesty, dict) and isinstance(honesty.get("honesty_score"), (int, float)):
        found = honesty.get("discrepancies")
        count = len(found) if isinstance(found, list) else 0
        parts.append(f"honesty {honesty['honesty_score']:.2f}" + (f" ({count} discrepancies)" if count else ""))
    return " · ".join(parts) or "evidence recorded (no gates, criteria, tests or honesty in it)"


__all__ = ["TurnReports", "describe_evidence", "turn_reports"]
