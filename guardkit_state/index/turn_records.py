"""Turn records: one per ``turn_state_turn_N.json`` (and per turn a task file lists without one).

A turn's facts all start at its own ``Turn`` entity: the turn itself pointing at its task, the
Coach's feedback, each blocker, lesson and next step, the criteria's statuses, and one fact per
*failed* gate pointing at a shared ``Gate`` entity ("which gates keep failing" is one node's edges).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guardkit_state.errors import one_line
from guardkit_state.index.records import (
    FEATURE,
    TASK,
    TURN_STATES,
    Entity,
    Fact,
    IndexRecord,
    stable_uuid,
)
from guardkit_state.model import TurnState, turn_state_id
from guardkit_state.store.jsonio import load_record
from guardkit_state.store.layout import STATE_DIR, WORKTREES_DIR
from guardkit_state.store.turn_files import turn_state_number

_CRITERION_ID = re.compile(r"^\s*([A-Za-z]+-\d+)\b")


def task_entity(group: str, task_id: str, feature: str | None = None, *, summary: str | None = None,
                defines: bool = False) -> Entity:
    """The shared entity of a task (its record, when the task file exists, defines its summary)."""
    return Entity(stable_uuid(group, f"task/{task_id}"), task_id, "Task",
                  summary or f"Task {task_id}" + (f" of feature {feature}" if feature else ""),
                  record_key=f"{TASK}:{task_id}", shared=True, defines=defines)


def feature_entity(group: str, feature_id: str, *, summary: str | None = None, defines: bool = False) -> Entity:
    return Entity(stable_uuid(group, f"feature/{feature_id}"), feature_id, "Feature",
                  summary or f"Feature {feature_id}", record_key=f"{FEATURE}:{feature_id}", shared=True,
                  defines=defines)


def turn_anchor_uuid(group: str, key: str) -> str:
    """The uuid of a turn's own entity (every fact of the turn starts there)."""
    return stable_uuid(group, f"turn/{key}")


def turn_record(data: dict[str, Any], group_id: str, *, source_path: str | None = None) -> IndexRecord:
    """Build the record of one turn state dict (``TurnState.to_dict()`` shape).

    The key is the canonical ``TURN-{feature}-{task}-T{n}`` (GuardKit's own ``TURN-{feature}-{n}``
    collides across tasks); the file's own ``id`` stays in the content untouched.
    """
    turn = _Turn.of(TurnState.from_dict(data))
    state = turn.state
    criteria = tuple(dict.fromkeys(m.group(1).upper() for c in state.acceptance_criteria_status
                                   if (m := _CRITERION_ID.match(c))))
    anchor = Entity(turn_anchor_uuid(group_id, turn.key), turn.key, "Turn", turn.summary(), record_key=turn.key)
    return IndexRecord(
        key=turn.key, kind=TURN_STATES, group_id=group_id, name=turn.key, data=data, summary=turn.summary(),
        search_text=turn.search_text(),
        fields={"coach_decision": turn.coach, "player_decision": turn.player, "mode": str(state.mode),
                "task_id": state.task_id, "feature_id": turn.feature, "turn": str(state.turn_number)},
        facts=turn.facts(group_id, anchor), entities=[anchor], source_path=source_path, task_id=state.task_id,
        feature_id=state.feature_id, turn_number=state.turn_number,
        completed_at=state.completed_at or state.started_at, criteria=criteria,
    )


@dataclass(frozen=True)
class _Turn:
    """A turn state as the index words it: its key, and the names every sentence uses."""

    state: TurnState
    key: str
    feature: str
    coach: str
    player: str

    @classmethod
    def of(cls, state: TurnState) -> _Turn:
        return cls(state, turn_state_id(state.feature_id, state.task_id, state.turn_number),
                   state.feature_id or "NOFEAT", str(state.coach_decision or ""), str(state.player_decision or ""))

    @property
    def title(self) -> str:
        return f"{self.feature} {self.state.task_id} turn {self.state.turn_number}"

    def measures(self) -> str:
        """``tests 12 passed, 2 failed; coverage 78%; arch score 80`` (only what was measured)."""
        state, parts = self.state, []
        if state.tests_passed is not None or state.tests_failed is not None:
            parts.append(f"tests {state.tests_passed or 0} passed, {state.tests_failed or 0} failed")
        if state.coverage is not None:
            parts.append(f"coverage {_percent(state.coverage)}")
        if state.arch_score is not None:
            parts.append(f"arch score {state.arch_score:g}")
        return "; ".join(parts)

    def summary(self) -> str:
        state = self.state
        summary = (f"turn_state {self.title}: coach_decision={self.coach} "
                   f"player_decision={self.player} mode={state.mode}")
        if self.measures():
            summary += f" ({self.measures()})"
        if state.coach_feedback:
            summary += f" feedback={one_line(state.coach_feedback, 120)}"
        if state.blockers_found:
            summary += f" blockers={len(state.blockers_found)}"
        return summary

    def search_text(self) -> str:
        state = self.state
        lines = [f"turn_state {self.title} {self.key}",
                 f"coach_decision {self.coach} player_decision {self.player} mode {state.mode}",
                 f"summary: {state.player_summary}"]
        if self.measures():
            lines.append(self.measures())
        if state.progress_summary:
            lines.append(f"progress: {state.progress_summary}")
        if state.coach_feedback:
            lines.append(f"coach_feedback: {state.coach_feedback}")
        if state.blockers_found:
            lines.append("blockers: " + "; ".join(map(str, state.blockers_found)))
        if state.lessons_from_turn:
            lines.append("lessons: " + "; ".join(map(str, state.lessons_from_turn)))
        if state.what_to_try_next:
            lines.append(f"what_to_try_next: {state.what_to_try_next}")
        lines += [f"criterion {criterion}: {status}" for criterion, status in state.acceptance_criteria_status.items()]
        lines += [_gate_sentence(gate) for gate in state.gate_results if isinstance(gate, dict)]
        if state.error:
            lines.append(f"error: {state.error}")
        if state.files_modified:
            lines.append("files: " + " ".join(map(str, state.files_modified)))
        return "\n".join(lines)

    def facts(self, group_id: str, anchor: Entity) -> list[Fact]:
        """The turn (pointing at its task), its feedback, blockers, lessons, next step, criteria and failed gates."""
        state, key, task, n = self.state, self.key, self.state.task_id, self.state.turn_number
        task_node = task_entity(group_id, task, state.feature_id)
        when = f", {state.completed_at}" if state.completed_at else ""
        headline = (f"{task} turn {n} ({self.feature}{when}): coach_decision {self.coach}, player_decision "
                    f"{self.player}, mode {state.mode}.")
        if self.measures():
            headline += f" {self.measures().capitalize()}."
        facts = [Fact(stable_uuid(group_id, f"fact/{key}/turn_of"), "TURN_OF",
                      f"{headline} {one_line(state.player_summary, 300)}", anchor, task_node)]
        for i, (kind, predicate, sentence) in enumerate(self._notes()):
            facts.append(Fact(stable_uuid(group_id, f"fact/{key}/{kind}/{i}"), predicate, sentence, anchor, task_node))
        if state.acceptance_criteria_status:
            listed = "; ".join(f"{c} is {s}" for c, s in state.acceptance_criteria_status.items())
            facts.append(Fact(stable_uuid(group_id, f"fact/{key}/criteria"), "CRITERIA_STATUS",
                              one_line(f"{task} turn {n} criteria: {listed}", 1500), anchor, task_node))
        for i, gate in enumerate(g for g in state.gate_results if isinstance(g, dict) and g.get("passed") is False):
            name = str(gate.get("gate") or "gate")
            gate_node = Entity(stable_uuid(group_id, f"gate/{name}"), f"gate {name}", "Gate",
                               f"Quality gate {name}", shared=True)
            facts.append(Fact(stable_uuid(group_id, f"fact/{key}/gate/{i}"), "GATE_FAILED",
                              f"Gate {name} failed on {task} turn {n}: {_gate_sentence(gate)}", anchor, gate_node))
        return facts

    def _notes(self) -> list[tuple[str, str, str]]:
        """(kind, predicate, sentence) of the feedback, blockers, lessons and next step, in that order."""
        state, task, n = self.state, self.state.task_id, self.state.turn_number
        items: list[tuple[str, str, str]] = []
        if state.coach_feedback:
            feedback = f"Coach feedback on {task} turn {n}: {state.coach_feedback}"
            items.append(("feedback", "RECEIVED_FEEDBACK", feedback))
        items += [("blocker", "HIT_BLOCKER", f"Blocker in {task} turn {n}: {b}") for b in state.blockers_found]
        items += [("lesson", "LEARNED", f"Lesson from {task} turn {n}: {lesson}") for lesson in state.lessons_from_turn]
        if state.what_to_try_next:
            items.append(("next", "TRY_NEXT", f"What to try after {task} turn {n}: {state.what_to_try_next}"))
        if state.error:
            items.append(("error", "FAILED_WITH", f"Error in {task} turn {n}: {state.error}"))
        return items


def _percent(value: float) -> str:
    """Coverage as GuardKit writes it: a fraction (0.85) or a percentage (85)."""
    return f"{value * 100:g}%" if 0 <= value <= 1 else f"{value:g}%"


def _gate_sentence(gate: dict[str, Any]) -> str:
    verdict = {True: "passed", False: "failed", None: "not checked"}.get(gate.get("passed"), "not checked")
    return (f"gate {gate.get('gate')} {verdict}: actual {gate.get('actual')}, threshold {gate.get('threshold')}"
            f" ({gate.get('source', 'built-in')})")


def turn_state_files(repo_root: Path, tasks: Sequence[str] | None = None) -> list[Path]:
    """Every ``turn_state_turn_N.json`` of the checkout, then of each loop worktree (of ``tasks`` only, when given)."""
    root = Path(repo_root)
    homes = [root, *sorted(p for p in (root / WORKTREES_DIR).glob("*") if p.is_dir())]
    found: list[Path] = []
    for home in homes:
        state = home / STATE_DIR
        for folder in [state / task for task in tasks] if tasks is not None else sorted(state.glob("*")):
            found += sorted(p for p in folder.glob("turn_state_turn_*.json")
                            if turn_state_number(p.name) is not None and p.is_file())
    return found


def load_turn_state_dict(path: Path) -> dict[str, Any]:
    """Read one turn state file as its canonical dict (strict JSON, validated and normalised).

    Raises:
        ParseError, SchemaError: the file is not a valid turn state.
    """
    return TurnState.from_dict(load_record("turn_state", path)).to_dict()


def anchor_uuid(group: str, key: str, kind: str, task_id: str | None, feature_id: str | None) -> str:
    """The uuid of the entity every fact of record ``key`` starts at (its turn, task or feature)."""
    if kind == TASK and task_id:
        return stable_uuid(group, f"task/{task_id}")
    if kind == FEATURE and feature_id:
        return stable_uuid(group, f"feature/{feature_id}")
    return turn_anchor_uuid(group, key)
