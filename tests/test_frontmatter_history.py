"""Turns GuardKit's own loop recorded only in the frontmatter are history: context, stalls, search.

GuardKit lists every turn in ``autobuild_state.turns`` (or the legacy ``feature_build`` block) while
its per-turn JSON stays on the machine that ran it. A task with such a history must continue from
it, not start afresh; its repeated feedback is a stall; its feedback is searchable.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guardkit_state.store.turn_files import TurnStore, artifacts_dir
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.turns.history import TaskHistory, turn_signal
from guardkit_state.turns.lifecycle import record_turn

from .guardkit_fixtures import (
    GENERIC_FEEDBACK,
    LABELLED_BODY,
    cli,
    cli_json,
    feedback_turns,
    make_repo,
    task_text,
)
from .helpers import coach_decision, player_report

TASK = "TASK-GK-001"
REL = f"tasks/in_progress/{TASK}-labelled.md"


def varied_turns(count: int) -> list[dict[str, object]]:
    return [{"turn": n, "decision": "feedback", "feedback": f"- AC-{n} still failing: case {chr(96 + n)}",
             "summary": f"Worked on part {n}"} for n in range(1, count + 1)]


def test_context_continues_a_frontmatter_only_history(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: task_text(TASK, LABELLED_BODY, turns=varied_turns(4))})
    run = cli(root, "context", TASK)
    assert run.returncode == 0, run.stderr
    assert "fresh start" not in run.stdout and "No previous turn" not in run.stdout
    assert "## Previous Turn Summary (Turn 4)" in run.stdout
    assert "**What was attempted**: Worked on part 4" in run.stdout
    assert "**Coach feedback**: - AC-4 still failing: case d" in run.stdout
    assert "**Coach decision**: feedback" in run.stdout
    # The ledger known so far, with the task's own criterion ids and texts on one line each.
    assert "○ AC-1: Parser accepts `1h30m` and rejects garbage: pending" in run.stdout
    assert "○ AC-005: All modified files pass lint: pending" in run.stdout
    assert "no per-turn report" in run.stdout


def test_log_of_a_frontmatter_only_history_points_at_the_listed_turns(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: task_text(TASK, LABELLED_BODY, turns=varied_turns(4))})
    run = cli(root, "log", TASK)
    assert run.returncode == 0, run.stderr
    assert "the task file lists 4 turn(s)" in run.stderr
    assert "no turns recorded" not in run.stderr
    assert "the task file lists 4 turn(s)" in " ".join(cli_json(root, "log", TASK)["notes"])


def test_context_for_an_earlier_turn_shows_the_turn_before_it(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: task_text(TASK, LABELLED_BODY, turns=varied_turns(4))})
    data = cli_json(root, "context", TASK, "--turn", "3")
    assert data["turn"] == 3
    assert "## Previous Turn Summary (Turn 2)" in data["context"]
    assert "case b" in data["context"] and "case c" not in data["context"]


def test_context_shows_the_frontmatter_ledger_without_turn_files(tmp_path: Path) -> None:
    text = task_text(TASK, LABELLED_BODY, turns=varied_turns(2), criteria={"AC-1": "verified", "AC-2": "rejected"})
    root = make_repo(tmp_path / "repo", {REL: text})
    out = cli(root, "context", TASK).stdout
    assert "✓ AC-1: Parser accepts `1h30m` and rejects garbage: verified" in out
    assert "✗ AC-2: Formatter renders the shortest form: rejected" in out
    assert "○ AC-3: Round trip holds: pending" in out


def test_legacy_feature_build_block_is_history(tmp_path: Path) -> None:
    turns = [{"turn": 1, "decision": "feedback", "feedback": "Missing token refresh edge case",
              "summary": "Implemented OAuth flow with tests"}]
    text = task_text(TASK, LABELLED_BODY, turns=turns, key="feature_build", decision_key="coach_decision")
    root = make_repo(tmp_path / "repo", {REL: text})
    out = cli(root, "context", TASK).stdout
    assert "## Previous Turn Summary (Turn 1)" in out
    assert "**What was attempted**: Implemented OAuth flow with tests" in out
    assert "Missing token refresh edge case" in out


def test_identical_frontmatter_feedback_is_a_stall_and_show_says_so(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: task_text(TASK, LABELLED_BODY, turns=feedback_turns(25))})
    data = cli_json(root, "show", TASK)
    assert data["stall"] is not None and "the same feedback 3 turns in a row" in data["stall"]
    assert "turns 23-25" in data["stall"]
    out = cli(root, "show", TASK).stdout
    assert "stall: the same feedback 3 turns in a row with no criteria verified (turns 23-25)" in out


def test_varied_frontmatter_feedback_is_no_stall(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: task_text(TASK, LABELLED_BODY, turns=varied_turns(6))})
    assert cli_json(root, "show", TASK)["stall"] is None
    assert "stall:" not in cli(root, "show", TASK).stdout


def test_unknown_progress_is_never_called_a_stall(tmp_path: Path) -> None:
    # A criterion verified at some point: the frontmatter does not say when, so the turns' counts
    # are unknown and the same feedback five times is not declared a stall on a guess.
    text = task_text(TASK, LABELLED_BODY, turns=feedback_turns(6), criteria={"AC-1": "verified"})
    task = TaskFile.from_bytes(text.encode(), Path(tmp_path / "t.md"))
    assert TaskHistory(task, None).stall() is None


def test_record_after_a_frontmatter_history_sees_the_stall(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: task_text(TASK, LABELLED_BODY, turns=feedback_turns(2))})
    (tmp_path / "p.json").write_text(json.dumps(player_report(3, task_id=TASK)))
    (tmp_path / "c.json").write_text(json.dumps(coach_decision(3, "feedback", task_id=TASK,
                                                               feedback=GENERIC_FEEDBACK)))
    run = cli(root, "record", TASK, "--player", str(tmp_path / "p.json"), "--coach", str(tmp_path / "c.json"),
              "--json")
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["turn"] == 3
    assert data["outcome"] == "unrecoverable_stall"
    assert "turns 1-3" in data["stall"]


def test_search_finds_frontmatter_feedback(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: task_text(TASK, LABELLED_BODY, turns=varied_turns(3))})
    data = cli_json(root, "search", "still failing case b", "--backend", "files")
    hits = data["hits"]
    assert hits, data
    top = hits[0]
    assert TASK in top["summary"] and "turn 2" in top["summary"]


def test_search_reads_a_frontmatter_turn_once_when_its_turn_file_exists(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: task_text(TASK, LABELLED_BODY, turns=varied_turns(2))})
    (tmp_path / "p.json").write_text(json.dumps(player_report(3, task_id=TASK, summary="Third part done")))
    (tmp_path / "c.json").write_text(json.dumps(coach_decision(3, "feedback", task_id=TASK,
                                                               feedback="zebra quartz unique words")))
    assert cli(root, "record", TASK, "--player", str(tmp_path / "p.json"),
               "--coach", str(tmp_path / "c.json")).returncode == 0
    hits = cli_json(root, "search", f"{TASK}", "--backend", "files", "--limit", "20")["hits"]
    turns = sorted(h["summary"].split(" turn ")[1].split(":")[0] for h in hits if TASK in h["summary"])
    assert turns == ["1", "2", "3"]


@pytest.mark.corpus
def test_corpus_task_with_25_recorded_turns(corpus_dir: Path, tmp_path: Path) -> None:
    source = next((corpus_dir / "tasks").rglob("TASK-CR-008-*.md"))
    root = make_repo(tmp_path / "repo", {f"tasks/completed/{source.name}": source.read_text(encoding="utf-8")})
    context = cli(root, "context", "TASK-CR-008")
    assert context.returncode == 0, context.stderr
    assert "## Previous Turn Summary (Turn 25)" in context.stdout
    assert "Tests did not pass during task-work execution" in context.stdout
    show = cli_json(root, "show", "TASK-CR-008")
    assert show["stall"] and "turns 23-25" in show["stall"]
    search = cli_json(root, "search", "Tests did not pass during task-work execution", "--backend", "files")
    assert any("TASK-CR-008" in hit["summary"] for hit in search["hits"])



def test_the_stall_window_sees_turn_files_as_the_ledger_reads_them(tmp_path: Path) -> None:
    """Frontmatter turns 1-2, turn files for 3-4: the window's signals are what full reads give."""
    root = make_repo(tmp_path / "repo", {REL: task_text(TASK, LABELLED_BODY, turns=varied_turns(2))})
    for turn in (3, 4):
        record_turn(root, TASK, player_report(turn, task_id=TASK),
                    coach_decision(turn, "feedback", task_id=TASK, feedback=f"- AC-1 still failing: case {turn}"))
    store = TurnStore(artifacts_dir(root, TASK), TASK)
    task = TaskFile.load(root / REL)
    window = TaskHistory(task, store).stall_history(5)
    full = TaskHistory(task, store)
    assert window == [turn_signal(state) for n in (1, 2, 3, 4) if (state := full.turn_state(n)) is not None]
    assert [s.turn for s in window] == [1, 2, 3, 4] and window[2].verified_count is not None
