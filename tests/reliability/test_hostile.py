"""Hostile input catalogue: each case gets a typed error naming the file and place, exit 2 from
the CLI with one ``error:`` line on stderr, and not one byte changed on disk.

``validate`` is a linter: it reports an invalid file with exit 1 (its documented contract) and a
``path:line`` or ``path: $.pointer`` line; it is checked on the same files.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from guardkit_state.cli.app import run
from guardkit_state.errors import GuardkitStateError, InputError
from guardkit_state.store.reads import MAX_FILE_BYTES
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.turns.lifecycle import record_turn

TASK_ID = "TASK-HOS-001"
TASK_REL = Path("tasks/backlog/TASK-HOS-001-hostile.md")
GOOD = f"---\nid: {TASK_ID}\ntitle: Hostile\nstatus: backlog\n---\n\n## Acceptance Criteria\n\n- [ ] One\n"
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))

#: name, task-file bytes, where (a fragment the error line must contain)
TASK_CASES: list[tuple[str, bytes, str]] = [
    ("both-state-keys", b"---\nid: TASK-HOS-001\nautobuild_state:\n  turns: []\nfeature_build:\n  turns: []\n---\n",
     "TASK-HOS-001-hostile.md"),
    ("truncated", b"---\nid: TASK-HOS-001\ntitle: cut he", "TASK-HOS-001-hostile.md"),
    ("no-closing-with-dashes", b"---\nid: TASK-HOS-001\nnotes: |\n  -----\n  text\n", "TASK-HOS-001-hostile.md"),
    ("python-object-tag", b"---\nid: TASK-HOS-001\nx: !!python/object/apply:os.system ['touch /tmp/pwned']\n---\n",
     ":3"),
    ("python-name-tag", b"---\nid: TASK-HOS-001\nx: !!python/name:os.system\n---\n", ":3"),
    ("python-module-tag", b"---\nid: TASK-HOS-001\nx: !!python/module:os\n---\n", ":3"),
    ("custom-tag", b"---\nid: TASK-HOS-001\nx: !Ref thing\n---\n", ":3"),
    ("alias-bomb", ("---\nid: TASK-HOS-001\n" + BOMB + "---\n").encode(), "TASK-HOS-001-hostile.md"),
    ("non-utf8", b"---\nid: TASK-HOS-001\ntitle: caf\xe9\n---\n", ":3"),
    ("nul-byte", b"---\nid: TASK-HOS-001\ntitle: a\x00b\n---\n", "TASK-HOS-001-hostile.md"),
    ("bad-yaml-syntax", b"---\nid: TASK-HOS-001\ntitle: [unclosed\n---\n", "TASK-HOS-001-hostile.md"),
    ("unclosed-quote", b"---\nid: TASK-HOS-001\ntitle: \"open\n---\n", "TASK-HOS-001-hostile.md"),
    ("tab-indent", b"---\nid: TASK-HOS-001\nautobuild_state:\n\tturns: []\n---\n", "TASK-HOS-001-hostile.md"),
    ("frontmatter-is-list", b"---\n- a\n- b\n---\n", "TASK-HOS-001-hostile.md"),
    ("state-is-string", b"---\nid: TASK-HOS-001\nautobuild_state: running\n---\n", ":3"),
    # A value its schema refuses is named on its own line, by its JSON path.
    ("turns-not-list", b"---\nid: TASK-HOS-001\nautobuild_state:\n  current_turn: 1\n  turns: 5\n---\n",
     ":5: $.autobuild_state.turns"),
    ("turn-entry-not-mapping", b"---\nid: TASK-HOS-001\nautobuild_state:\n  turns:\n  - 1\n---\n",
     ":5: $.autobuild_state.turns[0]"),
    ("current-turn-string", b"---\nid: TASK-HOS-001\nautobuild_state:\n  current_turn: many\n  turns: []\n---\n",
     ":4: $.autobuild_state.current_turn"),
]

#: name, player-report text (or bytes), where
# (name, report bytes, where the error must point, exit code). `record` exits 2 for a file that is
# not a readable JSON report and 1 for a readable report it rejects (record's documented exit codes, docs/lifecycle.md).
REPORT_CASES: list[tuple[str, bytes, str, int]] = [
    ("json-nan", b'{"files_modified": [], "coverage": NaN}', "player.json:1", 2),
    ("json-infinity", b'{"coverage": -Infinity}', "player.json:1", 2),
    ("json-duplicate-key", b'{"turn": 1,\n "turn": 2}', "player.json:2", 2),
    ("json-deep", b"[" * 5000 + b"]" * 5000, "player.json", 2),
    ("json-truncated", b'{"files_modified": ["a"', "player.json:1", 2),
    ("json-not-object", b"[1, 2, 3]", "player.json", 1),
    ("json-non-utf8", b'{"implementation_notes": "caf\xe9"}', "player.json:1", 2),
    ("json-wrong-type", b'{"files_modified": "not a list"}', "$.files_modified", 1),
    ("json-other-task", b'{"task_id": "TASK-OTHER-001"}', "$.task_id", 1),
    ("json-other-turn", b'{"turn": 7}', "$.turn", 1),
    ("json-huge-number", b'{"tests_passed_count": ' + b"9" * 5000 + b"}", "player.json", 2),
    ("json-newer-schema", b'{"schema_version": 99}', "player.json", 1),
]

BAD_IDS = ["../etc/passwd", "TASK-1/../../x", "TASK-A\x00B", "TASK-A/B", "..", "TASK-..-1", "task with space",
           "TASK-A\nB", "TASK-\x1b[31m"]

_counted: dict[str, int] = {}


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _project(tmp_path: Path, task: bytes = GOOD.encode()) -> Path:
    root = tmp_path / "repo"
    path = root / TASK_REL
    path.parent.mkdir(parents=True)
    path.write_bytes(task)
    return root


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = run(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_error_line(err: str, where: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1, err
    assert where in errors[0], (where, err)
    assert "Traceback" not in err and "\x1b" not in err


def _reports(root: Path, player: bytes | None = None) -> tuple[Path, Path]:
    p, c = root.parent / "player.json", root.parent / "coach.json"
    p.write_bytes(player if player is not None else json.dumps({"files_modified": []}).encode())
    c.write_text(json.dumps({"decision": "feedback", "rationale": "more"}))
    return p, c


@pytest.mark.parametrize(("name", "data", "where"), TASK_CASES, ids=[c[0] for c in TASK_CASES])
def test_hostile_task_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, data: bytes,
                           where: str) -> None:
    root = _project(tmp_path, data)
    before = _snapshot(root)
    with pytest.raises(InputError) as info:
        TaskFile.load(root / TASK_REL)
    assert info.value.path is not None and info.value.path.name == TASK_REL.name
    player, coach = _reports(root)
    for argv in (["show", TASK_ID], ["context", TASK_ID],
                 ["record", TASK_ID, "--player", str(player), "--coach", str(coach)],
                 ["feature-build", TASK_ID, "--player", "true", "--coach", "true", "--no-worktree"]):
        code, out, err = _cli(capsys, *argv, "--repo", str(root))
        assert code == 2, (argv, err)
        _one_error_line(err, where)
    code, out, err = _cli(capsys, "validate", str(root / TASK_REL))
    assert code == 1 and TASK_REL.name in out
    assert _snapshot(root) == {**before, **{k: v for k, v in _snapshot(root).items() if k.startswith(".guardkit/logs")}}
    assert not (root / ".guardkit" / "autobuild").exists()


#: A key repeated in the frontmatter is read as GuardKit reads it (the last value, with a warning
#: naming both lines), and a write to such a file is refused: name, bytes, the place the lines name.
DUPLICATE_CASES: list[tuple[str, bytes, str]] = [
    ("duplicate-top-key", b"---\nid: TASK-HOS-001\ntitle: a\ntitle: b\n---\n", ":4"),
    ("duplicate-state-key", b"---\nid: TASK-HOS-001\nautobuild_state:\n  current_turn: 1\n  current_turn: 2\n"
     b"  turns: []\n---\n", ":5"),
    ("second-state-block", b"---\nid: TASK-HOS-001\nautobuild_state:\n  turns: []\nautobuild_state:\n"
     b"  turns: []\n---\n", ":5"),
]


@pytest.mark.parametrize(("name", "data", "where"), DUPLICATE_CASES, ids=[c[0] for c in DUPLICATE_CASES])
def test_a_repeated_key_is_read_as_its_last_value_and_never_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, data: bytes, where: str) -> None:
    root = _project(tmp_path, data)
    before = _snapshot(root)
    TaskFile.load(root / TASK_REL)  # read, not refused
    code, _out, err = _cli(capsys, "show", TASK_ID, "--repo", str(root))
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and where in warnings[0] and "duplicate key" in warnings[0], err
    player, coach = _reports(root)
    for argv in (["record", TASK_ID, "--player", str(player), "--coach", str(coach)],
                 ["feature-build", TASK_ID, "--player", "true", "--coach", "true", "--no-worktree"]):
        code, _out, err = _cli(capsys, *argv, "--repo", str(root))
        assert code == 2, (argv, err)
        _one_error_line(err, where)
        assert "keep one line of each key" in err
    assert _snapshot(root) == {**before, **{k: v for k, v in _snapshot(root).items() if k.startswith(".guardkit/logs")}}
    assert not (root / ".guardkit" / "autobuild").exists()


@pytest.mark.parametrize(("name", "data", "where", "exit_code"), REPORT_CASES, ids=[c[0] for c in REPORT_CASES])
def test_hostile_report(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, data: bytes,
                        where: str, exit_code: int) -> None:
    root = _project(tmp_path)
    player, coach = _reports(root, data)
    before = _snapshot(root)
    code, _out, err = _cli(capsys, "record", TASK_ID, "--player", str(player), "--coach", str(coach),
                           "--repo", str(root))
    assert code == exit_code, err
    _one_error_line(err, where)
    assert _snapshot(root) == before


def test_hostile_oversized_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _project(tmp_path)
    task = root / TASK_REL
    with open(task, "ab") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)  # sparse: cheap, and refused before it is read
    before = {p: p.stat().st_size for p in root.rglob("*") if p.is_file()}
    code, _out, err = _cli(capsys, "show", TASK_ID, "--repo", str(root))
    assert code == 2
    _one_error_line(err, TASK_REL.name)
    assert f"over the {MAX_FILE_BYTES}-byte limit" in err
    task.write_text(GOOD)
    player, coach = _reports(root)
    with open(player, "ab") as handle:
        handle.truncate(MAX_FILE_BYTES + 10)
    code, _out, err = _cli(capsys, "record", TASK_ID, "--player", str(player), "--coach", str(coach),
                           "--repo", str(root))
    assert code == 2
    _one_error_line(err, "player.json")
    assert task.read_text() == GOOD and before


@pytest.mark.parametrize("bad_id", BAD_IDS, ids=[repr(i) for i in BAD_IDS])
def test_hostile_task_ids(tmp_path: Path, capsys: pytest.CaptureFixture[str], bad_id: str) -> None:
    root = _project(tmp_path)
    before = _snapshot(root)
    player, coach = _reports(root)
    for argv in (["show", bad_id], ["context", bad_id],
                 ["record", bad_id, "--player", str(player), "--coach", str(coach)],
                 ["feature-build", bad_id, "--player", "true", "--coach", "true"]):
        code, _out, err = _cli(capsys, *argv, "--repo", str(root))
        assert code == 2, (argv, err)
        _one_error_line(err, "invalid task id")
    assert _snapshot(root) == before


def test_hostile_symlink_outside_repository(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text(GOOD)
    root = _project(tmp_path)
    (root / TASK_REL).unlink()
    (root / TASK_REL).symlink_to(outside)
    player, coach = _reports(root)
    for argv in (["show", TASK_ID], ["record", TASK_ID, "--player", str(player), "--coach", str(coach)]):
        code, _out, err = _cli(capsys, *argv, "--repo", str(root))
        assert code in (1, 2) and code != 0, err
        _one_error_line(err, f"no task file for {TASK_ID}")
    assert outside.read_text() == GOOD  # never written through the link


def test_hostile_ansi_in_feedback_never_reaches_the_terminal(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    root = _project(tmp_path)
    evil = "\x1b[2J\x1b[31mRED\x1b[0m \x1b]0;pwned\x07 \x9b31m \r overwrite"
    player = {"files_modified": [], "implementation_notes": f"notes {evil}", "summary": evil,
              "lessons": [evil], "blockers": [evil]}
    coach = {"decision": "feedback", "rationale": evil, "feedback": evil,
             "issues": [{"severity": "must_fix", "description": evil}], "what_to_try_next": evil}
    record_turn(root, TASK_ID, player, coach)
    for argv in (["show", TASK_ID], ["context", TASK_ID], ["show", TASK_ID, "--json"], ["context", TASK_ID, "--json"]):
        code, out, err = _cli(capsys, *argv, "--repo", str(root))
        assert code == 0, err
        assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out and "\r" not in out, argv
        assert "RED" in out


@pytest.mark.corpus
def test_hostile_real_unparseable_corpus_files(corpus_dir: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str],
                                               record_figures: Callable[[dict[str, Any]], None]) -> None:
    """Every real task file the store refuses is refused the same way through the CLI."""
    refused: list[Path] = []
    for path in sorted((corpus_dir / "tasks").rglob("*.md")):
        try:
            TaskFile.load(path)
        except GuardkitStateError:
            refused.append(path)
    if not refused:
        pytest.skip("no unparseable file in this corpus")
    for index, source in enumerate(refused):
        root = tmp_path / f"r{index}"
        target = root / "tasks" / "backlog" / source.name
        target.parent.mkdir(parents=True)
        target.write_bytes(source.read_bytes())
        task_id = TaskFile.__module__ and source.name.split("-")[0]
        from guardkit_state.taskfile.discovery import task_id_from_filename

        task_id = task_id_from_filename(source.name)
        code, _out, err = _cli(capsys, "show", task_id, "--repo", str(root))
        assert code == 2, (source, err)
        _one_error_line(err, source.name)
        assert target.read_bytes() == source.read_bytes()
    record_figures({"hostile_cases": len(refused), "kind": "corpus"})


def test_hostile_catalogue_size(record_figures: Callable[[dict[str, Any]], None]) -> None:
    total = len(TASK_CASES) + len(REPORT_CASES) + len(BAD_IDS) + 3  # + oversized, symlink, ANSI
    assert total >= 40
    record_figures({"hostile_cases": total, "kind": "catalogue"})
