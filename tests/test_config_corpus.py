"""Real GuardKit tasks: every task type and complexity in the corpus gets a gate profile and advice."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from guardkit_state.config import default_config
from guardkit_state.errors import GuardkitStateError
from guardkit_state.taskfile.document import TaskFile

# Types real tasks use that have no profile of their own and no alias: they fall back with a warning.
EXPECTED_UNKNOWN = {"review", "ops", "operator_handoff", "declarative", "validation", "research", "operation",
                    "investigation", "infrastructure", "configuration", "benchmark"}


@pytest.mark.corpus
def test_every_real_task_gets_a_gate_profile(corpus_dir: Path) -> None:
    config = default_config()
    resolved: Counter[str] = Counter()
    warned: set[str] = set()
    loaded = 0
    for path in sorted((corpus_dir / "tasks").rglob("*.md")):
        try:
            task = TaskFile.load(path)
        except GuardkitStateError:
            continue  # unreadable frontmatter is the task file module's business, not the gates'
        if task.task_type is None:
            continue
        loaded += 1
        lookup = config.lookup_gate_profile(task.task_type, task.data.get("complexity"))
        assert lookup.profile.covers(lookup.complexity)
        resolved[lookup.task_type] += 1
        if any("unknown task_type" in w for w in lookup.warnings):
            warned.add(task.task_type.strip().lower())
        advice = config.suggest_mode(task.complexity)
        assert advice is None or advice.mode.covers(advice.complexity)
    assert loaded > 500
    assert warned <= EXPECTED_UNKNOWN
    assert {"fix", "bugfix", "implementation", "refactor", "enhancement"}.isdisjoint(warned)
    assert set(resolved) <= {"feature", "testing", "documentation", "scaffolding"}
