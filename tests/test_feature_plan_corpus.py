"""Every real GuardKit feature plan (``../shared/corpus/guardkit/features``): read in place, waves
formed, schema-valid, a no-op update byte-identical, a status change one line, progress added
without touching anything else. Writes go to copies (``writable_copy``)."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from guardkit_state.plans.plan import FeaturePlan, find_plan, find_plans, load_plan
from guardkit_state.plans.plan_splice import PlanUpdate, splice_plan
from guardkit_state.plans.plan_validation import validate_plan_file
from guardkit_state.plans.plan_writer import modify_plan, update_plan
from guardkit_state.plans.waves import plan_waves

from .conftest import CORPUS, writable_copy

pytestmark = pytest.mark.corpus

FEATURES = CORPUS / "features"
#: Read at collection time; without the corpus each test skips through ``corpus_dir``.
PLAN_NAMES = sorted(path.name for path in FEATURES.glob("FEAT-*.yaml")) if FEATURES.is_dir() else ["(no corpus)"]
#: Plans without ``orchestration.parallel_groups``: their waves come from the dependencies.
FROM_DEPENDENCIES = {"FEAT-CD4C.yaml", "FEAT-MEM-09.yaml"}


def corpus_plan(corpus_dir: Path, name: str) -> Path:
    return corpus_dir / "features" / name


def copy_plan(corpus_dir: Path, name: str, repo: Path) -> Path:
    return writable_copy(corpus_plan(corpus_dir, name), repo / ".guardkit" / "features" / name)


def no_op(plan: FeaturePlan) -> PlanUpdate:
    """Every task value, execution value and top-level scalar set to what it already is."""
    update = PlanUpdate()
    for task in plan.tasks:
        update.set_task(task.id, **{k: v for k, v in task.raw.items() if k != "id"})
    if plan.execution is not None:
        update.set_execution(**plan.execution.raw)
    update.set_top_level(**{k: v for k, v in plan.data.items() if k not in ("tasks", "execution")})
    return update


def diff_lines(old: str, new: str) -> tuple[list[str], list[str]]:
    removed, added = [], []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0):
        if line.startswith("-") and not line.startswith("---"):
            removed.append(line[1:])
        elif line.startswith("+") and not line.startswith("+++"):
            added.append(line[1:])
    return removed, added


def removed_line_numbers(old: str, new: str) -> list[int]:
    """0-based numbers of the old lines a line diff removes or replaces."""
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    return [n for tag, i1, i2, _, _ in matcher.get_opcodes() if tag != "equal" for n in range(i1, i2)]


def block_lines(lines: list[str], first: int) -> range:
    """The 0-based lines from ``first`` to just before the next top-level key (or the end)."""
    end = next((n for n in range(first + 1, len(lines)) if lines[n][:1].isalpha()), len(lines))
    return range(first, end)


def test_plans_are_found_in_a_checkout(corpus_dir: Path, tmp_path: Path) -> None:
    assert len(PLAN_NAMES) == 41
    writable_copy(corpus_dir / "features", tmp_path / ".guardkit" / "features")
    assert [path.name for path in find_plans(tmp_path)] == PLAN_NAMES
    assert find_plan(tmp_path, "FEAT-GE") == tmp_path / ".guardkit" / "features" / "FEAT-GE.yaml"
    assert find_plan(corpus_dir, "features/FEAT-GE.yaml") == corpus_dir / "features" / "FEAT-GE.yaml"


@pytest.mark.parametrize("name", PLAN_NAMES)
def test_every_plan_is_read_with_waves_and_validates(corpus_dir: Path, name: str) -> None:
    path = corpus_plan(corpus_dir, name)
    plan = load_plan(path)
    assert plan.feature_id == name.removesuffix(".yaml")
    assert plan.tasks and all(task.file_path for task in plan.tasks)
    waves = plan_waves(plan)
    assert waves.source == ("dependencies" if name in FROM_DEPENDENCIES else "parallel_groups")
    assert sorted(task_id for wave in waves for task_id in wave) == sorted(plan.task_ids)
    for number, wave in enumerate(waves, start=1):  # every dependency runs in an earlier wave
        assert all(waves.wave_of(need) < number for task_id in wave for need in plan.task(task_id).dependencies)
    assert validate_plan_file(path) == []


@pytest.mark.parametrize("name", PLAN_NAMES)
def test_a_no_op_update_leaves_every_plan_byte_identical(corpus_dir: Path, name: str, tmp_path: Path) -> None:
    path = copy_plan(corpus_dir, name, tmp_path)
    before = path.read_bytes()
    plan = load_plan(path)
    assert not splice_plan(plan.text, no_op(plan), path=path).changed
    written = modify_plan(path, no_op)
    assert not written.changed
    assert path.read_bytes() == before


@pytest.mark.parametrize("name", PLAN_NAMES)
def test_a_task_status_change_is_one_line(corpus_dir: Path, name: str, tmp_path: Path) -> None:
    plan = load_plan(corpus_plan(corpus_dir, name))
    for task in plan.tasks:
        status = "in_progress" if task.status != "in_progress" else "completed"
        text = splice_plan(plan.text, PlanUpdate().set_task(task.id, status=status), parsed=plan.parsed).text
        removed, added = diff_lines(plan.text, text)
        assert len(removed) == len(added) == 1, task.id
        assert removed[0].replace(f"status: {task.status}", f"status: {status}") == added[0]
    path = copy_plan(corpus_dir, name, tmp_path)
    first = plan.tasks[0]
    written = update_plan(path, PlanUpdate().set_task(first.id, status="blocked"))
    assert written.plan.task(first.id).status == "blocked"
    assert len(diff_lines(plan.text, path.read_text(encoding="utf-8"))[0]) == 1


@pytest.mark.parametrize("name", PLAN_NAMES)
def test_progress_lands_without_touching_anything_else(corpus_dir: Path, name: str, tmp_path: Path) -> None:
    path = copy_plan(corpus_dir, name, tmp_path)
    old = path.read_text(encoding="utf-8")
    plan = load_plan(path)
    had_execution = "execution" in plan.data
    last = plan.tasks[-1]
    update = (PlanUpdate()
              .set_task(last.id, status="completed", turns_completed=2, merged_commit="0123456789abcdef",
                        result={"total_turns": 2, "final_decision": "approved", "error": None})
              .set_execution(current_wave=1, completed_waves=[1], tasks_completed=1, tasks_failed=0,
                             total_turns=2, last_updated="2026-07-01T10:00:00.000001"))
    new = update_plan(path, update).plan
    if not had_execution:
        # The block is appended at the end: every byte before the last task's entry is kept.
        assert new.text.startswith(old[: old.rindex("- id: " + last.id)])
        assert new.text.endswith("execution:\n  current_wave: 1\n  completed_waves:\n  - 1\n  tasks_completed: 1\n"
                                 "  tasks_failed: 0\n  total_turns: 2\n  last_updated: '2026-07-01T10:00:00.000001'\n")
    lines = old.splitlines()
    owned = set(block_lines(lines, last.line - 1 if last.line else 0))
    if had_execution:
        owned |= set(block_lines(lines, lines.index("execution:")))
    changed = removed_line_numbers(old, new.text)
    assert set(changed) <= owned, [lines[n] for n in changed if n not in owned]
    # Comments and every key outside the update read back exactly as before.
    assert [line for line in old.splitlines() if line.lstrip().startswith("#")] == \
        [line for line in new.text.splitlines() if line.lstrip().startswith("#")]
    assert {k: v for k, v in new.data.items() if k not in ("tasks", "execution")} == \
        {k: v for k, v in plan.data.items() if k not in ("tasks", "execution")}
    assert [t.raw for t in new.tasks[:-1]] == [t.raw for t in plan.tasks[:-1]]
    assert validate_plan_file(path) == []
