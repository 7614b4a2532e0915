"""The public surface is deliberate: every exported name resolves and is listed once."""

from __future__ import annotations

import subprocess
import sys

import guardkit_state


def test_every_exported_name_resolves() -> None:
    missing = [name for name in guardkit_state.__all__ if not hasattr(guardkit_state, name)]
    assert missing == []


def test_all_is_sorted_and_unique() -> None:
    names = [n for n in guardkit_state.__all__ if n != "__version__"]
    assert names == sorted(set(names))


def test_errors_share_one_base() -> None:
    for name in guardkit_state.__all__:
        obj = getattr(guardkit_state, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, guardkit_state.GuardkitStateError), name


def test_importing_the_cli_does_not_import_heavy_modules() -> None:
    code = ("import sys; from guardkit_state.cli.app import build_parser; build_parser(); "
            "heavy = [m for m in ('jsonschema', 'git', 'graphiti_core', 'yaml') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
