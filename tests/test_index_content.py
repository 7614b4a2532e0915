"""Worth asking: tasks (title, criteria, status), feature plans (tasks, waves, outcome), turns with
their structured fields (coverage, tests, gate results, timestamps), turns known only from task
frontmatter; filters and recency; one tokenisation for both backends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.guardkit_fixtures import task_text
from tests.index_helpers import keys, write_plan, write_task, write_turn

pytest.importorskip("graphiti_core", reason="the graphiti extra is not installed (pip install '.[graphiti]')")
pytest.importorskip("redislite", reason="falkordblite is not installed (see the Makefile's install step)")

from guardkit_state.cli.app import run
from guardkit_state.index import FileIndex, make_filters, open_graphiti
from guardkit_state.index.base import SearchHit
from guardkit_state.index.query import Filters
from guardkit_state.index.words import index_text, tokens

pytestmark = [pytest.mark.graphiti, pytest.mark.slow]

COVERAGE_GATE = {"gate": "coverage", "passed": False, "actual": 0.62, "threshold": 0.8, "source": "built-in",
                 "required": True}


def _project(root: Path) -> Path:
    write_task(root, "TASK-AUTH-001", "Login returns JWT tokens", feature="FEAT-AUTH",
               criteria=("Login returns a signed JWT", "Refresh rotates the refresh token",
                         "Lock the account after five failed logins"))
    write_task(root, "TASK-CACHE-002", "Cache the product catalogue in Redis", status="completed",
               criteria=("Cache hit ratio above 80 percent",))
    (root / "tasks" / "in_progress" / "TASK-LEGACY-009.md").write_text(task_text(
        "TASK-LEGACY-009", "# Legacy\n", turns=[{"turn": 1, "decision": "feedback",
                                                  "feedback": "Flaky websocket reconnect handshake"}]))
    write_plan(root, "FEAT-AUTH", "Authentication", [
        {"id": "TASK-AUTH-001", "name": "JWT login", "status": "in_progress", "dependencies": []},
        {"id": "TASK-AUTH-0010", "name": "Password reset", "status": "failed", "dependencies": ["TASK-AUTH-001"],
         "result": {"total_turns": 4, "final_decision": "max_turns_exceeded", "error": "stalled on e-mail stub"}},
    ], execution={"current_wave": 2, "completed_waves": [1], "tasks_failed": 1, "total_turns": 7})
    write_plan(root, "FEAT-CACHE", "Catalogue caching", [
        {"id": "TASK-CACHE-002", "name": "Redis cache", "status": "completed", "dependencies": [],
         "result": {"total_turns": 2, "final_decision": "approved"}}], status="completed")
    write_turn(root, "FEAT-AUTH", "TASK-AUTH-001", 1, "rejected", feedback="Coverage below the threshold",
               tests_passed=12, tests_failed=2, coverage=0.62, gate_results=[COVERAGE_GATE],
               completed_at="2026-03-01T10:00:00")
    write_turn(root, "FEAT-AUTH", "TASK-AUTH-001", 2, "feedback", feedback="Refresh token not rotated",
               tests_passed=15, tests_failed=0, coverage=0.84, completed_at="2026-03-02T10:00:00")
    write_turn(root, "FEAT-AUTH", "TASK-AUTH-001", 3, "approved", tests_passed=18, tests_failed=0, coverage=0.9,
               completed_at="2026-03-03T10:00:00")
    write_turn(root, "FEAT-CACHE", "TASK-CACHE-002", 1, "approved", coverage=0.81,
               completed_at="2026-02-01T09:00:00", gate_results=[dict(COVERAGE_GATE, passed=True, actual=0.81)])
    return root


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, object]]:
    root = _project(tmp_path_factory.mktemp("content") / "proj")
    with open_graphiti(root) as index:
        index.sync()
        yield root, index



def _both(indexed: tuple[Path, object], query: str, filters: Filters | None = None,
          limit: int = 10) -> dict[str, list[SearchHit]]:
    root, index = indexed
    return {"files": FileIndex(root).search(query, limit=limit, filters=filters),
            "graphiti": index.search(query, limit=limit, filters=filters)}  # type: ignore[attr-defined]


def test_tasks_are_indexed_with_title_criteria_and_status(indexed: tuple[Path, object]) -> None:
    for backend, hits in _both(indexed, "lock the account after failed logins").items():
        assert keys(hits)[:1] == ["task:TASK-AUTH-001"], backend
    for backend, hits in _both(indexed, "AC-003").items():
        assert keys(hits) == ["task:TASK-AUTH-001"], backend  # a criterion id names its task
    _, index = indexed
    (hit,) = index.search("task TASK-CACHE-002", limit=1)  # type: ignore[attr-defined]
    assert "status completed" in hit.summary and hit.feature_id == "FEAT-CACHE"  # the plan gave its feature


def test_feature_plans_are_indexed_with_tasks_waves_and_outcome(indexed: tuple[Path, object]) -> None:
    for backend, hits in _both(indexed, "stalled e-mail stub max turns exceeded").items():
        assert keys(hits)[:1] == ["feature:FEAT-AUTH"], backend
    (feature,) = [h for h in _both(indexed, "feature FEAT-AUTH")["graphiti"] if h.kind == "feature"]
    assert "1 failed" in feature.summary and "current wave 2" in feature.summary


def test_turns_carry_tests_coverage_gates_and_timestamps(indexed: tuple[Path, object]) -> None:
    for backend, hits in _both(indexed, "coverage gate failed").items():
        assert keys(hits)[:1] == ["TURN-FEAT-AUTH-TASK-AUTH-001-T1"], backend
        assert hits[0].completed_at == "2026-03-01T10:00:00"
    root, _ = indexed
    (turn,) = [r for r in FileIndex(root).records() if r.key == "TURN-FEAT-AUTH-TASK-AUTH-001-T1"]
    assert "tests 12 passed, 2 failed; coverage 62%" in turn.search_text
    assert "gate coverage failed: actual 0.62, threshold 0.8" in turn.search_text


def test_turns_known_only_from_task_frontmatter_are_indexed(indexed: tuple[Path, object]) -> None:
    for backend, hits in _both(indexed, "websocket reconnect handshake").items():
        assert keys(hits)[:1] == ["TURN-NOFEAT-TASK-LEGACY-009-T1"], backend


def test_filters_task_feature_decision_since(indexed: tuple[Path, object]) -> None:
    cases = [
        (make_filters(task="TASK-AUTH-001"), "token", {"TURN-FEAT-AUTH-TASK-AUTH-001-T2", "task:TASK-AUTH-001"}),
        (make_filters(decision="rejected"), "coverage", {"TURN-FEAT-AUTH-TASK-AUTH-001-T1"}),
        (make_filters(feature="FEAT-CACHE"), "redis cache", {"task:TASK-CACHE-002", "feature:FEAT-CACHE",
                                                            "TURN-FEAT-CACHE-TASK-CACHE-002-T1"}),
        (make_filters(since="2026-03-02"), "coverage", {"TURN-FEAT-AUTH-TASK-AUTH-001-T2",
                                                        "TURN-FEAT-AUTH-TASK-AUTH-001-T3"}),
    ]
    for filters, query, expected in cases:
        for backend, hits in _both(indexed, query, filters).items():
            assert set(keys(hits)) <= expected and keys(hits), (backend, filters, keys(hits))


def test_recency_answers_the_last_turn(indexed: tuple[Path, object]) -> None:
    for backend, hits in _both(indexed, "last turn of TASK-AUTH-001").items():
        assert keys(hits) == ["TURN-FEAT-AUTH-TASK-AUTH-001-T3"], backend
    for backend, hits in _both(indexed, "latest turns of TASK-AUTH-001").items():
        assert [h.turn_number for h in hits] == [3, 2, 1], backend


def test_one_tokenisation_for_both_backends(indexed: tuple[Path, object]) -> None:
    assert tokens("coverage_threshold TASK-GE-001") == ["coverage_threshold", "coverage", "threshold",
                                                         "task_ge_001", "task", "ge", "001"]
    assert index_text("coverage_threshold") == "coverage_threshold coverage threshold"
    for query in ("coverage threshold", "coverage_threshold"):
        for backend, hits in _both(indexed, query).items():
            assert "TURN-FEAT-AUTH-TASK-AUTH-001-T1" in keys(hits), (backend, query)


def test_cli_filters(indexed: tuple[Path, object], capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = indexed
    assert run(["search", "coverage", "--decision", "rejected", "--since", "2026-01-01", "--repo", str(root),
                "--backend", "files", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"TURN-FEAT-AUTH-TASK-AUTH-001-T1"' in out and "T2" not in out
    assert run(["search", "x", "--since", "last tuesday", "--repo", str(root), "--backend", "files"]) == 2
    assert "--since 'last tuesday'" in capsys.readouterr().err
