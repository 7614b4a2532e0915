"""Recording a turn, as the file system sees it: what is listed as written, the crash hook, modes,
owners and ACLs of new files, and turn states handed out as copies the caller may change."""

from __future__ import annotations

import json
import os
import signal
import stat
import struct
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from guardkit_state.agents.protocol import CallableAgent, TurnRequest
from guardkit_state.config import default_config
from guardkit_state.loop.run import LoopOptions, run_task_loop
from guardkit_state.store import fsio
from guardkit_state.turns.lifecycle import TurnLifecycle, record_turn

from .conftest import run_git
from .helpers import coach_decision, make_task_repo, player_report

TASK = "TASK-AUTH-001"
STORE = Path(".guardkit/autobuild") / TASK


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask() -> Iterator[Callable[[int], None]]:
    """Set the process umask for a test (several times if it likes); the old one comes back after."""
    def set_umask(value: int) -> None:
        os.umask(value)

    old = os.umask(0o022)
    try:
        yield set_umask
    finally:
        os.umask(old)


# --------------------------------------------------------------------------- TurnRecord.written


def test_written_lists_only_the_reports_still_on_disk(git_repo: Path) -> None:
    """The Coach runs between ``record_player`` and ``complete_turn`` (minutes, in a loop)
    and is handed the Player report's path; one that moves it away leaves a turn whose record still
    lists the report as written unless ``_written`` looks for the file; ``written`` is what the CLI's
    JSON says the turn wrote and what an exact-paths commit is asked to take."""
    make_task_repo(git_repo)
    run_git(git_repo, "add", "tasks")
    run_git(git_repo, "commit", "-q", "-m", "add task")

    def player(request: TurnRequest) -> dict[str, Any]:
        return {"summary": "work", "tests_run": True, "tests_passed": True}

    def archiving_coach(request: TurnRequest) -> dict[str, Any]:
        assert request.player_report_file is not None
        # A Coach that files away the report it graded (any agent may touch the checkout).
        request.player_report_file.rename(request.player_report_file.with_name("graded.json"))
        return {"decision": "approve", "rationale": "ok", "issues": [],
                "criteria_verification": [{"criterion_id": f"AC-00{i}", "result": "verified", "notes": ""}
                                          for i in (1, 2, 3)]}

    result = run_task_loop(git_repo, TASK, CallableAgent(player), CallableAgent(archiving_coach),
                           LoopOptions(use_worktree=False))
    # The Coach is read-only: moving the loop's record makes its turn an error naming the file.
    first = result.turns[0].turn_state
    assert first.coach_decision == "error" and first.failed_role == "coach", first
    assert "player_turn_1.json" in (first.error or ""), first.error
    for record in result.turns:
        assert [p.name for p in record.written if not p.exists()] == []


# --------------------------------------------------------------------------- the crash hook


def _python(script: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=120, check=False)


def test_a_crash_variable_removed_after_import_no_longer_arms_the_hook(tmp_path: Path) -> None:
    """tests/conftest.py removes ``GUARDKIT_STATE_CRASH_AT`` (monkeypatch.delenv) before
    every test so that a variable left exported in the shell cannot kill in-process tests; but pytest
    imports the package while collecting, before any fixture runs: a hook that kept what it saw on
    import would stay armed. This child does the same in that order: import, remove the variable,
    write."""
    target = tmp_path / "file.json"
    run = _python("""
        import os, sys
        from pathlib import Path
        from guardkit_state.store import fsio  # imported first, as collection imports it
        del os.environ["GUARDKIT_STATE_CRASH_AT"]  # what the autouse fixture then does
        fsio.atomic_write_bytes(Path(sys.argv[1]), b"{}")
    """, str(target), env={"GUARDKIT_STATE_CRASH_AT": "write.before_replace"})
    assert run.returncode == 0, f"killed by signal {-run.returncode}" if run.returncode < 0 else run.stderr
    assert target.read_bytes() == b"{}"


def test_a_process_started_without_the_crash_variable_never_looks_for_it(tmp_path: Path) -> None:
    """The hook is armed only in a process started with the variable (as the harness starts its
    loops): a process started without it does not look it up at every point of every write."""
    target = tmp_path / "file.json"
    run = _python("""
        import os, sys
        from pathlib import Path
        from guardkit_state.store import fsio
        os.environ["GUARDKIT_STATE_CRASH_AT"] = "write.before_replace"  # set after the start: not armed
        fsio.atomic_write_bytes(Path(sys.argv[1]), b"{}")
    """, str(target), env={})
    assert run.returncode == 0, f"killed by signal {-run.returncode}" if run.returncode < 0 else run.stderr
    assert target.read_bytes() == b"{}"


def test_a_process_started_with_the_crash_variable_dies_at_the_named_step(tmp_path: Path) -> None:
    """What the reliability harness relies on: a process started with the variable is killed
    at the N-th time it reaches the step, and the file it was replacing is left as it was."""
    target = tmp_path / "file.json"
    target.write_bytes(b"old")
    run = _python("""
        import sys
        from pathlib import Path
        from guardkit_state.store import fsio
        for text in (b"first", b"second"):
            fsio.atomic_write_bytes(Path(sys.argv[1]), text)
    """, str(target), env={"GUARDKIT_STATE_CRASH_AT": "write.before_replace:2"})
    assert run.returncode == -signal.SIGKILL, run.stderr
    assert target.read_bytes() == b"first"


# --------------------------------------------------------------------------- file modes


def _set_default_acl(folder: Path) -> None:
    """A default POSIX ACL ``u::rwx g::rwx o::---`` on ``folder`` (the xattr's binary form, so no
    setfacl is needed); skips where the file system or platform has none."""
    def entry(tag: int, perm: int) -> bytes:
        return struct.pack("<HHI", tag, perm, 0xFFFFFFFF)

    user_obj, group_obj, other = 0x01, 0x04, 0x20
    acl = struct.pack("<I", 2) + entry(user_obj, 7) + entry(group_obj, 7) + entry(other, 0)
    try:
        os.setxattr(folder, "system.posix_acl_default", acl)
    except (AttributeError, OSError) as exc:
        pytest.skip(f"no default POSIX ACLs here: {exc}")


def test_new_turn_files_in_a_folder_with_a_default_acl_stay_private(tmp_path: Path,
                                                                      umask: Callable[[int], None]) -> None:
    """A default ACL denying others replaces the umask for
    files created below it; a new file is now made like any program's there. Before, a 0644 chmod
    after creation made every turn file world-readable in a folder set up to keep them private."""
    umask(0o022)
    _set_default_acl(tmp_path)
    make_task_repo(tmp_path)
    record = record_turn(tmp_path, TASK, player_report(1), coach_decision(1, "feedback", feedback="more"))
    reference = tmp_path / STORE / "made-by-another-program"
    os.close(os.open(reference, os.O_CREAT | os.O_WRONLY, 0o644))
    turn_files = [p for p in record.written if p.suffix == ".json"]
    assert len(turn_files) == 3
    assert {p.name: _mode(p) for p in turn_files} == {p.name: _mode(reference) for p in turn_files}
    assert all(_mode(p) & 0o007 == 0 for p in turn_files)


def test_recording_a_turn_never_changes_the_process_umask(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The umask is process-wide: reading it with ``os.umask`` means setting it, and until it
    is set back another thread's new file (a forked task loop's parent, a log writer) is created
    under whatever was set. Nothing a turn writes may call it; the kernel applies it instead."""
    calls: list[int] = []
    real_umask = os.umask

    def spying_umask(mask: int) -> int:
        calls.append(mask)
        return real_umask(mask)

    make_task_repo(tmp_path)
    monkeypatch.setattr(os, "umask", spying_umask)
    record_turn(tmp_path, TASK, player_report(1), coach_decision(1, "feedback", feedback="more"))
    record_turn(tmp_path, TASK, player_report(2), coach_decision(2, "approve"))
    assert calls == []


def test_relative_paths_follow_the_umask_of_each_write_and_keep_an_old_mode(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask: Callable[[int], None]) -> None:
    """Writes now name files by string: a bare relative name (an empty folder part) must land
    in the working directory, the umask in force at each write applies to new files (it may change
    between writes), and a replaced file keeps its mode whatever the umask is then."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    umask(0o077)
    assert fsio.atomic_write_bytes("private.json", b"1")  # type: ignore[arg-type]  # str paths are accepted
    umask(0o027)
    assert fsio.atomic_write_bytes("sub/shared.json", b"2")  # type: ignore[arg-type]
    assert fsio.atomic_write_bytes("private.json", b"3")  # type: ignore[arg-type]
    assert (_mode(tmp_path / "private.json"), _mode(tmp_path / "sub/shared.json")) == (0o600, 0o640)
    assert (tmp_path / "private.json").read_bytes() == b"3"
    leftovers = [p.name for p in tmp_path.rglob(f"{fsio.TEMP_PREFIX}*")]
    assert leftovers == []


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file another group needs root")
def test_a_symlinked_task_file_keeps_its_targets_mode_and_group_in_a_setgid_folder(
        tmp_path: Path, umask: Callable[[int], None]) -> None:
    """An existing file still gets its own mode back (only new files lost the chmod): here a
    0600 target of a symlinked task file, in a set-group-id folder whose group it does not share.
    The turn files new in that folder take the folder's group and 0644 less the umask, no set-id bit."""
    umask(0o022)
    make_task_repo(tmp_path)
    link = next((tmp_path / "tasks/backlog").glob("*.md"))
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chown(shared, -1, 4343)
    shared.chmod(0o2775)
    target = shared / link.name
    link.rename(target)
    link.symlink_to(os.path.relpath(target, link.parent))
    os.chown(target, 4242, 4444)
    target.chmod(0o600)
    store = tmp_path / STORE
    store.mkdir(parents=True)
    os.chown(store, -1, 4343)
    store.chmod(0o2775)
    record = record_turn(tmp_path, TASK, player_report(1), coach_decision(1, "feedback", feedback="more"))
    assert link.is_symlink()
    info = target.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (4242, 4444, 0o600)
    for path in (p for p in record.written if p.suffix == ".json"):
        info = path.stat()
        assert (info.st_gid, stat.S_IMODE(info.st_mode)) == (4343, 0o644), path.name


# --------------------------------------------------------------------------- turn states handed out


def test_turn_states_handed_out_share_nothing_with_the_store_or_each_other(tmp_path: Path) -> None:
    """Turn states handed out (gate results, nested extras, provenance) must be copies, and so must
    what a record of a completed turn holds, or a caller changing them would change the next turn's
    ledger in the same process."""
    make_task_repo(tmp_path)
    lifecycle = TurnLifecycle.open(tmp_path, TASK)
    profile = default_config().gate_profile("feature", 5)
    with lifecycle.locked():
        lifecycle.begin_turn()
        lifecycle.record_player(player_report(1))
        # "pass" is a synonym: the turn state keeps its reading (a list of dicts); the issue is kept too.
        lifecycle.record_coach(coach_decision(1, "feedback", feedback="more",
                                              verdicts={"AC-001": "verified", "AC-002": "pass"}))
        record = lifecycle.complete_turn(gate_profile=profile)
    on_disk = json.loads((tmp_path / STORE / "turn_state_turn_1.json").read_text())
    assert on_disk["gate_results"] and on_disk["verdict_words"] and on_disk["criteria_provenance"]

    def tamper(state: Any) -> None:
        state.gate_results[0]["passed"] = "tampered"
        state.verdict_words[0]["read_as"] = "tampered"
        state.coach_issues[0]["description"] = "tampered"
        for entry in state.criteria_provenance.values():
            entry["status"] = "tampered"
        state.acceptance_criteria_status["AC-001"] = "tampered"

    tamper(record.turn_state)
    first = lifecycle.previous_turn_state()
    assert first is not None and first.to_dict() == on_disk
    tamper(first)
    again = lifecycle.previous_turn_state()
    assert again is not None and again.to_dict() == on_disk
    assert lifecycle.ledger().statuses() == TurnLifecycle.open(tmp_path, TASK).ledger().statuses()
    assert lifecycle.ledger().statuses()["AC-001"] == "verified"


def test_a_turn_state_edited_between_turns_is_read_again_by_the_same_lifecycle(tmp_path: Path) -> None:
    """The record kept in memory is keyed on the file's identity: an edit (an editor's atomic
    save, a new inode; or a rewrite in place of another size) is what the next turn sees."""
    make_task_repo(tmp_path)
    lifecycle = TurnLifecycle.open(tmp_path, TASK)
    with lifecycle.locked():
        lifecycle.begin_turn()
        lifecycle.record_player(player_report(1))
        lifecycle.record_coach(coach_decision(1, "feedback", feedback="first feedback"))
        lifecycle.complete_turn()
    path = tmp_path / STORE / "turn_state_turn_1.json"
    first = lifecycle.previous_turn_state()
    assert first is not None and first.coach_feedback == "first feedback"

    data = json.loads(path.read_text())
    data["coach_feedback"] = "edited by an editor"
    scratch = path.with_name("editor-save.tmp")
    scratch.write_text(json.dumps(data))
    os.replace(scratch, path)  # a new inode
    edited = lifecycle.previous_turn_state()
    assert edited is not None and edited.coach_feedback == "edited by an editor"

    data["coach_feedback"] = "edited in place, longer than before"
    path.write_text(json.dumps(data))  # same inode, another size
    in_place = lifecycle.previous_turn_state()
    assert in_place is not None and in_place.coach_feedback == "edited in place, longer than before"
    assert "edited in place, longer than before" in lifecycle.context_for()
