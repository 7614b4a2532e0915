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


def test_the_typing_block_names_every_export_from_its_module() -> None:
    # mypy and editors read the TYPE_CHECKING imports; the lazy loader reads _EXPORTS: they must agree.
    import ast
    from pathlib import Path

    tree = ast.parse(Path(guardkit_state.__file__).read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If)
                 and getattr(node.test, "id", "") == "TYPE_CHECKING")
    typed = {alias.name: node.module for node in block.body if isinstance(node, ast.ImportFrom)
             for alias in node.names}
    exports = {name: f"guardkit_state.{module}" for name, module in guardkit_state._EXPORTS.items()}
    assert typed == exports


def test_the_wheel_lists_every_package_of_the_source_tree() -> None:
    # setuptools ships only the packages pyproject names: a new subpackage left out breaks installs.
    import tomllib
    from pathlib import Path

    root = Path(guardkit_state.__file__).parent
    listed = set(tomllib.loads((root.parent / "pyproject.toml").read_text(encoding="utf-8"))
                 ["tool"]["setuptools"]["packages"])
    on_disk = {".".join(init.parent.relative_to(root.parent).parts) for init in root.rglob("__init__.py")}
    assert on_disk <= listed


def test_the_index_package_lists_and_resolves_every_export_before_first_use() -> None:
    # Its names resolve on first use (PEP 562): dir(), help() and completion must list them all
    # the same, each name must import, and the typing block must name each from its module.
    import ast
    from pathlib import Path

    code = ("import guardkit_state.index as index, importlib; "
            "missing = [n for n in index.__all__ if n not in dir(index)]; "
            "bad = [n for n in index.__all__ if getattr(index, n, None) is None]; print(missing, bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] []"
    import guardkit_state.index as index

    tree = ast.parse(Path(index.__file__).read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If)
                 and getattr(node.test, "id", "") == "TYPE_CHECKING")
    typed = {alias.name: node.module for node in block.body if isinstance(node, ast.ImportFrom)
             for alias in node.names}
    assert typed == index._EXPORTS
