"""The suite's own set-up (tests/conftest.py): what the processes its tests start inherit from it."""

from __future__ import annotations

import subprocess
import sys

from .conftest import REPO_ROOT

# Run as pytest runs the suite's set-up first; then a child of it tells how it gets SIGINT.
_SUITE = (
    "import signal, subprocess, sys\n"
    "ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN\n"
    "import tests.conftest\n"
    "child = 'import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)'\n"
    "told = subprocess.run([sys.executable, '-c', child], capture_output=True, text=True, check=True).stdout\n"
    "print(ignored, told.strip())\n"
)


def test_a_suite_started_in_the_background_gives_the_workers_it_starts_sigint_as_a_terminal_does() -> None:
    # `pytest ... &` in a shell without job control: the suite starts with SIGINT ignored, and so,
    # unless the set-up gives it back, would every worker a test sends Ctrl-C to (it never stops).
    done = subprocess.run(["sh", "-c", '"$0" -c "$1" & wait', sys.executable, _SUITE], cwd=REPO_ROOT,
                          capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]  # started ignoring it; its child gets KeyboardInterrupt
