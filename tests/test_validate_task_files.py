"""``validate`` on a GuardKit-like tasks/ folder: task files only, one line per duplicated id,
errors first, ``--errors-only``."""

from __future__ import annotations

from pathlib import Path

import pytest

from guardkit_state.cli.app import run
from guardkit_state.inspect.validation import is_task_file, validate_paths

TASK = "---\nid: {id}\ntitle: {id}\nstatus: backlog\n---\n\n# {id}\n"
BROKEN = "---\nid: {id}\ntitle: one: two\n---\n"


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    root = tmp_path / "tasks"
    for folder in ("backlog/feat-a", "backlog/feat-b", "in_progress", "completed"):
        (root / folder).mkdir(parents=True)
        # GuardKit leaves a guide and a README in every feature folder: not task files, even broken
        (root / folder / "IMPLEMENTATION-GUIDE.md").write_text("---\nnot: [valid\n---\n# Guide\nTASK-X-001\n")
        (root / folder / "README.md").write_text("# notes\n")
    for folder in ("backlog/feat-a", "in_progress", "completed"):  # one id, three copies
        (root / folder / "TASK-X-001-thing.md").write_text(TASK.format(id="TASK-X-001"))
    (root / "backlog/feat-b/TASK-X-002-other.md").write_text(TASK.format(id="TASK-X-002"))
    (root / "backlog/feat-b/TASK-X-002-copy.md").write_text(TASK.format(id="TASK-X-002"))
    (root / "completed/TASK-X-003-broken.md").write_text(BROKEN.format(id="TASK-X-003"))
    (root / "completed/REV-SD-001-review.md").write_text(TASK.format(id="REV-SD-001"))  # declares its id
    (root / "completed/NOTES-ON-WAVES.md").write_text("# no frontmatter id\n")
    return root


def test_what_makes_a_file_a_task_file(tasks: Path) -> None:
    assert is_task_file(tasks / "completed/TASK-X-003-broken.md")
    assert is_task_file(tasks / "completed/REV-SD-001-review.md")
    assert not is_task_file(tasks / "completed/NOTES-ON-WAVES.md")
    assert not is_task_file(tasks / "completed/IMPLEMENTATION-GUIDE.md")
    assert not is_task_file(tasks / "completed/README.md")
    report = validate_paths([tasks])
    assert sorted(r.path.name for r in report.results) == [
        "REV-SD-001-review.md", "TASK-X-001-thing.md", "TASK-X-001-thing.md", "TASK-X-001-thing.md",
        "TASK-X-002-copy.md", "TASK-X-002-other.md", "TASK-X-003-broken.md"]
    assert [(d.task_id, len(d.copies)) for d in report.duplicates] == [("TASK-X-001", 3), ("TASK-X-002", 2)]


def test_errors_come_first_and_each_duplicated_id_is_one_line(tasks: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["validate", str(tasks)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"error: {tasks / 'completed/TASK-X-003-broken.md'}:3: mapping values")
    assert lines[1:3] == [
        "warning: duplicate task id TASK-X-001: 3 copies; commands read tasks/backlog/feat-a/TASK-X-001-thing.md "
        "(first in GuardKit's search order); also tasks/completed/TASK-X-001-thing.md, "
        "tasks/in_progress/TASK-X-001-thing.md",
        "warning: duplicate task id TASK-X-002: 2 copies; commands read tasks/backlog/feat-b/TASK-X-002-copy.md "
        "(first in GuardKit's search order); also tasks/backlog/feat-b/TASK-X-002-other.md"]
    assert lines[3:] == ["checked 7 files: 6 valid, 1 invalid, 2 warnings"]


def test_errors_only_leaves_the_warnings_out(tasks: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["validate", "--errors-only", str(tasks)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines[:-1]] == ["error"]
    assert lines[-1] == "checked 7 files: 6 valid, 1 invalid, 2 warnings"
