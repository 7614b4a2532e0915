"""The ``feature-build`` command a message tells the user to run next, pasteable as it is.

An interrupted or stopped run says how to go on ("continue with '...'"). That line is a real
command: the words the run was started with (its agents' commands, ``--max-turns``, ``--repo``, ...),
each shell-quoted, with ``--resume`` added (or taken out for a fresh start). Pure functions.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

#: The program name the commands start with (the console script).
PROGRAM = "guardkit-state"
_RESUME = "--resume"


def build_argv(target: str, player: object, coach: object) -> tuple[str, ...]:
    """``feature-build TARGET --player CMD --coach CMD`` from two agents: their ``command`` when they
    are command agents, else the placeholder ``CMD`` (an agent given as a Python object has no
    command line)."""
    return ("feature-build", target, "--player", _command_of(player), "--coach", _command_of(coach))


def rerun_command(argv: Sequence[str], *, resume: bool) -> str:
    """``guardkit-state`` and ``argv`` (without the program name), shell-quoted, with ``--resume``
    at the end when ``resume`` and nowhere otherwise."""
    words = [word for word in argv if word != _RESUME]
    return shlex.join([PROGRAM, *words, *([_RESUME] if resume else [])])


def _command_of(agent: object) -> str:
    command = getattr(agent, "command", None)
    return command if isinstance(command, str) and command else "CMD"


__all__ = ["PROGRAM", "build_argv", "rerun_command"]
