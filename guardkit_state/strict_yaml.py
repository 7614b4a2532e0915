"""Strict YAML reading: PyYAML's C safe loader, dates kept as strings, duplicate keys refused.

PyYAML silently keeps the last of two duplicate keys and turns ``2025-12-24`` into a ``date``; both
would make a save change bytes the user wrote. This loader keeps dates as the strings they are,
refuses duplicate keys with the line of the second one, refuses any tag that would construct an
object, and refuses alias bombs. Errors name the file and the line (offset to the file's own
numbering when the YAML is a fragment of a larger file, as frontmatter is).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .errors import DuplicateKeyError, FrontmatterError, ParseError

try:  # libyaml is present wherever PyYAML wheels are; fall back rather than fail.
    _BaseLoader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - only without libyaml
    _BaseLoader = yaml.SafeLoader

#: Expanded node count above which aliases are treated as an alias bomb.
MAX_EXPANDED_NODES = 200_000


class StrictLoader(_BaseLoader):  # type: ignore[misc, valid-type]
    """Safe loader with no timestamp resolver and duplicate-key detection."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()  # type: ignore[attr-defined]
    }

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, "found an unhashable mapping key", key_node.start_mark
                ) from None
            line = key_node.start_mark.line + 1
            if key in seen:
                raise _DuplicateKey(key, seen[key], line)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


class _DuplicateKey(Exception):
    def __init__(self, key: Any, first_line: int, line: int) -> None:
        super().__init__(key)
        self.key = key
        self.first_line = first_line
        self.line = line


@dataclass(frozen=True)
class ParsedYaml:
    """A parsed document: the plain data and the node tree (with marks) it came from."""

    data: Any
    node: yaml.Node | None


def parse_yaml(
    text: str,
    *,
    path: Path | str | None = None,
    line_offset: int = 0,
    error_type: type[ParseError] = FrontmatterError,
) -> ParsedYaml:
    """Parse one YAML document strictly.

    Args:
        text: the YAML text.
        path: the file it came from, for error messages.
        line_offset: added to YAML line numbers (frontmatter starting on line 2 uses 1).
        error_type: the :class:`ParseError` subclass raised for syntax and tag problems.

    Raises:
        DuplicateKeyError: a mapping repeats a key.
        ParseError: (``error_type``) invalid YAML, an object-constructing tag, or an alias bomb.
    """
    loader = StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return ParsedYaml(None, None)
        _check_alias_expansion(node, path, line_offset, error_type)
        data = loader.construct_document(node)
        return ParsedYaml(data, node)
    except _DuplicateKey as dup:
        raise DuplicateKeyError(
            f"duplicate key {dup.key!r} (first defined on line {dup.first_line + line_offset})",
            path=path,
            line=dup.line + line_offset,
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


def _check_alias_expansion(
    root: yaml.Node, path: Path | str | None, line_offset: int, error_type: type[ParseError]
) -> None:
    """Refuse documents whose aliases expand to more than :data:`MAX_EXPANDED_NODES` nodes."""
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
