"""The skip account: ``make test`` ends with one line saying what was skipped and why.

Hooks, imported by ``tests/conftest.py``. They run in the controlling process only (under
pytest-xdist the workers' reports reach it, collection skips once), and read the terminal
reporter's own ``skipped`` list, so the count is the one pytest prints. Under ``CI=true`` a skip
whose reason is not allowed in CI by ``tests/allowed_skips.py`` turns a green run into a failure,
naming the test and its reason.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pytest

from .allowed_skips import classify

_STRICT = "GUARDKIT_SKIPS_STRICT"
_LINE = pytest.StashKey[str]()
_REFUSED = pytest.StashKey[list[tuple[str, str]]]()


def _is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")


def _strict() -> bool:
    """CI (``CI=true``, as ``.ci/run`` sets it) or ``GUARDKIT_SKIPS_STRICT=1``: unlisted skips fail."""
    return any(os.environ.get(name, "").lower() in ("1", "true", "yes") for name in ("CI", _STRICT))


def _message(report: Any) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        message = str(longrepr[2])
    else:
        message = str(longrepr)
    return message.removeprefix("Skipped: ")


def _skips(config: pytest.Config) -> list[tuple[str, str]]:
    """(where, message) of every skip pytest counted (xfails are not skips)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    reports = reporter.stats.get("skipped", []) if reporter is not None else []
    return [(report.nodeid or str(report.fspath), _message(report)) for report in reports
            if not hasattr(report, "wasxfail")]


def account(skips: list[tuple[str, str]]) -> tuple[str, list[tuple[str, str]]]:
    """The one-line account, and the skips CI does not allow."""
    labels: Counter[str] = Counter()
    refused: list[tuple[str, str]] = []
    for where, message in skips:
        reason = classify(message)
        labels[reason.label if reason else message[:60]] += 1
        if reason is None or not reason.allowed_in_ci:
            refused.append((where, message))
    ordered = sorted(labels.items(), key=lambda item: (-item[1], item[0]))  # the same line whatever the run order
    detail = ", ".join(f"{label}: {count}" for label, count in ordered)
    return f"skips: {len(skips)}" + (f" ({detail})" if detail else ""), refused


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if not _is_controller(config):
        return
    line, refused = account(_skips(config))
    config.stash[_LINE] = line
    if refused and _strict():
        config.stash[_REFUSED] = refused
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    """Printed last, after pytest's own summary line, so the run ends with it."""
    if not _is_controller(config) or _LINE not in config.stash:
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    refused = config.stash.get(_REFUSED, [])
    for where, message in refused:
        reporter.write_line(f"skip not allowed in CI (tests/allowed_skips.py): {where}: {message}", red=True)
    reporter.write_line(config.stash[_LINE] + (f"; {len(refused)} not allowed in CI: the run fails" if refused else ""))

