"""What a turn's writes leave: new files made as any program makes them there, edited files keeping
their mode."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from guardkit_state import record_turn

from .helpers import coach_decision, make_task_repo, player_report

TASK = "TASK-AUTH-001"


@pytest.fixture
def umask_027() -> Iterator[None]:
    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("umask_027")
def test_new_turn_files_get_0644_less_the_umask_and_the_task_file_keeps_its_mode(tmp_path: Path) -> None:
    task = make_task_repo(tmp_path)
    task.chmod(0o600)
    record = record_turn(tmp_path, TASK, player_report(1), coach_decision(1, "feedback"))
    assert _mode(task) == 0o600
    turn_files = [p for p in record.written if p != task]
    assert len(turn_files) == 3
    assert {p.name: _mode(p) for p in turn_files} == {p.name: 0o640 for p in turn_files}


def test_under_another_umask_the_same_files_are_group_and_world_readable(tmp_path: Path) -> None:
    make_task_repo(tmp_path)
    old = os.umask(0o022)
    try:
        record = record_turn(tmp_path, TASK, player_report(1), coach_decision(1, "feedback"))
    finally:
        os.umask(old)
    assert {_mode(p) for p in record.written if p.suffix == ".json"} == {0o644}

