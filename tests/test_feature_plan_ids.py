"""``validate`` refuses the plan ids ``feature-build`` refuses, each with its JSON path and line.

Task ids become branch names, worktree folders and task file names; a plan id such as
``../../etc/passwd`` must be refused by every reader of the plan, not only when a run starts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from guardkit_state.errors import SchemaError
from guardkit_state.plans.plan import load_plan
from guardkit_state.plans.plan_validation import validate_plan_file

HOSTILE = 'id: FEAT-H\ntasks:\n- id: "../../etc/passwd"\n- id: "TASK-<b>X</b>"\n'

HOSTILE_REFERENCES = """\
id: FEAT-R
tasks:
- id: TASK-A
- id: TASK-B
  dependencies: [TASK-A, "a b"]
orchestration:
  parallel_groups:
  - [TASK-A]
  - ["TASK-B/../x"]
"""


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "guardkit_state", *args], cwd=cwd,
                          capture_output=True, text=True, check=False, timeout=120)


def _repo(tmp_path: Path, name: str, text: str) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "init"], cwd=root, check=True)
    folder = root / ".guardkit" / "features"
    folder.mkdir(parents=True)
    (folder / f"{name}.yaml").write_text(text)
    return root


def test_validate_refuses_the_ids_feature_build_refuses(tmp_path: Path) -> None:
    root = _repo(tmp_path, "FEAT-H", HOSTILE)
    plan = ".guardkit/features/FEAT-H.yaml"

    build = _cli(root, "feature-build", "FEAT-H", "--player", "true", "--coach", "true")
    assert build.returncode == 2
    assert "invalid task id '../../etc/passwd'" in build.stderr

    checked = _cli(root, "validate", plan)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert f"{plan}:3: $.tasks[0].id: invalid task id '../../etc/passwd'" in checked.stdout
    assert f"{plan}:4: $.tasks[1].id: invalid task id 'TASK-<b>X</b>'" in checked.stdout
    assert "0 valid, 1 invalid" in checked.stdout

    as_json = json.loads(_cli(root, "validate", "--json", plan).stdout)
    text = json.dumps(as_json)
    assert "$.tasks[0].id" in text and "$.tasks[1].id" in text


def test_ids_in_dependencies_and_groups_are_refused_with_their_paths(tmp_path: Path) -> None:
    root = _repo(tmp_path, "FEAT-R", HOSTILE_REFERENCES)
    problems = validate_plan_file(root / ".guardkit/features/FEAT-R.yaml")
    assert [(p.pointer, p.line) for p in problems] == [
        ("$.orchestration.parallel_groups[1][0]", 9),
        ("$.tasks[1].dependencies[1]", 5),
    ]
    assert all("invalid task id" in p.message and p.severity == "error" for p in problems)


def test_reading_the_plan_refuses_a_hostile_id_before_anything_runs(tmp_path: Path) -> None:
    root = _repo(tmp_path, "FEAT-H", HOSTILE)
    with pytest.raises(SchemaError) as caught:
        load_plan(root / ".guardkit/features/FEAT-H.yaml")
    assert caught.value.pointer == "$.tasks[0].id" and caught.value.line == 3
    assert [pointer for pointer, _ in caught.value.problems] == ["$.tasks[0].id", "$.tasks[1].id"]


def test_a_hostile_feature_id_is_refused(tmp_path: Path) -> None:
    root = _repo(tmp_path, "FEAT-X", "id: ../FEAT-X\ntasks:\n- id: TASK-A\n")
    problems = validate_plan_file(root / ".guardkit/features/FEAT-X.yaml")
    assert [(p.pointer, p.line, p.severity) for p in problems] == [("$.id", 1, "error")]


def test_plain_ids_stay_valid(tmp_path: Path) -> None:
    text = "id: FEAT-OK\ntasks:\n- id: TASK-A.1\n- id: T-2\n  dependencies: [TASK-A.1]\n"
    root = _repo(tmp_path, "FEAT-OK", text)
    assert validate_plan_file(root / ".guardkit/features/FEAT-OK.yaml") == []
