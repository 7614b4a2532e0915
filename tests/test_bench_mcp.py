"""The MCP benchmark case runs at a tiny size and reports both columns (timings are not checked)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_mcp_case_measures_the_server_beside_the_cli(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    proc = subprocess.run([sys.executable, "-m", "tests.bench", "--quick", "--no-langgraph", "--status-files", "40",
                           "--only", "mcp", "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = json.loads(out.read_text(encoding="utf-8"))["cases"]["mcp"]
    # On the corpus-shaped repository when the corpus is there, else a generated one of 40 files.
    assert row["files"] >= 40 and (row["feature"] is not None or row["turns"] == 5)
    assert set(row["tools"]) >= {"status", "show", "context", "criteria", "turn_reports", "search"}
    assert all(ms > 0 for ms in row["tools"].values()) and row["help_ms"] > 0
    for name in ("show", "context"):
        assert row[f"mcp_{name}_ms"] > 0 and row[f"cli_{name}_ms"] > 0
    assert "| MCP show, warm tool call in the server (" in proc.stdout
    assert "| MCP status, warm tool call in the server (" in proc.stdout
