"""Plan writes: only the values that change, verified before they land, one writer at a time."""

from __future__ import annotations

import difflib
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from guardkit_state.errors import (
    FeaturePlanError,
    LockedError,
    SchemaError,
    TaskNotFoundError,
    WriteVerificationError,
)
from guardkit_state.plans.plan import FeaturePlan, load_plan, parse_plan
from guardkit_state.plans.plan_splice import PlanUpdate, apply_plan_update, splice_plan
from guardkit_state.plans.plan_writer import modify_plan, plan_lock, plan_lock_file, update_plan
from guardkit_state.yamltext.strict_yaml import parse_yaml

from .conftest import REPO_ROOT, run_git

PLAN = """\
# Feature plan written by hand
id: FEAT-W
status: planned  # GuardKit's word
tasks:
- id: TASK-1
  name: 'first: quoted'
  dependencies: []
  status: pending  # not started
  note: |
    keep this
    block scalar
- id: TASK-2
  dependencies:
  - TASK-1
  status: pending
  result: null

- id: TASK-3
  dependencies: [TASK-1]
  status: pending
orchestration:
  parallel_groups:
  - - TASK-1
  - - TASK-2
    - TASK-3
  recommended_parallel: 2
"""


def changed_lines(old: str, new: str) -> tuple[list[str], list[str]]:
    """(removed, added) lines between two texts."""
    removed, added = [], []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old.splitlines(True), new.splitlines(True),
                                                        autojunk=False).get_opcodes():
        if tag != "equal":
            removed += old.splitlines(True)[i1:i2]
            added += new.splitlines(True)[j1:j2]
    return removed, added


def write_plan(directory: Path, text: str = PLAN, name: str = "FEAT-W.yaml") -> Path:
    path = directory / ".guardkit" / "features" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path


# --------------------------------------------------------------------------- the splice


def test_a_status_change_rewrites_only_its_value_keeping_the_comment() -> None:
    result = splice_plan(PLAN, PlanUpdate().set_task("TASK-1", status="in_progress"))
    assert result.changed
    assert changed_lines(PLAN, result.text) == (["  status: pending  # not started\n"],
                                                 ["  status: in_progress  # not started\n"])


def test_new_task_keys_go_after_the_entry_s_last_key() -> None:
    update = PlanUpdate().set_task("TASK-2", status="completed", turns_completed=2, merged_commit="0a1b2c3",
                                   result={"total_turns": 2, "final_decision": "approved", "error": None})
    text = splice_plan(PLAN, update).text
    assert "  status: completed\n  result:\n    total_turns: 2\n    final_decision: approved\n    error: null\n" \
           "  turns_completed: 2\n  merged_commit: 0a1b2c3\n\n- id: TASK-3\n" in text
    removed, _ = changed_lines(PLAN, text)
    assert removed == ["  status: pending\n", "  result: null\n"]
    assert parse_plan(text).task("TASK-2").final_decision == "approved"


def test_a_block_scalar_value_is_replaced_as_a_whole_and_others_kept() -> None:
    text = splice_plan(PLAN, PlanUpdate().set_task("TASK-1", note="one line")).text
    assert changed_lines(PLAN, text)[0] == ["  note: |\n", "    keep this\n", "    block scalar\n"]
    assert "  note: one line\n- id: TASK-2\n" in text


def test_adding_execution_keeps_every_earlier_byte() -> None:
    update = PlanUpdate().set_execution(current_wave=1, completed_waves=[], tasks_completed=0,
                                        worktree_path="/repo/.guardkit/worktrees/FEAT-W",
                                        last_updated="2026-07-01T10:00:00.123456")
    text = splice_plan(PLAN, update).text
    assert text.startswith(PLAN)
    assert text[len(PLAN):] == ("execution:\n  current_wave: 1\n  completed_waves: []\n  tasks_completed: 0\n"
                                "  worktree_path: /repo/.guardkit/worktrees/FEAT-W\n"
                                "  last_updated: '2026-07-01T10:00:00.123456'\n")


def test_a_plan_without_final_newline_gets_one_before_new_keys() -> None:
    old = PLAN.rstrip("\n")
    text = splice_plan(old, PlanUpdate().set_execution(current_wave=2)).text
    assert text == old + "\nexecution:\n  current_wave: 2\n"


def test_a_plan_ending_inside_a_block_scalar_without_newline_cannot_grow() -> None:
    old = "id: F-1\ntasks:\n- id: T-1\n  note: |\n    last line"
    with pytest.raises(FeaturePlanError, match="ends inside a block scalar") as info:
        splice_plan(old, PlanUpdate().set_task("T-1", status="x"))
    assert info.value.line == 5
    stripped = old.replace("|", "|-")  # strip chomping: the value has no final line break to lose
    assert splice_plan(stripped, PlanUpdate().set_task("T-1", status="x")).text == stripped + "\n  status: x\n"
    rewritten = splice_plan(old, PlanUpdate().set_task("T-1", note="new")).text
    assert rewritten == "id: F-1\ntasks:\n- id: T-1\n  note: new\n"


@pytest.mark.parametrize("written", ["execution:\n", "execution: null\n", "execution: {}\n", "execution: {a: 1}\n"])
def test_an_execution_written_inline_or_null_is_rewritten_as_one_entry(written: str) -> None:
    old = PLAN + written
    text = splice_plan(old, PlanUpdate().set_execution(current_wave=3)).text
    assert text.startswith(PLAN)
    assert parse_yaml(text).data["execution"]["current_wave"] == 3


def test_execution_lists_keep_their_style() -> None:
    old = PLAN + "execution:\n  completed_waves: [1, 2]  # done\n  other:\n  - 1\n  current_wave: 2\n"
    text = splice_plan(old, PlanUpdate().set_execution(completed_waves=[1, 2, 3], other=[1, 4],
                                                      current_wave=3, tasks_failed=0)).text
    assert text == PLAN + ("execution:\n  completed_waves: [1, 2, 3]  # done\n  other:\n  - 1\n  - 4\n"
                           "  current_wave: 3\n  tasks_failed: 0\n")


def test_crlf_plans_stay_crlf() -> None:
    old = PLAN.replace("\n", "\r\n")
    text = splice_plan(old, PlanUpdate().set_task("TASK-3", status="done", merged_commit="abc1234")
                       .set_execution(current_wave=1)).text
    assert "\n" not in text.replace("\r\n", "")
    assert "  status: done\r\n  merged_commit: abc1234\r\n" in text


def test_items_indented_under_tasks_are_edited_too() -> None:
    old = "id: FEAT-I\ntasks:\n  # wave 1\n  - id: T-1\n    status: pending\n\n  # wave 2\n  - id: T-2\n    status: x\n"
    text = splice_plan(old, PlanUpdate().set_task("T-1", status="done", turns_completed=1)).text
    assert text == ("id: FEAT-I\ntasks:\n  # wave 1\n  - id: T-1\n    status: done\n    turns_completed: 1\n\n"
                    "  # wave 2\n  - id: T-2\n    status: x\n")


def test_a_no_op_update_returns_the_identical_text() -> None:
    update = PlanUpdate().set_task("TASK-1", status="pending", note="keep this\nblock scalar\n")
    update.set_top_level(status="planned")
    result = splice_plan(PLAN, update)
    assert not result.changed and result.text is PLAN
    assert not splice_plan(PLAN, PlanUpdate()).changed


def test_top_level_values_are_set_in_place_or_added_at_the_end() -> None:
    text = splice_plan(PLAN, PlanUpdate().set_top_level(status="in_progress", feature_branch="autobuild/FEAT-W")).text
    assert changed_lines(PLAN, text) == (["status: planned  # GuardKit's word\n"],
                                         ["status: in_progress  # GuardKit's word\n",
                                          "feature_branch: autobuild/FEAT-W\n"])
    assert text.endswith("recommended_parallel: 2\nfeature_branch: autobuild/FEAT-W\n")


def test_the_data_twin_matches_and_does_not_mutate() -> None:
    data = parse_yaml(PLAN).data
    update = PlanUpdate().set_task("TASK-3", status="done").set_execution(total_turns=4).set_top_level(x=1)
    expected = apply_plan_update(data, update)
    assert data["tasks"][2]["status"] == "pending" and "execution" not in data
    assert list(expected)[-2:] == ["execution", "x"]
    assert parse_yaml(splice_plan(PLAN, update).text).data == expected


# --------------------------------------------------------------------------- refusals


def test_unknown_and_duplicate_tasks_are_refused() -> None:
    with pytest.raises(TaskNotFoundError, match="no task TASK-9"):
        splice_plan(PLAN, PlanUpdate().set_task("TASK-9", status="x"))
    twice = PLAN.replace("- id: TASK-3", "- id: TASK-2")
    with pytest.raises(FeaturePlanError, match="TASK-2 is listed 2 times") as info:
        splice_plan(twice, PlanUpdate().set_task("TASK-2", status="x"))
    assert info.value.pointer == "$.tasks[2].id"


def test_update_values_are_checked() -> None:
    with pytest.raises(ValueError, match="cannot be changed"):
        PlanUpdate().set_task("TASK-1", id="TASK-X")
    with pytest.raises(ValueError, match="through its own field"):
        PlanUpdate(top_level={"tasks": []})
    with pytest.raises(SchemaError, match="invalid value") as info:
        splice_plan(PLAN, PlanUpdate().set_execution(tasks_completed=-1))
    assert info.value.pointer == "$.execution.tasks_completed"
    with pytest.raises(SchemaError):
        splice_plan(PLAN, PlanUpdate().set_task("TASK-1", turns_completed="2"))


def test_layouts_that_cannot_be_edited_in_place_are_refused_by_name() -> None:
    with pytest.raises(FeaturePlanError, match="'tasks' is not a block list"):
        splice_plan("id: F-1\ntasks: [{id: T-1}]\n", PlanUpdate().set_task("T-1", status="x"))
    with pytest.raises(FeaturePlanError, match="task entry 1 is not a block mapping"):
        splice_plan("id: F-1\ntasks:\n- {id: T-1}\n", PlanUpdate().set_task("T-1", status="x"))


def test_an_anchored_value_aliased_elsewhere_is_refused() -> None:
    old = "id: F-1\ntasks:\n- id: T-1\n  status: &s pending\n- id: T-2\n  status: *s\n"
    with pytest.raises(WriteVerificationError, match=r"would change \$\.tasks\[1\]\.status.*alias") as info:
        splice_plan(old, PlanUpdate().set_task("T-1", status="done"))
    assert info.value.pointer == "$.tasks[1].status"
    # Setting the alias itself replaces it with the value: nothing else changes.
    text = splice_plan(old, PlanUpdate().set_task("T-2", status="done")).text
    assert text == "id: F-1\ntasks:\n- id: T-1\n  status: &s pending\n- id: T-2\n  status: done\n"


# --------------------------------------------------------------------------- the locked writer


def test_update_plan_writes_atomically_and_keeps_the_mode(tmp_path: Path) -> None:
    path = write_plan(tmp_path)
    path.chmod(0o640)
    written = update_plan(path, PlanUpdate().set_task("TASK-1", status="in_progress"))
    assert written.changed and written.plan.task("TASK-1").status == "in_progress"
    assert path.read_text(encoding="utf-8") == written.plan.text
    assert path.stat().st_mode & 0o777 == 0o640
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".gks-tmp-")]


def test_a_no_op_write_leaves_the_file_untouched(tmp_path: Path) -> None:
    path = write_plan(tmp_path)
    before = path.stat()
    written = update_plan(path, PlanUpdate().set_task("TASK-2", status="pending", result=None))
    assert not written.changed and written.plan.text == PLAN
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_refused_write_leaves_the_file_untouched(tmp_path: Path) -> None:
    path = write_plan(tmp_path)
    with pytest.raises(SchemaError):
        update_plan(path, PlanUpdate().set_execution(current_wave=-2))
    assert path.read_text(encoding="utf-8") == PLAN


def test_the_lock_lives_beside_the_plans_and_git_ignores_it(git_repo: Path) -> None:
    path = write_plan(git_repo)
    run_git(git_repo, "add", ".")
    run_git(git_repo, "commit", "-q", "-m", "plan")
    update_plan(path, PlanUpdate().set_task("TASK-1", status="in_progress"))
    assert plan_lock_file(path) == path.parent / ".locks" / "FEAT-W.yaml.lock"
    assert plan_lock_file(path).exists()
    assert run_git(git_repo, "status", "--porcelain").splitlines() == [" M .guardkit/features/FEAT-W.yaml"]


def test_modify_plan_computes_from_the_plan_on_disk(tmp_path: Path) -> None:
    path = write_plan(tmp_path)

    def finish(plan: FeaturePlan) -> PlanUpdate:
        done = plan.execution.tasks_completed if plan.execution else 0
        return PlanUpdate().set_task("TASK-3", status="completed").set_execution(tasks_completed=done + 1)

    modify_plan(path, finish)
    written = modify_plan(path, finish)
    assert written.plan.execution is not None and written.plan.execution.tasks_completed == 2
    assert not modify_plan(path, lambda plan: None).changed


def test_several_changes_apply_in_order_and_land_in_one_write(tmp_path: Path) -> None:
    path = write_plan(tmp_path)
    seen: list[int] = []

    def count_one(plan: FeaturePlan) -> PlanUpdate:
        done = plan.execution.tasks_completed if plan.execution else 0
        seen.append(done)
        return PlanUpdate().set_execution(tasks_completed=done + 1)

    before = path.stat().st_ino
    written = modify_plan(path, count_one, lambda plan: None, count_one)
    assert seen == [seen[0], seen[0] + 1]  # the second change saw what the first one set
    assert written.changed and written.plan.execution is not None
    assert written.plan.execution.tasks_completed == seen[0] + 2
    assert path.stat().st_ino != before  # replaced...
    assert len(list(path.parent.iterdir())) == 2  # ...once, with no temp file left (the plan and .locks)
    assert load_plan(path).execution.tasks_completed == seen[0] + 2  # type: ignore[union-attr]
    assert not modify_plan(path, lambda plan: None, lambda plan: PlanUpdate()).changed


def test_a_save_by_another_program_during_the_write_is_kept(tmp_path: Path) -> None:
    path = write_plan(tmp_path)
    calls = []

    def change(plan: FeaturePlan) -> PlanUpdate:
        calls.append(plan.text)
        if len(calls) == 1:  # an editor saves between our read and our rename
            path.write_text(plan.text.replace("name: 'first: quoted'", "name: edited by hand"), encoding="utf-8")
        return PlanUpdate().set_task("TASK-2", status="completed")

    written = modify_plan(path, change)
    assert len(calls) == 2 and "edited by hand" in calls[1]
    text = path.read_text(encoding="utf-8")
    assert "name: edited by hand" in text and written.plan.task("TASK-2").status == "completed"


def test_plan_lock_is_reentrant_in_a_thread_and_exclusive_across_threads(tmp_path: Path) -> None:
    path = write_plan(tmp_path)
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with plan_lock(path):
            held.set()
            release.wait(10)

    with plan_lock(path, wait=1):
        update_plan(path, PlanUpdate().set_task("TASK-1", status="a"), wait=0.5)  # no self-deadlock
    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(10)
        with pytest.raises(LockedError):
            update_plan(path, PlanUpdate().set_task("TASK-1", status="b"), wait=0.05)
    finally:
        release.set()
        thread.join()
    assert load_plan(path).task("TASK-1").status == "a"


# --------------------------------------------------------------------------- concurrent writers


def _finish_turns(path: str, task_id: str, rounds: int) -> None:
    """One task loop reporting ``rounds`` turns: its own entry, and the shared counters."""
    for turn in range(1, rounds + 1):

        def change(plan: FeaturePlan, turn: int = turn) -> PlanUpdate:
            total = plan.execution.total_turns if plan.execution else 0
            return (PlanUpdate().set_task(task_id, status="in_progress", turns_completed=turn,
                                          last_turn_by=f"{task_id}/{turn}")
                    .set_execution(total_turns=total + 1, last_updated=f"{task_id}-{turn}"))

        modify_plan(path, change)


def _concurrent_plan(directory: Path, tasks: int) -> Path:
    entries = "".join(f"- id: TASK-{i}\n  status: pending  # task {i}\n" for i in range(tasks))
    return write_plan(directory, f"id: FEAT-C\n# shared progress below\ntasks:\n{entries}")


def test_threads_updating_different_tasks_all_land(tmp_path: Path) -> None:
    path = _concurrent_plan(tmp_path, 3)
    rounds = 20
    threads = [threading.Thread(target=_finish_turns, args=(str(path), f"TASK-{i}", rounds)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    plan = load_plan(path)
    assert plan.execution is not None and plan.execution.total_turns == 3 * rounds
    for task in plan.tasks:
        assert (task.turns_completed, task.raw["last_turn_by"]) == (rounds, f"{task.id}/{rounds}")
    assert plan.text.startswith("id: FEAT-C\n# shared progress below\ntasks:\n- id: TASK-0\n  status: in_progress"
                                "  # task 0\n")


def test_processes_updating_different_tasks_all_land(tmp_path: Path) -> None:
    path = _concurrent_plan(tmp_path, 2)
    rounds = 15
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_finish_turns, args=(str(path), f"TASK-{i}", rounds)) for i in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [worker.exitcode for worker in workers] == [0, 0]
    plan = load_plan(path)
    assert plan.execution is not None and plan.execution.total_turns == 2 * rounds
    assert [task.turns_completed for task in plan.tasks] == [rounds, rounds]
    assert sorted(os.listdir(path.parent)) == [".locks", "FEAT-W.yaml"]  # no temp file left behind


def test_an_outside_edit_after_our_write_is_read_afresh(tmp_path: Path) -> None:
    path = write_plan(tmp_path)
    update_plan(path, PlanUpdate().set_task("TASK-1", status="a"))
    edited = path.read_text(encoding="utf-8").replace("[TASK-1]\n  status: pending", "[TASK-1]\n  status: edited")
    path.write_text(edited, encoding="utf-8")
    written = update_plan(path, PlanUpdate().set_task("TASK-2", status="b"))
    assert [task.status for task in written.plan.tasks] == ["a", "b", "edited"]
    assert [task.status for task in load_plan(path).tasks] == ["a", "b", "edited"]


@pytest.mark.parametrize(("point", "lands"), [
    ("plan.before_write", False), ("write.before_fsync", False), ("write.before_replace", False),
    ("write.after_replace", True), ("plan.after_write", True),
])
def test_a_kill_inside_a_plan_write_leaves_the_old_or_the_new_plan(tmp_path: Path, point: str, lands: bool) -> None:
    path = write_plan(tmp_path)
    with plan_lock(path):
        pass  # the lock's folder exists: the write killed is the plan's
    script = ("import sys; from guardkit_state.plans.plan_splice import PlanUpdate; "
              "from guardkit_state.plans.plan_writer import update_plan; "
              "update_plan(sys.argv[1], PlanUpdate().set_task('TASK-1', status='done').set_execution(current_wave=1))")
    env = {**os.environ, "GUARDKIT_STATE_CRASH_AT": point}
    completed = subprocess.run([sys.executable, "-c", script, str(path)], env=env, cwd=REPO_ROOT, check=False)
    assert completed.returncode == -signal.SIGKILL
    plan = load_plan(path)
    assert (plan.task("TASK-1").status == "done") is lands and (plan.execution is not None) is lands
    # The next writer is not blocked (the lock died with its holder) and finishes the job.
    again = update_plan(path, PlanUpdate().set_task("TASK-1", status="done"), wait=1)
    assert again.plan.task("TASK-1").status == "done"
