"""Criterion ids as GuardKit assigns them: the task's own label, else ``AC-00N`` by position.

Bodies say ``- [ ] AC-1: ...``, ``- [ ] **AC-2** ...`` or use ``### AC-001 — ...`` headings; a Coach
judges those ids, so the ledger, ``show``, ``context`` and ``record`` must speak them too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guardkit_state.errors import GuardkitStateError
from guardkit_state.model import text_hash
from guardkit_state.taskfile.criteria_text import extract_criteria
from guardkit_state.taskfile.frontmatter import parse_frontmatter

from .guardkit_fixtures import HEADING_BODY, LABELLED_BODY, cli, cli_json, make_repo, snapshot, task_text
from .helpers import coach_decision, player_report

TASK = "TASK-GK-002"
REL = f"tasks/in_progress/{TASK}-criteria.md"


def ids_and_texts(body: str, data: dict[str, object] | None = None) -> list[tuple[str, str]]:
    return [(c.id, c.text) for c in extract_criteria(data or {}, body)]


def test_labels_in_the_text_are_the_ids() -> None:
    assert ids_and_texts(LABELLED_BODY) == [
        ("AC-1", "Parser accepts `1h30m` and rejects garbage"),
        ("AC-2", "Formatter renders the shortest form"),
        ("AC-3", "Round trip holds"),
        ("AC-ANTISTUB-1", "no stub bodies in authored code"),
        ("AC-005", "All modified files pass lint"),
    ]


@pytest.mark.parametrize(("item", "expected"), [
    ("- [ ] **AC-4 — Compound IDs still work.** Add a fixture", ("AC-4", "Compound IDs still work. Add a fixture")),
    ("- [ ] **AC-2 (absent-vs-empty):** findings differ", ("AC-2", "(absent-vs-empty): findings differ")),
    ("- [ ] AC-001 (design gate): a design doc", ("AC-001", "(design gate): a design doc")),
    ("- [x] **AC-007-6** — idempotent replay", ("AC-007-6", "idempotent replay")),
    ("- [ ] AC-FORK-52C2-01: release cut", ("AC-FORK-52C2-01", "release cut")),
    ("- [ ] AC-XXX: a template placeholder", ("AC-001", "AC-XXX: a template placeholder")),
    ("- [ ] Implement what AC-3 of the parent asks", ("AC-001", "Implement what AC-3 of the parent asks")),
])
def test_label_styles(item: str, expected: tuple[str, str]) -> None:
    assert ids_and_texts(f"## Acceptance Criteria\n\n{item}\n") == [expected]


def test_headings_under_the_section_are_criteria() -> None:
    assert ids_and_texts(HEADING_BODY) == [
        ("AC-001", "Eligibility check"), ("AC-002", "Decision rule"), ("AC-003", "Report persisted")]


def test_frontmatter_list_comes_first() -> None:
    data = {"acceptance_criteria": ["AC-7: from frontmatter", {"id": "AC-X-1", "text": "named"}, "plain"]}
    assert ids_and_texts(LABELLED_BODY, data) == [("AC-7", "from frontmatter"), ("AC-X-1", "named"),
                                                  ("AC-003", "plain")]


def test_ids_are_unique() -> None:
    body = "## Acceptance Criteria\n\n- [ ] AC-002: labelled two\n- [ ] unlabelled second\n- [ ] AC-002: again\n"
    assert [c.id for c in extract_criteria({}, body)] == ["AC-002", "AC-002.2", "AC-003"]


def test_a_label_does_not_change_the_text_hash() -> None:
    # A ledger written while ids were positional hashed the whole item: it must still match.
    criterion = extract_criteria({}, "## Acceptance Criteria\n\n- [ ] AC-001: Login works\n  on mobile\n")[0]
    assert (criterion.id, criterion.text) == ("AC-001", "Login works on mobile")
    assert criterion.text_hash == text_hash("AC-001: Login works\non mobile")


def test_show_lists_heading_criteria(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: task_text(TASK, HEADING_BODY, turns=[])})
    run = cli(root, "show", TASK)
    assert run.returncode == 0, run.stderr
    assert "criteria 0/3 verified" in run.stdout
    assert "○ AC-002: Decision rule: pending" in run.stdout


def write_reports(tmp_path: Path, turn: int, verdicts: dict[str, str], *, decision: str = "feedback",
                  promises: list[tuple[str, str]] | None = None) -> tuple[Path, Path]:
    player, coach = tmp_path / f"p{turn}.json", tmp_path / f"c{turn}.json"
    player.write_text(json.dumps(player_report(turn, task_id=TASK, promises=promises)))
    feedback = None if decision == "approve" else "AC-2 still open"
    coach.write_text(json.dumps(coach_decision(turn, decision, task_id=TASK, verdicts=verdicts, feedback=feedback)))
    return player, coach


def test_a_coach_using_the_task_labels_updates_those_criteria(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: task_text(TASK, LABELLED_BODY, turns=[])})
    player, coach = write_reports(tmp_path, 1, {"AC-1": "verified", "AC-ANTISTUB-1": "verified"})
    run = cli(root, "record", TASK, "--player", str(player), "--coach", str(coach))
    assert run.returncode == 0, run.stderr
    criteria = {c["id"]: c["status"] for c in cli_json(root, "show", TASK)["criteria"]}
    assert criteria == {"AC-1": "verified", "AC-2": "pending", "AC-3": "pending", "AC-ANTISTUB-1": "verified",
                        "AC-005": "pending"}
    context = cli(root, "context", TASK).stdout
    assert "✓ AC-1: Parser accepts `1h30m` and rejects garbage: verified" in context
    assert "AC-001" not in context


@pytest.mark.parametrize("where", ["coach", "player"])
def test_record_rejects_an_unknown_criterion_id(tmp_path: Path, where: str) -> None:
    root = make_repo(tmp_path / "repo", {REL: task_text(TASK, LABELLED_BODY, turns=[])})
    if where == "coach":
        player, coach = write_reports(tmp_path, 1, {"AC-1": "verified", "AC-001": "verified"})
    else:
        player, coach = write_reports(tmp_path, 1, {}, promises=[("AC-1", "complete"), ("AC-9", "complete")])
    before = snapshot(root)
    run = cli(root, "record", TASK, "--player", str(player), "--coach", str(coach))
    assert run.returncode == 1, run.stdout + run.stderr
    assert "AC-1, AC-2, AC-3, AC-ANTISTUB-1, AC-005" in run.stderr
    assert ("AC-001" if where == "coach" else "AC-9") in run.stderr
    assert "Traceback" not in run.stderr
    assert snapshot(root) == before  # nothing written: no report, no turn state, no lock, same task file


def test_a_task_without_criteria_accepts_any_id(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {REL: task_text(TASK, "# Task\n\nNo criteria section.\n", turns=[])})
    player, coach = write_reports(tmp_path, 1, {"AC-001": "verified"})
    run = cli(root, "record", TASK, "--player", str(player), "--coach", str(coach))
    assert run.returncode == 0, run.stderr


@pytest.mark.corpus
def test_corpus_criteria_ids(corpus_dir: Path) -> None:
    """Every parseable corpus task: unique ids, one-line texts; the label styles read as GuardKit's."""
    by_name: dict[str, list[tuple[str, str]]] = {}
    for path in sorted((corpus_dir / "tasks").rglob("*.md")):
        try:
            parsed = parse_frontmatter(path.read_text(encoding="utf-8"))
        except GuardkitStateError:  # refusals are test_corpus_tasks' business; an untyped crash fails here
            continue
        criteria = extract_criteria(parsed.data, parsed.split.body)
        ids = [c.id for c in criteria]
        assert len(ids) == len(set(ids)), path
        assert all("\n" not in c.text and c.text for c in criteria), path
        by_name[path.name] = [(c.id, c.text) for c in criteria]
    observability = by_name["TASK-OBS-ABST-passive-run-success-observability.md"]
    assert [cid for cid, _ in observability] == [f"AC-{n:03d}" for n in range(1, 11)]
    assert observability[0] == ("AC-001", "CLI subcommand")
    antistub = by_name["TASK-QAV-001-anti-stub-scan-factory-core.md"]
    assert antistub[0][0] == "AC-1" and antistub[0][1].startswith("(positive, Python): a fixture")
    bold = by_name["TASK-HMIG-BDDWIRE-wire-factory-bdd-plugins-into-coach.md"]
    assert [cid for cid, _ in bold] == ["AC-1", "AC-2", "AC-3", "AC-4", "AC-5", "AC-6"]
    plain = by_name["TASK-CR-008-trim-dataclass-pydantic-patterns.md"]
    assert [cid for cid, _ in plain] == ["AC-001", "AC-002", "AC-003", "AC-004"]
