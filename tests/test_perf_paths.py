"""Regression tests for the fast paths added by the benchmarks (issue 8).

* ``TurnStore`` serves a validated record from memory only while its file is unchanged.
* jsonschema-rs is trusted only to say "valid", and agrees with jsonschema on the corpus and on
  every malformed variant of ``tests/test_schemas.py``.
* ``status`` sees a file changed at the same size within the same mtime.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from guardkit_state.errors import SchemaError
from guardkit_state.inspect.status import repo_status
from guardkit_state.store.schemas import fast_validator, is_valid_fast, problems_of, validate_record, validator
from guardkit_state.store.turn_files import TurnStore
from guardkit_state.turns.lifecycle import TurnLifecycle

from .helpers import coach_decision, make_task_repo, player_report
from .test_schemas import BUILDERS, MALFORMED, _corpus_turn_files, _set

TASK = "TASK-AUTH-001"


def _record_turns(root: Path, count: int) -> TurnLifecycle:
    make_task_repo(root)
    lifecycle = TurnLifecycle.open(root, TASK, max_turns=50)
    for _ in range(count):
        active = lifecycle.begin_turn()
        lifecycle.record_player(player_report(active.number))
        lifecycle.record_coach(coach_decision(active.number, "feedback", feedback=f"fix {'abc'[active.number % 3]}"))
        lifecycle.complete_turn()
    return lifecycle


# ------------------------------------------------------------------------------------- TurnStore cache


def test_store_read_after_write_equals_a_fresh_stores_read(tmp_path: Path) -> None:
    lifecycle = _record_turns(tmp_path, 2)
    fresh = TurnStore(lifecycle.store.directory, TASK)
    for kind in ("player_turn", "coach_turn", "turn_state"):
        for turn in (1, 2):
            assert lifecycle.store.read(kind, turn) == fresh.read(kind, turn)


def test_store_cache_returns_copies(tmp_path: Path) -> None:
    store = _record_turns(tmp_path, 1).store
    first = store.read("turn_state", 1)
    assert first is not None
    first["coach_feedback"] = "mutated by a caller"
    again = store.read("turn_state", 1)
    assert again is not None and again["coach_feedback"] != "mutated by a caller"


def test_store_cache_sees_a_file_changed_behind_its_back(tmp_path: Path) -> None:
    store = _record_turns(tmp_path, 1).store
    path = store.path("turn_state", 1)
    data = store.read("turn_state", 1)
    assert data is not None
    stat = path.stat()
    # Same size, same mtime, rewritten in place (same inode): only ctime tells.
    changed = path.read_text(encoding="utf-8").replace(data["task_id"], data["task_id"][:-1] + "9")
    assert len(changed) == len(path.read_text(encoding="utf-8"))
    path.write_text(changed, encoding="utf-8")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    again = store.read("turn_state", 1)
    assert again is not None and again["task_id"] == data["task_id"][:-1] + "9"


def test_store_cache_sees_an_invalid_replacement(tmp_path: Path) -> None:
    store = _record_turns(tmp_path, 1).store
    assert store.read("coach_turn", 1) is not None
    path = store.path("coach_turn", 1)
    bad = json.loads(path.read_text(encoding="utf-8"))
    bad["decision"] = "maybe"
    path.write_text(json.dumps(bad), encoding="utf-8")
    with pytest.raises(SchemaError):
        store.read("coach_turn", 1)


def test_store_read_of_missing_file_is_none(tmp_path: Path) -> None:
    store = _record_turns(tmp_path, 1).store
    assert store.read("player_turn", 7) is None
    store.path("player_turn", 1).unlink()
    assert store.read("player_turn", 1) is None


# ------------------------------------------------------------------------------------ jsonschema-rs


def test_fast_validator_is_installed() -> None:
    # A declared dependency: without it every turn pays ~1 ms per record.
    assert fast_validator("player_turn") is not None


@pytest.mark.parametrize(("kind", "parts", "value"), [(k, p, v) for k, p, v, _, _ in MALFORMED])
def test_fast_and_full_validators_agree_on_malformed_variants(kind: str, parts: tuple[Any, ...], value: Any) -> None:
    data = _set(BUILDERS[kind](), parts, value)
    full_ok = not list(validator(kind).iter_errors(data))
    assert full_ok is False
    assert fast_validator(kind).is_valid(data) is full_ok
    assert problems_of(kind, data)  # the verdict callers see is jsonschema's


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_fast_and_full_validators_agree_on_fixtures(kind: str) -> None:
    data = BUILDERS[kind]()
    assert fast_validator(kind).is_valid(data) is True
    assert not list(validator(kind).iter_errors(data))


@pytest.mark.corpus
def test_fast_and_full_validators_agree_on_the_corpus(corpus_dir: Path) -> None:
    from guardkit_state.store.jsonio import load_json
    from guardkit_state.store.schemas import normalise

    files = _corpus_turn_files(corpus_dir)
    assert len(files) >= 30
    for kind, path in files:
        for data in (load_json(path), normalise(kind, load_json(path))[0]):
            full_ok = not list(validator(kind).iter_errors(data))
            assert fast_validator(kind).is_valid(data) is full_ok, path


@pytest.mark.parametrize("value", [(1, 2), {1, 2}, {"files_modified": ("a.py",)}])
def test_non_json_values_never_take_the_fast_path(value: Any) -> None:
    # jsonschema-rs reads a tuple as an array; jsonschema does not: only plain JSON is fast-checked.
    data = player_report(1)
    data["files_modified"] = value
    assert is_valid_fast("player_turn", data) is False
    with pytest.raises(SchemaError):
        validate_record("player_turn", data)


@pytest.mark.parametrize("where", ["summary", "task_id"])
def test_lone_surrogate_gets_the_same_verdict(where: str) -> None:
    # jsonschema-rs may refuse to convert such a string: the full validator decides then.
    data = player_report(1)
    data[where] = "bad \ud800 text"
    assert validate_record("player_turn", data)[where].startswith("bad")


# ------------------------------------------------------------------------------------------- status


def test_status_cache_sees_same_size_same_mtime_change(tmp_path: Path) -> None:
    _record_turns(tmp_path, 1)
    [summary] = repo_status(tmp_path)
    assert summary.turns == 1 and summary.status == "in_progress"
    path = tmp_path / "tasks" / "backlog" / "TASK-AUTH-001-jwt-auth.md"
    stat = path.stat()
    text = path.read_text(encoding="utf-8")
    changed = text.replace("status: in_progress", "status: in_review__", 1)
    assert len(changed) == len(text)
    path.write_text(changed, encoding="utf-8")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    [again] = repo_status(tmp_path)
    assert again.status == "in_review__"


def test_status_lists_worktree_copy_with_checkout_relative_path(tmp_path: Path) -> None:
    _record_turns(tmp_path, 1)
    tree = tmp_path / ".guardkit" / "worktrees" / TASK
    _record_turns(tree, 2)
    [summary] = repo_status(tmp_path)
    assert summary.in_worktree is True and summary.turns == 2
    assert summary.path == "tasks/backlog/TASK-AUTH-001-jwt-auth.md"
