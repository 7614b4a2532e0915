"""Deterministic regression tests for the bugs the reliability campaign found."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from guardkit_state.errors import FrontmatterError
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.worktrees import WorktreeManager
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.taskfile.splice import StateUpdate, splice_state
from guardkit_state.turns.lifecycle import TurnLifecycle

from .harness import TASK_ID, Setup, check_on_disk, finish, git, make_project, read_history, start_loop


def test_no_worktree_turn_recorded_but_not_committed_is_committed_on_resume(tmp_path: Path) -> None:
    setup = Setup(worktree=False)
    root = make_project(tmp_path / "repo", setup)
    code, _ = finish(start_loop(root, setup, resume=False, crash_at="loop.before_commit:2"))
    assert code == -signal.SIGKILL
    assert read_history(root, setup, final=False).commit_turns == [1]
    code, err = finish(start_loop(root, setup, resume=True))
    assert code == 0, err
    assert check_on_disk(root, setup, final=True).commit_turns == [1, 2, 3, 4]


def test_temp_file_in_scratch_dir_is_removed_on_resume(tmp_path: Path) -> None:
    setup = Setup(git=False)
    root = make_project(tmp_path / "repo", setup)
    code, _ = finish(start_loop(root, setup, resume=False, crash_at="write.before_replace:8"))
    assert code == -signal.SIGKILL
    assert list(root.rglob(".gks-tmp-*"))
    code, err = finish(start_loop(root, setup, resume=True))
    assert code == 0, err
    assert not list(root.rglob(".gks-tmp-*"))


def test_half_created_worktree_is_discarded_and_recreated(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo", Setup())
    repo = GitRepo.discover(root)
    assert repo is not None
    manager = WorktreeManager(repo)
    created = manager.create(TASK_ID)
    # What a SIGKILL inside `git worktree add` leaves: git's "initializing" lock on the record.
    admin = Path(git(created.path, "rev-parse", "--absolute-git-dir").strip())
    (admin / "locked").write_text("initializing")
    (created.path / "src" / "work.txt").unlink()  # a partial checkout
    found, note = manager.find(TASK_ID)
    assert found is not None and "half-created" in note
    assert (found.path / "src" / "work.txt").is_file()
    assert not (admin / "locked").exists()


def test_splice_refuses_an_indented_frontmatter_mapping() -> None:
    text = "---\n id: TASK-X-1\n---\nbody\n"
    with pytest.raises(FrontmatterError, match="indented"):
        splice_state(text, StateUpdate(block_scalars={"current_turn": 1}))


def test_player_report_with_a_decision_key_is_a_player_report(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo", Setup(git=False))
    lifecycle = TurnLifecycle.open(root, TASK_ID)
    lifecycle.begin_turn()
    player = lifecycle.record_player({"files_modified": [], "implementation_notes": "x", "decision": "implemented"})
    assert player.turn == 1


def test_editor_save_landing_after_the_write_is_merged(tmp_path: Path) -> None:
    """A stale copy saved over the store's write is detected and the update re-applied."""
    root = make_project(tmp_path / "repo", Setup(git=False))
    path = next(root.glob("tasks/backlog/*.md"))
    task = TaskFile.load(path)
    # The editor has been saving this file: it changed once since the store read it ...
    path.write_text(path.read_text().replace("status: backlog", "status: backlog\nreviewer: ann"))
    stale = path.read_text().replace("status: backlog", "status: backlog\nowner: editor")
    update = StateUpdate(block_scalars={"current_turn": 1},
                         append_turns=[{"turn": 1, "decision": "feedback", "timestamp": "2026-01-01T00:00:00+00:00"}])
    import guardkit_state.taskfile.document as taskfile_module

    real_sleep = taskfile_module.time.sleep
    calls = {"saved": 0}

    def editor_saves_during_pause(seconds: float) -> None:
        # ... so the store checks its write once more after a pause; during that pause the editor
        # saves its stale copy (read before our rename) right over the store's write.
        if not calls["saved"] and "- turn: 1" in path.read_text():
            calls["saved"] += 1
            path.write_text(stale)
        real_sleep(seconds)

    taskfile_module.time.sleep = editor_saves_during_pause  # type: ignore[assignment]
    try:
        task.apply(update)
    finally:
        taskfile_module.time.sleep = real_sleep  # type: ignore[assignment]
    final = TaskFile.load(path)
    assert calls["saved"] == 1
    assert final.data.get("owner") == "editor" and final.data.get("reviewer") == "ann"
    assert [t.turn for t in final.state.turns] == [1]  # type: ignore[union-attr]
