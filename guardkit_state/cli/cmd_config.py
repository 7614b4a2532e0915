"""``guardkit-state config show [gates|roles|modes]``: the resolved configuration and its sources."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from guardkit_state.cli.exit_codes import ExitCode
from guardkit_state.cli.options import add_json_option, add_repo_option, help_of
from guardkit_state.cli.output import Output, safe
from guardkit_state.store import layout

if TYPE_CHECKING:
    from guardkit_state.config import GateProfile, ResolvedConfig

# Not imported from the config package, so that building the parser does not import YAML and JSON Schema.
SECTIONS = ("gates", "roles", "modes")
QUALITY_GATES_FILE = layout.QUALITY_GATES_FILE.as_posix()
OVERRIDES_FILE = layout.OVERRIDES_FILE.as_posix()
BUILT_IN = "built-in"

EXAMPLE = """\
Example:
  guardkit-state config show
  guardkit-state config show gates --json
  guardkit-state config show roles --repo ../my-project
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "config", help="show the quality gates, role constraints and modes in force",
        description=f"Show the configuration the loop uses: quality gates ({QUALITY_GATES_FILE} when "
                    f"present, else built-in), role constraints and gate overrides ({OVERRIDES_FILE}), "
                    "and implementation modes, with where each value came from.",
        epilog=EXAMPLE)
    actions = parser.add_subparsers(dest="config_action", metavar="ACTION")
    show = actions.add_parser(
        "show", help="print the resolved configuration and the source of each value",
        description="Print the resolved configuration and the source of each value "
                    "(built-in, the config file, or 'override: <file>').",
        epilog=EXAMPLE)
    show.add_argument("section", nargs="?", choices=SECTIONS, help="only this section")
    add_repo_option(show)
    add_json_option(show)
    show.set_defaults(handler=show_config)
    parser.set_defaults(handler=help_of(parser))


def show_config(args: argparse.Namespace, out: Output) -> int:
    from guardkit_state.config import load_config

    config = load_config(args.repo)
    if args.json:
        out.json(config.to_dict(args.section))
        return ExitCode.OK
    gates_file = config.files.get("quality_gates")
    overrides_file = config.files.get("entity_overrides")
    out.line(out.style("Configuration files", "bold"))
    out.line(f"  quality gates:    {gates_file or f'none ({QUALITY_GATES_FILE} absent: built-in profiles)'}")
    out.line(f"  entity overrides: {overrides_file or f'none ({OVERRIDES_FILE} absent)'}")
    for section, show in zip(SECTIONS, (_show_gates, _show_roles, _show_modes), strict=True):
        if args.section in (None, section):
            show(config, out)
    return ExitCode.OK


def _mark(source: str, default: str, out: Output) -> str:
    return "" if source == default else out.style(f" [{safe(source)}]", "yellow")


def _profile_line(profile: GateProfile, default: str, out: Output) -> str:
    low, high = profile.complexity_range
    arch = f"arch review {profile.arch_review_threshold}" if profile.arch_review_required else "arch review -"
    arch += _mark(profile.source_of("arch_review_threshold"), default, out)
    cov = f"coverage {profile.coverage_threshold * 100:g}%" if profile.coverage_required else "coverage -"
    cov += _mark(profile.source_of("coverage_threshold"), default, out)
    tests = ("tests must pass" if profile.tests_must_pass else "tests required") if profile.tests_required \
        else "tests -"
    tests += _mark(profile.source_of("tests_must_pass"), default, out)
    return f"  {safe(profile.task_type):<14} {low}-{high:<5} {arch} | {cov} | {tests}"


def _show_gates(config: ResolvedConfig, out: Output) -> None:
    from guardkit_state.config.gates import FALLBACK_TASK_TYPE

    out.line()
    out.line(out.style(f"Quality gates (from {safe(config.gates_source)} unless marked)", "bold"))
    for profile in config.gate_profiles:
        out.line(_profile_line(profile, config.gates_source, out))
    aliases = ", ".join(f"{safe(k)}->{safe(v)}" for k, v in config.task_type_aliases.items())
    out.line(f"  task-type aliases: {aliases}")
    out.line(f"  unknown task types use the '{FALLBACK_TASK_TYPE}' profile (with a warning)")


def _show_roles(config: ResolvedConfig, out: Output) -> None:
    from guardkit_state.config.roles import RULE_KINDS

    out.line()
    out.line(out.style(f"Role constraints ({BUILT_IN} unless marked)", "bold"))
    for name, role in config.roles.items():
        out.line(f"  {safe(name)}")
        for kind in RULE_KINDS:
            rules = getattr(role, kind)
            out.line(f"    {kind.replace('_', ' ')}:" + ("" if rules else " (none)"))
            for rule in rules:
                out.line(f"      - {safe(rule.text)}{_mark(rule.source, BUILT_IN, out)}")


def _show_modes(config: ResolvedConfig, out: Output) -> None:
    out.line()
    out.line(out.style("Implementation modes (advisory only)", "bold"))
    for mode in config.modes.values():
        low, high = mode.complexity_range
        out.line(f"  {safe(mode.mode):<10} complexity {low}-{high:<3} {mode.ceremony_level} ceremony, "
                 f"{safe(mode.invocation_method)}{_mark(mode.source, BUILT_IN, out)}")
        out.line(f"    when to use: {safe('; '.join(mode.when_to_use))}")
        out.line(f"    pitfalls:    {safe('; '.join(mode.pitfalls))}")
        out.line(f"    results in:  {safe(mode.result_location_pattern)}")
