"""``guardkit-state worktrees [prune]``: list loop worktrees, remove finished ones."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from guardkit_state.cli.exit_codes import ExitCode
from guardkit_state.cli.options import add_json_option, add_repo_option
from guardkit_state.cli.output import Output, safe
from guardkit_state.errors import GitError
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.worktrees import WorktreeInfo, WorktreeManager

LIST_EXAMPLE = """\
Example:
  guardkit-state worktrees
  guardkit-state worktrees --json
  guardkit-state worktrees prune --dry-run
"""

PRUNE_EXAMPLE = """\
Example:
  guardkit-state worktrees prune --dry-run     # show what would go
  guardkit-state worktrees prune               # remove merged, clean worktrees
  guardkit-state worktrees prune --force       # also unmerged/dirty ones (discards their work and files)
  guardkit-state worktrees prune TASK-AUTH-001 --force   # throw away one loop, leave the others
  guardkit-state worktrees prune FEAT-AUTH     # the feature's worktree and its tasks' worktrees

Even with --force, a branch holding merges that no other branch has (a feature branch with its
tasks' work merged in) is kept, and the output says so.
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "worktrees", help="list loop worktrees (.guardkit/worktrees/*) and their state",
        description="List the worktrees of autobuild loops: branch, base, ahead/behind, merged, dirty.",
        epilog=LIST_EXAMPLE)
    add_repo_option(parser)
    add_json_option(parser)
    parser.set_defaults(handler=list_worktrees)
    actions = parser.add_subparsers(dest="worktrees_action", metavar="ACTION", parser_class=type(parser))
    prune = actions.add_parser(
        "prune", help="remove finished (merged and clean) worktrees",
        description="Remove worktrees whose turn commits are merged into their base and that hold no file "
                    "that exists nowhere else (uncommitted changes, or ignored files no commit and no main "
                    "checkout copy has), with their merged branches. Anything else is kept, saying which "
                    "files, unless --force.",
        epilog=PRUNE_EXAMPLE)
    # SUPPRESS: values given before 'prune' are not overwritten by the subparser's defaults.
    add_repo_option(prune, default=argparse.SUPPRESS)
    add_json_option(prune, default=argparse.SUPPRESS)
    prune.add_argument("ids", metavar="TASK-ID|FEAT-ID", nargs="*",
                       help="only these loops' worktrees (a feature: its own and its tasks'); default: every one")
    prune.add_argument("--force", action="store_true", help="also remove unmerged or dirty worktrees (loses work)")
    prune.add_argument("--dry-run", action="store_true", help="only show what would be removed")
    prune.set_defaults(handler=prune_worktrees)


def _loops_named(repo_dir: Path, ids: list[str]) -> set[str]:
    """The loops ``ids`` name: each task id, and each feature id with its plan's task ids."""
    from guardkit_state.plans.plan import find_plan, load_plan
    from guardkit_state.store.layout import names_feature
    from guardkit_state.store.safe_paths import validate_task_id

    named: set[str] = set()
    for ref in ids:
        if names_feature(ref):
            plan = load_plan(find_plan(Path(repo_dir).resolve(), ref))
            named |= {plan.feature_id, *(task.id for task in plan.tasks)}
        else:
            validate_task_id(ref)
            named.add(ref)
    return named


def _manager(repo_dir: Path) -> WorktreeManager:
    repo = GitRepo.discover(repo_dir)
    if repo is None:
        raise GitError("not a git repository (or git is not installed)", path=repo_dir,
                       fix="run it in a git repository, or give --repo DIR")
    return WorktreeManager(repo)


def _row(info: WorktreeInfo) -> str:
    if info.missing:
        state = "missing (deleted by hand)"
    elif info.merged:
        state = "merged"
    else:
        state = f"{info.ahead} ahead" if info.ahead is not None else "unknown base"
    if info.behind:
        state += f", base moved {info.behind}"
    if info.dirty:
        state += ", dirty"
    return f"{safe(info.task_id):<24} {safe(info.branch or '-'):<32} {safe(info.base_branch or '-'):<12} {state}"


def list_worktrees(args: argparse.Namespace, out: Output) -> int:
    out.result(_manager(args.repo).list(), _list)
    return ExitCode.OK


def _list(infos: list[WorktreeInfo], out: Output) -> None:
    if not infos:
        out.note("no loop worktrees")
        return
    out.line(out.style(f"{'TASK':<24} {'BRANCH':<32} {'BASE':<12} STATE", "bold"))
    for info in infos:
        out.line(_row(info))


def prune_worktrees(args: argparse.Namespace, out: Output) -> int:
    only = _loops_named(args.repo, args.ids) if getattr(args, "ids", None) else None
    result = _manager(args.repo).prune(force=args.force, dry_run=args.dry_run, only=only)
    if getattr(args, "json", False):
        out.json(result.to_dict())
        return ExitCode.OK
    verb = "would remove" if args.dry_run else "removed"
    for info in result.removed:
        out.line(f"{verb} {safe(info.task_id)} ({safe(info.path)})")
    for info, reason in result.kept:
        out.line(f"kept {safe(info.task_id)}: {safe(reason)}")
    for note in result.notes:
        out.note(safe(note))
    if not result.removed and not result.kept:
        out.note("no loop worktrees" if only is None else f"no loop worktree of {', '.join(sorted(only))}")
    return ExitCode.OK
