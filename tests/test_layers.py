"""The layer contract of guardkit_state, read from the source (docs/architecture.md draws it).

Every import counts: top level, lazy inside a function, and under ``if TYPE_CHECKING:``. A module
imports only from its own layer or a layer below; no import cycle joins two modules; no two modules
share a basename and no two classes share a name, so a name in a traceback says which one.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = "guardkit_state"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE

# Bottom to top. The key is the first name under guardkit_state (a package or a top-level module).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "model", "extras"),  # the errors, the records, the optional extras: everything may name them
    ("store",),
    ("yamltext",),  # text-preserving YAML: strict reading, the one editor, verified file writes
    ("git",),
    ("taskfile",),
    ("config",),
    ("plans",),
    ("turns",),
    ("agents",),  # the agent protocol and the presets that implement it: the loop calls them
    ("loop",),
    ("index",),  # above the loop: the loop reaches it only through the subscriber its caller passes in
    ("features", "remote"),
    ("inspect",),
    ("report", "mcp_server"),
    ("cli", "__init__", "__main__"),
)
LAYER_OF = {part: rank for rank, parts in enumerate(LAYERS) for part in parts}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}
TREES: dict[str, ast.Module] = {
    name: ast.parse(path.read_text(encoding="utf-8"), filename=str(path)) for name, path in MODULES.items()
}


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _resolve(importer: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The package modules one import statement names (a submodule where one exists, else its module)."""
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
        return [_nearest_module(t) for t in targets if t == PACKAGE or t.startswith(PACKAGE + ".")]
    if node.level:
        base = importer.split(".")
        if not _is_package(importer):
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module or ""
    if module != PACKAGE and not module.startswith(PACKAGE + "."):
        return []
    found = []
    for alias in node.names:
        if module == PACKAGE and alias.name == "__version__":
            continue  # a constant of the root itself, not one of the names it re-exports from above
        sub = f"{module}.{alias.name}"
        found.append(sub if sub in MODULES else _nearest_module(module))
    return found


def _nearest_module(dotted: str) -> str:
    while dotted not in MODULES and "." in dotted:
        dotted = dotted.rsplit(".", 1)[0]
    return dotted


def _import_graph() -> dict[str, dict[str, int]]:
    """importer -> {imported module: first line}, every import statement anywhere in the module."""
    graph: dict[str, dict[str, int]] = {name: {} for name in MODULES}
    for name, tree in TREES.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in _resolve(name, node):
                    if target != name:
                        graph[name].setdefault(target, node.lineno)
    return graph


GRAPH = _import_graph()


def _layer_key(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _location(module: str, line: int) -> str:
    return f"{MODULES[module].relative_to(ROOT.parent)}:{line}"


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(m for m in MODULES if _layer_key(m) not in LAYER_OF)
    assert not unplaced, "modules in no layer (add them to LAYERS and docs/architecture.md):\n" + "\n".join(unplaced)


def test_imports_point_down_the_layers() -> None:
    upward = []
    for importer, targets in GRAPH.items():
        below = LAYER_OF.get(_layer_key(importer))
        for target, line in sorted(targets.items()):
            above = LAYER_OF.get(_layer_key(target))
            if below is not None and above is not None and above > below:
                upward.append(
                    f"{_location(importer, line)}: {importer} (layer {_layer_key(importer)}) imports "
                    f"{target} (layer {_layer_key(target)}, above)"
                )
    assert not upward, f"{len(upward)} imports point up the layers:\n" + "\n".join(upward)


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.get(nxt, {}))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_no_import_cycles() -> None:
    cycles = _cycles(GRAPH)
    lines = []
    for component in cycles:
        members = set(component)
        edges = [
            f"    {_location(a, line)}: {a} -> {b}"
            for a in component
            for b, line in sorted(GRAPH[a].items())
            if b in members
        ]
        lines.append(f"cycle of {len(component)}: " + ", ".join(component) + "\n" + "\n".join(edges))
    assert not cycles, f"{len(cycles)} import cycles:\n" + "\n".join(lines)


def test_no_two_modules_share_a_basename() -> None:
    by_basename: dict[str, list[str]] = defaultdict(list)
    for path in MODULES.values():
        if path.name != "__init__.py":
            by_basename[path.stem].append(str(path.relative_to(ROOT.parent)))
    clashes = [f"{stem}: {', '.join(paths)}" for stem, paths in sorted(by_basename.items()) if len(paths) > 1]
    assert not clashes, f"{len(clashes)} module basenames used twice:\n" + "\n".join(clashes)


def test_no_two_classes_share_a_name() -> None:
    by_class: dict[str, list[str]] = defaultdict(list)
    for name, tree in TREES.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                by_class[node.name].append(_location(name, node.lineno))
    clashes = [f"{cls}: {', '.join(places)}" for cls, places in sorted(by_class.items()) if len(places) > 1]
    assert not clashes, f"{len(clashes)} class names used twice:\n" + "\n".join(clashes)


@pytest.mark.parametrize(
    ("importer", "source", "expected"),
    [
        ("guardkit_state.loop.run", "from guardkit_state.turns import lifecycle", "guardkit_state.turns.lifecycle"),
        ("guardkit_state.loop.run", "from guardkit_state.turns.lifecycle import x", "guardkit_state.turns.lifecycle"),
        ("guardkit_state.loop.run", "from ..turns.lifecycle import record_turn", "guardkit_state.turns.lifecycle"),
        ("guardkit_state.loop", "from .run import x", "guardkit_state.loop.run"),
        ("guardkit_state.loop.run", "import guardkit_state.errors", "guardkit_state.errors"),
        ("guardkit_state.loop.run", "from guardkit_state import errors", "guardkit_state.errors"),
        ("guardkit_state.mcp_server.serve", "from guardkit_state import __version__", None),
    ],
)
def test_imports_resolve_to_modules(importer: str, source: str, expected: str | None) -> None:
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.Import | ast.ImportFrom)
    assert _resolve(importer, node) == ([expected] if expected else [])


def test_cycles_found_in_a_small_graph() -> None:
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}, "e": {}}
    assert _cycles(graph) == [["a", "b", "c"]]
