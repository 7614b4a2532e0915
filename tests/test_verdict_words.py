"""Verdict words are never guessed silently: the schema's, a listed synonym (shown and kept), or refused.

``record`` and ``feature-build`` apply the same rule (``turns/verdicts.py``)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guardkit_state.errors import InputError
from guardkit_state.turns.verdicts import SYNONYMS, VERDICTS, read_verdict_words

from .guardkit_fixtures import LABELLED_BODY, cli, make_repo, snapshot, task_text

TASK = "TASK-GK-078"
REL = f"tasks/in_progress/{TASK}-words.md"


def _coach(result: Any, cid: str = "AC-1") -> dict[str, Any]:
    return {"task_id": TASK, "turn": 1, "decision": "feedback", "issues": [], "rationale": "r",
            "criteria_verification": [{"criterion_id": cid, "result": result, "notes": "n"}]}


def _player() -> dict[str, Any]:
    return {"task_id": TASK, "turn": 1, "files_modified": [], "files_created": [], "tests_written": [],
            "tests_run": False, "tests_passed": False, "implementation_notes": "x", "concerns": [],
            "requirements_addressed": [], "requirements_remaining": []}


@given(st.one_of(st.text(max_size=12), st.sampled_from([*SYNONYMS, *VERDICTS, "Pass", " NOT MET ", "not-met"])))
def test_a_result_is_its_verdict_its_synonym_or_refused(word: str) -> None:
    key = word.strip().lower().replace("-", "_").replace(" ", "_")
    expected = key if key in VERDICTS else SYNONYMS.get(key)
    if expected is None:
        with pytest.raises(InputError) as info:
            read_verdict_words(_coach(word))
        assert info.value.pointer == "$.criteria_verification[0].result"
        return
    out = read_verdict_words(_coach(word))
    assert out["criteria_verification"][0]["result"] == expected
    mapped = out.get("verdict_words", [])
    assert mapped == ([] if key in VERDICTS else [{"criterion_id": "AC-1", "written": word, "read_as": expected}])


def _record(tmp_path: Path, coach: dict[str, Any]) -> tuple[Path, Any]:
    root = make_repo(tmp_path / "repo", {REL: task_text(TASK, LABELLED_BODY)})
    (tmp_path / "p.json").write_text(json.dumps(_player()))
    (tmp_path / "c.json").write_text(json.dumps(coach))
    return root, cli(root, "record", TASK, "--player", str(tmp_path / "p.json"), "--coach", str(tmp_path / "c.json"))


def test_record_reads_a_synonym_says_so_and_keeps_it(tmp_path: Path) -> None:
    root, run = _record(tmp_path, _coach("pass"))
    assert run.returncode == 0, run.stderr
    assert '  verdict: AC-1: "pass" read as "verified"' in run.stdout.splitlines()
    store = root / ".guardkit" / "autobuild" / TASK
    assert json.loads((store / "coach_turn_1.json").read_text())["verdict_words"] == [
        {"criterion_id": "AC-1", "written": "pass", "read_as": "verified"}]
    state = json.loads((store / "turn_state_turn_1.json").read_text())
    assert state["acceptance_criteria_status"]["AC-1"] == "verified"
    assert state["verdict_words"] == [{"criterion_id": "AC-1", "written": "pass", "read_as": "verified"}]


@pytest.mark.parametrize(("coach", "said"), [
    (_coach("partially"), '$.criteria_verification[0].result: criterion result "partially" is not a verdict'),
    (_coach("verified", cid="AC-001"), "names criterion AC-001, which TASK-GK-078 does not have"),
    ({**_coach("verified"), "criteria_verification": [{"criterion_id": "AC-1", "result": "verified"},
                                                      {"criterion_id": "AC-1", "result": "fail"}]},
     "$.criteria_verification[1].result: coach decision judges criterion AC-1 twice, verified and rejected"),
])
def test_record_refuses_a_word_or_an_id_outside_the_task_in_one_line(tmp_path: Path, coach: dict[str, Any],
                                                                      said: str) -> None:
    root = make_repo(tmp_path / "repo", {REL: task_text(TASK, LABELLED_BODY)})
    before = snapshot(root)
    (tmp_path / "p.json").write_text(json.dumps(_player()))
    (tmp_path / "c.json").write_text(json.dumps(coach))
    run = cli(root, "record", TASK, "--player", str(tmp_path / "p.json"), "--coach", str(tmp_path / "c.json"))
    assert run.returncode != 0
    [line] = run.stderr.strip().splitlines()
    assert said in line
    assert snapshot(root) == before


COACH = """\
import json, os, sys
from pathlib import Path
Path(os.environ["GUARDKIT_REPORT_FILE"]).write_text(json.dumps({
    "decision": "feedback", "issues": [], "rationale": "r",
    "criteria_verification": [{"criterion_id": "AC-1", "result": sys.argv[1], "notes": ""}]}))
"""
PLAYER = """\
import json, os
from pathlib import Path
Path(os.environ["GUARDKIT_REPORT_FILE"]).write_text(json.dumps({
    "files_modified": [], "files_created": [], "tests_written": [], "tests_run": False, "tests_passed": False,
    "implementation_notes": "x", "concerns": [], "requirements_addressed": [], "requirements_remaining": []}))
"""


@pytest.mark.parametrize(("word", "line"), [
    ("FAILED", 'note: turn 1: Coach verdict AC-1: "FAILED" read as "rejected"'),
    ("pending", 'coach: error — invalid report: $.criteria_verification[0].result: criterion result "pending" '
                "is not a verdict"),
])
def test_the_loop_applies_the_same_rule(tmp_path: Path, word: str, line: str) -> None:
    root = make_repo(tmp_path / "repo", {REL: task_text(TASK, LABELLED_BODY)})
    (tmp_path / "p.py").write_text(PLAYER)
    (tmp_path / "c.py").write_text(COACH)
    run = cli(root, "feature-build", TASK, "--player", shlex.join([sys.executable, str(tmp_path / "p.py")]),
              "--coach", shlex.join([sys.executable, str(tmp_path / "c.py"), word]), "--max-turns", "1")
    assert run.returncode == 1, run.stderr
    assert any(line in shown for shown in run.stderr.splitlines()), run.stderr
