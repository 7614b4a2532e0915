"""Write a task's (or a feature's) report: build it from the files, draw it, and replace the output file atomically.

A browser tab left open on the file shows the new report on reload: the page is written the way
the store writes every file (:func:`~guardkit_state.store.fsio.atomic_write_bytes`: a temp file
beside it, renamed over it), so a reader never sees half a page.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from guardkit_state.errors import GuardkitStateError, InputError
from guardkit_state.report.collect import build_task_report
from guardkit_state.report.feature import FeatureReport, build_feature_report
from guardkit_state.report.feature_page import render_feature_report
from guardkit_state.report.page import render_report
from guardkit_state.report.task_report import TaskReport
from guardkit_state.store.fsio import atomic_write_bytes, ensure_private_dir
from guardkit_state.store.home import check_state_home
from guardkit_state.store.layout import report_file

#: A page is for reading by anyone the folder is shared with: 0644 whatever the umask, and whatever
#: mode the page it replaces had (the store's writes keep the old mode, or take the umask's).
PAGE_MODE = 0o644

R = TypeVar("R", TaskReport, FeatureReport)


@dataclass(frozen=True)
class ReportResult(Generic[R]):
    """A written report (a task's or a feature's): where, how big, and what it counts."""

    path: Path
    bytes: int
    report: R

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "bytes": self.bytes, **self.report.summary()}


FeatureReportResult = ReportResult[FeatureReport]


def write_report(repo: Path | str, task: str, output: Path | str | None = None, *,
                 running_turn: int | None = None) -> ReportResult[TaskReport]:
    """Write the HTML report of ``task`` to ``output`` (default ``.guardkit/reports/TASK-ID.html``).

    Raises:
        InputError: ``output`` is a directory, or a feature was named (not available yet).
        TaskNotFoundError, ParseError...: the task cannot be read (nothing is written).
        GuardkitStateError: the file cannot be written.
    """
    report = build_task_report(repo, task, running_turn=running_turn)
    return _write(repo, report.task_id, output, report, render_report(report))


def write_feature_report(repo: Path | str, feature: str, output: Path | str | None = None, *,
                         running: Mapping[str, int | None] | None = None) -> FeatureReportResult:
    """Write the HTML report of ``feature`` (``FEAT-X`` or a plan file's path), as :func:`write_report` does.

    ``running``: the tasks whose loops run now, each with its current turn (None between turns).
    Raises FeatureNotFoundError, ParseError or SchemaError when the plan cannot be read (nothing is written).
    """
    report = build_feature_report(repo, feature, running=running)
    return _write(repo, report.view.feature_id, output, report, render_feature_report(report))


def _write(repo: Path | str, name: str, output: Path | str | None, report: R, page: str) -> ReportResult[R]:
    path = _output(repo, name, output)
    data = page.encode("utf-8")
    if output is None:
        # .guardkit/reports/ holds a .gitignore of '*': git never sees the pages (nor a later
        # feature-build "uncommitted changes" the tool made itself).
        _private_folder(path.parent)
    _write_page(path, data)
    return ReportResult(path=path, bytes=len(data), report=report)


def _output(repo: Path | str, name: str, output: Path | str | None) -> Path:
    if output is None:
        check_state_home(Path(repo))  # the default page goes under .guardkit: never out of the repository
    path = Path(output) if output is not None else report_file(repo, name)
    if path.is_dir():
        raise InputError(f"{path} is a directory", path=path, expected="the path of an .html file to write")
    return path


def _private_folder(folder: Path) -> None:
    try:
        ensure_private_dir(folder)
    except OSError as exc:
        raise _cannot_write(folder, exc) from exc


def _write_page(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one rename, creating its folder; an OS refusal is said as the report's."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # No size cap: the store caps what it writes at what it reads back, and nothing reads a page back.
        atomic_write_bytes(path, data, mode=PAGE_MODE, limit=None)
    except OSError as exc:
        raise _cannot_write(path, exc) from exc
    except GuardkitStateError as exc:
        # An OS error inside the write (no space, permission denied ...) is said as the report's;
        # the store's typed refusals already name the file and what to do.
        if type(exc) is GuardkitStateError and isinstance(exc.__cause__, OSError):
            raise _cannot_write(path, exc.__cause__) from exc.__cause__
        raise


def _cannot_write(path: Path, exc: OSError) -> GuardkitStateError:
    return GuardkitStateError(f"cannot write the report: {exc.strerror or exc}", path=path)
