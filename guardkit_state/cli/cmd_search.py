"""``guardkit-state search``: search turn states, Graphiti when configured, else the files."""

from __future__ import annotations

import argparse

from guardkit_state.cli.options import add_json_option, add_repo_option
from guardkit_state.cli.output import Output, safe


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "search",
        help="search turn states and configuration (Graphiti index, else the files)",
        description="Search turn states (and role constraints, gate configs, implementation modes). "
        "Uses the Graphiti index when it is installed and built (or --uri is given); otherwise "
        "scans the files. The first line says which backend answered.",
        epilog="Example:\n  guardkit-state search \"turn TASK-AUTH-001\"\n"
        "  guardkit-state search \"coach_decision rejected\" --group turn_states --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_search_arguments(parser)
    parser.add_argument("--backend", choices=("auto", "files", "graphiti"), default="auto",
                        help="force a backend (default: auto)")
    parser.set_defaults(handler=run)


def add_search_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", metavar="QUERY")
    parser.add_argument("--group", action="append", metavar="G",
                        help="limit to a group (turn_states, role_constraints, quality_gate_configs, "
                        "implementation_modes); repeatable")
    parser.add_argument("--limit", type=int, default=10, metavar="N", help="at most N results (default 10)")
    add_repo_option(parser)
    parser.add_argument("--uri", default=None, help="Graphiti server URI (or GUARDKIT_GRAPHITI_URI)")
    parser.add_argument("--embedder", choices=("hashing", "minilm"), default="hashing",
                        help="query embedder for the Graphiti backend (default: hashing)")
    add_json_option(parser)


def run(args: argparse.Namespace, out: Output) -> int:
    from guardkit_state.index import search

    result = search(args.repo, args.query, groups=args.group, limit=max(1, args.limit),
                    backend=args.backend, uri=args.uri, embedder=args.embedder)
    render(result, args.query, out)
    return 0


def render(result: object, query: str, out: Output) -> None:
    """Print a :class:`SearchResult` as seed 001 shows it, or as JSON."""
    from guardkit_state.index import SearchResult

    assert isinstance(result, SearchResult)
    if out.json_mode:
        out.json(result.to_dict() | {"query": query})
        return
    if result.note:
        out.note(f"note: {safe(result.note)}")
    out.line(f"Found {len(result.hits)} results for {safe(repr(query))} (backend: {safe(result.backend)}):")
    for i, hit in enumerate(result.hits, 1):
        out.line(f"{i}. [{hit.score:.2f}] {safe(hit.summary)}")
