"""``guardkit-state search``: turns, tasks, features and configuration — from the index when it can
answer rightly, else from the files, always saying which."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from guardkit_state.cli.exit_codes import ExitCode
from guardkit_state.cli.options import add_json_option, add_repo_option
from guardkit_state.cli.output import Output, safe

if TYPE_CHECKING:
    from guardkit_state.index.base import SearchResult


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "search",
        help="search turns, tasks, features and configuration (Graphiti index, else the files)",
        description="Search turns (decision, feedback, blockers, tests, coverage, gates), tasks (title, "
        "criteria, status), feature plans and configuration. Answers from the Graphiti index when it is "
        "built, fresh for the query's scope and not busy; otherwise scans the files and says why. The first "
        "line says which backend answered. A query naming a task, feature, criterion or turn is about it; "
        "'last', 'latest' or 'most recent' puts the newest first.",
        epilog="Examples:\n  guardkit-state search \"turn TASK-AUTH-001\"\n"
        "  guardkit-state search \"last turn of TASK-AUTH-001\"\n"
        "  guardkit-state search \"coverage below threshold\" --feature FEAT-AUTH --since 7d\n"
        "  guardkit-state search \"token refresh\" --decision rejected --json",
    )
    add_search_arguments(parser)
    parser.add_argument("--backend", choices=("auto", "files", "graphiti"), default="auto",
                        help="force a backend (default: auto)")
    parser.set_defaults(handler=run_search)


def add_search_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", metavar="QUERY")
    parser.add_argument("--group", action="append", metavar="G",
                        help="limit to a group (turn_states: turns, tasks and features; role_constraints, "
                        "quality_gate_configs, implementation_modes); repeatable")
    parser.add_argument("--task", metavar="TASK-ID", help="only this task's records")
    parser.add_argument("--feature", metavar="FEAT-ID", help="only this feature's records (its plan, tasks, turns)")
    parser.add_argument("--decision", metavar="D", help="only turns with this Coach decision (approved, feedback, "
                        "rejected, error)")
    parser.add_argument("--since", metavar="WHEN", help="only records from then on: a date, a date-time, or a span "
                        "back from now (24h, 7d, 2w)")
    parser.add_argument("--limit", type=int, default=10, metavar="N", help="at most N results (default 10)")
    add_index_options(parser)


def add_index_options(parser: argparse.ArgumentParser) -> None:
    """The options every command reading the index ends with (``search``, each ``graphiti`` action)."""
    add_repo_option(parser)
    parser.add_argument("--uri", default=None, help="Graphiti server URI (or GUARDKIT_GRAPHITI_URI)")
    parser.add_argument("--embedder", default=None, metavar="E", help="embedder: hashing, minilm, or openai:MODEL@URL "
                        "(an OpenAI-compatible endpoint); default: the one the index was built with")
    add_json_option(parser)


def run_search(args: argparse.Namespace, out: Output) -> int:
    """``search``, and ``graphiti search`` (whose ``backend`` is "graphiti")."""
    from guardkit_state.index import make_filters, search

    filters = make_filters(task=args.task, feature=args.feature, decision=args.decision, since=args.since)
    result = search(args.repo, args.query, groups=args.group, limit=max(1, args.limit), backend=args.backend,
                    uri=args.uri, embedder=args.embedder, filters=filters)
    render(result, args.query, out)
    return ExitCode.OK


def render(result: SearchResult, query: str, out: Output) -> None:
    """Print which backend answered (and why, for a fallback) and one numbered line per hit (or the JSON)."""
    if out.json_mode:
        out.json(result.to_dict() | {"query": query})
        return
    if result.note:
        out.note(f"note: {safe(result.note)}")
    out.line(f"Found {len(result.hits)} results for {safe(repr(query))} (backend: {safe(result.backend)}):")
    for i, hit in enumerate(result.hits, 1):
        when = f" @ {safe(hit.completed_at)}" if hit.completed_at and hit.kind == "turn_states" else ""
        out.line(f"{i}. [{hit.score:.2f}] {safe(hit.summary)}{when}")
