"""GuardKit's ``stop_on_failure``: which failure stops a feature, and what a failure that does not skips."""

from __future__ import annotations

from guardkit_state.plans.failure_rules import skipped_by, stops_on_failure
from guardkit_state.plans.plan import parse_plan

PLAN = """\
id: FEAT-R
tasks:
- {id: TASK-R-005, dependencies: [TASK-R-003]}
- {id: TASK-R-001, dependencies: []}
- {id: TASK-R-002, dependencies: []}
- {id: TASK-R-003, dependencies: [TASK-R-001, TASK-R-002]}
- {id: TASK-R-004, dependencies: [TASK-R-002]}
"""


def test_skipped_by_names_every_dependent_directly_and_through_others_in_plan_order() -> None:
    plan = parse_plan(PLAN)
    # TASK-R-005 is listed before what it needs: found all the same.
    assert skipped_by(["TASK-R-001"], plan) == {"TASK-R-005": "TASK-R-001", "TASK-R-003": "TASK-R-001"}
    assert skipped_by(["TASK-R-002"], plan) == {"TASK-R-005": "TASK-R-002", "TASK-R-003": "TASK-R-002",
                                                "TASK-R-004": "TASK-R-002"}
    assert skipped_by([], plan) == {}


def test_stops_on_failure_the_flag_then_the_tasks_wave_then_the_plan_then_true() -> None:
    plain = parse_plan(PLAN)
    assert stops_on_failure(plain, "TASK-R-001", None) is True  # GuardKit's default
    assert stops_on_failure(plain, "TASK-R-001", False) is False
    keyed = parse_plan(PLAN + "stop_on_failure: false\nwaves:\n  wave_1:\n    tasks: [TASK-R-001]\n"
                       "    stop_on_failure: true\n  wave_2:\n    tasks: [TASK-R-002]\n")
    assert stops_on_failure(keyed, "TASK-R-001", None) is True  # its wave says so
    assert stops_on_failure(keyed, "TASK-R-002", None) is False  # its wave says nothing: the plan's word
    assert stops_on_failure(keyed, "TASK-R-002", True) is True  # --stop-on-failure
