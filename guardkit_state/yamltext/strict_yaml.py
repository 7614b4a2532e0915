"""Strict YAML reading: PyYAML's C safe loader, dates kept as strings, duplicate keys refused.

PyYAML silently keeps the last of two duplicate keys and turns ``2025-12-24`` into a ``date``; both
would make a save change bytes the user wrote. This loader keeps dates as the strings they are,
refuses duplicate keys with the line of the second one, refuses any tag that would construct an
object, and refuses alias bombs. Errors name the file and the line (offset to the file's own
numbering when the YAML is a fragment of a larger file, as frontmatter is).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import yaml

from guardkit_state.errors import DuplicateKeyError, FrontmatterError, ParseError

try:  # libyaml is present wherever PyYAML wheels are; fall back rather than fail.
    _BaseLoader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - only without libyaml
    _BaseLoader = yaml.SafeLoader

MERGE_TAG = "tag:yaml.org,2002:merge"

#: Expanded node count above which aliases are treated as an alias bomb.
MAX_EXPANDED_NODES = 200_000


class StrictLoader(_BaseLoader):  # type: ignore[misc]
    """Safe loader with no timestamp resolver and duplicate-key detection."""

    yaml_implicit_resolvers: ClassVar[dict[Any, list[tuple[str, re.Pattern[str]]]]] = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()  # type: ignore[attr-defined]
    }

    #: Set by :func:`parse_yaml` with ``keep_last``: duplicate keys are listed here, not refused.
    duplicates: list[DuplicateKey] | None = None
    #: Set by :func:`parse_yaml`: added to the lines of the keys found repeated.
    line_offset = 0

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, "found an unhashable mapping key", key_node.start_mark
                ) from None
            line = key_node.start_mark.line + 1 + self.line_offset
            if key in seen:
                if self.duplicates is None:
                    raise _DuplicateKey(DuplicateKey(key, seen[key], line))
                self.duplicates.append(DuplicateKey(key, seen[key], line))  # PyYAML keeps the last
            else:
                seen[key] = line
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


class _DuplicateKey(Exception):
    """A key a mapping repeats, refused (its :class:`DuplicateKey` is the argument)."""


@dataclass(frozen=True)
class DuplicateKey:
    """A key a mapping repeats, read with ``keep_last``: its two file lines (the last value is read)."""

    key: Any
    first_line: int
    line: int


@dataclass(frozen=True)
class ParsedYaml:
    """A parsed document: the plain data and the node tree (with marks) it came from."""

    data: Any
    node: yaml.Node | None
    aliased: bool = False  # some node is reached twice (through an alias)
    #: Keys repeated in a mapping (only with ``keep_last``; otherwise they are refused).
    duplicates: tuple[DuplicateKey, ...] = ()


def parse_yaml(
    text: str,
    *,
    path: Path | str | None = None,
    line_offset: int = 0,
    error_type: type[ParseError] = FrontmatterError,
    keep_last: bool = False,
) -> ParsedYaml:
    """Parse one YAML document strictly.

    Args:
        text: the YAML text.
        path: the file it came from, for error messages.
        line_offset: added to YAML line numbers (frontmatter starting on line 2 uses 1).
        error_type: the :class:`ParseError` subclass raised for syntax and tag problems.
        keep_last: read a repeated key as its last value, as PyYAML (and so GuardKit) does, and
            list it in ``duplicates``, instead of refusing it.

    Raises:
        DuplicateKeyError: a mapping repeats a key (without ``keep_last``).
        ParseError: (``error_type``) invalid YAML, an object-constructing tag, or an alias bomb.
    """
    loader = StrictLoader(text)
    loader.line_offset = line_offset
    if keep_last:
        loader.duplicates = []
    try:
        node = loader.get_single_node()
        if node is None:
            return ParsedYaml(None, None)
        # Every tree is walked once: it refuses alias bombs and deep nesting (with the line), and
        # says whether some node is reached twice (the splice then explains an alias it changes).
        aliased = _check_alias_expansion(node, path, line_offset, error_type)
        data = _construct(loader, node, "<<" in text)
        return ParsedYaml(data, node, aliased, tuple(loader.duplicates or ()))
    except _DuplicateKey as exc:
        dup: DuplicateKey = exc.args[0]
        raise DuplicateKeyError(
            f"duplicate key {dup.key!r} (first defined on line {dup.first_line})",
            path=path,
            line=dup.line,
            expected="each key once per mapping",
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 + line_offset if mark is not None else None
        problem = exc.problem or "invalid YAML"
        if "could not determine a constructor" in problem:
            problem = f"tag refused: {problem.split('tag ')[-1].strip()} would construct an object"
        elif exc.context:
            problem = f"{exc.context}: {problem}"
        raise error_type(problem, path=path, line=line, expected="plain YAML") from exc
    except yaml.YAMLError as exc:
        raise error_type(f"invalid YAML: {exc}", path=path, expected="plain YAML") from exc
    except RecursionError as exc:
        raise error_type("YAML nested too deeply", path=path, expected="plain YAML") from exc
    finally:
        loader.dispose()


def _construct(loader: Any, node: yaml.Node, may_merge: bool) -> Any:
    """Construct ``node``'s data, leaving the node tree as parsed.

    PyYAML resolves ``<<`` merge keys by rewriting the mapping nodes in place; the splice locates
    keys from those nodes' marks afterwards, so every mapping is put back as it was written.
    """
    written = _merging_mappings(node) if may_merge else []
    try:
        return loader.construct_document(node)
    finally:
        for mapping, pairs in written:
            mapping.value = pairs


def _merging_mappings(root: yaml.Node) -> list[tuple[yaml.MappingNode, list[tuple[yaml.Node, yaml.Node]]]]:
    return [(node, list(node.value)) for node in walk_nodes(root)
            if isinstance(node, yaml.MappingNode) and any(key.tag == MERGE_TAG for key, _ in node.value)]


def walk_nodes(root: yaml.Node) -> Iterator[yaml.Node]:
    """Every node of the tree under ``root`` once (a node an alias reaches again is not repeated)."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        if isinstance(node, yaml.MappingNode):
            stack.extend(child for pair in node.value for child in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)


def _check_alias_expansion(
    root: yaml.Node, path: Path | str | None, line_offset: int, error_type: type[ParseError]
) -> bool:
    """Refuse documents whose aliases expand to more than :data:`MAX_EXPANDED_NODES` nodes.

    Returns True when some node is reached twice (the document uses an alias).
    """
    sizes: dict[int, int] = {}
    shared = False

    def size(node: yaml.Node, depth: int) -> int:
        nonlocal shared
        key = id(node)
        if key in sizes:
            shared = True
            return sizes[key]
        if depth > 500:
            raise error_type(
                "YAML nested too deeply", path=path, line=node.start_mark.line + 1 + line_offset
            )
        sizes[key] = 1  # guards against recursive aliases
        total = 1
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                total += size(k, depth + 1) + size(v, depth + 1)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                total += size(item, depth + 1)
        sizes[key] = total
        return total

    total = size(root, 0)
    if shared and total > MAX_EXPANDED_NODES:
        raise error_type(
            f"aliases expand to {total} nodes (alias bomb?)",
            path=path,
            line=root.start_mark.line + 1 + line_offset,
            expected=f"at most {MAX_EXPANDED_NODES} nodes after alias expansion",
        )
    return shared
