"""The skip account: a run ends with one line counting its skips by reason, and under CI=true a skip
whose reason tests/allowed_skips.py does not allow in CI fails an otherwise green run (across
pytest-xdist workers, collection skips included)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .allowed_skips import SKIP_REASONS, classify
from .skip_account import account

REPO_ROOT = Path(__file__).resolve().parent.parent

_SUITE = '''
import pytest

def test_passes():
    pass

def test_tmpfs():
    pytest.skip("cannot mount a tmpfs here (needs root); RLIMIT_FSIZE covers the full-disk path")

def test_corpus():
    pytest.skip("GuardKit corpus not found at /nowhere (it sits beside the clone in CI)")

@pytest.mark.xfail(reason="an expected failure is not a skip")
def test_xfail():
    assert False
'''
_MODULE_SKIP = '''
import pytest
pytest.importorskip("no_such_package_here", reason="the graphiti extra is not installed (pip install '.[graphiti]')")

def test_never_collected():
    pass
'''


def _run(tmp_path: Path, files: dict[str, str], ci: str | None, workers: str = "2") -> subprocess.CompletedProcess[str]:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    # Not CI's settings nor those of an xdist worker this test may itself be running in.
    env = {k: v for k, v in os.environ.items()
           if k not in ("CI", "GUARDKIT_SKIPS_STRICT", "PYTEST_ADDOPTS") and not k.startswith("PYTEST_XDIST")}
    if ci is not None:
        env["CI"] = ci
    # From the repository root so the plugin imports as tests.skip_account; the suite is the temp one.
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.skip_account", "-q", "-n", workers,
                           "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path), str(tmp_path)],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False)


def test_the_run_ends_with_the_account_and_passes_outside_ci(tmp_path: Path) -> None:
    result = _run(tmp_path, {"test_suite.py": _SUITE, "test_module_skip.py": _MODULE_SKIP}, ci=None)
    assert result.returncode == 0, result.stdout + result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert last == "skips: 3 (extra not installed: 1, no ../shared/corpus: 1, no tmpfs mount: 1)", result.stdout


def test_ci_fails_a_green_run_on_a_skip_it_does_not_allow(tmp_path: Path) -> None:
    result = _run(tmp_path, {"test_suite.py": _SUITE}, ci="true")
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.strip().splitlines()
    assert "skip not allowed in CI (tests/allowed_skips.py): test_suite.py::test_corpus: GuardKit corpus not found" \
        in "\n".join(lines)
    assert lines[-1] == "skips: 2 (no ../shared/corpus: 1, no tmpfs mount: 1); 1 not allowed in CI: the run fails"


def test_ci_passes_when_every_skip_is_allowed(tmp_path: Path) -> None:
    suite = _SUITE.replace('pytest.skip("GuardKit corpus not found', 'pytest.skip("no default POSIX ACLs here: x; ')
    result = _run(tmp_path, {"test_suite.py": suite}, ci="true", workers="0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().splitlines()[-1] == "skips: 2 (no POSIX ACLs: 1, no tmpfs mount: 1)"


@pytest.mark.parametrize("message, label, allowed", [
    ("cannot mount a tmpfs here (needs root); RLIMIT_FSIZE covers the full-disk path", "no tmpfs mount", True),
    ("giving a file another group needs root", "not root", False),
    ("no Chromium on this machine: install the system package", "no Chromium", False),
    ("cannot fetch the build backend: No matching distribution", "offline wheel build", True),
    ("could not import 'x': No module named 'x'", "extra not installed", False),
])
def test_skip_messages_are_classified_by_reason(message: str, label: str, allowed: bool) -> None:
    reason = classify(message)
    assert reason is not None and (reason.label, reason.allowed_in_ci) == (label, allowed)


def test_an_unknown_reason_is_counted_under_its_message_and_refused() -> None:
    line, refused = account([("t.py::a", "the moon is full"), ("t.py::b", "no default POSIX ACLs here: EOPNOTSUPP")])
    assert line == "skips: 2 (no POSIX ACLs: 1, the moon is full: 1)"
    assert refused == [("t.py::a", "the moon is full")]
    assert account([]) == ("skips: 0", [])


def test_the_list_allowed_in_ci_stays_short_and_documented() -> None:
    allowed = [reason.label for reason in SKIP_REASONS if reason.allowed_in_ci]
    assert len(allowed) <= 5
    contributing = (REPO_ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    assert all(f"`{label}`" in contributing for label in allowed), allowed
