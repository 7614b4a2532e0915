"""The ``guardkit-state`` command: a thin twin of the library.

Each command lives in its own module with a ``register(subparsers)`` function that adds its parser
and sets ``handler`` (a function of the parsed args returning an exit code). Errors are translated
to one line and a fixed exit code in one place, :func:`guardkit_state.cli.app.run`.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> None:
    """The ``guardkit-state`` command (what the console script and ``python -m`` call)."""
    # The command's modules load inside the try: a Ctrl-C while they load (the first tens of
    # milliseconds of every run) is one line and exit 130 like any other, never a traceback.
    try:
        from guardkit_state.cli.app import main as run_cli

        run_cli(argv)
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        sys.exit(130)  # app.EXIT_INTERRUPTED, which may be the very module being loaded
