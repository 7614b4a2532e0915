"""``guardkit-state merge-driver``: git's merge driver for task files and plans, and its setup."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from guardkit_state.cli.exit_codes import ExitCode
from guardkit_state.cli.options import add_json_option, add_repo_option
from guardkit_state.cli.output import Output, safe

EXAMPLE = """\
Register it once per clone (it writes .gitattributes, to commit, and the local git config):
  guardkit-state merge-driver --install
  guardkit-state merge-driver --check          # exit 0 registered, 1 not (and what is missing)

Git then runs it for task files (tasks/**/*.md) and plans (.guardkit/features/*.yaml) as
  guardkit-state merge-driver %O %A %B %P
merging the frontmatter key by key (turns by number, criteria by id, plan tasks by id,
statuses forward), the body with git merge-file. A value changed differently on both sides
is a conflict: written between markers, named on stderr, exit 1.

Exit status: 0 merged (or registered), 1 conflicts (or not registered), 2 bad arguments, or a
side over the 8 MiB size cap a task file is read under (refused unread; git counts it a conflict).
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "merge-driver", help="merge task files and plans key by key (git merge driver; --install)",
        description="Git's merge driver for loop state, and the one command that registers it.",
        epilog=EXAMPLE)
    parser.add_argument("files", metavar="FILE", nargs="*",
                        help="as git passes them: BASE OURS THEIRS PATH (%%O %%A %%B %%P); the result goes to OURS")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--install", action="store_true", help="register the driver in this repository")
    action.add_argument("--check", action="store_true", help="say whether the driver is registered here")
    parser.add_argument("--marker-size", type=int, default=7, metavar="N", help="conflict marker size (git's %%L)")
    add_repo_option(parser)
    add_json_option(parser, "machine-readable answer (--install, --check)")
    parser.set_defaults(handler=run_merge_driver)


def run_merge_driver(args: argparse.Namespace, out: Output) -> int:
    if args.install or args.check:
        if args.files:
            out.error("merge-driver: --install and --check take no FILE")
            return ExitCode.USAGE
        return _setup(args, out)
    if len(args.files) != 4:
        out.error("merge-driver: expected BASE OURS THEIRS PATH (run 'guardkit-state merge-driver --help')")
        return ExitCode.USAGE
    from guardkit_state.remote.merge_driver import merge_texts
    from guardkit_state.store.reads import read_bytes_capped

    base, ours, theirs = (Path(name) for name in args.files[:3])
    path = args.files[3]
    # Each side as git wrote it from its blob, read as a task file on disk is: one over the cap (pushed
    # by a hostile worker) is refused unread, and git takes the failure as a conflict.
    texts = [read_bytes_capped(file).decode("utf-8", "surrogateescape") for file in (base, ours, theirs)]
    result = merge_texts(texts[0], texts[1], texts[2], path, marker=args.marker_size)
    with open(ours, "wb") as handle:  # git's own temporary file, read back by git when we exit
        handle.write(result.text.encode("utf-8", "surrogateescape"))
    for note in result.notes:
        out.note(f"guardkit-state merge-driver: {safe(note)}")
    for conflict in result.conflicts:
        out.note(f"guardkit-state merge-driver: {safe(path)}: conflict: {safe(conflict)}")
    return ExitCode.OK if result.clean else ExitCode.FAILED


def _setup(args: argparse.Namespace, out: Output) -> int:
    from guardkit_state.errors import InputError
    from guardkit_state.git.merge_driver_setup import install, registration
    from guardkit_state.git.repo import GitRepo

    repo = GitRepo.discover(args.repo)
    if repo is None:
        raise InputError(f"{args.repo} is not in a git repository", path=args.repo,
                         fix="run it in a git working tree, or give --repo DIR")
    changed = install(repo) if args.install else []
    found = registration(repo)
    if args.json:
        out.json({**found.to_dict(), "changed": changed})
    else:
        for change in changed:
            out.line(f"set {safe(change)}")
        if found.registered:
            out.line(f"registered: git runs '{safe(found.driver)}' for task files and plans"
                     + (" (commit .gitattributes so every clone has it)" if changed else ""))
        else:
            out.line(f"not registered: missing {safe('; '.join(found.missing()))}; "
                     "run 'guardkit-state merge-driver --install'")
    return ExitCode.OK if found.registered else ExitCode.FAILED
