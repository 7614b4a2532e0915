"""The feature plans read once: parsed once per change of the file, per process and between
processes (``.guardkit/cache/plans.json``); a plan the strict reader refuses still lists its tasks;
a show of a task in a repository of many plans parses none of them when they are unchanged."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from guardkit_state.errors import DuplicateKeyError
from guardkit_state.inspect.task_view import task_view
from guardkit_state.plans.plan import load_plan
from guardkit_state.store import stat_cache
from guardkit_state.taskfile import plan_reads
from guardkit_state.taskfile.discovery import listing_scope
from guardkit_state.taskfile.resolve import plan_listings
from guardkit_state.yamltext import strict_yaml

PLAN = "id: {id}\nname: Plan {n}\ntasks:\n- id: TASK-P{n}-001\n  file_path: tasks/backlog/TASK-P{n}-001.md\n" \
       "  dependencies: []\n  status: pending\n"
TASK = "---\nid: {id}\ntitle: Task\nstatus: backlog\n---\n\n## Acceptance Criteria\n\n- [ ] works\n"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(stat_cache, "RACY_NS", 0)  # the fixture's files count as settled
    for n in range(12):
        plan = tmp_path / ".guardkit" / "features" / f"FEAT-P{n}.yaml"
        plan.parent.mkdir(parents=True, exist_ok=True)
        plan.write_text(PLAN.format(id=f"FEAT-P{n}", n=n), encoding="utf-8")
        task = tmp_path / "tasks" / "backlog" / f"TASK-P{n}-001.md"
        task.parent.mkdir(parents=True, exist_ok=True)
        task.write_text(TASK.format(id=f"TASK-P{n}-001"), encoding="utf-8")
    return tmp_path


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every YAML text parsed (the plans' and the task files' frontmatter), by the file it came from."""
    seen: list[str] = []
    real = strict_yaml.parse_yaml

    def counting(text: str, **kwargs: object) -> object:
        seen.append(Path(str(kwargs.get("path"))).name)
        return real(text, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(strict_yaml, "parse_yaml", counting)
    yield seen


def _new_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stat_cache, "_LOADED", {})
    monkeypatch.setattr(plan_reads, "_MEMO", {})


def test_plans_are_parsed_once_per_change_across_processes(repo: Path, parses: list[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    with listing_scope():
        assert len(plan_listings(repo)) == 12
    assert sorted(parses) == sorted(f"FEAT-P{n}.yaml" for n in range(12))
    parses.clear()
    _new_process(monkeypatch)
    with listing_scope():
        assert [p.feature_id for p in plan_listings(repo)][:2] == ["FEAT-P0", "FEAT-P1"]
        assert load_plan(repo / ".guardkit" / "features" / "FEAT-P3.yaml").task_ids == ["TASK-P3-001"]
    assert parses == []  # served from .guardkit/cache/plans.json
    changed = repo / ".guardkit" / "features" / "FEAT-P5.yaml"
    changed.write_text(PLAN.format(id="FEAT-P5", n=5).replace("Plan 5", "Plan five"), encoding="utf-8")
    _new_process(monkeypatch)
    with listing_scope():
        assert load_plan(changed).name == "Plan five"
        plan_listings(repo)
    assert parses == ["FEAT-P5.yaml"]


def test_a_show_parses_no_unchanged_plan(repo: Path, parses: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    task_view(repo, "TASK-P4-001")
    _new_process(monkeypatch)
    parses.clear()
    assert task_view(repo, "TASK-P4-001").task.task_id == "TASK-P4-001"
    assert not [name for name in parses if name.endswith(".yaml")]


def test_a_plan_the_strict_reader_refuses_still_lists_its_tasks(repo: Path) -> None:
    plan = repo / ".guardkit" / "features" / "FEAT-P0.yaml"
    plan.write_text(PLAN.format(id="FEAT-P0", n=0) + "name: again\n", encoding="utf-8")
    [listing] = [p for p in plan_listings(repo) if p.feature_id == "FEAT-P0"]
    assert listing.tasks == (("TASK-P0-001", "tasks/backlog/TASK-P0-001.md"),)
    with pytest.raises(DuplicateKeyError):
        load_plan(plan)
