"""The exit codes of every ``guardkit-state`` command, in one table.

Loaded with the ``guardkit_state.cli`` package itself, before the command's modules, so that a
Ctrl-C while those load still exits with :attr:`ExitCode.INTERRUPTED`. Which error gets which code
is decided in one place, :func:`guardkit_state.cli.app.exit_code_for`.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """What a command's exit status means (the README and each command's ``--help`` list them)."""

    #: Done. ``record``: the turn was recorded, or these very reports were already (a retry).
    OK = 0
    #: The command ran and the answer is no: the loop was not approved (max turns, a stall),
    #: ``validate`` found an invalid file, or the files or git failed it.
    FAILED = 1
    #: ``doctor``: something would stop a loop here (each problem printed with its fix).
    NOT_READY = 1
    #: ``record``: a readable report was rejected (its schema, a value JSON cannot store, another
    #: task or turn); nothing was written.
    REJECTED = 1
    #: A fault of guardkit-state itself, not of the input: an unexpected error, or its own write
    #: failing its self-check (``WriteVerificationError``: a bug to report); nothing was written.
    INTERNAL = 1
    #: The command cannot run as asked: a bad option, an unknown or ambiguous task, nothing to
    #: resume, a task locked by another run, a closed task without ``--reopen``; nothing changed.
    USAGE = 2
    #: ``record``: the reports name a turn already recorded with other reports.
    ALREADY_RECORDED = 3
    #: Ctrl-C, SIGTERM or SIGHUP (128 + SIGINT, as shells report it); a loop's state is saved.
    INTERRUPTED = 130


__all__ = ["ExitCode"]
