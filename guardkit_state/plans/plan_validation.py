"""Checking a feature plan file for ``guardkit-state validate``: every problem with its line.

A plan file is read as a feature run reads it (capped read, UTF-8, strict YAML), checked against
``schemas/feature_plan.schema.json`` (every violation, not just the first), and, when that
passes, its waves are formed as a run would form them (unknown dependencies, cycles, groups that
contradict the dependencies). A plan whose ``id`` differs from its file name is a warning: the
file is found by its name, the feature is reported by its id. So is a ``scenarios`` stamp GuardKit
would refuse (:mod:`guardkit_state.plans.guardkit_keys`).
"""

from __future__ import annotations

from pathlib import Path

from guardkit_state.errors import GuardkitStateError, ParseError, WaveError
from guardkit_state.plans.guardkit_keys import stamp_problems
from guardkit_state.plans.plan import PLAN_SUFFIX, parse_plan
from guardkit_state.plans.schema import PlanProblem, schema_problems
from guardkit_state.plans.waves import plan_waves
from guardkit_state.store import reads
from guardkit_state.store.json_paths import format_pointer
from guardkit_state.yamltext.positions import node_line
from guardkit_state.yamltext.strict_yaml import parse_yaml


def validate_plan_file(path: Path | str) -> list[PlanProblem]:
    """Every problem of the plan file ``path`` (errors first, then warnings); empty when valid.

    Never raises for a bad plan: an unreadable file, invalid YAML or a duplicate key is one
    problem with its line; schema violations are listed each with its JSON path and line.
    """
    path = Path(path)
    try:
        text = reads.decode_utf8(reads.read_bytes_capped(path), path)
        parsed = parse_yaml(text, path=path, error_type=ParseError)
    except GuardkitStateError as exc:
        return [_from_error(exc)]
    problems = schema_problems(parsed.data, parsed.node)
    if problems:
        return problems
    plan = parse_plan(text, path=path, parsed=parsed, check=False)  # its schema problems were just listed: none
    found: list[PlanProblem] = []
    try:
        plan_waves(plan)
    except WaveError as exc:
        found.append(_from_error(exc))
    # GuardKit refuses to load a plan with a stamp off its closed list: said, not refused (ours runs it).
    found += [PlanProblem(f"{text}: GuardKit refuses to load this plan", node_line(parsed.node, parts),
                          format_pointer(parts), "warning") for parts, text in stamp_problems(parsed.data)]
    stem = path.name[: -len(PLAN_SUFFIX)] if path.name.endswith(PLAN_SUFFIX) else path.stem
    if plan.feature_id != stem:
        found.append(PlanProblem(f"the plan's id {plan.feature_id!r} differs from its file name ({path.name}); "
                                 f"'{stem}' finds this file", node_line(plan.node, ("id",)),
                                 "$.id", "warning"))
    return found


def _from_error(exc: GuardkitStateError) -> PlanProblem:
    return PlanProblem(exc.described(), exc.line, exc.pointer)


__all__ = ["PlanProblem", "validate_plan_file"]
