"""``guardkit-state graphiti``: build, check and search the optional Graphiti index."""

from __future__ import annotations

import argparse
from typing import Any

from guardkit_state.cli.options import add_json_option, add_repo_option
from guardkit_state.cli.output import Output, safe

SUBCOMMANDS = ("seed", "sync", "rebuild", "status", "prune", "search")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "graphiti",
        help="the optional Graphiti index: seed, sync, rebuild, status, prune, search",
        description="Manage the Graphiti secondary index (embedded FalkorDB under .guardkit/index/, "
        "or a server given --uri / GUARDKIT_GRAPHITI_URI). Built from the files and rebuildable "
        "from them; no LLM or API key needed.",
        epilog="Example:\n  guardkit-state graphiti sync\n  guardkit-state graphiti status --verbose\n"
        "  guardkit-state graphiti search \"blockers TASK-AUTH-001\" --group turn_states",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="graphiti_command", metavar="ACTION")
    helps = {
        "seed": "write the system groups (role constraints, gate configs, implementation modes)",
        "sync": "converge the index with the turn state files (adds, updates, removes; retention applied)",
        "rebuild": "drop this project's groups and rebuild them from the files",
        "status": "what the index holds, per group, and how far it is from the files",
        "prune": "apply retention (50 turns per feature, 200 per project) to the index",
        "search": "search the Graphiti index",
    }
    for name in SUBCOMMANDS:
        action = actions.add_parser(name, help=helps[name], description=helps[name],
                                    epilog=f"Example:\n  guardkit-state graphiti {name}"
                                    + (' "turn TASK-AUTH-001"' if name == "search" else ""),
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
        if name == "search":
            from guardkit_state.cli.cmd_search import add_search_arguments

            add_search_arguments(action)
        else:
            add_repo_option(action)
            action.add_argument("--uri", default=None, help="Graphiti server URI (or GUARDKIT_GRAPHITI_URI)")
            action.add_argument("--embedder", choices=("hashing", "minilm"), default="hashing",
                                help="embedder (default: hashing, offline)")
            add_json_option(action)
        if name == "status":
            action.add_argument("--verbose", action="store_true", help="list every group with its count")
        if name in ("prune", "sync"):
            action.add_argument("--dry-run", action="store_true", help="say what would change; change nothing")
        action.set_defaults(handler=run)
    parser.set_defaults(handler=lambda args, out: (parser.print_help(), 2)[1])


def run(args: argparse.Namespace, out: Output) -> int:
    from guardkit_state.index import open_graphiti
    from guardkit_state.index.embedded import embedded_index_exists

    command = args.graphiti_command
    if command == "search":
        from guardkit_state.cli.cmd_search import render
        from guardkit_state.index import search

        render(search(args.repo, args.query, groups=args.group, limit=max(1, args.limit),
                      backend="graphiti", uri=args.uri, embedder=args.embedder), args.query, out)
        return 0
    graph = open_graphiti(args.repo, uri=args.uri, embedder=args.embedder)
    if command == "status" and not graph.uri and not embedded_index_exists(graph.repo_root):
        # A read command: an index never built is reported as such, and nothing is created for it.
        return _print_status(_unbuilt_status(graph), graph.project_group, args, out)
    with graph as index:
        if command == "status":
            return _print_status(index.status(), index.project_group, args, out)
        if command == "seed":
            report = index.seed()
        elif command == "sync":
            report = index.sync(dry_run=args.dry_run)
        elif command == "rebuild":
            report = index.rebuild()
        else:
            report = index.prune(dry_run=args.dry_run)
    if out.json_mode:
        out.json(report.to_dict())
        return 0
    verb = "would" if report.dry_run else "did"
    out.line(f"{command} ({verb}): {len(report.added)} added, {len(report.updated)} updated, "
             f"{len(report.removed)} removed, {report.unchanged} unchanged")
    if report.pruned_by_retention:
        out.line(f"retention keeps {len(report.pruned_by_retention)} turn state(s) out of the index")
    for key in report.removed:
        out.line(f"  - {safe(key)}")
    for note in report.notes:
        out.note(f"note: {safe(note)}")
    for problem in report.problems:
        out.note(f"skipped: {safe(problem)}")
    return 0


def _print_status(status: Any, project_group: str, args: argparse.Namespace, out: Output) -> int:
    if out.json_mode:
        out.json(status.to_dict())
        return 0
    out.line(f"Index: {status.backend} at {safe(status.location)}")
    out.line(f"Turn states: {status.groups.get(project_group, 0)} indexed, {status.files} files "
             f"({status.missing} missing, {status.stale} stale, {status.extra} extra)")
    if args.verbose:
        out.line("Groups:")
        for group, count in status.groups.items():
            out.line(f"  • {group}: {count}")
        out.line(f"Entities: {status.entities}  Facts: {status.facts}")
    for note in status.notes:
        out.line(f"note: {note}")
    return 0


def _unbuilt_status(graph: Any) -> Any:
    """The status of an embedded index not built yet: every turn state file is missing from it."""
    from guardkit_state.index.base import IndexStatus
    from guardkit_state.index.records import load_turn_state_records

    files = len(load_turn_state_records(graph.repo_root).records)
    return IndexStatus(backend="graphiti (embedded FalkorDB)", location=graph.location, groups={},
                       files=files, missing=files,
                       notes=["no index built yet: 'guardkit-state graphiti sync' builds it"])
