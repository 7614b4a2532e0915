"""``guardkit-state graphiti``: build, check and search the optional Graphiti index."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from guardkit_state.cli.cmd_search import add_index_options, add_search_arguments, run_search
from guardkit_state.cli.exit_codes import ExitCode
from guardkit_state.cli.options import help_of
from guardkit_state.cli.output import Output, safe

if TYPE_CHECKING:
    from guardkit_state.index.base import IndexStatus, SyncReport


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "graphiti",
        help="the optional Graphiti index: seed, sync, rebuild, status, prune, search",
        description="Manage the Graphiti secondary index (embedded FalkorDB under .guardkit/index/, "
        "or a server given --uri / GUARDKIT_GRAPHITI_URI). Built from the files and rebuildable "
        "from them; no LLM or API key needed.",
        epilog="Example:\n  guardkit-state graphiti sync\n  guardkit-state graphiti status --verbose\n"
        "  guardkit-state graphiti search \"blockers TASK-AUTH-001\" --group turn_states",
    )
    actions = parser.add_subparsers(dest="graphiti_command", metavar="ACTION")
    helps = {
        "seed": "write this project's configuration groups (role constraints, gate configs, implementation modes)",
        "sync": "converge the index with the files: turns, tasks, feature plans (adds, updates, removes; "
                "retention applied)",
        "rebuild": "drop this project's groups and rebuild them from the files (also: switch embedder, recover "
                   "from a corrupt snapshot)",
        "status": "what the index holds, per group, its embedder, and how far it is from the files",
        "prune": "apply retention (50 turns per feature, 200 per project) to the index",
        "search": "search the Graphiti index",
    }
    for name, text in helps.items():
        action = actions.add_parser(name, help=text, description=text,
                                    epilog=f"Example:\n  guardkit-state graphiti {name}"
                                    + (' "turn TASK-AUTH-001"' if name == "search" else ""))
        if name == "search":
            add_search_arguments(action)
            action.set_defaults(handler=run_search, backend="graphiti")
        else:
            add_index_options(action)
            action.set_defaults(handler=run)
        if name == "status":
            action.add_argument("--verbose", action="store_true", help="list every group with its count")
        if name in ("prune", "sync"):
            action.add_argument("--dry-run", action="store_true", help="say what would change; change nothing")
        if name == "sync":
            action.add_argument("--full", action="store_true",
                                help="compare with every stored record, not with the local manifest")
    parser.set_defaults(handler=help_of(parser))


def run(args: argparse.Namespace, out: Output) -> int:
    from guardkit_state.index import graphiti_status, project_group_id, update_graphiti

    command = args.graphiti_command
    if command == "status":
        status = graphiti_status(args.repo, uri=args.uri, embedder=args.embedder)
        group = project_group_id(args.repo)
        out.result(status, lambda shown, _: _print_status(shown, group, args.verbose, out))
        return ExitCode.OK
    out.result(update_graphiti(args.repo, command, uri=args.uri, embedder=args.embedder,
                               dry_run=getattr(args, "dry_run", False), full=getattr(args, "full", False)),
               lambda report, _: _print_sync(command, report, out))
    return ExitCode.OK


def _print_sync(command: str, report: SyncReport, out: Output) -> None:
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


def _print_status(status: IndexStatus, project_group: str, verbose: bool, out: Output) -> None:
    out.line(f"Index: {status.backend} at {safe(status.location)}")
    if status.embedder:
        out.line(f"Embedder: {safe(status.embedder)} ({status.dimension} dimensions)"
                 + (f"; last sync {safe(status.synced_at)}" if status.synced_at else ""))
    out.line(f"Turns, tasks and features: {status.groups.get(project_group, 0)} indexed, {status.files} in the files "
             f"({status.missing} missing, {status.stale} stale, {status.extra} extra)")
    if verbose:
        out.line("Groups:")
        for group, count in status.groups.items():
            out.line(f"  • {safe(group)}: {count}")
        out.line(f"Entities: {status.entities}  Facts: {status.facts}")
    for note in status.notes:
        out.line(f"note: {safe(note)}")
