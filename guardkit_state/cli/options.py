"""Options every command shares, declared once so they read and behave the same everywhere."""

from __future__ import annotations

import argparse
import functools
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from guardkit_state.cli.exit_codes import ExitCode

_N = TypeVar("_N", int, float)

REPO_HELP = "the repository (default: the nearest folder above the current one with tasks/ or .git)"


def existing_dir(value: str) -> Path:
    """``--repo``'s type: a folder that exists, else a usage error naming it (exit 2)."""
    path = Path(value)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"no such directory: {value}")
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"not a directory: {value}")
    return path


def _above_zero(parse: Callable[[str], _N], wanted: str) -> Callable[[str], _N]:
    """An option's type: a finite number above 0 (``nan``, ``inf`` and 0 would only fail once the
    worktree exists and the Player runs), else a usage error naming what it wants (exit 2)."""
    def convert(value: str) -> _N:
        try:
            number = parse(value)
        except ValueError:
            number = None
        if number is None or not (math.isfinite(number) and number > 0):
            raise argparse.ArgumentTypeError(f"must be {wanted}, not {value!r}")
        return number
    return convert


#: ``--max-turns``, ``--turn-timeout`` and ``--max-cost``.
turn_count = _above_zero(int, "a whole number of at least 1")
seconds = _above_zero(float, "a finite number of seconds above 0")
usd = _above_zero(lambda value: float(value.lstrip("$")), "an amount of USD above 0, such as 2.50")


def add_repo_option(parser: argparse.ArgumentParser, **overrides: Any) -> None:
    """``--repo DIR``; left unset, :func:`resolve_repo` finds the repository from the current folder."""
    options: dict[str, Any] = {"type": existing_dir, "default": None, "metavar": "DIR", "help": REPO_HELP}
    options.update(overrides)
    parser.add_argument("--repo", **options)


def add_json_option(parser: argparse.ArgumentParser, help: str = "machine-readable output", **overrides: Any) -> None:
    parser.add_argument("--json", action="store_true", help=help, **overrides)


def help_of(parser: argparse.ArgumentParser) -> Any:
    """The handler of a command run without its action (``config``), or of no command at all: its help,
    exit 2 (usage)."""
    def show(args: argparse.Namespace, out: Any) -> int:
        parser.print_help()
        return ExitCode.USAGE
    return show


def log_on_stderr(out: Any) -> None:
    """``--verbose``: the library's log on stderr too, as ``  log: ...`` lines under the progress."""
    handler = logging.StreamHandler(out.stderr)
    handler.set_name(VERBOSE_HANDLER)  # removed when the command ends (cli.app.run)
    handler.setFormatter(logging.Formatter("  log: %(message)s"))
    logging.getLogger("guardkit_state").addHandler(handler)


#: The name of the handler :func:`log_on_stderr` adds.
VERBOSE_HANDLER = "guardkit-state --verbose"


def resolve_repo(args: argparse.Namespace) -> None:
    """Fill in ``args.repo`` when the command has the option and it was not given.

    A command taking a ``TASK-ID`` also has it resolved once, when it runs (so a bad reference is
    reported like any other error): see :func:`_with_task_resolved`.
    """
    if "repo" in vars(args) and args.repo is None:
        args.repo = find_repo_root(Path.cwd())
    if isinstance(vars(args).get("task_id"), str):
        args.handler = functools.partial(_with_task_resolved, args.handler)


def _with_task_resolved(handler: Any, args: argparse.Namespace, out: Any) -> Any:
    """Run ``handler`` with the task resolved once for the whole command.

    The copy chosen is pinned: every lookup of the id during the command (the loop's and
    ``record``'s included) gets the same file, and a path to a task file stands for exactly that
    file. When the id has several copies, the one read is said once, on stderr.
    """
    from guardkit_state.errors import TaskNotFoundError
    from guardkit_state.store.layout import names_feature
    from guardkit_state.taskfile.locate import locate_task
    from guardkit_state.taskfile.resolve import pinned, resolve_task

    repo = vars(args).get("repo") or find_repo_root(Path.cwd())
    if names_feature(args.task_id):  # a feature (its id, or its plan's file): no task to resolve
        return handler(args, out)
    try:
        found = resolve_task(repo, args.task_id)
    except TaskNotFoundError:
        if args.task_id.endswith(".md"):
            raise
        # The command says it its own way (log and diff may still find commits of the task).
        return handler(args, out)
    args.task_id = found.task_id
    with pinned(found):
        read = locate_task(repo, found.task_id).resolution
        if read is not None and read.note:
            out.note(f"note: {read.note}")
        return handler(args, out)


def find_repo_root(start: Path) -> Path:
    """The nearest folder from ``start`` upwards holding ``tasks/`` or ``.git``; ``start`` if none."""
    start = start.resolve()
    for candidate in (start, *start.parents):
        if (candidate / "tasks").is_dir() or (candidate / ".git").exists():
            return candidate
    return start
