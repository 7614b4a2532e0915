"""The ``guardkit-state`` command: a thin twin of the library.

Each command lives in its own module with a ``register(subparsers)`` function that adds its parser
and sets ``handler`` (a function of the parsed args returning an exit code). Errors are translated
to one line and a fixed exit code in one place, :func:`guardkit_state.cli.app.run`.
"""

from __future__ import annotations

from .app import main

__all__ = ["main"]
