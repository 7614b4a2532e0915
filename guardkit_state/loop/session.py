"""What surrounds one run of the loop in its process: the log file, and signals that stop it like Ctrl+C."""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from guardkit_state.store.fsio import ensure_private_dir


@contextlib.contextmanager
def interrupts_as_exceptions() -> Iterator[None]:
    """SIGTERM and SIGHUP behave like Ctrl+C: a KeyboardInterrupt the loop turns into a saved stop.

    SIGHUP (a closed terminal, a dropped SSH session) would otherwise kill the loop without
    stopping its agent, which runs in a session of its own and would be left working unattended.
    """
    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signums = [signal.SIGTERM]
    hangup = getattr(signal, "SIGHUP", None)
    # A SIGHUP the run was started ignoring (``nohup guardkit-state ... &``, a worker left running
    # over SSH) stays ignored: the person asked for the run to outlive the terminal.
    if hangup is not None and signal.getsignal(hangup) != signal.SIG_IGN:
        signums.append(hangup)
    try:
        previous = {signum: signal.signal(signum, handler) for signum in signums}
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


@contextlib.contextmanager
def logging_to(path: Path) -> Iterator[None]:
    """Append the library's log (INFO and up) to ``path`` for the duration of the block."""
    ensure_private_dir(path.parent)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    root = logging.getLogger("guardkit_state")
    old_level = root.level
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.INFO:
        root.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        handler.close()
