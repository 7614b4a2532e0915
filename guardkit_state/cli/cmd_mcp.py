"""``guardkit-state mcp``: serve the repository's loop memory to an agent over MCP (stdio)."""

from __future__ import annotations

import argparse

from guardkit_state.cli.exit_codes import ExitCode
from guardkit_state.cli.options import add_repo_option
from guardkit_state.cli.output import Output


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "mcp",
        help="serve this repository's loop memory to a coding agent (an MCP server on stdio)",
        description="Run a Model Context Protocol server on stdin/stdout for one repository. Tools: "
        "status, show, context, criteria, turn_reports, feature, search (read); record_turn (write, "
        "with the checks of 'record'), claim_next_task, release_claim and release_quarantined_task (a "
        "feature's tasks claimed on its git remote as 'feature-build --remote' workers claim them); resources "
        "guardkit://task/TASK-ID and "
        "guardkit://task/TASK-ID/turn/N. Every answer is read from the files when asked. stdout "
        "carries only the protocol; logs go to stderr. Needs the mcp extra "
        "(without it, the error names the command that installs it into this copy; 'guardkit-state doctor' "
        "lists the extras). Register it with an agent (see docs/mcp.md).",
        epilog="Examples:\n  claude mcp add guardkit-state -- guardkit-state mcp --repo /path/to/repo\n"
        "  guardkit-state mcp --read-only        # for a Coach or a reviewer: no write tools",
    )
    parser.add_argument("--read-only", action="store_true",
                        help="leave out the write tools (record_turn, claim_next_task, release_claim, "
                        "release_quarantined_task): "
                        "for a Coach or a reviewer")
    add_repo_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, out: Output) -> int:
    from guardkit_state.extras import missing_extra_error

    try:
        from guardkit_state.mcp_server.serve import serve
    except ImportError as exc:
        if exc.name is None or not exc.name.startswith(("mcp", "pydantic", "anyio")):
            raise
        raise missing_extra_error("mcp", "the MCP server", missing=exc.name.partition(".")[0]) from exc
    serve(args.repo, read_only=args.read_only)
    return ExitCode.OK
