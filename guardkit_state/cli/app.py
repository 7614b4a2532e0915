"""Argument parsing, command registry, and the one place errors become exit codes."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from guardkit_state import __version__
from guardkit_state.cli.options import resolve_repo
from guardkit_state.cli.output import Output, colour_enabled, safe
from guardkit_state.errors import (
    AmbiguousTaskError,
    GuardkitStateError,
    InputError,
    LockedError,
    ResumeError,
    TaskNotFoundError,
)

#: Command modules, in ``--help`` order. Each has ``register(subparsers) -> None``.
COMMAND_MODULES: tuple[str, ...] = (
    # one line per command module (cli/cmd_<name>.py); keep each on its own line
    "record",
    "feature-build",
    "show",
    "context",
    "status",
    "worktrees",
    "log",
    "diff",
    "config",
    "suggest_mode",
    "validate",
    "graphiti",
    "search",
)

#: Errors that mean "the command cannot run as asked": bad input, an unknown or ambiguous task,
#: nothing to resume, the task locked by another run. Exit 2; nothing on disk was changed.
USAGE_ERRORS = (InputError, LockedError, TaskNotFoundError, AmbiguousTaskError, ResumeError)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class _Parser(argparse.ArgumentParser):
    """Every parser of the CLI (subcommands and their actions inherit this class through
    ``add_subparsers``): a usage error is one ``error:`` line naming the command, like every
    other error, instead of argparse's multi-line usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        prefix = "\x1b[31merror:\x1b[0m" if colour_enabled(sys.stderr) else "error:"
        # The message can quote what was typed (an invalid choice): made safe like any other value.
        self.exit(EXIT_USAGE, f"{prefix} {self.prog}: {safe(message)} (run '{self.prog} --help' for usage)\n")

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        # A subcommand hands options it does not know up to the top parser, whose error would
        # name 'guardkit-state' alone: refuse them here, where the error names the command.
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="guardkit-state",
        description="File-first, git-native memory for Player/Coach coding loops.",
        epilog="Run 'guardkit-state COMMAND --help' for a command's options and an example.",
    )
    parser.add_argument("--version", action="version", version=f"guardkit-state {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for unexpected errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(f".cmd_{name.replace('-', '_')}", __package__).register(sub)
    return parser


def run(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, run the command, and map every outcome to an exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return EXIT_USAGE
    resolve_repo(args)
    out = Output.for_args(args)
    logging.getLogger("guardkit_state").addHandler(logging.NullHandler())
    try:
        return int(args.handler(args, out) or 0)
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python from complaining at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        out.error("interrupted")
        return EXIT_INTERRUPTED
    except USAGE_ERRORS as exc:
        out.error_from(exc)
        return EXIT_USAGE
    except GuardkitStateError as exc:
        out.error_from(exc)
        return EXIT_FAILED
    except Exception as exc:  # the one place unexpected errors are shown
        if args.debug:
            raise
        out.error(f"unexpected {type(exc).__name__}: {exc} (run with --debug for the traceback)")
        return EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(run(argv))
