"""The record path does each thing once: one check per report, one resume point under the lock, and
the promise fallback found from the turn states instead of every earlier report.

Spies wrap the real functions (they count calls and pass everything through); the files are real.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from guardkit_state.errors import GuardkitStateError
from guardkit_state.store import reads, schemas
from guardkit_state.store.jsonio import load_record
from guardkit_state.store.turn_files import TurnStore
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.taskfile.frontmatter import parse_frontmatter
from guardkit_state.taskfile.splice import StateUpdate
from guardkit_state.turns import view
from guardkit_state.turns.lifecycle import TurnLifecycle, record_turn
from guardkit_state.turns.promises import SOURCE_KEY, promises_source

from .helpers import coach_decision, make_task_repo, player_report

TASK = "TASK-AUTH-001"
PROMISED = [("AC-001", "complete"), ("AC-002", "partial")]


def _spy(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, calls: Counter[str]) -> None:
    real = getattr(module, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        calls[f"{name}:{args[0] if args else kwargs.get('kind')}"] += 1  # by record kind too
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counting)


def _record(root: Path, turn: int, *, promises: bool) -> Any:
    return record_turn(root, TASK, player_report(turn, promises=PROMISED if promises else None),
                       coach_decision(turn, "feedback", feedback=f"fix part {turn} of the refresh flow"),
                       max_turns=50)


def _turn_state(root: Path, turn: int) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / ".guardkit/autobuild" / TASK / f"turn_state_turn_{turn}.json")
                                      .read_text(encoding="utf-8"))
    return data


# ------------------------------------------------------------------------------------------- one check


def test_each_report_is_validated_once_and_written_unchecked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_task_repo(tmp_path)
    _record(tmp_path, 1, promises=True)
    calls: Counter[str] = Counter()
    for name in ("validate_with_warnings", "check_record"):
        _spy(monkeypatch, schemas, name, calls)
    rec = _record(tmp_path, 2, promises=True)
    assert rec.turn_state.turn_number == 2
    # Read and normalised: the two reports where they come in, and turn 1's state (the ledger and
    # the stall window, read once). Checked as written: only the turn state, built here.
    state_blocks = calls["validate_with_warnings:autobuild_state"]
    assert calls["validate_with_warnings"] - state_blocks == 2 + 1
    assert calls["check_record"] == 1
    # The task file's state block is checked by its schema once per reading: the one read, the write's.
    assert state_blocks == 2


def test_a_record_given_as_a_record_is_checked_before_anything_is_written(tmp_path: Path) -> None:
    from guardkit_state.errors import SchemaError
    from guardkit_state.model import CoachDecision, PlayerReport

    make_task_repo(tmp_path)
    bad = CoachDecision(task_id=TASK, turn=1, decision="maybe")  # type: ignore[arg-type]
    with pytest.raises(SchemaError):
        record_turn(tmp_path, TASK, PlayerReport(task_id=TASK, turn=1), bad)
    assert not (tmp_path / ".guardkit/autobuild" / TASK / "player_turn_1.json").exists()


def test_the_written_reports_read_back_as_the_store_reads_them(tmp_path: Path) -> None:
    make_task_repo(tmp_path)
    lifecycle = TurnLifecycle.open(tmp_path, TASK, max_turns=10)
    lifecycle.begin_turn()
    lifecycle.record_player(player_report(1, promises=PROMISED, extra_field={"kept": [1, 2]}))
    lifecycle.record_coach(coach_decision(1, "feedback", feedback="more"))
    lifecycle.complete_turn()
    fresh = TurnStore(lifecycle.store.directory, TASK)
    for kind in ("player_turn", "coach_turn", "turn_state"):
        assert lifecycle.store.read(kind, 1) == fresh.read(kind, 1)


# ------------------------------------------------------------------------------- one read of the task file


def _count_task_file_access(monkeypatch: pytest.MonkeyPatch, task_path: Path) -> Counter[str]:
    """Count the reads (whole file), byte comparisons and YAML parses of ``task_path`` from now on."""
    # The frontmatter reader imports the parser where it parses (a read answered from a cache parses
    # none), so the parser is counted at its home.
    from guardkit_state.yamltext import strict_yaml

    calls: Counter[str] = Counter()
    real_read, real_holds, real_parse = reads.read_bytes_capped, reads.holds, strict_yaml.parse_yaml

    def read(path: Path, **kwargs: Any) -> bytes:
        calls["read"] += Path(path) == task_path
        return real_read(path, **kwargs)

    def holds(path: Path, expected: bytes) -> bool:
        calls["compare"] += Path(path) == task_path
        return real_holds(path, expected)

    def parse(text: str, **kwargs: Any) -> Any:
        calls["parse"] += 1  # the only YAML a record parses is its task file's frontmatter
        return real_parse(text, **kwargs)

    monkeypatch.setattr(reads, "read_bytes_capped", read)
    monkeypatch.setattr(reads, "holds", holds)
    monkeypatch.setattr(strict_yaml, "parse_yaml", parse)
    return calls


def test_a_record_reads_the_task_file_once_and_parses_it_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task_path = make_task_repo(tmp_path)
    _record(tmp_path, 1, promises=True)
    # Saved by someone else since (an editor): bytes no cache of this process knows, as a new process reads them.
    task_path.write_text(task_path.read_text(encoding="utf-8") + "\nA note.\n", encoding="utf-8")
    calls = _count_task_file_access(monkeypatch, task_path)
    assert _record(tmp_path, 2, promises=True).turn_state.turn_number == 2
    # Read once (its view confirmed under the lock by the file's identity), parsed for that read
    # and for the new text's verification; compared just before the rename and just after it.
    assert calls == {"read": 1, "parse": 2, "compare": 2}, dict(calls)


def test_a_loop_turn_reads_no_task_file_and_parses_only_its_new_text(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    task_path = make_task_repo(tmp_path)
    lifecycle = TurnLifecycle.open(tmp_path, TASK, max_turns=10)
    for turn in (1, 2):
        if turn == 2:
            calls = _count_task_file_access(monkeypatch, task_path)
        lifecycle.begin_turn()
        lifecycle.record_player(player_report(turn))
        lifecycle.record_coach(coach_decision(turn, "feedback", feedback="more"))
        lifecycle.complete_turn()
    # The loop holds the text it wrote last: the next write starts from it, compared before and after its rename.
    assert calls == {"parse": 1, "compare": 2}, dict(calls)


# --------------------------------------------------------------------------------------- resume point


def test_the_resume_point_is_not_computed_for_a_report_of_the_next_turn(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    make_task_repo(tmp_path)
    _record(tmp_path, 1, promises=True)
    calls: Counter[str] = Counter()
    _spy(monkeypatch, view, "resume_point", calls)
    _record(tmp_path, 2, promises=True)
    assert calls["resume_point"] == 0


def test_a_dropped_turn_is_rolled_forward_with_one_resume_point_under_the_lock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task_path = make_task_repo(tmp_path)
    _record(tmp_path, 1, promises=True)
    before = task_path.read_text(encoding="utf-8")
    _record(tmp_path, 2, promises=True)
    task_path.write_text(before, encoding="utf-8")  # a stale editor save drops turn 2's entry
    (tmp_path / ".guardkit/autobuild" / TASK / "turn_state_turn_2.json").unlink()
    calls: Counter[str] = Counter()
    _spy(monkeypatch, view, "resume_point", calls)
    rec = _record(tmp_path, 3, promises=True)
    assert rec.turn_state.turn_number == 3
    assert [t.turn for t in TaskFile.load(task_path).state.turns] == [1, 2, 3]  # type: ignore[union-attr]
    assert calls["resume_point"] == 2  # once to check the reports before the lock, once under it


# ----------------------------------------------------------------------------------- promise fallback


def test_the_turn_state_says_where_the_promises_came_from_or_that_none_did(tmp_path: Path) -> None:
    make_task_repo(tmp_path)
    _record(tmp_path, 1, promises=False)
    _record(tmp_path, 2, promises=True)
    rec = _record(tmp_path, 3, promises=False)
    assert SOURCE_KEY in _turn_state(tmp_path, 1) and _turn_state(tmp_path, 1)[SOURCE_KEY] is None
    assert SOURCE_KEY not in _turn_state(tmp_path, 2)
    assert _turn_state(tmp_path, 3)[SOURCE_KEY] == "player_turn_2.json"
    assert rec.promises_recovered_from == 2


def test_the_fallback_reads_one_earlier_report_however_long_the_history(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    make_task_repo(tmp_path)
    _record(tmp_path, 1, promises=True)
    for turn in range(2, 13):
        _record(tmp_path, turn, promises=False)
    reads: Counter[int] = Counter()
    real = TurnStore.read

    def counting(store: TurnStore, kind: str, turn: int) -> Any:
        if kind == "player_turn":
            reads[turn] += 1
        return real(store, kind, turn)

    monkeypatch.setattr(TurnStore, "read", counting)
    rec = _record(tmp_path, 13, promises=False)
    assert rec.promises_recovered_from == 1
    assert dict(reads) == {1: 1}  # turn 12's state names the source; only that report is read


def test_a_report_changed_on_disk_is_seen_by_the_next_look(tmp_path: Path) -> None:
    make_task_repo(tmp_path)
    _record(tmp_path, 1, promises=True)
    store = TurnStore(tmp_path / ".guardkit/autobuild" / TASK, TASK)
    first = store.read("player_turn", 1)
    assert first is not None and first["completion_promises"]
    assert store.read("player_turn", 1) == first
    path = store.path("player_turn", 1)
    edited = json.loads(path.read_text(encoding="utf-8"))
    edited["completion_promises"] = []
    path.write_text(json.dumps(edited, indent=2), encoding="utf-8")  # in place, as an editor saves
    again = store.read("player_turn", 1)
    assert again is not None and again["completion_promises"] == []
    assert promises_source(store, 2) is None  # the fallback sees the edit too
    path.unlink()
    assert store.read("player_turn", 1) is None


@pytest.mark.parametrize("seed", range(12))
def test_the_fallback_finds_what_reading_every_report_finds(tmp_path: Path, seed: int) -> None:
    """Histories with and without promises, turn states without the key (another tool, an older
    version), reports deleted or broken by hand: the answer is the one a scan of every report gives."""
    rng = random.Random(seed)
    make_task_repo(tmp_path)
    turns = rng.randint(3, 9)
    for turn in range(1, turns + 1):
        _record(tmp_path, turn, promises=rng.random() < 0.3)
    directory = tmp_path / ".guardkit/autobuild" / TASK
    for turn in range(1, turns + 1):
        roll = rng.random()
        state = directory / f"turn_state_turn_{turn}.json"
        if roll < 0.2:
            data = json.loads(state.read_text(encoding="utf-8"))
            data.pop(SOURCE_KEY, None)
            state.write_text(json.dumps(data), encoding="utf-8")
        elif roll < 0.3:
            (directory / f"player_turn_{turn}.json").write_text("{broken", encoding="utf-8")
        elif roll < 0.4:
            (directory / f"player_turn_{turn}.json").unlink()
    for upto in range(2, turns + 2):
        scanned = _scan_every_report(TurnStore(directory, TASK), upto)
        assert promises_source(TurnStore(directory, TASK), upto) == scanned, upto


def _scan_every_report(store: TurnStore, turn: int) -> int | None:
    """The most recent earlier readable Player report with promises, read report by report."""
    for earlier in range(turn - 1, 0, -1):
        try:
            report = store.read_player(earlier)
        except GuardkitStateError:
            continue
        if report is not None and report.completion_promises:
            return earlier
    return None


# --------------------------------------------------------------------------------- located node trees


def test_successive_writes_locate_keys_as_a_fresh_read_does(tmp_path: Path) -> None:
    """Each write's verified reading (recorded turns left out, marks moved) locates the keys of the
    text it wrote exactly where a full parse of that text does."""
    path = tmp_path / "TASK-V-1.md"
    path.write_text("---\nid: TASK-V-1\nstatus: backlog\nautobuild_state:\n  current_turn: 1\n  turns:\n"
                    "  - turn: 1\n    decision: feedback\n---\nbody\n", encoding="utf-8")
    task = TaskFile.load(path)
    rng = random.Random(7)
    texts = ["plain", "two\nlines\n  indented", "quotes 'a' \"b\"", "colon: not a key # nor a comment", "- dash", ""]
    for turn in range(2, 40):
        update = StateUpdate(block_scalars={"current_turn": turn, "last_updated": f"2026-01-{turn % 28 + 1:02d}"},
                             criteria={"AC-001": rng.choice(["pending", "verified"])} if rng.random() < 0.5 else None,
                             append_turns=[{"turn": turn, "decision": "feedback", "feedback": rng.choice(texts)}],
                             top_level={"status": rng.choice(["in_progress", "blocked"])})
        task.apply(update)
        fresh = parse_frontmatter(path.read_text(encoding="utf-8"))
        assert fresh.data == task.data
        located = task._parsed
        assert located is not None and located.node is not None
        assert _key_marks(located.node) == _key_marks(fresh.node), turn


def _key_marks(root: Any) -> dict[str, tuple[int, int, int, int]]:
    """Where each top-level key and each key of a mapping under one sits: key line, key, value start and end."""
    out = {}
    for key, value in root.value:
        out[key.value] = (key.start_mark.line, key.start_mark.index, value.start_mark.index, value.end_mark.index)
        for child, child_value in getattr(value, "value", []) if value.id == "mapping" else []:
            out[f"{key.value}.{child.value}"] = (child.start_mark.line, child.start_mark.index,
                                                 child_value.start_mark.index, child_value.end_mark.index)
    return out


# ------------------------------------------------------------------- the store's memory of records
# orjson read an integer beyond 64 bits as a float: a cached copy differed from a fresh read.

BIG = 2**64  # one past the largest unsigned 64-bit integer
HUGE = 123456789012345678901234567890


def test_a_cached_read_is_the_files_record_for_integers_beyond_64_bits(tmp_path: Path) -> None:
    store = TurnStore(tmp_path / "TASK-1", "TASK-1")
    report = {"task_id": "TASK-1", "turn": 1, "tests_passed_count": BIG, "metrics": {"bytes": HUGE}}
    path = store.write("player_turn", 1, report, recorded_turns=0)
    on_disk = load_record("player_turn", path)
    assert on_disk["tests_passed_count"] == BIG and type(on_disk["tests_passed_count"]) is int

    first = store.read("player_turn", 1)  # served from what write() remembered
    assert first == on_disk
    assert type(first["tests_passed_count"]) is int and type(first["metrics"]["bytes"]) is int

    fresh = TurnStore(tmp_path / "TASK-1", "TASK-1")  # a new process: a miss, then a hit
    assert fresh.read("player_turn", 1) == on_disk
    again = fresh.read("player_turn", 1)
    assert again == on_disk and type(again["metrics"]["bytes"]) is int
