"""The public surface is deliberate: every exported name resolves and is listed once, and ``__all__``,
the lazy table, the typing block, the package's namespace and the list in docs/README.md never drift."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import guardkit_state

ROOT = Path(guardkit_state.__file__).resolve().parent.parent


def test_every_exported_name_resolves() -> None:
    missing = [name for name in guardkit_state.__all__ if not hasattr(guardkit_state, name)]
    assert missing == []


def test_all_is_sorted_and_unique() -> None:
    names = [n for n in guardkit_state.__all__ if n != "__version__"]
    assert names == sorted(set(names))


def test_all_lists_exactly_the_lazy_exports() -> None:
    assert set(guardkit_state.__all__) == set(guardkit_state._EXPORTS) | {"__version__"}


def test_the_package_offers_no_public_name_beyond_all() -> None:
    # Every lazy name resolved, the package's namespace holds __all__ and its subpackages, nothing else
    # public: a helper imported at the top of __init__.py would be an export nobody chose.
    code = ("import __future__, types, guardkit_state as g; [getattr(g, n) for n in g.__all__]; "
            "print(sorted(n for n, v in vars(g).items() if not n.startswith('_') and n not in g.__all__ "
            "and not isinstance(v, (types.ModuleType, __future__._Feature))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_surface_stays_small() -> None:
    # The task file, the turn store, the records, the loop, the index protocol, the errors a caller
    # tells apart: about forty names (docs/README.md). Anything else is imported from its module.
    assert len(guardkit_state.__all__) <= 45


def test_docs_list_exactly_the_public_names() -> None:
    text = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    section = text.split("## Python API", 1)[1].split("\n## ", 1)[0]
    table = "\n".join(line for line in section.splitlines() if line.startswith("| ") and "---" not in line)
    documented = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", table))
    assert documented == set(guardkit_state.__all__) - {"__version__"}


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
    tree = ast.parse(Path(guardkit_state.__file__).read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test))
    typed = {alias.name: node.module for node in block.body if isinstance(node, ast.ImportFrom)
             for alias in node.names}
    exports = {name: f"guardkit_state.{module}" for name, module in guardkit_state._EXPORTS.items()}
    assert typed == exports


def test_the_wheel_lists_every_package_of_the_source_tree() -> None:
    # setuptools ships only the packages pyproject names: a new subpackage left out breaks installs.
    import tomllib

    root = Path(guardkit_state.__file__).parent
    listed = set(tomllib.loads((root.parent / "pyproject.toml").read_text(encoding="utf-8"))
                 ["tool"]["setuptools"]["packages"])
    on_disk = {".".join(init.parent.relative_to(root.parent).parts) for init in root.rglob("__init__.py")}
    assert on_disk <= listed


def test_the_index_package_lists_and_resolves_every_export_before_first_use() -> None:
    # Its names resolve on first use (PEP 562): dir(), help() and completion must list them all
    # the same, each name must import, and the typing block must name each from its module.
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
