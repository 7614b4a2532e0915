"""The file-scan search, records and groups: everything that works without the graphiti extra."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from guardkit_state.cli.app import run
from guardkit_state.errors import InputError
from guardkit_state.index import FileIndex, search
from guardkit_state.index.after_turn import index_turn_best_effort
from guardkit_state.index.identity import sanitize_group_part
from guardkit_state.index.records import project_group_id, resolve_group, stable_uuid
from guardkit_state.index.sources import load_project_records
from guardkit_state.index.turn_records import turn_record, turn_state_files
from tests.index_helpers import keys, seed001_project, write_turn

T = "TURN-FEAT-AUTH-TASK-AUTH-001-T"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return seed001_project(tmp_path / "my-app.v2")


def test_turn_query_returns_exactly_that_tasks_turns(project: Path) -> None:
    hits = FileIndex(project).search("turn TASK-AUTH-001", groups=["turn_states"])
    assert keys(hits) == [f"{T}1", f"{T}2", f"{T}3"]  # not TASK-AUTH-0010


def test_coach_decision_query_returns_rejected_turns(project: Path) -> None:
    hits = FileIndex(project).search("coach_decision rejected", groups=["turn_states"])
    assert sorted(keys(hits)) == [f"{T}2", "TURN-FEAT-AUTH-TASK-AUTH-0010-T1"]


def test_blockers_query_ranks_the_blocked_turn_first(project: Path) -> None:
    hits = FileIndex(project).search("blockers TASK-CACHE-002", groups=["turn_states"])
    assert keys(hits)[0] == "TURN-FEAT-CACHE-TASK-CACHE-002-T1"
    assert all(h.task_id == "TASK-CACHE-002" for h in hits)


def test_search_falls_back_to_files_and_says_why(project: Path) -> None:
    result = search(project, "turn TASK-AUTH-001")
    assert result.backend == "files"
    assert result.note and "scanned the files" in result.note
    assert keys(result.hits)[:3] == [f"{T}1", f"{T}2", f"{T}3"]


def test_worktree_copy_wins_over_main_checkout(tmp_path: Path) -> None:
    write_turn(tmp_path, "FEAT-X", "TASK-X-001", 1, "feedback", player_summary="old main copy")
    newer = write_turn(tmp_path, "FEAT-X", "TASK-X-001", 1, "approved", worktree=True,
                       player_summary="worktree copy")
    assert newer in turn_state_files(tmp_path)
    (record,) = load_project_records(tmp_path).records
    assert record.fields["coach_decision"] == "approved"


def test_unreadable_turn_file_is_reported_not_fatal(tmp_path: Path) -> None:
    write_turn(tmp_path, "FEAT-X", "TASK-X-001", 1, "feedback")
    bad = tmp_path / ".guardkit" / "autobuild" / "TASK-X-001" / "turn_state_turn_2.json"
    bad.write_text("{not json")
    loaded = load_project_records(tmp_path)
    assert [r.turn_number for r in loaded.records] == [1]
    assert loaded.problems[0].path == bad and loaded.problems[0].line == 1


def test_group_ids_use_only_word_characters(project: Path) -> None:
    group = project_group_id(project)
    assert re.fullmatch(r"my_app_v2_[0-9a-f]{10}__turn_states", group)  # the folder, then the checkout's id
    assert sanitize_group_part("--") == "project"
    assert resolve_group("turn_states", project) == group
    with pytest.raises(InputError):
        resolve_group("bad-group", project)


def test_ids_are_stable_and_task_scoped(project: Path) -> None:
    data = json.loads((project / ".guardkit/autobuild/TASK-AUTH-001/turn_state_turn_2.json").read_text())
    data["id"] = "TURN-FEAT-AUTH-2"  # GuardKit's colliding id stays in the content only
    one, two = turn_record(data, "g"), turn_record(dict(data), "g")
    assert one.key == f"{T}2" and one.uuid == two.uuid == stable_uuid("g", f"{T}2")
    assert one.owned_uuids() == two.owned_uuids() and one.content == two.content
    assert turn_record(data, "other").uuid != one.uuid


def test_cli_search_files_backend_json(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["search", "coach_decision rejected", "--repo", str(project), "--backend", "files", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["backend"] == "files"
    assert {h["key"] for h in out["hits"]} == {f"{T}2", "TURN-FEAT-AUTH-TASK-AUTH-0010-T1"}


def test_cli_search_text_names_the_backend(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["search", "turn TASK-AUTH-001", "--repo", str(project), "--backend", "files"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "Found 3 results for 'turn TASK-AUTH-001' (backend: files):"


def test_cli_rejects_bad_group(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["search", "x", "--repo", str(project), "--group", "a-b", "--backend", "files"]) == 2
    assert "invalid group" in capsys.readouterr().err


def test_hook_skips_without_an_index(project: Path) -> None:
    path = project / ".guardkit/autobuild/TASK-AUTH-001/turn_state_turn_1.json"
    result = index_turn_best_effort(project, path, budget_seconds=1.0)
    assert result.startswith("skipped:")
    assert not (project / ".guardkit" / "index").exists()


def test_the_loop_offers_each_recorded_turn_to_the_index_only_through_its_callers_sink(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Guards ``with_indexing``: the caller's sink sees each event first, then each recorded turn (and
    only those) is offered to the index; without the wrapper the loop offers nothing."""
    from guardkit_state.agents.protocol import CallableAgent
    from guardkit_state.index.after_turn import with_indexing
    from guardkit_state.loop.events import LoopEvent, TurnRecorded
    from guardkit_state.loop.run import LoopOptions, run_task_loop
    from tests.helpers import make_task_repo
    from tests.test_loop import coach_verifying, scripted_player

    def offers() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.getMessage().startswith("index turn")]

    caplog.set_level(logging.INFO, logger="guardkit_state")
    plain, wrapped = tmp_path / "plain", tmp_path / "wrapped"
    make_task_repo(plain), make_task_repo(wrapped)
    options = LoopOptions(use_worktree=False)
    run_task_loop(plain, "TASK-AUTH-001", CallableAgent(scripted_player), coach_verifying(2), options)
    assert offers() == []
    seen: list[LoopEvent] = []

    def sink(event: LoopEvent) -> None:
        seen.append(event)
        if isinstance(event, TurnRecorded):
            assert len(offers()) == event.turn - 1  # the caller's sink first, then the offer

    run_task_loop(wrapped, "TASK-AUTH-001", CallableAgent(scripted_player), coach_verifying(2), options,
                  on_event=with_indexing(sink, wrapped))
    recorded = [e.turn for e in seen if isinstance(e, TurnRecorded)]
    assert recorded == [1, 2]
    assert [m.split(":")[0] for m in offers()] == ["index turn 1 of TASK-AUTH-001", "index turn 2 of TASK-AUTH-001"]
    assert all("skipped:" in m for m in offers())  # no index configured: none is created
    assert not (wrapped / ".guardkit" / "index").exists()


def test_feature_build_offers_every_turn_of_a_feature_and_of_a_task_to_the_index(tmp_path: Path) -> None:
    """Guards the callers passing ``with_indexing``: the CLI's task loop and the feature runner's task
    processes each offer every recorded turn to the index (in the loop's log; skipped: none configured)."""
    from guardkit_state.store.layout import log_file
    from tests.feature_support import TaskSpec, cli_argv, make_feature, run_cli

    def offers(root: Path) -> list[tuple[str, str]]:
        return sorted(re.findall(r"index turn (\d+) of (TASK-FB-\d+): skipped", log_file(root).read_text()))

    feature = make_feature(tmp_path / "feature", [TaskSpec("TASK-FB-001", approve_at=2), TaskSpec("TASK-FB-002")])
    assert run_cli(feature).returncode == 0
    assert offers(feature.root) == [("1", "TASK-FB-001"), ("1", "TASK-FB-002"), ("2", "TASK-FB-001")]
    task = make_feature(tmp_path / "task", [TaskSpec("TASK-FB-001", approve_at=2)])
    argv = cli_argv(task)
    argv[argv.index("FEAT-FB")] = "TASK-FB-001"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARDKIT_", "FEATURE_"))} | task.env()
    done = subprocess.run(argv, cwd=task.root, capture_output=True, text=True, timeout=120, check=False, env=env)
    assert done.returncode == 0, done.stderr
    assert offers(task.root) == [("1", "TASK-FB-001"), ("2", "TASK-FB-001")]
    assert not (task.root / ".guardkit" / "index").exists()


def test_help_does_not_import_graphiti() -> None:
    code = ("import sys\nfrom guardkit_state.cli.app import build_parser\nbuild_parser()\n"
            "print('graphiti_core' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


@pytest.mark.corpus
def test_real_guardkit_turn_states_are_searchable(corpus_dir: Path, tmp_path: Path) -> None:
    from .conftest import writable_copy

    target = tmp_path / "repo" / ".guardkit" / "autobuild"
    for task in ("TASK-HARV-002", "TASK-HARV-004"):
        writable_copy(corpus_dir / "autobuild" / task, target / task)
    loaded = load_project_records(tmp_path / "repo")
    assert len(loaded.records) == 10, [str(p) for p in loaded.problems]
    # GuardKit's ids collide across tasks (TURN-FEAT-HARV-1); ours are task-scoped.
    assert len({r.key for r in loaded.records}) == 10
    hits = FileIndex(tmp_path / "repo").search("turn TASK-HARV-004", groups=["turn_states"])
    assert {h.task_id for h in hits} == {"TASK-HARV-004"} and len(hits) == 5


def test_embedder_mismatch_error_lives_in_errors_under_its_old_names_too() -> None:
    """Guards the move into ``errors.py``: every old import path names the one class, still a usage error."""
    from guardkit_state import errors
    from guardkit_state.index import EmbedderMismatchError as from_index
    from guardkit_state.index.embedder_spec import EmbedderMismatchError as old

    assert from_index is old is errors.EmbedderMismatchError
    assert issubclass(old, errors.InputError) and issubclass(old, errors.IndexBackendError)


def test_a_turn_file_numbered_in_other_digits_is_no_turn(tmp_path: Path) -> None:
    # `\d` is any Unicode digit and int("٣") is 3: a file named turn_state_turn_٣.json (an agent can
    # write one into its worktree) took turn 3's place, hiding the real one from search (and from
    # the turn log's reading on disk).
    real = write_turn(tmp_path, "FEAT-X", "TASK-X-001", 3, "approved", player_summary="the real turn 3")
    fake = real.with_name("turn_state_turn_\u0663.json")
    fake.write_text(real.read_text().replace("the real turn 3", "an impostor"))
    assert turn_state_files(tmp_path) == [real]
    (record,) = load_project_records(tmp_path).records
    assert "the real turn 3" in record.search_text and "impostor" not in record.search_text
