"""``guardkit-state validate`` checks feature plans: schema, waves, and where plans are looked for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guardkit_state.cli.app import run
from guardkit_state.inspect.validation import PLAN_KIND, kind_of, validate_paths

PLAN_OK = """\
id: FEAT-OK
name: Two waves   # a comment
tasks:
- id: TASK-A
  dependencies: []
- id: TASK-B
  dependencies: [TASK-A]
orchestration:
  parallel_groups:
  - [TASK-A]
  - [TASK-B]
"""

PLAN_CYCLE = """\
id: FEAT-CYCLE
tasks:
- id: T-1
  dependencies: [T-2]
- id: T-2
  dependencies: [T-1]
"""

PLAN_BAD_TYPE = """\
id: FEAT-TYPE
tasks:
- id: T-1
  dependencies: T-2
"""


def _features(root: Path, **plans: str) -> Path:
    folder = root / ".guardkit" / "features"
    folder.mkdir(parents=True)
    for name, text in plans.items():
        (folder / f"{name}.yaml").write_text(text)
    return folder


def test_plan_files_are_recognised_by_name() -> None:
    assert kind_of(Path("FEAT-1A2B.yaml")) == PLAN_KIND
    assert kind_of(Path("settings.yaml")) is None


def test_walking_a_repository_checks_its_plans_with_lines(tmp_path: Path) -> None:
    _features(tmp_path, **{"FEAT-OK": PLAN_OK, "FEAT-CYCLE": PLAN_CYCLE, "FEAT-TYPE": PLAN_BAD_TYPE})
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "FEAT-ELSEWHERE.yaml").write_text("not: a plan\n")
    report = validate_paths([tmp_path])
    by_name = {r.path.name: r for r in report.results}
    assert sorted(by_name) == ["FEAT-CYCLE.yaml", "FEAT-OK.yaml", "FEAT-TYPE.yaml"]
    assert by_name["FEAT-OK.yaml"].valid
    cycle = by_name["FEAT-CYCLE.yaml"].problems
    assert len(cycle) == 1 and "T-1 -> T-2 -> T-1" in cycle[0].message and cycle[0].line == 4
    typed = by_name["FEAT-TYPE.yaml"].problems
    assert typed and typed[0].pointer == "$.tasks[0].dependencies" and typed[0].line == 4


def test_validate_cli_exit_code_and_json_for_plans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _features(tmp_path, **{"FEAT-OK": PLAN_OK, "FEAT-CYCLE": PLAN_CYCLE})
    assert run(["validate", str(folder / "FEAT-OK.yaml")]) == 0
    capsys.readouterr()
    assert run(["validate", "--json", str(folder)]) == 1
    data = json.loads(capsys.readouterr().out)
    assert (data["checked"], data["invalid"]) == (2, 1)


def test_a_plan_id_that_differs_from_its_file_name_is_a_warning(tmp_path: Path) -> None:
    _features(tmp_path, **{"FEAT-NAME": PLAN_OK})
    [result] = validate_paths([tmp_path]).results
    assert result.valid and any("differs from its file name" in w.message for w in result.warnings)
