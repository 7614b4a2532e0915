"""The one results table (markdown), with each target and whether it was met."""

from __future__ import annotations

from typing import Any

from . import bench_agents, bench_feature, bench_first_hour, bench_mcp, bench_remote, bench_status

HEADER = ("Case", "guardkit-state", "Floor", "x floor", "LangGraph SqliteSaver", "x LangGraph", "Target", "Met")


def _ms(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.2f} ms" if value < 100 else f"{value:.0f} ms"


def _x(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _bytes(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value / 1024:.0f} KiB" if value < 10 * 1024 * 1024 else f"{value / 1024 / 1024:.1f} MiB"


def _met(ok: bool | None) -> str:
    return "-" if ok is None else ("yes" if ok else "**no**")


def _le(value: Any, limit: float) -> bool | None:
    return None if value is None else value <= limit


#: The public ``record_turn``'s budget (not a race: an agent's turn takes minutes): at most this many
#: times the disk floor with 1 prior turn, and at 200 prior turns at most this many times its own
#: 1-prior time.
RECORD_TURN_FLOOR_BUDGET = 6.0
RECORD_TURN_GROWTH_BUDGET = 3.0
#: ... and at its longest history, at most this many times the floor plus two strict parses of the
#: task file's frontmatter (the read's and the verification's: the parses a record cannot skip).
RECORD_TURN_PARSE_BUDGET = 1.5


def _record_rows(record: list[dict[str, Any]], label: str) -> list[tuple[str, ...]]:
    """A row per history length of the loop's own path (an open lifecycle): no target of its own;
    the one beside LangGraph's step at 25 prior turns is the peer comparison."""
    rows: list[tuple[str, ...]] = []
    for row in record:
        at25 = row["prior_turns"] == 25 and row.get("ours/langgraph") is not None
        rows.append((f"Record a turn in a running loop (open lifecycle), {row['prior_turns']} prior turns{label}",
                     _ms(row["ours_ms"]), _ms(row["floor_ms"]), _x(row["ours/floor"]), _ms(row.get("langgraph_ms")),
                     _x(row.get("ours/langgraph")), "<= 3x LangGraph" if at25 else "",
                     _met(row["ours/langgraph"] <= 3.0) if at25 else "-"))
    return rows


def _public_rows(public: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """The public path, ``record_turn`` (as ``guardkit-state record`` runs it), against its budget."""
    rows: list[tuple[str, ...]] = []
    for promises in (True, False):
        runs = sorted((r for r in public if r.get("promises", True) == promises), key=lambda r: r["prior_turns"])
        if not runs:
            continue
        what = "with" if promises else "without"
        first = runs[0]
        for row in runs:
            budget = row["prior_turns"] == 1
            rows.append((f"Record a turn, public record_turn, {row['prior_turns']} prior turns, {what} promises",
                         _ms(row["ours_ms"]), _ms(row["floor_ms"]), _x(row["ours/floor"]), "-", "-",
                         f"<= {RECORD_TURN_FLOOR_BUDGET:g}x floor" if budget else "",
                         _met(_le(row["ours/floor"], RECORD_TURN_FLOOR_BUDGET)) if budget else "-"))
        last = runs[-1]
        if last.get("parse_ms") is not None:
            both = last["floor_ms"] + 2 * last["parse_ms"]
            rows.append((f"Record a turn, public record_turn, {last['prior_turns']} prior turns, {what} promises "
                         f"(floor: the disk floor + two parses of its frontmatter, {_ms(last['parse_ms'])} each)",
                         _ms(last["ours_ms"]), _ms(both), _x(last["ours/(floor+2 parses)"]), "-", "-",
                         f"<= {RECORD_TURN_PARSE_BUDGET:g}x", _met(_le(last["ours/(floor+2 parses)"],
                                                                     RECORD_TURN_PARSE_BUDGET))))
        if last is not first and first["ours_ms"]:
            growth = round(last["ours_ms"] / first["ours_ms"], 2)
            rows.append((f"Record a turn, public record_turn, {last['prior_turns']} prior turns vs "
                         f"{first['prior_turns']}, {what} promises", _x(growth), "", "", "", "",
                         f"<= {RECORD_TURN_GROWTH_BUDGET:g}x", _met(_le(growth, RECORD_TURN_GROWTH_BUDGET))))
    return rows


def _recording(cases: dict[str, Any]) -> list[tuple[str, ...]]:
    """The record rows: the public path against its budget, then the loop's own path."""
    record = cases.get("record")
    if isinstance(record, dict):
        return [("Record a turn", "error", "", "", "", "", "", record.get("error", ""))]
    rows = _public_rows(cases.get("record_turn") or [])
    if isinstance(record, list) and record:
        rows += _record_rows(record, "")
    no_promises = cases.get("record_no_promises")
    if isinstance(no_promises, list) and no_promises:
        rows += _record_rows(no_promises, ", no promises")
    return rows


def _rows(results: dict[str, Any]) -> list[tuple[str, ...]]:
    cases = results.get("cases", {})
    rows = _recording(cases)
    resume = cases.get("resume")
    if isinstance(resume, list):
        for row in resume:
            limit = {25: 10.0, 200: 60.0}.get(row["turns"])
            rows.append((f"Resume at {row['turns']} turns, new process (open + resume point + context)",
                         _ms(row["ours_ms"]),
                         _ms(row["floor_ms"]), _x(row["ours/floor"]), _ms(row.get("langgraph_ms")),
                         _x(row.get("ours/langgraph")), f"<= {limit:.0f} ms" if limit else "",
                         _met(_le(row["ours_ms"], limit)) if limit else "-"))
    storage = cases.get("storage")
    if isinstance(storage, dict) and "own_bytes" in storage:
        rows.append((f"Bytes on disk after {storage['turns']} turns (floor = the turns' own bytes*)",
                     _bytes(storage["ours_bytes"]), _bytes(storage["own_bytes"]), _x(storage["ours/own"]),
                     _bytes(storage.get("langgraph_bytes")), _x(storage.get("langgraph/own")) + " own",
                     "<= 1.5x own", _met(_le(storage["ours/own"], 1.5))))
    status = cases.get("status")
    if isinstance(status, dict) and "cold_ms" in status:
        label = f"{status['files']:,} task files, {status['with_state']:,} with state"
        rows.append((f"status --json, cold ({label})", _ms(status["cold_ms"]), _ms(status["floor_ms"]),
                     _x(status["cold/floor"]), "", "", "<= 3 s", _met(_le(status["cold_ms"], 3000))))
        rows.append(("status --json, warm (nothing changed)", _ms(status["warm_ms"]), _ms(status["floor_ms"]),
                     _x(status["warm/floor"]), "", "", "<= 0.3 s", _met(_le(status["warm_ms"], 300))))
        rows.append(("status --json, peak memory (max RSS)", f"{status['peak_rss_mb']:.0f} MB", "", "", "", "",
                     "<= 200 MB", _met(_le(status["peak_rss_mb"], 200))))
    startup = cases.get("startup")
    if isinstance(startup, dict) and "help_ms" in startup:
        rows.append(("guardkit-state --help (floor: python -c pass)", _ms(startup["help_ms"]),
                     _ms(startup["python_pass_ms"]), _x(startup["help/python"]), "", "", "<= 4x",
                     _met(_le(startup["help/python"], 4.0))))
        rows.append(("guardkit-state show TASK-ID", _ms(startup["show_ms"]), _ms(startup["python_pass_ms"]),
                     _x(startup["show/python"]), "", "", "", "-"))
    rows += bench_status.table_rows(cases.get("reads"))
    git = cases.get("git")
    if isinstance(git, dict) and "median_ms" in git:
        med = git["median_ms"]
        rows.append((f"Turn commit, paths ({git['repo_files']:,}-file repo; floor: git add + commit)",
                     _ms(med["commit_turn_paths"]), _ms(med["floor_add_commit"]),
                     _x(git["ratio"]["commit_turn_paths/floor_add_commit"]), "", "", "", "-"))
        rows.append(("Turn commit, managed worktree (add -A + commit)", _ms(med["commit_turn_managed"]),
                     _ms(med["floor_add_commit"]), _x(git["ratio"]["commit_turn_managed/floor_add_commit"]),
                     "", "", "", "-"))
        if "coach_snapshot" in med:
            rows.append(("Worktree snapshot around the Coach, taken and put back (floor: add -A + write-tree + "
                         "status, temp index)", _ms(med["coach_snapshot"]), _ms(med["floor_snapshot"]),
                         _x(git["ratio"]["coach_snapshot/floor_snapshot"]), "", "", "", "-"))
    index = cases.get("index")
    if isinstance(index, dict) and "sync_200_ms" in index:
        rows.append(("Graphiti index: sync 200 turn states (embedded FalkorDB)", _ms(index["sync_200_ms"]),
                     "", "", "", "", "off the turn's path", "-"))
        rows.append(("Graphiti index: re-sync, nothing changed", _ms(index.get("resync_200_ms")), "", "", "", "",
                     "", "-"))
        rows.append(("Graphiti search, content words (floor: file scan, same query)", _ms(index.get("search_ms")),
                     _ms(index.get("files_search_ms")), _x(index.get("search_ratio_vs_files")), "", "", "", "-"))
        rows.append(("Graphiti identifier lookup, turn TASK-ID (floor: file scan, same query)",
                     _ms(index.get("lookup_ms")), _ms(index.get("files_lookup_ms")),
                     _x(index.get("lookup_ratio_vs_files")), "", "", "", "-"))
    rows += bench_feature.table_rows(cases.get("feature"))
    rows += bench_remote.table_rows(cases.get("remote"))
    rows += bench_agents.table_rows(cases.get("agents"))
    rows += bench_mcp.table_rows(cases.get("mcp"))
    rows += bench_first_hour.table_rows(cases.get("first_hour"))
    for name in ("status", "startup", "reads", "git", "index", "mcp"):
        value = cases.get(name)
        if isinstance(value, dict) and ("error" in value or "skipped" in value):
            rows.append((name, value.get("error") or f"skipped: {value['skipped']}", "", "", "", "", "", "-"))
    return rows


def render_table(results: dict[str, Any]) -> str:
    """Markdown: the machine, the table, and the notes (definitions, skipped columns)."""
    m = results.get("machine", {})
    lines = [f"Machine: {m.get('cpu_count')} CPUs ({m.get('cpu', 'unknown CPU')}), Python {m.get('python')}, "
             f"{m.get('platform')}, disk {m.get('disk')}. Medians of {results.get('repeat')} runs after warm-up"
             + (" (--quick: tiny sizes, not a measurement)." if results.get("quick") else "."), ""]
    lines.append("| " + " | ".join(HEADER) + " |")
    lines.append("|" + "|".join("---" for _ in HEADER) + "|")
    for row in _rows(results):
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "Floors: record = the same four files' bytes (3 JSON + task file) written with temp + fsync + "
              "replace + directory fsync, nothing parsed or validated (no promises: the Player reports after turn "
              "1 leave their completion promises out, and each turn recovers them from turn 1's); "
              "resume = reading the task file and the "
              "last turn state, in the same fresh process as ours (each resume sample is a new interpreter, "
              "imports off the clock); status = a Python subprocess reading every task file. "
              "LangGraph step = put_writes + put of a checkpoint holding the same state (every turn's three "
              "records), SqliteSaver defaults (WAL, synchronous=FULL); resume = get_tuple on a new connection, "
              "in that same fresh process.",
              "*Own bytes: the canonical JSON of the three records per turn plus each turn's frontmatter entry "
              "(YAML). Ours: the task's turn files plus what the turns added to the task file; SqliteSaver: the "
              "database file after closing (WAL folded in)."]
    lines += [f"Note: {note}" for note in results.get("notes", [])]
    return "\n".join(lines)
