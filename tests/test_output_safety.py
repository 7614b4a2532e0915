"""What reaches the terminal: short one-line errors, shortened agent text, and no raw bidi controls.

Hostile values (a 5,000-character task id, 25,000 characters of feedback, U+202E in a report) come
from real files through the real CLI; ``--json`` keeps every value whole (escaped, never cut).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from guardkit_state.cli.output import safe
from guardkit_state.errors import GuardkitStateError, TaskNotFoundError, shorten
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.worktrees import WorktreeManager
from guardkit_state.turns.lifecycle import record_turn

from .gitloop import make_project, run_turn

TASK_ID = "TASK-OUT-001"
TASK_REL = Path("tasks/backlog/TASK-OUT-001-output.md")
GOOD = f"---\nid: {TASK_ID}\ntitle: Output\nstatus: backlog\n---\n\n## Acceptance Criteria\n\n- [ ] One\n"
CLI = Path(sys.executable).with_name("guardkit-state")
#: Every bidirectional formatting control: embeddings, overrides, isolates, marks.
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / TASK_REL).parent.mkdir(parents=True)
    (root / TASK_REL).write_text(GOOD)
    return root


def _cli(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([str(CLI), *argv, "--repo", str(root)], capture_output=True, text=True, env=env,
                          timeout=120, check=False)


def _assert_no_raw_bidi(text: str) -> None:
    raw = sorted({f"U+{ord(c):04X}" for c in text if c in BIDI})
    assert not raw, raw


# --------------------------------------------------------------------------- short errors


def test_unknown_long_task_id_is_one_short_error_line(tmp_path: Path) -> None:
    root = _project(tmp_path)
    long_id = "TASK-" + "A" * 5000
    result = _cli(root, "show", long_id)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert len(lines[0]) < 600 and "… (5005 chars)" in lines[0]


def test_error_lines_shorten_huge_values_but_json_keeps_them() -> None:
    error = TaskNotFoundError("no task file for " + "B" * 3000, path="/x/" + "p" * 4000, expected="e" * 5000,
                              pointer="$." + "k" * 900)
    text = str(error)
    assert len(text) < 2000 and "(5000 chars)" in text and "(4003 chars)" in text and "(902 chars)" in text
    assert error.to_dict()["expected"] == "e" * 5000
    assert shorten("x" * 10, 4) == "xxxx… (10 chars)" and shorten("short") == "short"
    assert str(GuardkitStateError("plain", path="a.md", line=3)) == "a.md:3: plain"


# --------------------------------------------------------------------------- long agent text


def _reports(tmp_path: Path, feedback: str) -> tuple[Path, Path]:
    player, coach = tmp_path / "player.json", tmp_path / "coach.json"
    player.write_text(json.dumps({"task_id": TASK_ID, "turn": 1, "files_modified": [], "summary": "did it"}))
    coach.write_text(json.dumps({"task_id": TASK_ID, "turn": 1, "decision": "feedback", "rationale": "r",
                                 "feedback": feedback}))
    return player, coach


def test_record_shortens_long_feedback_to_one_line_but_json_keeps_it(tmp_path: Path) -> None:
    feedback = "Fix the parser. " + "x" * 25_000 + "\nsecond line"
    player, coach = _reports(tmp_path, feedback)
    root = _project(tmp_path)
    result = _cli(root, "record", TASK_ID, "--player", str(player), "--coach", str(coach))
    assert result.returncode == 0, result.stderr
    assert max(len(line) for line in result.stdout.splitlines()) < 300, result.stdout[:500]
    shown = next(line for line in result.stdout.splitlines() if "feedback:" in line)
    assert "Fix the parser." in shown and shown.endswith("…")
    other = tmp_path / "again"
    other.mkdir()
    root2 = _project(other)
    result = _cli(root2, "record", TASK_ID, "--player", str(player), "--coach", str(coach), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["turn_state"]["coach_feedback"] == feedback


def test_one_line_helper() -> None:
    from guardkit_state.cli.output import one_line

    assert one_line("a\nb\r\n  c") == "a b c"
    assert one_line("x" * 500, 200) == "x" * 199 + "…"
    assert one_line("\x1b[31mred") == "\\x1b[31mred"
    assert len(one_line("y" * 500)) == 200


# --------------------------------------------------------------------------- bidi controls


def test_safe_escapes_every_bidi_control() -> None:
    assert safe("a\u202eb") == "a\\u202eb"
    _assert_no_raw_bidi(safe(BIDI))
    assert safe("tab\tand newline\n stay; émoji ✓ stays") == "tab\tand newline\n stay; émoji ✓ stays"


def test_safe_shows_the_bytes_of_a_name_no_utf8_as_their_escapes() -> None:
    # A ref or file name git gave as bytes no UTF-8 is kept as lone surrogates (surrogateescape) so
    # it goes back to git as it came; shown raw, no UTF-8 writer takes it (stdout, an MCP answer).
    shown = safe("refs/guardkit/claims/F/T/\udcff\udce9 and \ud800")
    assert shown == "refs/guardkit/claims/F/T/\\xff\\xe9 and \\ud800"
    assert shown.encode("utf-8")


def test_bidi_controls_never_reach_the_terminal_from_show_and_context(tmp_path: Path) -> None:
    root = _project(tmp_path)
    evil = f"fine{BIDI}txt.exe"
    record_turn(root, TASK_ID, {"files_modified": [], "summary": evil, "lessons": [evil]},
                {"decision": "feedback", "rationale": evil, "feedback": evil})
    for argv in (["show", TASK_ID], ["context", TASK_ID], ["show", TASK_ID, "--json"], ["context", TASK_ID, "--json"]):
        result = _cli(root, *argv)
        assert result.returncode == 0, result.stderr
        _assert_no_raw_bidi(result.stdout)
        assert "\\u202e" in result.stdout, argv
        if "--json" in argv:
            assert evil in json.dumps(json.loads(result.stdout), ensure_ascii=False)  # escaped, not lost


def test_bidi_controls_in_frontmatter_values_are_escaped_by_the_output_layer(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / TASK_REL).write_text(GOOD.replace("status: backlog", 'status: "review\u202e\u2067"'), encoding="utf-8")
    result = _cli(root, "show", TASK_ID)
    assert result.returncode == 0, result.stderr
    _assert_no_raw_bidi(result.stdout)
    assert "status review\\u202e\\u2067" in result.stdout


def test_bidi_controls_in_a_turn_diff_are_escaped(git_repo: Path) -> None:
    make_project(git_repo)
    repo = GitRepo.discover(git_repo)
    assert repo is not None
    worktree = WorktreeManager(repo).create("TASK-GIT-001", None)
    (worktree.path / "src" / "trojan.py").write_text('access = "user\u202e \u2066# admin\u2069\u2066"\n')
    assert run_turn(worktree.path, 1).committed
    result = _cli(git_repo, "diff", "TASK-GIT-001", "--turn", "1")
    assert result.returncode == 0, result.stderr
    assert "trojan.py" in result.stdout and "\\u202e" in result.stdout
    _assert_no_raw_bidi(result.stdout)


@pytest.mark.parametrize("char", list(BIDI))
def test_json_output_escapes_bidi(char: str, tmp_path: Path) -> None:
    from guardkit_state.cli.output import Output

    class Sink:
        text = ""

        def write(self, chunk: str) -> None:
            self.text += chunk

    sink = Sink()
    Output(sink, sink, colour=False, json_mode=True).json({"v": f"a{char}b"})  # type: ignore[arg-type]
    assert char not in sink.text and json.loads(sink.text) == {"v": f"a{char}b"}


@pytest.mark.parametrize("data", [
    [{"task_id": "TASK-1", "verified": 3, "total": 4, "resolved": None, "notes": ["é", "\u2028", "\x7f"]}],
    {"nan": float("nan"), "inf": float("-inf")},  # JSON cannot hold these: the standard library writes them
    {"path": Path("tasks/x.md"), "set": {1}},  # not JSON: written as str(), as ever
    {1: "int key", False: "bool key", None: "null key", 2.5: "float key", "nested": [[], {}, [1.5, -0.0]]},
])
def test_json_output_is_the_standard_librarys_text(data: object) -> None:
    """--json output takes a faster writer for plain data; the text must stay what it always was."""
    import io

    from guardkit_state.cli.output import Output

    stream = io.StringIO()
    Output(stream, io.StringIO(), False, True).json(data)
    expected = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    assert stream.getvalue() == expected.replace("\u2028", "\\u2028").replace("\x7f", "\\u007f") + "\n"
