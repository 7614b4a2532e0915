"""The progress lines of ``feature-build`` (``cli/event_lines.py``): a resumed wave's line says what
its tasks that do not run are — a failed task is not done.

``wave 1/2: A, B, C (3 already done)`` counted every task not run again, failed ones included.
The line tells them apart from the phases the run read (``WaveStarted.phases``).
"""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

from guardkit_state.cli.event_lines import event_lines
from guardkit_state.cli.output import Output
from guardkit_state.features.feature_events import WaveStarted

from .feature_support import TaskSpec, make_feature, start_cli

T1, T2, T3, T4 = "TASK-FB-001", "TASK-FB-002", "TASK-FB-003", "TASK-FB-004"


def _line(event: WaveStarted) -> str:
    [line] = event_lines(event, Output(io.StringIO(), io.StringIO(), False), feature=True)
    return line


def test_the_line_names_each_kind_of_task_not_run() -> None:
    wave = WaveStarted(1, 2, (T1, T2, T3, T4), (T4,), ("merged", "approved", "failed", "resume"))
    assert _line(wave) == (f"wave 1/2: {T1}, {T2}, {T3}, {T4} "
                           "(1 already merged, 1 approved awaiting merge, 1 failed)")
    assert wave.to_dict()["phases"] == {T1: "merged", T2: "approved", T3: "failed", T4: "resume"}
    skipped = WaveStarted(2, 2, (T1, T2), (), ("closed", "merged"))
    assert _line(skipped) == f"wave 2/2: {T1}, {T2} (1 already merged, 1 skipped)"
    fresh = WaveStarted(1, 1, (T1, T2), (T1, T2), ("new", "new"))
    assert _line(fresh) == f"wave 1/1: {T1}, {T2}"


def test_without_phases_the_line_does_not_call_them_done() -> None:
    line = _line(WaveStarted(1, 2, (T1, T2, T3), (T3,)))
    assert line == f"wave 1/2: {T1}, {T2}, {T3} (2 ended in an earlier run)"
    assert "done" not in line


def test_a_resumed_run_says_failed_not_done(tmp_path: Path) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1), TaskSpec(T2), TaskSpec(T3, approve_at=0), TaskSpec(T4, [T3])],
                           [[T1, T2, T3], [T4]], recommended=3)
    first = start_cli(project, "--max-turns", "1")
    _, err = first.communicate(timeout=120)
    assert first.returncode == 1, err
    assert f"wave 1/2: {T1}, {T2}, {T3}\n" in err  # a fresh start runs every task

    again = start_cli(project, "--max-turns", "1", "--resume")
    out, err = again.communicate(timeout=120)
    result = subprocess.CompletedProcess(again.args, again.returncode, out, err)
    assert result.returncode == 1, result.stderr
    assert f"wave 1/2: {T1}, {T2}, {T3} (2 already merged, 1 failed)" in result.stderr
    assert "already done" not in result.stderr
