"""``guardkit-state config show`` and ``guardkit-state suggest-mode`` through the real CLI."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from guardkit_state.cli.app import run

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "entity-overrides.yaml.example"
OVERRIDE = "override: .guardkit/config/entity-overrides.yaml"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / ".guardkit" / "config").mkdir(parents=True)
    return root


@pytest.fixture
def overridden(repo: Path) -> Path:
    shutil.copy(EXAMPLE, repo / ".guardkit" / "config" / "entity-overrides.yaml")
    return repo


def test_config_show_text_marks_overridden_values(overridden: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["config", "show", "--repo", str(overridden)]) == 0
    out = capsys.readouterr().out
    assert "  entity overrides: .guardkit/config/entity-overrides.yaml\n" in out
    assert "Quality gates (from built-in unless marked)" in out
    assert f"feature        4-6     arch review 60 | coverage 85% [{OVERRIDE}] | tests must pass\n" in out
    assert "feature        1-3     arch review 50 | coverage 70% | tests must pass\n" in out
    assert f"      - Verify OPG registration compliance [{OVERRIDE}]\n" in out
    assert "      - Run quality gates\n" in out
    assert "Implementation modes (advisory only)" in out


@pytest.mark.parametrize("section", ["gates", "roles", "modes"])
def test_config_show_json_section(section: str, overridden: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["config", "show", section, "--json", "--repo", str(overridden)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"files", section}
    if section == "gates":
        feature = next(p for p in data["gates"]["profiles"] if p["id"] == "QG-feature-4-6")
        assert feature["coverage_threshold"] == 0.85
        assert feature["sources"]["coverage_threshold"] == OVERRIDE
        assert data["gates"]["source"] == "built-in"
    elif section == "roles":
        assert data["roles"]["coach"]["must_do"][-1] == {"text": "Check Moneyhub API contract alignment",
                                                         "source": OVERRIDE}
    else:
        assert [m["mode"] for m in data["modes"]] == ["direct", "task_work", "autobuild"]


def test_config_show_malformed_file_exits_2_with_one_line(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = repo / ".guardkit" / "config" / "entity-overrides.yaml"
    path.write_text("quality_gate_configs:\n  feature:\n    overrides:\n      - coverage_threshold: high\n")
    assert run(["config", "show", "--repo", str(repo)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (f"error: {path}:4: $.quality_gate_configs.feature.overrides[0].coverage_threshold: "
                            "expected number, got string \"high\"\n")


def test_config_without_action_shows_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["config"]) == 2
    assert "show" in capsys.readouterr().out


@pytest.mark.parametrize(("complexity", "mode"), [(2, "direct"), (7, "autobuild"), (5, "task_work")])
def test_suggest_mode_with_complexity(
    complexity: int, mode: str, repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["suggest-mode", "--complexity", str(complexity), "--repo", str(repo)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(f"Suggested mode: {mode} (")
    assert f"complexity {complexity} from --complexity" in captured.err


def test_suggest_mode_json(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["suggest-mode", "--complexity", "7", "--json", "--repo", str(repo)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["advice"]["suggested_mode"] == "autobuild"
    assert data["advice"]["alternatives"] == ["task_work"]
    assert data["complexity_source"] == "--complexity"


def test_suggest_mode_without_estimate_is_advice_not_error(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["suggest-mode", "--complexity", "0", "--repo", str(repo)]) == 0
    assert capsys.readouterr().out.startswith("No suggestion: complexity 0")


def test_suggest_mode_needs_task_or_complexity(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["suggest-mode"]) == 2
    assert capsys.readouterr().err.startswith("error: give a TASK-ID or --complexity N")


def test_suggest_mode_refuses_bad_task_id(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["suggest-mode", "../etc/passwd", "--repo", str(repo)]) == 2
    assert "invalid task id" in capsys.readouterr().err


def test_config_show_json_in_a_subprocess(overridden: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "guardkit_state", "config", "show", "gates", "--json",
                             "--repo", str(overridden)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["files"]["entity_overrides"] == ".guardkit/config/entity-overrides.yaml"


def write_task(repo: Path, task_id: str, complexity: str) -> Path:
    path = repo / "tasks" / "backlog" / f"{task_id}-add-login.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nid: {task_id}\ntitle: Add login\ntask_type: feature\ncomplexity: {complexity}\n---\n\n"
                    "# Add login\n\n## Acceptance Criteria\n\n- [ ] User can log in\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(("complexity", "mode"), [("2", "direct"), ("7", "autobuild")])
def test_suggest_mode_reads_the_task_complexity(complexity: str, mode: str, repo: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = write_task(repo, "TASK-AUTH-001", complexity)
    write_task(repo, "TASK-AUTH-0010", "9")  # a longer id must not be found by prefix
    assert run(["suggest-mode", "TASK-AUTH-001", "--repo", str(repo), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["complexity"] == int(complexity)
    assert data["complexity_source"] == str(path)
    assert data["advice"]["suggested_mode"] == mode


def test_suggest_mode_for_task_without_complexity(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_task(repo, "TASK-AUTH-002", "0")
    assert run(["suggest-mode", "TASK-AUTH-002", "--repo", str(repo)]) == 0
    assert capsys.readouterr().out.startswith("No suggestion: complexity 0 (from ")


def test_suggest_mode_unknown_task_exits_2(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["suggest-mode", "TASK-NOPE-1", "--repo", str(repo)]) == 2  # a usage error, as everywhere
    assert "no task file for TASK-NOPE-1" in capsys.readouterr().err


def test_cli_constants_match_the_library() -> None:
    from guardkit_state.cli import cmd_config
    from guardkit_state.config import loader

    assert cmd_config.SECTIONS == loader.SECTIONS
    assert loader.QUALITY_GATES_FILE.as_posix() == cmd_config.QUALITY_GATES_FILE
    assert loader.OVERRIDES_FILE.as_posix() == cmd_config.OVERRIDES_FILE
