"""Argument parsing, command registry, and the one place errors become exit codes."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from guardkit_state import __version__
from guardkit_state.cli.exit_codes import ExitCode
from guardkit_state.cli.options import VERBOSE_HANDLER, help_of, resolve_repo
from guardkit_state.cli.output import Output, colour_enabled, safe, to_nowhere
from guardkit_state.errors import (
    AlreadyRecordedError,
    AmbiguousTaskError,
    FileTooLargeError,
    GuardkitStateError,
    InputError,
    LockedError,
    ParseError,
    ResumeError,
    SchemaError,
    TaskNotFoundError,
    WriteVerificationError,
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
    "report",
    "merge_driver",
    "agents",
    "doctor",
    "mcp",
)

#: Commands that only read the task files and plans (``report`` writes its page, ``status`` and
#: ``search`` their caches): each runs in one listing scope, so ``tasks/`` is listed, and each plan
#: looked at, once for the whole command (see :func:`guardkit_state.taskfile.discovery.listing_scope`).
READ_COMMANDS = frozenset({"show", "context", "status", "log", "diff", "suggest-mode", "validate", "search", "report"})

#: Errors that mean "the command cannot run as asked": bad input, an unknown or ambiguous task,
#: nothing to resume, the task locked by another run. Exit 2; nothing on disk was changed.
USAGE_ERRORS = (InputError, LockedError, TaskNotFoundError, AmbiguousTaskError, ResumeError)


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written (their ``Example:`` blocks keep their lines); the agent
    presets a help text names (``{presets}``, ``{continuing_presets}``) read from the presets' data
    when the help is shown (building the parser never reads YAML)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = super()._get_help_string(action)
        if text and "presets}" in text:
            from guardkit_state.agents.presets import preset_names

            text = text.replace("{presets}", preset_names()).replace("{continuing_presets}",
                                                                     preset_names(continuing=True))
        return text


class _Parser(argparse.ArgumentParser):
    """Every parser of the CLI (subcommands and their actions inherit this class through
    ``add_subparsers``): a usage error is one ``error:`` line naming the command, like every
    other error, instead of argparse's multi-line usage block. Help is formatted by :class:`_Formatter`."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(**kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        prefix = "\x1b[31merror:\x1b[0m" if colour_enabled(sys.stderr) else "error:"
        # The message can quote what was typed (an invalid choice): made safe like any other value.
        self.exit(ExitCode.USAGE, f"{prefix} {self.prog}: {safe(message)} (run '{self.prog} --help' for usage)\n")

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        # A subcommand hands options it does not know up to the top parser, whose error would
        # name 'guardkit-state' alone: refuse them here, where the error names the command.
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser: with every command (as ``--help`` lists them), or with ``command`` alone,
    when it is what is being run: only its module and what it needs are then imported (each
    command module brings its part of the library; importing them all is ~50 ms of every run)."""
    parser = _Parser(
        prog="guardkit-state",
        description="File-first, git-native memory for Player/Coach coding loops.",
        epilog="Run 'guardkit-state COMMAND --help' for a command's options and an example.",
    )
    parser.add_argument("--version", action="version", version=f"guardkit-state {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for unexpected errors")
    parser.set_defaults(handler=help_of(parser))  # no command: the help, exit 2
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in (command,) if command in COMMAND_MODULES else COMMAND_MODULES:
        importlib.import_module(f".cmd_{name.replace('-', '_')}", __package__).register(sub)
    return parser


#: ``--debug`` as argparse takes it: whole, or cut short to any prefix no other option shares.
_DEBUG_SPELLINGS = frozenset("--debug"[:end] for end in range(3, len("--debug") + 1))


def command_named(argv: Sequence[str]) -> str | None:
    """The :data:`COMMAND_MODULES` entry of the command ``argv`` runs: its first word, or the first
    after ``--debug`` (the one top-level option a command follows), when that is a command's name;
    else None (``--help``, a typo, a ``--``: every command is needed, to list them)."""
    words = iter(argv)
    word = next(words, None)
    while word in _DEBUG_SPELLINGS:
        word = next(words, None)
    return next((name for name in COMMAND_MODULES if name.replace("_", "-") == word), None)


class _FileWarnings(logging.Handler):
    """The warnings about task files (a key written twice) as a command shows them: each once; in
    full when the file is the task the command is about (``subject``), and the others folded into
    one line at the end, pointing at ``validate`` (a ``status`` of a GuardKit repository would
    otherwise print the same dozen lines every time, none of which it can act on)."""

    def __init__(self, out: Output, args: argparse.Namespace) -> None:
        super().__init__(logging.WARNING)
        self.out = out
        self.args = args  # its task id is read when a warning comes: resolved by then
        self.seen: set[str] = set()
        self.folded: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message in self.seen:
            return
        self.seen.add(message)
        name = os.path.basename(str(getattr(record, "task_file", "") or ""))
        subject = _subject(self.args)
        if subject is not None and (name == f"{subject}.md" or name.startswith(f"{subject}-")):
            self.out.note(f"warning: {safe(message)}")
        else:
            self.folded.add(name or message)

    def finish(self) -> None:
        """The folded line, when any warning was folded."""
        if not self.folded:
            return
        count = len(self.folded)
        files = "task file repeats" if count == 1 else "task files repeat"
        self.out.note(f"warning: {count} other {files} a key (read as GuardKit reads it, the last value winning; "
                      "never written to until fixed): 'guardkit-state validate tasks' lists them")


def _subject(args: argparse.Namespace) -> str | None:
    """The task a command is about (its ``TASK-ID``), None for a feature or none."""
    ref = vars(args).get("task_id")
    if not isinstance(ref, str):
        return None
    from guardkit_state.store.layout import names_feature

    if names_feature(ref):
        return None
    return os.path.basename(ref).removesuffix(".md") if ref.endswith(".md") else ref


def run(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, run the command, and map every error to one line and an exit code.

    A Ctrl-C is left to :func:`guardkit_state.cli.main`, which also covers the modules loading.
    """
    parser = build_parser(command_named(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(argv)
    # The words as typed: a "continue with" line repeats them (with --resume), quoted for the shell.
    args.argv = tuple(sys.argv[1:] if argv is None else argv)
    resolve_repo(args)
    out = Output(sys.stdout, sys.stderr, colour_enabled(sys.stdout), bool(getattr(args, "json", False)))
    library_log = logging.getLogger("guardkit_state")
    if not any(isinstance(handler, logging.NullHandler) for handler in library_log.handlers):
        library_log.addHandler(logging.NullHandler())  # once: in-process runs (tests, scripts) repeat run()
    # The warnings about task files on stderr, as _FileWarnings shows them (--json keeps stdout clean);
    # removed when the command ends: an in-process run (tests, the MCP server) must not leave a handler
    # writing to a stream that is closed later.
    warnings = _FileWarnings(out, args)
    file_log = logging.getLogger("guardkit_state.taskfile.duplicates")
    file_log.addHandler(warnings)
    try:
        if args.command not in READ_COMMANDS:
            return int(args.handler(args, out))
        from guardkit_state.taskfile.discovery import listing_scope

        with listing_scope():
            return int(args.handler(args, out))
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python from complaining at exit.
        to_nowhere(sys.stdout)
        return ExitCode.OK
    except GuardkitStateError as exc:
        out.error_from(exc)
        return exit_code_for(exc, args.command)
    except Exception as exc:  # the one place unexpected errors are shown
        # (A Ctrl-C landing in a module a command imports as it goes arrives wrapped in a RuntimeError
        # when a class body was running: cli.main says "interrupted", exit 130, as for any Ctrl-C.)
        if args.debug or isinstance(exc.__cause__, KeyboardInterrupt):
            raise
        from guardkit_state.cli.crash_log import write_crash_log

        log = write_crash_log(exc, args.argv, getattr(args, "repo", None))
        where = f"the traceback is in {log}" if log is not None else "run with --debug for the traceback"
        out.error(f"unexpected {type(exc).__name__}: {exc} (a bug in guardkit-state; {where})")
        return ExitCode.INTERNAL
    finally:
        file_log.removeHandler(warnings)
        warnings.finish()
        for handler in [h for h in library_log.handlers if h.get_name() == VERBOSE_HANDLER]:
            library_log.removeHandler(handler)  # --verbose's, writing to this run's stderr


def exit_code_for(error: GuardkitStateError, command: str | None = None) -> ExitCode:
    """The exit code of an error no handler dealt with (see :class:`ExitCode`)."""
    if isinstance(error, WriteVerificationError):
        # Our own splice failed its self-check: a fault of ours, not a usage error.
        return ExitCode.INTERNAL
    if isinstance(error, AlreadyRecordedError):
        return ExitCode.ALREADY_RECORDED
    if command == "record" and isinstance(error, InputError):
        return _record_input_code(error)
    if isinstance(error, USAGE_ERRORS):
        return ExitCode.USAGE
    return ExitCode.FAILED


def _record_input_code(error: InputError) -> ExitCode:
    """``record`` tells a rejected report (1) from input that is not a report at all (2).

    A report failing its schema, or naming another task or turn (an error at a JSON path in it),
    is rejected. A file that is not JSON, an oversized file, a bad task id or an unreadable task
    file is a usage error, as in every other command.
    """
    if isinstance(error, SchemaError):
        return ExitCode.REJECTED
    if isinstance(error, (ParseError, FileTooLargeError)):
        return ExitCode.USAGE
    return ExitCode.REJECTED if error.pointer else ExitCode.USAGE
