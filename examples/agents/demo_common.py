"""Helpers shared by the scripted demo Player and Coach (stdlib only).

Both agents are launched by ``guardkit-state feature-build`` with the turn described in environment
variables (see ``examples/README.md``). They read the task file, run the project's unit tests and
write a JSON report; these are the pieces they have in common.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Exit code for a missing or malformed environment (the protocol's "usage" code).
EXIT_USAGE = 2

_CHECKBOX = re.compile(r"^\s*[-*]\s+\[[ xX]\]\s+(?P<text>.+?)\s*$")
_HEADING = re.compile(r"^(#{1,6})\s+(?P<title>.+?)\s*#*\s*$")

# Runs in a subprocess with cwd = the project: the same discovery as
# ``python -m unittest discover -s tests -t .``, but the per-test outcomes are written as JSON so
# the agents never have to scrape unittest's human-readable output.
_RUNNER = r"""
import json, sys, unittest

class Result(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.outcomes = {}
        self.messages = {}

    def _set(self, test, outcome, err=None):
        test_id = test.id()
        if self.outcomes.get(test_id) not in (None, "passed"):
            return  # a failed subtest already marked this test
        self.outcomes[test_id] = outcome
        if err is not None:
            lines = [l for l in self._exc_info_to_string(err, test).strip().splitlines() if l.strip()]
            self.messages[test_id] = lines[-1].strip() if lines else outcome

    def addSuccess(self, test):
        super().addSuccess(test); self.outcomes.setdefault(test.id(), "passed")
    def addFailure(self, test, err):
        super().addFailure(test, err); self._set(test, "failed", err)
    def addError(self, test, err):
        super().addError(test, err); self._set(test, "error", err)
    def addSkip(self, test, reason):
        super().addSkip(test, reason); self._set(test, "skipped")
    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            self._set(test, "failed" if failed else "error", err)
    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err); self._set(test, "passed")
    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test); self._set(test, "failed")

loader = unittest.TestLoader()
suite = loader.discover("tests", top_level_dir=".")
result = Result()
suite.run(result)
json.dump({"outcomes": result.outcomes, "messages": result.messages,
           "load_errors": [e.strip().splitlines()[-1] for e in loader.errors]},
          open(sys.argv[1], "w", encoding="utf-8"))
"""

#: The command a person would type to run the same tests.
TEST_COMMAND = "python -m unittest discover -s tests -t ."


class AgentError(Exception):
    """The agent cannot do its job (bad environment, unreadable task file)."""


@dataclass
class TestRun:
    """Outcome of one run of the project's unit tests."""

    outcomes: dict[str, str] = field(default_factory=dict)  # test id -> passed|failed|error|skipped
    messages: dict[str, str] = field(default_factory=dict)  # test id -> last line of the failure
    load_errors: list[str] = field(default_factory=list)
    returncode: int = 0
    output: str = ""

    @property
    def passed(self) -> int:
        return sum(1 for o in self.outcomes.values() if o == "passed")

    @property
    def failed(self) -> int:
        return sum(1 for o in self.outcomes.values() if o in ("failed", "error"))

    def matching(self, prefixes: tuple[str, ...]) -> list[str]:
        """Test ids equal to, or inside, any of ``prefixes`` (a class or module id)."""
        return sorted(t for t in self.outcomes if any(t == p or t.startswith(p + ".") for p in prefixes))


def require_env(name: str) -> str:
    """Return an environment variable the protocol promises, or raise AgentError."""
    value = os.environ.get(name)
    if not value:
        raise AgentError(f"environment variable {name} is not set (is this running under feature-build?)")
    return value


def read_criteria(task_file: Path) -> list[tuple[str, str]]:
    """Return ``[(AC-001, text), ...]`` from the ``## Acceptance Criteria`` checkboxes, in order.

    Numbering follows GuardKit's (and guardkit-state's) rule: the n-th checkbox is ``AC-00n``.
    """
    try:
        text = task_file.read_text(encoding="utf-8")
    except OSError as exc:
        raise AgentError(f"cannot read task file {task_file}: {exc}") from exc
    criteria: list[tuple[str, str]] = []
    in_section = False
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading:
            in_section = heading.group("title").strip().lower() == "acceptance criteria"
            continue
        if in_section:
            box = _CHECKBOX.match(line)
            if box:
                criteria.append((f"AC-{len(criteria) + 1:03d}", box.group("text")))
    return criteria


def run_unittests(cwd: Path, *, timeout: float = 300.0) -> TestRun:
    """Run the project's unit tests in a fresh interpreter and return per-test outcomes."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    with tempfile.TemporaryDirectory(prefix="demo-tests-") as tmp:
        out_path = Path(tmp) / "results.json"
        proc = subprocess.run([sys.executable, "-c", _RUNNER, str(out_path)], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout, check=False)
        run = TestRun(returncode=proc.returncode, output=(proc.stdout + proc.stderr)[-4000:])
        if not out_path.exists():
            # The runner itself died (e.g. the tests called sys.exit); report it as a load error.
            last = run.output.strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
            run.load_errors.append(f"test runner failed: {last[0]}")
            return run
        data: dict[str, Any] = json.loads(out_path.read_text(encoding="utf-8"))
    run.outcomes = {k: v for k, v in data["outcomes"].items() if v}
    run.messages = data["messages"]
    run.load_errors = list(data["load_errors"])
    # A module that fails to import shows up as a synthetic failed test; surface it as a load error.
    for test_id in [t for t in run.outcomes if t.startswith("unittest.loader._FailedTest.")]:
        run.load_errors.append(f"{test_id.rsplit('.', 1)[-1]}: {run.messages.get(test_id, 'import failed')}")
    return run


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as JSON through a temp file and a rename, so a reader never sees half a report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def say(role: str, message: str) -> None:
    """Progress for the person watching (stderr; the loop shows it with --verbose)."""
    print(f"[{role}] {message}", file=sys.stderr, flush=True)


def run_main(role: str, agent: Callable[[Path], int]) -> int:
    """An agent's entry point: run it in the worktree; usage problems exit 2, Ctrl-C exits 130."""
    try:
        return agent(Path.cwd())
    except AgentError as exc:
        say(role, f"error: {exc}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        say(role, "interrupted")
        return 130
