"""A :class:`TaskReport` drawn as one self-contained HTML page. Pure functions, no I/O.

The page has no script and loads nothing: its style is inline, and a Content-Security-Policy
forbids scripts, frames, forms and every fetch, so even a mistake in escaping could not run agent
text or reach the network. Every value from the files goes through :func:`esc`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from guardkit_state.inspect.agent_costs import describe_run
from guardkit_state.report.html_text import duration, esc, number, one_line, when
from guardkit_state.report.style import CSS
from guardkit_state.report.task_report import Cell, Gate, MatrixRow, TaskReport, TurnColumn

CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
       "form-action 'none'")
SYMBOLS = {"verified": "✓", "implied": "✓", "rejected": "✗", "pending": "○"}
NOTHING = "<p class=\"dim\">nothing recorded</p>"
#: The words of a turn (Coach decisions, Player outcomes) a class name is made of.
TURN_WORDS = ("approve", "feedback", "reject", "error", "implemented", "failed", "blocked", "unknown")
LABELS = {"verified": "verified", "implied": "implied by approval", "rejected": "rejected", "pending": "pending"}


def render_report(report: TaskReport) -> str:
    """The whole page for ``report``."""
    title = f"{report.task_id} — {one_line(report.title, 120)}" if report.title else report.task_id
    return page(title, "".join([
        _header(report), "<main>\n", task_body(report), "</main>\n",
        f"<footer>guardkit-state report of {esc(report.path)} · generated {esc(report.generated_at)} from the "
        "task file and its turn reports · this page runs no script and loads nothing</footer>\n"]))


def page(title: str, body: str, extra_css: str = "") -> str:
    """The page around ``body`` (HTML already drawn): the policy, the style (and ``extra_css``), and
    ``title`` (raw text, escaped here)."""
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n",
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
        "<meta name=\"generator\" content=\"guardkit-state report\">\n",
        f"<title>{esc(title)} · guardkit-state report</title>\n<style>{CSS}{extra_css}</style></head>\n<body>\n",
        body, "</body></html>\n",
    ])


def task_body(report: TaskReport, prefix: str = "", heading: str = "h2") -> str:
    """The turn timeline and the criteria matrix of ``report``; ``prefix`` starts every id (so several
    tasks share a page), ``heading`` is their headings' tag."""
    return (_timeline(report.turns, prefix, heading)
            + _matrix(report.criteria, report.turns, prefix, heading))


def task_facts(report: TaskReport) -> str:
    """The line of facts under a task's title, its next step and its notes."""
    facts = [f"status <b>{esc(report.status)}</b>",
             f"{len(report.turns)} turn(s) of {esc(report.max_turns) if report.max_turns else '?'}",
             f"criteria {esc(report.counts.describe())}"]
    if report.outcome:
        facts.append(f"outcome <b>{esc(report.outcome)}</b>")
    if report.cost_usd is not None:
        facts.append(f"agents' cost <b>${report.cost_usd:.4f}</b>")
    parts = [f"<p class=\"facts\">{' · '.join(facts)}</p>\n"]
    if report.stall:
        parts.append(f"<p class=\"next\"><b>stall:</b> {esc(report.stall)}</p>\n")
    if report.next_step:
        parts.append(f"<p class=\"next\">next: {esc(report.next_step)}</p>\n")
    if report.notes:
        parts.append("<ul class=\"notes\">" + "".join(f"<li>{esc(n, 600)}</li>" for n in report.notes) + "</ul>\n")
    return "".join(parts)


def _header(report: TaskReport) -> str:
    return (f"<header>\n<h1><span class=\"mono\">{esc(report.task_id)}</span> {esc(report.title)}</h1>\n"
            f"{task_facts(report)}</header>\n")


def _timeline(turns: Sequence[TurnColumn], prefix: str = "", heading: str = "h2") -> str:
    if not turns:
        return (f"<section id=\"{prefix}timeline\"><{heading}>Turns</{heading}><p class=\"dim\">No turn recorded "
                "yet.</p></section>\n")
    head = "".join(f"<th class=\"turn d-{token(t.decision)}\" id=\"{prefix}turn-{t.number}\" scope=\"col\">Turn "
                   f"{t.number}<br><span class=\"dim\" title=\"{esc(t.timestamp or '')}\">"
                   f"{esc(when(t.timestamp))}</span></th>" for t in turns)
    rows = [
        ("mode", [esc(t.mode) for t in turns]),
        ("Player", [f"<span class=\"p-{token(t.player_outcome)}\">{esc(t.player_outcome)}</span>"
                    + (f"<br><span class=\"dim\">tests: {esc(t.tests)}</span>" if t.tests else "") for t in turns]),
        ("Coach", [f"<span class=\"badge d-{token(t.decision)}\">{esc(t.decision)}</span>" for t in turns]),
        ("criteria", [_delta(t.delta) for t in turns]),
        ("duration", [esc(duration(t.duration_seconds)) for t in turns]),
        ("agents", ["<br>".join(f"{esc(role)}: {esc(describe_run(run))}" for role, run in t.agent_runs.items())
                    or "<span class=\"dim\">—</span>" for t in turns]),
        ("commit", [f"<code>{esc(t.commit[:10])}</code>" if t.commit else "<span class=\"dim\">—</span>"
                    for t in turns]),
        ("gates", [_gates(t.gates) for t in turns]),
        ("details", [_details(t) for t in turns]),
    ]
    body = "".join(f"<tr class=\"row-{name.lower()}\"><th scope=\"row\">{name}</th>"
                   + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>\n" for name, cells in rows)
    return (f"<section id=\"{prefix}timeline\"><{heading}>Turns</{heading}>\n<div class=\"scroll\">"
            "<table class=\"timeline\">\n"
            f"<thead><tr><th scope=\"row\">turn</th>{head}</tr></thead>\n<tbody>\n{body}</tbody></table></div>"
            "</section>\n")


def _delta(delta: Sequence[str]) -> str:
    if not delta:
        return "<span class=\"dim\">no change</span>"
    return "<span class=\"delta\">" + " ".join(
        f"<span class=\"{'up' if d.startswith('+') else 'down'}\">{esc(d)}</span>" for d in delta) + "</span>"


def _gates(gates: Sequence[Gate]) -> str:
    if not gates:
        return "<span class=\"dim\">—</span>"
    items = []
    for gate in gates:
        cls, mark = ("g-pass", "✓") if gate.passed else ("g-fail", "✗") if gate.passed is False else ("g-none", "○")
        optional = "" if gate.required else " <span class=\"dim\">(optional)</span>"
        value, wanted = _gate_words(gate)
        items.append(f"<li class=\"{cls}\">{mark} {esc(gate.name.replace('_', ' '))}: {esc(value)}"
                     + (f" <span class=\"dim\">({esc(wanted)})</span>" if wanted else "") + f"{optional}</li>")
    return "<ul class=\"gates\">" + "".join(items) + "</ul>"


def _gate_words(gate: Gate) -> tuple[str, str]:
    """What a gate measured and what it wanted: ``5 failed`` / ``must pass``, ``85`` / ``≥ 80``."""
    if gate.actual is None:
        value = "not measured"
    elif gate.name == "tests" and isinstance(gate.actual, int) and not isinstance(gate.actual, bool):
        value = f"{gate.actual} failed"
    else:
        value = number(gate.actual)
    if gate.threshold is None:
        return value, ""
    if gate.name == "tests":
        return value, "must pass"
    return value, f"≥ {number(gate.threshold)}" if isinstance(gate.threshold, (int, float)) and not isinstance(
        gate.threshold, bool) else f"threshold {number(gate.threshold)}"


def _details(turn: TurnColumn) -> str:
    """Everything said in the turn, folded: the Player, the Coach, blockers and lessons."""
    parts = [_block("Player", turn.player_summary), _block("Implementation notes", turn.implementation_notes),
             _items("Files", turn.files, limit=20), _block("Coach feedback", turn.feedback),
             _issues(turn), _block("Coach rationale", turn.rationale), _items("Blockers", turn.blockers),
             _items("Lessons", turn.lessons), _block("What to try next", turn.what_to_try_next),
             _block("Coach evidence (GuardKit)", turn.evidence), _block("Error", turn.error)]
    inner = "".join(p for p in parts if p)
    if turn.source == "frontmatter":
        inner += "<p class=\"dim text\">From the task file's frontmatter (no per-turn reports on disk).</p>"
    counts = [f"{len(turn.issues)} issue(s)" if turn.issues else "", f"{len(turn.blockers)} blocker(s)"
              if turn.blockers else "", f"{len(turn.lessons)} lesson(s)" if turn.lessons else ""]
    label = "Player, Coach" + "".join(f" · {c}" for c in counts if c)
    return f"<details><summary>{label}</summary>{inner or NOTHING}</details>"


def _block(title: str, text: str | None) -> str:
    if not text or not text.strip():
        return ""
    return f"<h4>{title}</h4><p class=\"text\">{esc(text.strip())}</p>"


def _items(title: str, values: Iterable[str], *, limit: int = 50) -> str:
    values = list(values)
    if not values:
        return ""
    shown = "".join(f"<li>{esc(v, 2000)}</li>" for v in values[:limit])
    more = f"<li class=\"dim\">… and {len(values) - limit} more</li>" if len(values) > limit else ""
    return f"<h4>{title}</h4><ul class=\"items\">{shown}{more}</ul>"


def _issues(turn: TurnColumn) -> str:
    if not turn.issues:
        return ""
    shown = "".join(f"<li><span class=\"sev\">{esc(i.severity, 40)}</span> <span class=\"text\">{esc(i.text, 4000)}"
                    "</span></li>" for i in turn.issues[:50])
    return f"<h4>Coach issues</h4><ul class=\"items\">{shown}</ul>"


def _matrix(rows: Sequence[MatrixRow], turns: Sequence[TurnColumn], prefix: str = "", heading: str = "h2") -> str:
    if not rows:
        return (f"<section id=\"{prefix}criteria\"><{heading}>Acceptance criteria</{heading}><p class=\"dim\">The "
                "task lists no acceptance criteria.</p></section>\n")
    head = "".join(f"<th scope=\"col\" class=\"d-{token(t.decision)}\">T{t.number}</th>" for t in turns)
    body = "".join(
        f"<tr data-criterion=\"{esc(row.id, 200)}\"><th scope=\"row\" class=\"crit\"><span class=\"cid\">"
        f"{esc(row.id, 200)}</span>{esc(row.text, 2000)}</th>"
        + "".join(_cell(row, cell, turn.number) for cell, turn in zip(row.cells, turns, strict=False)) + "</tr>\n"
        for row in rows)
    legend = "".join(f"<span class=\"s-{s}\">{SYMBOLS[s]} {LABELS[s]}</span>" for s in LABELS)
    return (f"<section id=\"{prefix}criteria\"><{heading}>Acceptance criteria, turn by turn</{heading}>\n"
            "<div class=\"scroll\">"
            f"<table class=\"matrix\">\n<thead><tr><th scope=\"row\">criterion</th>{head}</tr></thead>\n"
            f"<tbody>\n{body}</tbody></table></div>\n<p class=\"legend\">{legend} · a framed cell changed in "
            "that turn; a striped one fell back from verified</p></section>\n")


def _cell(row: MatrixRow, cell: Cell, turn: int) -> str:
    classes = ["cell", f"s-{cell.status}"] + (["changed"] if cell.changed else []) + (
        ["regression"] if cell.regression else [])
    said = LABELS[cell.status] + (f" in turn {cell.set_by_turn}" if cell.set_by_turn else "")
    tip = f"{row.id} after turn {turn}: {said}" + (f" — {one_line(cell.notes, 300)}" if cell.notes else "")
    return (f"<td class=\"{' '.join(classes)}\" data-turn=\"{turn}\" data-status=\"{cell.status}\" "
            f"title=\"{esc(tip, 600)}\"><span class=\"sym\">{SYMBOLS[cell.status]}</span>"
            f"{'fell back' if cell.regression else LABELS[cell.status].split(' ')[0]}</td>")


def token(value: str, known: Collection[str] = TURN_WORDS) -> str:
    """A class-name token from the closed vocabulary ``known`` (anything else becomes ``other``)."""
    return value if value in known else "other"
