"""The HTML report of a task's loop: a turn timeline, a criteria matrix, and what each turn said.

``write_report(repo, "TASK-AUTH-001")`` reads the task's files (never an index) and writes one
self-contained page; ``build_task_report`` and ``render_report`` are its two halves.
``write_feature_report(repo, "FEAT-X")`` does the same for a feature: its waves × tasks grid, then
every task's report (``build_feature_report`` and ``render_feature_report``). The records they pass
(``TaskReport``, ``FeatureReport``, ``ReportResult`` ...) are imported from their modules.
"""

from __future__ import annotations

from guardkit_state.report.collect import build_task_report
from guardkit_state.report.feature import build_feature_report
from guardkit_state.report.feature_page import render_feature_report
from guardkit_state.report.page import render_report
from guardkit_state.report.write import write_feature_report, write_report

__all__ = [
    "build_feature_report",
    "build_task_report",
    "render_feature_report",
    "render_report",
    "write_feature_report",
    "write_report",
]
