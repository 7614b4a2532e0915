"""The ``guardkit-state`` command: a thin twin of the library.

Each command lives in its own module with a ``register(subparsers)`` function that adds its parser
and sets ``handler`` (a function of the parsed args and the output, returning an
:class:`~guardkit_state.cli.exit_codes.ExitCode`). A handler calls one library function and
renders its result; errors it does not handle become one line and an exit code in one place,
:func:`guardkit_state.cli.app.run`, and a Ctrl-C at any moment in :func:`main`.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main"]

#: ExitCode.INTERRUPTED, spelled here: this module is imported by the console script before
#: main() runs, so it imports nothing a Ctrl-C could interrupt outside main()'s try.
_EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> None:
    """The ``guardkit-state`` command (what the console script and ``python -m`` call)."""
    # The command's modules load inside the try: a Ctrl-C while they load (the first tens of
    # milliseconds of every run) is one line and exit 130 like one during the command, never a
    # traceback. This is the only place a KeyboardInterrupt is caught (and, as the program ends, _exit_now).
    try:
        from guardkit_state.cli.app import run

        code = run(argv)
    except KeyboardInterrupt as stop:
        # A loop's interruption says where it stopped and how to continue; a bare Ctrl-C says nothing.
        sys.stderr.write(f"error: {str(stop) or 'interrupted'}\n")
        code = _EXIT_INTERRUPTED
    except Exception as error:
        # Python wraps what a descriptor's __set_name__ raises in a RuntimeError: a Ctrl-C landing
        # while a class body of the command's modules runs arrives as one, the interrupt its cause
        # (cli.app.run passes on any error whose cause is a Ctrl-C: each is one here).
        if not isinstance(error.__cause__, KeyboardInterrupt):
            raise
        sys.stderr.write("error: interrupted\n")
        code = _EXIT_INTERRUPTED
    if argv is None:  # the program itself (a call with its own argv is a caller's: it gets SystemExit)
        _exit_now(code)
    sys.exit(code)


def _exit_now(code: int) -> None:
    """End the program with ``code`` without the interpreter's teardown, which only frees what the
    system takes back anyway and cost 30-50 ms of CPU a run (six workers of a feature ending
    together spent 0.1 s on it). What that teardown does that matters is done first: the exit
    handlers run (log files flushed, temporary folders removed) and the standard streams are
    flushed. While a thread of the program still runs, the usual exit, which waits for it, is kept."""
    import atexit
    import contextlib
    import os
    import threading

    main_thread = threading.main_thread()
    if any(thread.is_alive() and not thread.daemon and thread is not main_thread for thread in threading.enumerate()):
        return
    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            try:
                if stream is not None and not stream.closed:  # (a closed one passed over, as Python's exit does)
                    stream.flush()
            except BrokenPipeError:
                # The reader went away (`| head`): quiet, as a closed pipe met during the command is (cli.app.run).
                # A short output is written only here (a pipe is block-buffered without PYTHONUNBUFFERED).
                pass
            except (OSError, ValueError):  # not written (a full disk, a detached stream): Python's exit status
                code = code or 120
    except KeyboardInterrupt:
        # A Ctrl-C while a slow reader (a pager) takes the last of the output, which can wait long: an
        # interruption as at any other moment, one line and 130 (what was not written goes nowhere).
        code = _EXIT_INTERRUPTED
        with contextlib.suppress(OSError):
            os.write(2, b"error: interrupted\n")  # (stderr's own buffer may be what was interrupted)
    os._exit(code)
