"""Edges of the report and task-file boundary: values JSON cannot store, odd turn numbers, odd
shapes, retried `record`s, editors saving in place, and stall normalisation of huge feedback.

Every CLI run is the real ``guardkit-state`` executable in a subprocess, on real files; loops run
real scripted agents (small Python scripts written by each test).
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from guardkit_state.errors import FileBusyError, InputError, ParseError
from guardkit_state.loop.run import LoopOptions
from guardkit_state.store import reads
from guardkit_state.store.turn_files import TurnStore
from guardkit_state.taskfile.document import TaskFile, read_task_settled
from guardkit_state.turns import stall

from ..e2e_support import GUARDKIT_STATE, clean_env
from .harness import TASK_ID, TASK_REL, TASK_TEXT, Setup, agent_command, make_project

STORE = Path(".guardkit/autobuild") / TASK_ID
WAIT = 60.0


# -- helpers -------------------------------------------------------------------------------------
def _cli(root: Path, *args: str, timeout: float = WAIT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(GUARDKIT_STATE), *args, "--repo", str(root)], cwd=root, env=clean_env(NO_COLOR="1"),
                          capture_output=True, text=True, encoding="utf-8", timeout=timeout, check=False)


def _snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (the git directory included: the task's lock lives there)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _without_logs(snapshot: dict[str, bytes]) -> dict[str, bytes]:
    return {k: v for k, v in snapshot.items() if not k.startswith(".guardkit/logs")}


def _one_error(stderr: str, *fragments: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr
    assert "Traceback" not in stderr and "error: unexpected" not in stderr, stderr
    for fragment in fragments:
        assert fragment in errors[0], (fragment, stderr)
    return errors[0]


def _player(turn: int | None = None, **extra: object) -> dict[str, object]:
    report: dict[str, object] = {"files_modified": ["src/work.txt"], "implementation_notes": "Did the work.",
                                 "tests_run": True, "tests_passed": True}
    if turn is not None:
        report["turn"] = turn
    report.update(extra)
    return report


def _coach(turn: int | None = None, **extra: object) -> dict[str, object]:
    report: dict[str, object] = {"decision": "feedback", "rationale": "AC-003 still fails",
                                 "feedback": "AC-003 still fails"}
    if turn is not None:
        report["turn"] = turn
    report.update(extra)
    return report


def _write_reports(where: Path, player: dict[str, object] | str, coach: dict[str, object] | str) -> tuple[Path, Path]:
    where.mkdir(parents=True, exist_ok=True)
    p, c = where / "player.json", where / "coach.json"
    p.write_text(player if isinstance(player, str) else json.dumps(player), encoding="utf-8")
    c.write_text(coach if isinstance(coach, str) else json.dumps(coach), encoding="utf-8")
    return p, c


def _record(root: Path, player: Path, coach: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return _cli(root, "record", TASK_ID, "--player", str(player), "--coach", str(coach), *extra)


def _listed_turns(path: Path) -> list[object]:
    """The raw ``turn:`` values of the task file's entries, as the YAML text holds them."""
    return [t.get("turn") for t in TaskFile.load(path).data["autobuild_state"]["turns"]]


def _with_state(block: str) -> str:
    return TASK_TEXT.replace("tags: [reliability, crash]\n", "tags: [reliability, crash]\n" + block)


def _agent(tmp_path: Path, name: str, body: str) -> str:
    """A scripted agent: ``body`` runs with ``turn``, ``task_id``, ``out`` (the report path) and ``json``."""
    script = tmp_path / f"{name}.py"
    script.write_text("import json, os, sys\nturn = int(os.environ['GUARDKIT_TURN'])\n"
                      "task_id = os.environ['GUARDKIT_TASK_ID']\nout = os.environ['GUARDKIT_REPORT_FILE']\n"
                      + textwrap.dedent(body), encoding="utf-8")
    return f"{sys.executable} -S {script}"


# -- values JSON cannot store --------------------------------------------------------------------
SURROGATE_PLAYER = '{"files_modified": [], "implementation_notes": "broken \\ud800 text"}'
OVERFLOW_COACH = '{"decision": "feedback", "rationale": "r", "validation_results": {"coverage": 1e400}}'


@pytest.mark.parametrize(("player", "coach", "bad", "pointer"), [
    (SURROGATE_PLAYER, None, "player.json", "$.implementation_notes"),
    (None, OVERFLOW_COACH, "coach.json", "$.validation_results.coverage"),
    (None, '{"decision": "feedback", "rationale": "r", "issues": [{"description": "x", "\\udfff": 1}]}',
     "coach.json", "$.issues[0]"),
], ids=["surrogate-player", "overflow-coach", "surrogate-key"])
def test_record_refuses_an_unstorable_report_before_any_side_effect(
        tmp_path: Path, player: str | None, coach: str | None, bad: str, pointer: str) -> None:
    root = make_project(tmp_path / "repo", Setup(git=True))
    p, c = _write_reports(tmp_path / "in", player or _player(), coach or _coach())
    before = _snapshot(root)
    run = _record(root, p, c)
    assert run.returncode == 1, run.stderr  # a readable report it rejects
    _one_error(run.stderr, bad, pointer)
    assert _snapshot(root) == before  # no lock file, no player_turn_1.json, nothing


def test_loop_records_an_unstorable_report_as_an_error_turn_and_goes_on(tmp_path: Path) -> None:
    setup = Setup(git=False)
    root = make_project(tmp_path / "repo", setup)
    # Turn 1's Player writes a lone surrogate; turn 1's Coach an overflowing number on the next try.
    player = _agent(tmp_path, "player", """\
        notes = "bad \\\\ud800 notes" if turn == 1 else "good notes"
        open(out, "w").write('{"files_modified": [], "tests_run": true, "tests_passed": true, '
                             '"implementation_notes": "%s"}' % notes)
        """)
    coach = _agent(tmp_path, "coach", """\
        cov = "1e400" if turn == 2 else "90"
        decision = "approve" if turn == 3 else "feedback"
        open(out, "w").write('{"decision": "%s", "rationale": "r", "validation_results": {"coverage": %s, '
                             '"tests_passed_count": 5, "tests_failed_count": 0, "arch_score": 90}}' % (decision, cov))
        """)
    run = _cli(root, "feature-build", TASK_ID, "--player", player, "--coach", coach, "--max-turns", "4")
    assert run.returncode == 0, run.stderr
    task = TaskFile.load(root / TASK_REL)
    assert task.state is not None
    assert [(t.turn, t.decision) for t in task.state.turns] == [(1, "error"), (2, "error"), (3, "approve")]
    assert "$.implementation_notes" in (task.state.turns[0].feedback or "")
    assert "$.validation_results.coverage" in (task.state.turns[1].feedback or "")


def test_resume_skips_an_unstorable_report_left_by_a_kill(tmp_path: Path) -> None:
    setup = Setup(git=False)
    root = make_project(tmp_path / "repo", setup)
    player, coach = agent_command("player.py"), agent_command("coach.py")
    env = {"GUARDKIT_STATE_CRASH_AT": "loop.after_player:1"}
    killed = subprocess.run([str(GUARDKIT_STATE), "feature-build", TASK_ID, "--player", player, "--coach", coach,
                             "--repo", str(root)], env=clean_env(**env), capture_output=True, timeout=WAIT,
                            check=False)
    assert killed.returncode < 0, killed.stderr
    # What a kill between the Coach's exit and the store's write leaves: its raw report in .work/.
    raw = root / STORE / ".work" / "coach_report_1.json"
    raw.write_text('{"task_id": "' + TASK_ID + '", "turn": 1, "decision": "feedback", "rationale": "\\ud800"}')
    for attempt in range(2):  # and a later --resume is a clean refusal: the turn budget is used up
        run = _cli(root, "feature-build", TASK_ID, "--player", player, "--coach", coach, "--resume",
                   "--max-turns", "1")
        assert run.returncode == (1 if attempt == 0 else 2), run.stderr  # max turns: not approved, no abort
        assert "error: unexpected" not in run.stderr
    assert "has used all 1 of its turns" in run.stderr
    task = TaskFile.load(root / TASK_REL)
    assert task.state is not None and [(t.turn, t.decision) for t in task.state.turns] == [(1, "feedback")]


# -- turn numbers and shapes in the task file ------------------------------------------------------
QUOTED_TURN = """\
autobuild_state:
  current_turn: 1
  max_turns: 5
  turns:
  - turn: '1'
    decision: feedback
    feedback: AC-003 still fails
    timestamp: '2026-01-01T00:00:00+00:00'
"""


def test_quoted_turn_number_is_that_turn(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo", Setup(git=False), _with_state(QUOTED_TURN))
    p, c = _write_reports(tmp_path / "in", _player(), _coach())
    run = _record(root, p, c)
    assert run.returncode == 0, run.stderr
    assert "Recorded turn 2" in run.stdout
    assert _listed_turns(root / TASK_REL) == ["1", 2]  # the hand-written entry is kept as written
    run = _cli(root, "feature-build", TASK_ID, "--player", agent_command("player.py"),
               "--coach", agent_command("coach.py"), "--resume")
    assert run.returncode == 0, run.stderr
    assert _listed_turns(root / TASK_REL) == ["1", 2, 3, 4]


@pytest.mark.parametrize(("turns", "message"), [
    ([1, 3], "turns jump from 1 to 3 in TASK-REL-001-crash-safety.md; turn 2 is missing"),
    ([2], "turns jump from 0 to 2 in TASK-REL-001-crash-safety.md; turn 1 is missing"),
    ([1, "'1'"], "turn 1 is listed twice in TASK-REL-001-crash-safety.md"),
], ids=["gap", "no-first", "duplicate"])
def test_hand_made_turn_gap_is_named_before_anything_is_written(tmp_path: Path, turns: list[object],
                                                                 message: str) -> None:
    entries = "".join(f"  - turn: {n}\n    decision: feedback\n    timestamp: '2026-01-0{i}T00:00:00+00:00'\n"
                      for i, n in enumerate(turns, start=1))
    root = make_project(tmp_path / "repo", Setup(git=True), _with_state(f"autobuild_state:\n  turns:\n{entries}"))
    p, c = _write_reports(tmp_path / "in", _player(), _coach())
    before = _snapshot(root)
    run = _record(root, p, c)
    assert run.returncode == 2, run.stderr  # the task file is wrong, not the reports
    line = _one_error(run.stderr, message, "fix the file by hand or restore it from git")
    assert "another writer" not in line
    run = _cli(root, "feature-build", TASK_ID, "--player", "true", "--coach", "true", "--no-worktree", "--resume")
    assert run.returncode == 2, run.stderr
    _one_error(run.stderr, message)
    assert _without_logs(_snapshot(root)) == _without_logs(before)


@pytest.mark.parametrize(("block", "key"), [
    ("autobuild_state:\n  turns: {turn: 1}\n", "turns"),
    ("autobuild_state:\n  criteria: [AC-001]\n  turns: []\n", "criteria"),
    ("autobuild_state:\n  criteria: {AC-001: [verified]}\n  turns: []\n", "criteria"),
    ("autobuild_state:\n  turns:\n  - [1, feedback]\n", "turns[0]"),
    ("autobuild_state:\n  turns:\n  - turn: one\n    decision: feedback\n", "turns[0].turn"),
    ("autobuild_state:\n  turns:\n  - turn: 1.5\n    decision: feedback\n", "turns[0].turn"),
    ("autobuild_state:\n  current_turn: many\n  turns: []\n", "current_turn"),
    ("autobuild_state:\n  max_turns: five\n  turns: []\n", "max_turns"),
    ("autobuild_state:\n  max_turns: 0\n  turns: []\n", "max_turns"),
    ("autobuild_state:\n  max_turns: true\n  turns: []\n", "max_turns"),
    ("autobuild_state:\n  criteria: {AC-001: 5}\n  turns: []\n", 'criteria["AC-001"]'),
    ("autobuild_state:\n  turns:\n  - turn: 1\n    decision: feedback\n    feedback: {a: 1}\n", "turns[0].feedback"),
    ("autobuild_state:\n  turns:\n  - turn: 1\n    decision: feedback\n    timestamp: [1]\n", "turns[0].timestamp"),
], ids=["turns-mapping", "criteria-list", "criteria-value-list", "entry-list", "turn-word", "turn-float",
        "current-turn-word", "max-turns-word", "max-turns-zero", "max-turns-bool", "criteria-unknown-status",
        "feedback-mapping", "timestamp-list"])
def test_odd_state_shapes_are_named_and_nothing_is_written(tmp_path: Path, block: str, key: str) -> None:
    root = make_project(tmp_path / "repo", Setup(git=True), _with_state(block))
    p, c = _write_reports(tmp_path / "in", _player(), _coach())
    before = _snapshot(root)
    for args in (["record", TASK_ID, "--player", str(p), "--coach", str(c)],
                 ["feature-build", TASK_ID, "--player", "true", "--coach", "true"],
                 ["show", TASK_ID]):
        run = _cli(root, *args)
        assert run.returncode == 2, (args, run.stderr)
        line = _one_error(run.stderr, "TASK-REL-001-crash-safety.md:", f"autobuild_state.{key}")
        assert "object has no attribute" not in line and "invalid literal" not in line and "int()" not in line
    assert _without_logs(_snapshot(root)) == _without_logs(before)
    assert not (root / ".guardkit" / "worktrees").exists()


def test_digit_string_max_turns_is_that_number(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo", Setup(git=False),
                        _with_state("autobuild_state:\n  max_turns: '1'\n  turns: []\n"))
    p, c = _write_reports(tmp_path / "in", _player(), _coach())
    run = _record(root, p, c)
    assert run.returncode == 0, run.stderr
    assert "max_turns_exceeded" in run.stdout


# -- options validated before any side effect ------------------------------------------------------
@pytest.mark.parametrize("value", ["nan", "inf", "1e400", "0", "-5"])
def test_bad_turn_timeout_is_a_usage_error_before_anything_starts(tmp_path: Path, value: str) -> None:
    root = make_project(tmp_path / "repo", Setup(git=True))
    marker = tmp_path / "player-started"
    before = _snapshot(root)
    run = _cli(root, "feature-build", TASK_ID, "--player", f"touch {marker}", "--coach", "true",
               "--turn-timeout", value)
    assert run.returncode == 2, run.stderr
    _one_error(run.stderr, "turn")
    assert not marker.exists()
    assert _without_logs(_snapshot(root)) == _without_logs(before)
    assert not (root / ".guardkit" / "worktrees").exists()


@pytest.mark.parametrize("kwargs", [{"turn_timeout": math.nan}, {"turn_timeout": math.inf},
                                    {"turn_timeout": 0.0}, {"turn_timeout": -1.0}, {"max_turns": 0},
                                    {"max_turns": -2}, {"max_turns": True}, {"max_turns": 2.5},
                                    {"max_cost": 0.0}, {"max_cost": math.nan}, {"cost_before": -0.01},
                                    {"cost_before": math.inf}, {"cost_before": None}])
def test_loop_options_refuse_bad_values_at_construction(kwargs: dict[str, object]) -> None:
    with pytest.raises(InputError):
        LoopOptions(**kwargs)  # type: ignore[arg-type]


def test_record_refuses_a_bad_max_turns_option(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo", Setup(git=True))
    p, c = _write_reports(tmp_path / "in", _player(), _coach())
    before = _snapshot(root)
    run = _record(root, p, c, "--max-turns", "0")
    assert run.returncode == 2, run.stderr
    _one_error(run.stderr, "max-turns")
    assert _snapshot(root) == before


# -- retrying a record ---------------------------------------------------------------------------------
def test_retried_record_after_its_commit_point_is_idempotent(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo", Setup(git=True))
    p, c = _write_reports(tmp_path / "in", _player(1), _coach(1))
    assert _record(root, p, c).returncode == 0
    after_first = _snapshot(root)
    run = _record(root, p, c)  # the orchestrator did not see the first one finish
    assert run.returncode == 0, run.stderr
    assert f"turn 1 of {TASK_ID} was already recorded with these reports; nothing to do" in run.stdout
    assert _snapshot(root) == after_first
    run = _record(root, p, c, "--json")
    assert run.returncode == 0 and json.loads(run.stdout)["already_recorded"] is True
    other_p, other_c = _write_reports(tmp_path / "other", _player(1, implementation_notes="Other work."), _coach(1))
    run = _record(root, other_p, other_c)
    assert run.returncode == 3, run.stderr
    _one_error(run.stderr, "turn 1", "already recorded", "player_turn_1.json")
    assert _snapshot(root) == after_first
    help_text = _cli(root, "record", "--help").stdout
    assert re.search(r"3\s+.*already recorded", help_text), help_text


def test_record_removes_stale_temp_files_of_its_store(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo", Setup(git=False))
    store = root / STORE
    store.mkdir(parents=True)
    stale = store / ".gks-tmp-player_turn_1.json.1.123456789"  # the form fsio writes: name.pid.ns
    stale.write_text("{half a rep")
    users = store / ".gks-tmp-notes.md"  # not in that form: somebody's own file, never ours to delete
    users.write_text("mine")
    old = time.time() - 3600
    for path in (stale, users):
        os.utime(path, (old, old))
    p, c = _write_reports(tmp_path / "in", _player(), _coach())
    assert _record(root, p, c).returncode == 0
    assert not stale.exists()
    assert users.read_text() == "mine"


# -- an editor saving the task file in place ---------------------------------------------------------
EDITOR = """\
import os, sys, time
path, stop = sys.argv[1], sys.argv[2]
n = 0
while not os.path.exists(stop):
    text = open(path, encoding="utf-8").read()
    if "editor_counter:" not in text:
        time.sleep(0.0005)
        continue
    n += 1
    head, _, rest = text.partition("editor_counter:")
    new = (head + "editor_counter: %d" % n + rest[rest.index("\\n"):] + "edit %d\\n" % n).encode()
    with open(path, "r+b") as handle:  # in place: truncate, then write in two chunks
        handle.truncate(0)
        handle.flush()
        time.sleep(0.0005)
        handle.write(new[: len(new) // 2])
        handle.flush()
        time.sleep(0.0005)
        handle.write(new[len(new) // 2:])
    time.sleep(0.006)  # over 100 saves a second
"""


def test_record_during_in_place_editor_saves_never_misnumbers_a_turn(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo", Setup(git=False),
                        TASK_TEXT.replace("status: backlog\n", "status: backlog\neditor_counter: 0\n"))
    script = tmp_path / "editor.py"
    script.write_text(EDITOR, encoding="utf-8")
    stop = tmp_path / "stop"
    editor = subprocess.Popen([sys.executable, str(script), str(root / TASK_REL), str(stop)])
    misnumbered, refused, recorded = [], [], 0
    try:
        turn = 1
        # Up to 40 attempts for 8 turns: on a loaded machine the editor wins many races
        # (FileBusyError, nothing written), which is refusal, not misnumbering.
        for _ in range(40):
            if recorded >= 8:
                break
            p, c = _write_reports(tmp_path / "in", _player(turn), _coach(turn))
            run = _record(root, p, c, "--max-turns", "100")
            if run.returncode == 0:
                recorded += 1
                turn += 1
            elif "kept changing" in run.stderr:
                refused.append(run.stderr)  # FileBusyError: the editor never let a whole read or write through
            elif "player.json" in run.stderr or "coach.json" in run.stderr or run.returncode == 2:
                misnumbered.append(run.stderr)  # "fix the report" or "fix the task file": both were fine
            else:
                refused.append(run.stderr)
    finally:
        stop.touch()
        editor.wait(timeout=WAIT)
    assert not misnumbered, misnumbered
    assert recorded >= 8, refused


def test_settled_read_of_a_file_saved_over_and_over_unparsable_is_busy_not_broken(tmp_path: Path) -> None:
    path = tmp_path / "TASK-X.md"
    path.write_text("---\nid: TASK-X\n", encoding="utf-8")
    stop = threading.Event()

    def save_again() -> None:  # a writer whose every save is cut short, each one different
        n = 0
        while not stop.is_set():
            n += 1
            path.write_text(f"---\nid: TASK-X\nsaved: {n}\n", encoding="utf-8")
            time.sleep(0.003)

    writer = threading.Thread(target=save_again)
    writer.start()
    try:
        with pytest.raises(FileBusyError, match="kept changing"):
            read_task_settled(path, TurnStore(tmp_path / "store", "TASK-X"))
    finally:
        stop.set()
        writer.join()
    # The same bytes, read settled: a broken file, said as a parse error naming it.
    with pytest.raises(ParseError, match="never closed"):
        read_task_settled(path, TurnStore(tmp_path / "store", "TASK-X"))


def test_settled_read_never_takes_an_emptied_task_file_for_the_task(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "TASK-X.md"
    whole = "---\nid: TASK-X\nstatus: in_progress\n---\n# Task\n"
    path.write_text("", encoding="utf-8")  # an editor between its truncate and its write
    # It sits there through the first reads, then writes: the settled read waits for the whole file.
    seen: list[bytes] = []
    real = reads.read_bytes_capped

    def slow_editor(file: Path) -> bytes:
        got = real(file)
        seen.append(got)
        if len(seen) == 2:
            file.write_text(whole, encoding="utf-8")
        return got

    monkeypatch.setattr(reads, "read_bytes_capped", slow_editor)
    task = read_task_settled(path, TurnStore(tmp_path / "store", "TASK-X"))
    assert task.text == whole and seen[:2] == [b"", b""]
    # Empty through every pause: not a task file, said as such (nothing can be recorded into it).
    path.write_text("", encoding="utf-8")
    monkeypatch.setattr(reads, "read_bytes_capped", real)
    with pytest.raises(ParseError, match="empty"):
        read_task_settled(path, TurnStore(tmp_path / "store", "TASK-X"))


def test_record_never_writes_a_turn_into_an_emptied_task_file(tmp_path: Path) -> None:
    from guardkit_state.turns.lifecycle import record_turn
    from tests.helpers import coach_decision, player_report

    task = tmp_path / "tasks" / "backlog" / "TASK-AUTH-001-login.md"
    task.parent.mkdir(parents=True)
    task.write_text("", encoding="utf-8")  # a save caught between its truncate and its write, for good
    with pytest.raises(ParseError, match="the task file is empty"):
        record_turn(tmp_path, "TASK-AUTH-001", player_report(1), coach_decision(1, "feedback"))
    assert task.read_bytes() == b""
    assert not list(tmp_path.rglob("*_turn_1.json"))


# -- stall normalisation on huge feedback ------------------------------------------------------------
#: The normaliser as it was (quadratic on long whitespace-free text): the reference on ordinary text.
_REFERENCE = (
    (re.compile(r"\S*\.guardkit/worktrees/[^\s/]+"), "<worktree>"),
    (re.compile(r"\S+\.py::\S+"), "<test>"),
    (re.compile(r"\btest_\w+"), "<test>"),
    (re.compile(r"\blines? \d+(?:-\d+)?"), "line <n>"),
    (re.compile(r"(?<=\.py):\d+(?::\d+)?"), ":<n>"),
    (re.compile(r"\d+(?:\.\d+)?\s?%"), "<pct>"),
    (re.compile(r"\d+(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds|min|minutes)\b"), "<dur>"),
    (re.compile(r"\d+(?:\.\d+)?"), "<n>"),
)


def _reference(text: str) -> str:
    out = text.lower()
    for pattern, token in _REFERENCE:
        out = pattern.sub(token, out)
    return " ".join(out.split())


ORDINARY = [
    "AC-003 not met: tests/test_parse.py::test_rejects_bad_input failed at line 42 (3.2s)",
    "Coverage 71.5% < 80 %; see /tmp/x/.guardkit/worktrees/TASK-A-1/src/a.py:12:4 and lines 3-9",
    "- AC-001: 5 of 5 tests failed in 120 ms\n- AC-002: fix src/util.py::helper (took 2 min)",
    "path a/.guardkit/worktrees/T1/b/.guardkit/worktrees/T2/c and x.py:: and .py::y z.py::w",
    "1.2.3.4% 12ms 1 s 10seconds 7min 3 minutes line 4-5 lines 6 test_x_1 test_ 99.py:1:2",
    "",
    "   ",
    "UPPER Case Test_Foo 45 % done\tin 3sec\n\n.guardkit/worktrees//x .guardkit/worktrees/",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_stall_normalisation_unchanged_on_ordinary_feedback(text: str) -> None:
    assert stall.normalise_feedback(text) == _reference(text)


def test_stall_normalisation_matches_the_reference_on_generated_feedback() -> None:
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    fragments = st.sampled_from(["a", "b", "1", "9", ".", "-", ":", "/", " ", "\n", "\t", "%", "ms", "s", "sec",
                                 "min", "minutes", "line", "lines", "test_", ".py", "::", ".guardkit/worktrees/",
                                 "x", "_", "\u00a0", "T", "é"])

    @hypothesis.settings(max_examples=1500, deadline=None, database=None)
    @hypothesis.given(st.lists(fragments, max_size=30).map("".join))
    def prop(text: str) -> None:
        assert stall.normalise_feedback(text) == _reference(text)

    prop()


@pytest.mark.parametrize("unit", [
    "a/.guardkit/worktrees/",   # the worktree pattern's backtracking
    "x.py::",                   # the test-id pattern's
    "1",                        # a digit run: the percentage and duration patterns'
    "1.",                       # numbers with dots
    "ab",
])
def test_stall_normalisation_of_megabytes_without_whitespace(unit: str) -> None:
    # How long it takes (minutes when the patterns backtracked; now about a floor's time) is
    # measured beside a linear floor by tests/bench/bench_stall.py, not limited here.
    text = unit * (3_000_000 // len(unit))
    signature = stall.feedback_signature(text)
    assert signature is not None
    # Bounded work: a further megabyte costs about what the first three did, per byte.
    assert stall.feedback_signature(text + "z") != signature
