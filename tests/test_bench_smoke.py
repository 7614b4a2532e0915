"""The benchmark runner works at tiny sizes and writes well-formed JSON (timings are not checked)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_bench_runner_quick_writes_results_and_table(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "tests.bench", "--quick", "--no-langgraph", "--status-files", "60",
         "--only", "record,resume,storage,status,startup,reads", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text(encoding="utf-8"))
    assert results["quick"] is True
    assert results["machine"]["cpu_count"] >= 1
    cases = results["cases"]
    assert [row["prior_turns"] for row in cases["record"]] == [1, 10]
    assert [row["prior_turns"] for row in cases["record_no_promises"]] == [1, 10]
    assert [(row["prior_turns"], row["promises"]) for row in cases["record_turn"]] == [(1, True), (1, False)]
    for row in cases["record"] + cases["record_no_promises"] + cases["record_turn"] + cases["resume"]:
        assert row["ours_ms"] > 0 and row["floor_ms"] > 0
        assert row["langgraph_ms"] is None  # --no-langgraph: the column is left out, not faked
    assert cases["storage"]["turns"] == 5
    assert cases["storage"]["ours_bytes"] >= cases["storage"]["own_bytes"] > 0
    # GuardKit's shape when the corpus is there (its files, at least), else 60 generated files.
    assert cases["status"]["files"] >= 60 and cases["status"]["listed"] <= cases["status"]["with_state"]
    assert cases["status"]["peak_rss_mb"] > 0
    assert cases["startup"]["help_ms"] > 0
    assert "| Record a turn, public record_turn, 1 prior turns, with promises |" in proc.stdout
    assert "| Record a turn, public record_turn, 1 prior turns, without promises |" in proc.stdout
    assert "| Record a turn in a running loop (open lifecycle), 1 prior turns |" in proc.stdout
    assert "| Record a turn in a running loop (open lifecycle), 1 prior turns, no promises |" in proc.stdout
    assert "| status --json, warm (nothing changed) |" in proc.stdout
    reads = cases["reads"]
    if "skipped" not in reads:  # the reads run on the corpus-shaped repository only
        assert [row["name"] for row in reads["reads"]] == ["show TASK", "context TASK", "log TASK", "show FEAT",
                                                           "status"]
        assert reads["help_ms"] > 0 and all(row["ms"] > 0 for row in reads["reads"])
        assert "| show TASK (" in proc.stdout
    # Resume is timed in a new interpreter per sample, as its label says, not in the warm runner.
    assert {row["process"] for row in cases["resume"]} == {"fresh per sample"}
    assert "| Resume at 1 turns, new process (open + resume point + context) |" in proc.stdout
    assert "Note: LangGraph columns skipped: disabled" in proc.stdout


def test_bench_runner_refuses_unknown_case(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "tests.bench", "--only", "record,nope", "--out",
                           str(tmp_path / "r.json")], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "unknown case(s): nope" in proc.stderr
    assert not (tmp_path / "r.json").exists()
