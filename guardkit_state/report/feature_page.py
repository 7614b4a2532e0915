"""A :class:`FeatureReport` drawn as one self-contained HTML page. Pure functions, no I/O.

The page is the task report's page (same policy, style and escaping, :mod:`.page`) holding a
waves × tasks grid, then one section per task with that task's whole report. The only links are
fragment links from the grid to the sections: their targets are made here from a closed alphabet,
never taken from the files, so no link can lead anywhere but down the page.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from guardkit_state.report.feature import TASK_STATUSES, FeatureReport, FeatureTask
from guardkit_state.report.html_text import esc, one_line
from guardkit_state.report.page import page, task_body, task_facts, token
from guardkit_state.report.style import FEATURE_CSS
from guardkit_state.report.task_report import TurnColumn

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
#: The grid's columns after the task: (data-field, heading).
COLUMNS = (("status", "status"), ("turns", "turns"), ("outcome", "outcome"), ("merged", "merged"),
           ("blocked", "blocked paths"), ("timeline", "turns at a glance"))


def anchor(index: int, task_id: str) -> str:
    """The id of a task's section: its position (ids stay unique) and its id made of safe characters."""
    return f"t{index + 1}-{_UNSAFE.sub('_', task_id)[:80]}"


def render_feature_report(report: FeatureReport) -> str:
    """The whole page for ``report``."""
    view = report.view
    title = f"{view.feature_id} — {one_line(view.name, 120)}" if view.name else view.feature_id
    sections = "".join(_section(index, task) for index, task in enumerate(report.tasks))
    body = "".join([
        _header(report), "<main>\n", _grid(report), sections, "</main>\n",
        f"<footer>guardkit-state report of the feature plan {esc(report.plan_path)} · generated "
        f"{esc(report.generated_at)} from the plan, its task files, their turn reports and git · this page runs "
        "no script and loads nothing</footer>\n"])
    return page(title, body, FEATURE_CSS)


def _header(report: FeatureReport) -> str:
    view = report.view
    told = ", ".join(f"{n} {esc(status)}" for status, n in report.status_counts().items())
    facts = [f"plan status <b>{esc(view.plan_status or '—')}</b>", f"<b>{esc(view.tally.describe())}</b>",
             f"{len(report.tasks)} task(s) in {len(view.waves)} wave(s)" + (f": {told}" if told else ""),
             f"{sum(t.row.turns for t in report.tasks)} turn(s)",
             f"branch <code>{esc(view.branch)}</code>"]
    costs = [t.report.cost_usd for t in report.tasks if t.report is not None and t.report.cost_usd is not None]
    if costs:
        facts.append(f"agents' cost <b>${sum(costs):.4f}</b>")
    parts = [f"<header>\n<h1><span class=\"mono\">{esc(view.feature_id)}</span> {esc(view.name)}</h1>\n",
             f"<p class=\"facts\">{' · '.join(facts)}</p>\n"]
    if report.next_step:
        parts.append(f"<p class=\"next\">next: {esc(report.next_step, 2000)}</p>\n")
    if view.notes:
        parts.append("<ul class=\"notes\">" + "".join(f"<li>{esc(n, 600)}</li>" for n in view.notes) + "</ul>\n")
    if report.smoke_gate is not None or report.smoke_runs:
        gate = f"smoke gate {esc(report.smoke_gate, 600)}" if report.smoke_gate is not None else "smoke gate"
        parts.append(f"<p class=\"facts\">{gate}</p>\n<ul class=\"notes\">"
                     + "".join(f"<li>{esc(run, 600)}</li>" for run in report.smoke_runs) + "</ul>\n")
    if report.queue_steps:
        parts.append("<p class=\"facts\">merge queue: each candidate, its gate result, what was sent back</p>\n"
                     "<ul class=\"notes\">" + "".join(f"<li>{esc(step, 600)}</li>" for step in report.queue_steps)
                     + "</ul>\n")
    parts.append("</header>\n")
    return "".join(parts)


def _grid(report: FeatureReport) -> str:
    index = {task.row.task_id: i for i, task in enumerate(report.tasks)}
    head = "".join(f"<th scope=\"col\">{label}</th>" for _, label in COLUMNS)
    bodies: list[str] = []
    for number, wave in enumerate(report.view.waves, start=1):
        tasks = [report.tasks[index[t]] for t in wave if t in index]
        rows = "".join(_row(index[task.row.task_id], task) for task in tasks)
        bodies.append(f"<tbody class=\"wave\" data-wave=\"{number}\"><tr class=\"wave-head\"><th colspan=\""
                      f"{len(COLUMNS) + 1}\" scope=\"rowgroup\">Wave {number} · {len(tasks)} task(s)</th></tr>\n"
                      f"{rows}</tbody>\n")
    return ("<section id=\"grid\"><h2>Waves and tasks</h2>\n<div class=\"scroll\"><table class=\"grid\">\n"
            f"<thead><tr><th scope=\"col\">task</th>{head}</tr></thead>\n{''.join(bodies)}</table></div>"
            "</section>\n")


def _row(index: int, task: FeatureTask) -> str:
    row = task.row
    target = anchor(index, row.task_id)
    name = f"<br><span class=\"dim\">{esc(row.name, 200)}</span>" if row.name else ""
    cells = {
        "status": _status_badge(task.status)
                  + (f" <span class=\"dim\">turn {task.running_turn}</span>" if task.running_turn else ""),
        "turns": str(row.turns),
        "outcome": esc(row.outcome, 80) if row.outcome else "<span class=\"dim\">—</span>",
        "merged": (f"yes <code>{esc(row.merge_commit[:10])}</code>" if row.merge_commit else "yes")
                  if row.merged else "no",
        "blocked": "<br>".join(f"<code>{esc(p, 400)}</code>" for p in row.conflicts[:20])
                   or "<span class=\"dim\">—</span>",
        "timeline": _chips(target, task),
    }
    tds = "".join(f"<td data-field=\"{field}\" class=\"{field}\">{cells[field]}</td>" for field, _ in COLUMNS)
    return (f"<tr data-task=\"{esc(row.task_id, 200)}\" data-wave=\"{row.wave}\"><th scope=\"row\">"
            f"<a href=\"#{target}\" class=\"mono\">{esc(row.task_id, 200)}</a>{name}</th>{tds}</tr>\n")


def _chips(target: str, task: FeatureTask) -> str:
    """The task's turns at a glance: one chip per turn, coloured by the Coach's decision, each a link to
    that turn's column in the task's section."""
    turns: Sequence[TurnColumn] = task.report.turns if task.report is not None else ()
    chips = [f"<a class=\"chip badge d-{token(t.decision)}\" href=\"#{target}-turn-{t.number}\" "
             f"title=\"turn {t.number}: {esc(t.mode, 60)}, {esc(t.player_outcome, 40)}, Coach {esc(t.decision, 40)}\">"
             f"{t.number}</a>" for t in turns]
    if task.running_turn:
        chips.append(f"<span class=\"chip running\" title=\"turn {task.running_turn} is running\">"
                     f"{task.running_turn}…</span>")
    if not chips:
        return "<span class=\"dim\">no turn yet</span>"
    return "<span class=\"chips\">" + "".join(chips) + "</span>"


def _section(index: int, task: FeatureTask) -> str:
    row = task.row
    target = anchor(index, row.task_id)
    title = esc(task.report.title) if task.report is not None else ""
    about = [f"wave {row.wave}", _status_badge(task.status)]
    if row.reason:
        about.append(esc(row.reason, 600))
    parts = [f"<section class=\"task\" id=\"{target}\" data-task=\"{esc(row.task_id, 200)}\">\n",
             f"<h2><span class=\"mono\">{esc(row.task_id, 200)}</span> {title}</h2>\n",
             f"<p class=\"dim\">{' · '.join(about)} · <a href=\"#grid\">back to the grid</a></p>\n"]
    if task.report is None:
        parts.append(f"<ul class=\"notes\"><li>its files could not be read: {esc(task.error or '', 600)}</li></ul>\n")
    else:
        parts += [task_facts(task.report), task_body(task.report, prefix=f"{target}-", heading="h3")]
    parts.append("</section>\n")
    return "".join(parts)


def _status_badge(status: str) -> str:
    """A task's status as a badge, its class from the grid's closed vocabulary (:data:`TASK_STATUSES`)."""
    return f"<span class=\"badge st-{token(status, TASK_STATUSES)}\">{esc(status, 40)}</span>"


__all__ = ["COLUMNS", "anchor", "render_feature_report"]
