"""``guardkit-state agents``: the agent presets, whether each program is installed, and its version."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from guardkit_state.cli.exit_codes import ExitCode
from guardkit_state.cli.options import add_json_option, add_repo_option
from guardkit_state.cli.output import Output, safe

if TYPE_CHECKING:
    from guardkit_state.agents.presets import PresetStatus

EXAMPLE = """\
Example:
  guardkit-state agents
  guardkit-state agents --json
  guardkit-state feature-build TASK-AUTH-001 --player claude --coach codex

Add or override a preset in .guardkit/config/agents.yaml (docs/agents.md).
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "agents", help="list the agent presets ({presets}, yours) and whether each is installed",
        description="List the agent presets --player NAME and --coach NAME can pick: the built-in ones and "
                    "those of .guardkit/config/agents.yaml, with where each program is on PATH and the version "
                    "it reports.",
        epilog=EXAMPLE)
    add_repo_option(parser)
    add_json_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, out: Output) -> int:
    from guardkit_state.agents.presets import load_presets, preset_status

    out.result([preset_status(preset) for preset in load_presets(args.repo).values()], render)
    return ExitCode.OK


def render(statuses: list[PresetStatus], out: Output) -> None:
    for status in statuses:
        where = f"{safe(status.path)}" + (f" ({safe(status.version)})" if status.version else "") \
            if status.path else out.style("not found on PATH", "yellow")
        source = "" if status.source == "built-in" else f" [{safe(status.source)}]"
        out.line(f"{out.style(safe(status.name), 'bold'):<10} {safe(status.description)}{source}")
        out.line(f"           {where}")
