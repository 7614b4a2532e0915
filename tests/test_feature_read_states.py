"""What ``show FEAT-X``, ``status`` and ``log FEAT-X`` say where a feature is in an awkward state: a
turn left half done, a task file that is missing, a task out of turns, a plan whose id is not its
file's name. Each claim is checked against what the real CLI then does (real git, real subprocesses,
the scripted agents of ``tests/feature_agents``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from guardkit_state.cli.app import run as cli_run
from guardkit_state.inspect.feature_view import feature_view

from .feature_support import FEATURE_BRANCH, FEATURE_ID, PLAN_REL, TaskSpec, git, make_feature, start_cli, task_rel

T1, T2, T3 = "TASK-FB-001", "TASK-FB-002", "TASK-FB-003"
WAIT = 120.0


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli_run(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    _, err = proc.communicate(timeout=WAIT)
    return proc.returncode, err


def test_a_turn_left_half_done_is_shown_as_the_step_resume_takes(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # The task's loop dies right after the Player's report is recorded: resume re-runs only the Coach,
    # so 'show' must not say the turn restarts (that would re-run the Player).
    project = make_feature(tmp_path, [TaskSpec(T1), TaskSpec(T2, [T1])], [[T1], [T2]])
    code, err = _finish(start_cli(project, crash_at="loop.after_player"))
    assert code != 0, err
    view = feature_view(project.root, FEATURE_ID)
    assert view.next.run == (T1,)
    assert "re-run only the Coach" in view.next.text and "restarts turn 1" not in view.next.text
    row = view.wave(1)[0]
    assert (row.phase, row.turns, row.resume_action) == ("resume", 0, "rerun_coach")
    code, out, _ = cli(capsys, "show", FEATURE_ID, "--repo", str(project.root))
    assert code == 0 and f"runs {T1} (turn 1 has the Player's report: re-run only the Coach)" in out
    shown = json.loads(cli(capsys, "show", FEATURE_ID, "--repo", str(project.root), "--json")[1])
    assert shown["waves"][0]["tasks"][0]["resume"]["action"] == "rerun_coach"

    # And that is what --resume does: the Player of turn 1 is not started again.
    code, err = _finish(start_cli(project, "--resume"))
    assert code == 0, err
    starts = [(e["task"], e["turn"]) for e in project.invocations() if e["event"] == "start"]
    assert starts.count((T1, 1)) == 1


def test_a_missing_task_file_is_named_and_the_next_step_says_the_run_cannot_start(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1), TaskSpec(T2), TaskSpec(T3, [T1, T2])], [[T1, T2], [T3]])
    git(project.root, "rm", "-q", str(task_rel(T3)))
    git(project.root, "commit", "-q", "-m", "drop the last task file")
    view = feature_view(project.root, FEATURE_ID)
    # Not "wave 1 runs T1, T2": the run refuses before it starts anything.
    assert (view.next.run, view.next.stopped_by, view.next.command) == ((), (T3,), None)
    assert "nothing can run" in view.next.text and f"no task file for {T3}" in view.next.text
    row = view.wave(2)[0]
    assert row.criteria is None and row.error is not None and f"no task file for {T3}" in row.error
    code, out, _ = cli(capsys, "show", FEATURE_ID, "--repo", str(project.root))
    assert code == 0 and "task file unreadable" not in out
    assert out.count(f"no task file for {T3}") == 2  # under its row, and in the next step

    code, err = _finish(start_cli(project))
    assert code == 2 and f"no task file for {T3}" in err
    assert git(project.root, "branch", "--list", FEATURE_BRANCH).strip() == ""


def test_a_task_out_of_turns_says_how_to_give_it_more(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1, approve_at=3), TaskSpec(T2, [T1])], [[T1], [T2]])
    code, err = _finish(start_cli(project, "--max-turns", "2"))
    assert code == 1, err
    view = feature_view(project.root, FEATURE_ID)
    assert view.next.stopped_by == (T1,)
    assert "--resume --max-turns 3 or more" in view.next.text
    code, out, _ = cli(capsys, "show", FEATURE_ID, "--repo", str(project.root))
    assert "--resume --max-turns 3 or more gives it more turns" in out

    # Taking that advice finishes the feature.
    code, err = _finish(start_cli(project, "--resume", "--max-turns", "3"))
    assert code == 0, err
    assert [row.status for row in feature_view(project.root, FEATURE_ID).tasks] == ["completed", "completed"]


def test_status_lists_a_plan_by_the_name_that_finds_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1)])
    renamed = project.root / ".guardkit/features/FEAT-RENAMED.yaml"
    renamed.write_text(project.plan_path.read_text().replace(f"id: {FEATURE_ID}", "id: FEAT-ORIGINAL"))
    long_status = project.root / ".guardkit/features/FEAT-LONG.yaml"
    long_status.write_text(project.plan_path.read_text().replace(f"id: {FEATURE_ID}", "id: FEAT-LONG")
                           .replace("status: planned", "status: superseded_by_another_plan"))
    code, out, _ = cli(capsys, "status", "--repo", str(project.root))
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines()[out.splitlines().index("features") + 1:]}
    assert "FEAT-ORIGINAL" not in lines and "(id FEAT-ORIGINAL)" in lines["FEAT-RENAMED"]
    # The name shown is one 'show' finds.
    assert cli(capsys, "show", "FEAT-RENAMED", "--repo", str(project.root))[0] == 0
    # A long status does not push its row's columns out of line with the others.
    columns = {name: line.index("task(s) done") for name, line in lines.items()}
    assert len(set(columns.values())) == 1, lines


def test_log_of_a_feature_explains_its_empty_sections_on_stdout(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1), TaskSpec(T2)])
    (project.root / task_rel(T2)).unlink()
    code, out, err = cli(capsys, "log", FEATURE_ID, "--repo", str(project.root))
    assert code == 0
    # 'log FEAT-X > log.txt' keeps why there are no merges and why a task has no turns.
    assert f"{FEATURE_ID}: not started (no branch autobuild/{FEATURE_ID})" in out and f"no task file for {T2}" in out
    assert f"{T1} (pending): turns from" in out and "no turns recorded" in out
    assert err == ""
    assert (project.root / PLAN_REL).is_file()


def test_the_next_step_under_stop_on_failure_false_names_the_tasks_that_run_and_the_skipped_ones(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t4 = "TASK-FB-004"
    project = make_feature(tmp_path, [TaskSpec(T1, approve_at=0), TaskSpec(T2), TaskSpec(T3, [T1]), TaskSpec(t4, [T2])])
    project.plan_path.write_text(project.plan_path.read_text() + "stop_on_failure: false\n")
    git(project.root, "commit", "-qam", "plan: a failure does not stop the feature")
    code, err = _finish(start_cli(project, "--max-turns", "1", crash_at="feature.between_waves"))
    assert code != 0, err  # killed after wave 1: T1 failed, T2 merged
    view = feature_view(project.root, FEATURE_ID)
    # Not "wave 1/2 stops: T1 ...": the plan says a failure does not stop the feature.
    assert (view.next.wave, view.next.run, view.next.stopped_by, view.next.skipped) == (2, (t4,), (), (T3,))
    assert view.next.text == f"wave 2/2 skips {T3} (it needs {T1}, which ended without approval), then runs {t4}"
    code, out, _ = cli(capsys, "show", FEATURE_ID, "--repo", str(project.root))
    assert f"next: {view.next.text}" in out and view.next.command is not None

    # And that is what --resume does: T4 runs, T3 never does, and the feature ends completed without T1, T3.
    code, err = _finish(start_cli(project, "--resume"))
    assert code == 1, err
    started = {e["task"] for e in project.invocations() if e["event"] == "start"}
    assert t4 in started and T3 not in started
    done = feature_view(project.root, FEATURE_ID).next
    assert (done.wave, done.run, done.skipped, done.command) == (None, (), (T3,), None)
    assert done.text == (f"nothing left to run: the feature ends completed without {T1}, {T3} ({T1} ended without "
                         f"approval (max_turns_exceeded): the Coach did not approve within 1 turns; {T3} skipped: it "
                         f"needs {T1}, which ended without approval)")
