"""GuardKit's newer plan keys and verifier stamps: shown where they change a view, checked by
``validate`` as GuardKit checks them at load, and never touched by a write (a plan's run progress,
a task's recorded turn)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from guardkit_state.inspect.feature_view import feature_view
from guardkit_state.inspect.task_view import task_view
from guardkit_state.inspect.validation import validate_paths
from guardkit_state.plans.guardkit_keys import read_stamp, run_settings, scenario_stamps, stamp_problem
from guardkit_state.plans.plan import load_plan
from guardkit_state.plans.plan_splice import PlanUpdate
from guardkit_state.plans.plan_writer import update_plan
from guardkit_state.turns.lifecycle import record_turn

from .guardkit_fixtures import cli, cli_json
from .helpers import coach_decision, player_report

#: The keys GuardKit's runner reads at 703734ee, as its plans write them (FEAT-HARV, FEAT-ABL-001 and
#: its routing-law tests), beside a plan's usual ones.
RUN_KEYS = """\
smoke_gates:
  after_wave: all
  command: pytest tests/smoke -q
  expected_exit: 0
  timeout: 120
behavioural_oracle:
  command: npm test  # the oracle GuardKit runs per task
  expected_exit: 0
  timeout: 300
evidence_repos:
- ../guardkitfactory
- path: ../forge
  test_command: pytest -q tests/
bootstrap_extras: [dev, test]
preflight_strict: true
routing_law: enforced
scenarios:
  'User signs in with valid credentials': hurl
  'Rate limiter refuses the 6th attempt':
    verifier: toolchain
    test_ref: tests/test_limits.py::test_rate_limiter_refuses_sixth
  'Owner reads the card':
    verifier: operator
"""

PLAN = """\
id: FEAT-GK
name: GuardKit keys
status: {status}
tasks:
- id: TASK-GK-001
  name: First
  file_path: tasks/backlog/TASK-GK-001-first.md
  dependencies: []
  status: {task_status}
orchestration:
  parallel_groups:
  - - TASK-GK-001
{run_keys}"""

TASK = """\
---
id: TASK-GK-001
title: First
status: backlog
component: api
verifier: toolchain
test_ref: tests/test_first.py::test_first_works
test_paths:
- tests/**/*
acceptance_criteria:
- id: AC-1
  text: The first thing works
  verifier: toolchain
  test_ref: tests/test_first.py::test_first_works
- id: AC-2
  text: The page loads
  verifier: playwright
---

# First
"""


def _repo(root: Path, *, status: str = "planned", task_status: str = "pending", run_keys: str = RUN_KEYS) -> Path:
    (root / "tasks" / "backlog").mkdir(parents=True)
    (root / "tasks" / "backlog" / "TASK-GK-001-first.md").write_text(TASK, encoding="utf-8")
    features = root / ".guardkit" / "features"
    features.mkdir(parents=True)
    (features / "FEAT-GK.yaml").write_text(PLAN.format(status=status, task_status=task_status, run_keys=run_keys),
                                           encoding="utf-8")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "fixture"]):
        subprocess.run(["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args], cwd=root, check=True,
                       capture_output=True)
    return root


def test_the_run_keys_are_shown_as_the_plan_holds_them(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    settings = dict(feature_view(root, "FEAT-GK").settings)
    assert settings == {
        "behavioural_oracle": "`npm test`, exit 0, timeout 300 s",
        "evidence_repos": "../guardkitfactory, ../forge (tests: pytest -q tests/)",
        "bootstrap_extras": "dev, test", "preflight_strict": "yes", "routing_law": "enforced",
        "scenarios": "3 stamped: hurl 1, operator 1, toolchain 1",
    }
    shown = cli(root, "show", "FEAT-GK")
    assert shown.returncode == 0, shown.stderr
    for line in ("behavioural oracle: `npm test`, exit 0, timeout 300 s", "preflight strict: yes",
                 "routing law: enforced", "scenarios: 3 stamped: hurl 1, operator 1, toolchain 1"):
        assert line in shown.stdout
    assert cli_json(root, "show", "FEAT-GK")["guardkit_settings"] == settings


def test_routing_law_off_reads_as_off() -> None:
    """YAML 1.1 reads a bare ``off`` as false: GuardKit takes it as "off", so does the view."""
    assert run_settings({"routing_law": False}) == [("routing_law", "off")]


def test_scenario_stamps_read_both_shapes() -> None:
    stamps = scenario_stamps({"scenarios": {"a": "hurl", "b": {"verifier": "toolchain", "test_ref": "t::x"},
                                            "c": {"verifier": ""}}})
    assert stamps["a"] is not None and stamps["a"].verifier == "hurl"
    assert stamps["b"] is not None and stamps["b"].test_ref == "t::x"
    assert stamps["c"] is None


def test_a_stamp_guardkit_would_refuse_is_named() -> None:
    assert stamp_problem(read_stamp("hurl")) is None  # type: ignore[arg-type]
    assert "not one of GuardKit's homes" in str(stamp_problem(read_stamp("postman")))  # type: ignore[arg-type]
    assert "names no test_ref" in str(stamp_problem(read_stamp("toolchain")))  # type: ignore[arg-type]


def test_validate_warns_on_stamps_guardkit_refuses(tmp_path: Path) -> None:
    bad = RUN_KEYS.replace("verifier: operator", "verifier: human").replace(
        "'User signs in with valid credentials': hurl", "'User signs in with valid credentials': toolchain")
    root = _repo(tmp_path, run_keys=bad)
    task = root / "tasks" / "backlog" / "TASK-GK-001-first.md"
    task.write_text(TASK.replace("  verifier: playwright", "  verifier: selenium"), encoding="utf-8")
    report = validate_paths([root / ".guardkit" / "features", root / "tasks"])
    assert report.ok
    warned = {(r.path.name, w.pointer): w.message for r in report.results for w in r.warnings}
    assert "names no test_ref" in warned[("FEAT-GK.yaml", '$.scenarios["User signs in with valid credentials"]')]
    assert "'human' is not one of GuardKit's homes" in warned[("FEAT-GK.yaml", '$.scenarios["Owner reads the card"]')]
    assert "'selenium' is not one of GuardKit's homes" in warned[
        ("TASK-GK-001-first.md", "$.acceptance_criteria[1].verifier")]
    assert all("GuardKit refuses to load" in message for message in warned.values())


def test_a_good_plan_and_task_have_no_stamp_warnings(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    report = validate_paths([root / ".guardkit" / "features", root / "tasks"])
    assert report.ok and report.warnings == 0, [r.to_dict() for r in report.results]


def test_awaiting_merge_says_what_waits(tmp_path: Path) -> None:
    root = _repo(tmp_path, status="awaiting_merge", task_status="completed")
    view = feature_view(root, "FEAT-GK")
    assert view.plan_status == "awaiting_merge" and view.tally.done == 1
    assert view.next.text == ("nothing: every task is done; the plan awaits its merge (GuardKit's "
                              "/feature-complete prepared autobuild/FEAT-GK for merging into your main branch)")
    assert "awaiting_merge" in cli(root, "status").stdout


def test_a_plan_write_keeps_every_run_key_byte_for_byte(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    path = root / ".guardkit" / "features" / "FEAT-GK.yaml"
    before = path.read_text(encoding="utf-8")
    written = update_plan(path, PlanUpdate(top_level={"status": "in_progress"}).set_task(
        "TASK-GK-001", status="in_progress").set_execution(current_wave=1, completed_waves=[]))
    after = path.read_text(encoding="utf-8")
    assert written.changed
    assert RUN_KEYS in after  # comment, flow list, quoting and order as written
    assert after.replace("status: in_progress", "status: planned", 1).replace(
        "  status: in_progress", "  status: pending", 1).startswith(before)
    assert load_plan(path).data["scenarios"] == load_plan(path).data["scenarios"]


def test_the_task_s_stamps_are_shown_and_kept_by_a_recorded_turn(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    view = task_view(root, "TASK-GK-001")
    assert view.verifier == {"verifier": "toolchain", "test_ref": "tests/test_first.py::test_first_works",
                             "test_paths": ["tests/**/*"]}
    stamps = {row.id: (row.verifier, row.test_ref) for row in view.criteria}
    assert stamps == {"AC-1": ("toolchain", "tests/test_first.py::test_first_works"), "AC-2": ("playwright", None)}
    shown = cli(root, "show", "TASK-GK-001").stdout
    assert "verifier toolchain · test_ref tests/test_first.py::test_first_works" in shown
    assert "AC-2: The page loads: pending · verifier playwright" in shown
    task = root / "tasks" / "backlog" / "TASK-GK-001-first.md"
    record_turn(root, "TASK-GK-001", player_report(1, task_id="TASK-GK-001"),
                coach_decision(1, "feedback", task_id="TASK-GK-001", feedback="again"))
    after = task.read_text(encoding="utf-8").replace("status: in_progress", "status: backlog", 1)
    head = TASK.split("---\n")[1]
    assert after.startswith("---\n" + head)  # every stamp line kept; the state block added after them
    assert json.dumps(task_view(root, "TASK-GK-001").verifier) == json.dumps(view.verifier)
