"""A generated repository and a labelled query set for measuring search (``bench_index_queries``).

:func:`generate` writes a repository of 24 tasks over 5 features (task files with titles and
criteria, feature plans with waves and outcomes) and ~120 turns whose feedback, blockers, gate
results and measures come from a fixed list of *themes*, each worded several ways. Every turn's
themes are known, so :func:`questions` labels each question with the exact records that answer
it — computed from the generator's ground truth, never from a search. Deterministic (seeded).

The questions are of five kinds: exact identifiers ("turn 2 of TASK-PAY-003"), recency ("last
turn of ..."), themes asked in other words than the records use ("refresh tokens are reused"),
task and feature knowledge ("which feature had a task fail"), and filtered questions (``--task``,
``--feature``, ``--decision``, ``--since``).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: theme -> (ways a Coach wrote it in feedback, a blocker sentence or None, ways a user asks about it)
THEMES: dict[str, tuple[tuple[str, ...], str | None, tuple[str, ...]]] = {
    "refresh": (("Refresh token is reused instead of rotated", "Token refresh does not validate the expiry of "
                 "the original token"), None, ("refresh tokens are reused", "token rotation problems")),
    "migration": (("Migration drops the orders column without a backfill", "Alembic migration fails on a "
                   "fresh SQLite database"), "Staging database credentials missing",
                  ("database migration failures", "schema change broke the orders table")),
    "flaky": (("Integration test is flaky under parallel runs", "Intermittent failure in test_checkout when run "
               "in parallel"), None, ("flaky tests", "tests that fail intermittently")),
    "latency": (("p95 latency of 450 ms on the search endpoint", "Endpoint too slow under load"), None,
                ("slow endpoints", "latency too high")),
    "coverage": (("Coverage below the required threshold", "Not enough tests: coverage dropped"), None,
                 ("coverage below threshold", "which turns failed the coverage gate")),
    "typing": (("mypy strict reports errors in the payments module", "Type annotations missing on public "
                "functions"), None, ("type checking errors", "mypy failures")),
    "injection": (("SQL built by string formatting: injection risk", "User input reaches the query without "
                   "parameters"), None, ("sql injection risk", "unsafe query building")),
    "redis": (("Cache layer cannot reach Redis", "Redis connection refused in tests"), "Redis not available in CI",
              ("redis unavailable", "blocked because the cache server is missing")),
    "contract": (("Response shape differs from the agreed API contract", "Field names do not match the payments "
                  "API contract"), "Waiting on the API contract from the payments team",
                 ("waiting for the payments api contract", "api contract mismatch")),
}

FEATURES = {
    "FEAT-AUTH": ("Authentication", ["JWT login", "Token refresh", "Password reset", "Account lockout",
                                     "Session audit"]),
    "FEAT-PAY": ("Payments", ["Card capture", "Refunds", "Payment webhooks", "Invoice export", "Currency rounding"]),
    "FEAT-SEARCH": ("Search", ["Query parser", "Ranking tweaks", "Search endpoint", "Facets", "Autocomplete"]),
    "FEAT-CAT": ("Catalogue", ["Product import", "Catalogue cache", "Price history", "Stock sync"]),
    "FEAT-OPS": ("Operations", ["Schema migrations", "Health checks", "Deploy pipeline", "Log retention",
                                "Backup restore"]),
}
PREFIX = {"FEAT-AUTH": "AUTH", "FEAT-PAY": "PAY", "FEAT-SEARCH": "SRCH", "FEAT-CAT": "CAT", "FEAT-OPS": "OPS"}
#: Feature -> themes its tasks run into most.
AFFINITY = {"FEAT-AUTH": ["refresh", "flaky", "coverage"], "FEAT-PAY": ["contract", "typing", "injection"],
            "FEAT-SEARCH": ["latency", "flaky", "injection"], "FEAT-CAT": ["redis", "latency", "coverage"],
            "FEAT-OPS": ["migration", "flaky", "typing"]}


@dataclass
class Turn:
    key: str
    task: str
    feature: str
    number: int
    decision: str
    themes: list[str]
    when: str


@dataclass
class Repo:
    """What the generator wrote: every turn with its themes, and the tasks and features."""

    root: Path
    turns: list[Turn] = field(default_factory=list)
    tasks: dict[str, tuple[str, str, list[str]]] = field(default_factory=dict)  # id -> (feature, title, criteria)
    failed_tasks: list[str] = field(default_factory=list)

    def turns_of(self, task: str) -> list[Turn]:
        return [t for t in self.turns if t.task == task]


def generate(root: Path, *, seed: int = 7, turns_scale: int = 1, in_progress: bool = False) -> Repo:
    """Write the repository under ``root``; ``turns_scale`` multiplies the tasks (for large runs).

    ``in_progress`` leaves every task in progress, so retention keeps every turn in the index.
    """
    rng = random.Random(seed)
    repo = Repo(root)
    day = 0
    for copy in range(turns_scale):
        for feature, (name, titles) in FEATURES.items():
            plan_tasks = []
            for i, title in enumerate(titles, 1):
                task = f"TASK-{PREFIX[feature]}-{copy * 10 + i:03d}"
                criteria = [f"{title} works end to end", f"{title} has unit tests",
                            f"{title} is documented in the README"]
                repo.tasks[task] = (feature, title, criteria)
                count = rng.randint(3, 7)
                failed = rng.random() < 0.15
                for n in range(1, count + 1):
                    day += 1
                    last = n == count
                    decision = ("rejected" if failed else "approved") if last else rng.choice(["feedback", "rejected"])
                    themes = [] if (last and not failed) else [rng.choice(AFFINITY[feature] if rng.random() < 0.7
                                                                          else list(THEMES))]
                    when = f"2026-{1 + day // 28 % 12:02d}-{1 + day % 28:02d}T10:00:00"
                    repo.turns.append(Turn(_turn_key(feature, task, n), task, feature, n, decision, themes, when))
                    _write_turn(root, repo.turns[-1], rng)
                status = "failed" if failed else "completed"
                if failed:
                    repo.failed_tasks.append(task)
                _write_task(root, task, feature, title, criteria,
                            "in_progress" if in_progress else "in_review" if not failed else "blocked")
                plan_tasks.append({"id": task, "name": title, "status": status, "dependencies": [],
                                   "turns_completed": count,
                                   "result": {"total_turns": count, "final_decision": "max_turns_exceeded" if failed
                                              else "approved", "error": "stalled on review feedback" if failed
                                              else None}})
            if copy == 0 or turns_scale > 1:
                _write_plan(root, feature if copy == 0 else f"{feature}-{copy}", name, plan_tasks)
    return repo


def _turn_key(feature: str, task: str, n: int) -> str:
    return f"TURN-{feature}-{task}-T{n}"


def _write_turn(root: Path, turn: Turn, rng: random.Random) -> None:
    feedback, blockers, gates = None, [], []
    for theme in turn.themes:
        phrasings, blocker, _ = THEMES[theme]
        feedback = rng.choice(phrasings)
        if blocker:
            blockers.append(blocker)
        if theme == "coverage":
            gates.append({"gate": "coverage", "passed": False, "actual": 0.62, "threshold": 0.8,
                          "source": "built-in", "required": True})
    passed = rng.randint(5, 40)
    data: dict[str, Any] = {
        "id": turn.key, "feature_id": turn.feature, "task_id": turn.task, "turn_number": turn.number,
        "mode": "fresh_start" if turn.number == 1 else "continuing_work",
        "player_summary": f"Implemented part {turn.number} of {turn.task}", "player_decision": "implemented",
        "coach_decision": turn.decision, "coach_feedback": feedback, "blockers_found": blockers,
        "acceptance_criteria_status": {"AC-001": "completed", "AC-002": "in_progress"},
        "files_modified": [f"src/{turn.task.lower()}.py"], "tests_passed": passed,
        "tests_failed": 0 if turn.decision == "approved" else rng.randint(1, 4),
        "coverage": 0.62 if "coverage" in turn.themes else 0.85, "gate_results": gates,
        "started_at": turn.when.replace("T10", "T09"), "completed_at": turn.when,
    }
    directory = root / ".guardkit" / "autobuild" / turn.task
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"turn_state_turn_{turn.number}.json").write_text(json.dumps(data), encoding="utf-8")


def _write_task(root: Path, task: str, feature: str, title: str, criteria: list[str], status: str) -> None:
    path = root / "tasks" / status / f"{task}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["---", f"id: {task}", f"title: {title}", f"status: {status}", f"feature_id: {feature}",
             "task_type: feature", "complexity: 4", "---", "", f"# {title}", "", "## Acceptance Criteria", ""]
    path.write_text("\n".join(lines + [f"- [ ] {c}" for c in criteria]) + "\n", encoding="utf-8")


def _write_plan(root: Path, feature: str, name: str, tasks: list[dict[str, Any]]) -> None:
    path = root / ".guardkit" / "features" / f"{feature}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    failed = sum(1 for t in tasks if t["status"] == "failed")
    data = {"id": feature, "name": name, "status": "failed" if failed else "completed", "tasks": tasks,
            "orchestration": {"parallel_groups": [[t["id"] for t in tasks[:3]], [t["id"] for t in tasks[3:]]]},
            "execution": {"current_wave": 2, "completed_waves": [1, 2], "tasks_completed": len(tasks) - failed,
                          "tasks_failed": failed, "total_turns": sum(t["turns_completed"] for t in tasks)}}
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


@dataclass(frozen=True)
class Question:
    """A question, its filters, and the records that answer it (any order)."""

    text: str
    expected: frozenset[str]
    kind: str
    filters: tuple[tuple[str, str], ...] = ()


def questions(repo: Repo) -> list[Question]:
    """The labelled query set (>= 40 questions) for ``repo``."""
    out: list[Question] = []
    by_theme = {theme: frozenset(t.key for t in repo.turns if theme in t.themes) for theme in THEMES}
    for theme, (_, _, asks) in THEMES.items():
        out += [Question(ask, by_theme[theme], "theme") for ask in asks]
    tasks = sorted(repo.tasks)
    for task in tasks[::3]:
        turns = repo.turns_of(task)
        out.append(Question(f"turn {min(2, len(turns))} of {task}",
                            frozenset({turns[min(2, len(turns)) - 1].key}), "identifier"))
        out.append(Question(f"last turn of {task}", frozenset({turns[-1].key}), "recency"))
    for task in tasks[1::6]:
        feature, title, _ = repo.tasks[task]
        out.append(Question(f"which task is about {title.lower()}", frozenset({f"task:{task}"}), "task"))
    out.append(Question("which feature had a task stall on review feedback",
                        frozenset(f"feature:{f}" for f in FEATURES
                                  if any(repo.tasks[t][0] == f for t in repo.failed_tasks)), "feature"))
    for feature, (name, _) in list(FEATURES.items())[:3]:
        out.append(Question(f"how did the {name.lower()} feature go", frozenset({f"feature:{feature}"}), "feature"))
    for theme, feature in (("flaky", "FEAT-AUTH"), ("latency", "FEAT-SEARCH"), ("typing", "FEAT-PAY")):
        expected = frozenset(t.key for t in repo.turns if theme in t.themes and t.feature == feature)
        out.append(Question(THEMES[theme][2][0], expected, "filtered", (("feature", feature),)))
    rejected = frozenset(t.key for t in repo.turns if "coverage" in t.themes and t.decision == "rejected")
    out.append(Question("coverage below threshold", rejected, "filtered", (("decision", "rejected"),)))
    since = sorted(t.when for t in repo.turns)[len(repo.turns) * 3 // 4]
    recent = frozenset(t.key for t in repo.turns if "flaky" in t.themes and t.when >= since)
    out.append(Question("flaky tests", recent, "filtered", (("since", since),)))
    return [q for q in out if q.expected]


__all__ = ["THEMES", "Question", "Repo", "generate", "questions"]
