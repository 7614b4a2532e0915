"""What a write should produce, judged without the code under test: the writers' property-test oracle.

The writers (the task-file splice, the plan writer) verify themselves against their own data twins
(``apply_update_to_block``, ``apply_plan_update``) and read their output with the product's own
strict reader. A property test that compared against those same functions would agree with a wrong
update function. This module is the independent judge:

* :func:`read_yaml` reads with ruamel.yaml (a second YAML implementation, pure Python), never with
  PyYAML or ``strict_yaml``; plain scalars resolve as GuardKit's reader (PyYAML, YAML 1.1) reads
  them: ``0000008`` is a string, ``yes`` a boolean, ``y`` a string (ruamel's YAML 1.1 table less
  ``y``/``n``). A YAML 1.2 reading would call ``0000008`` the number 8: the writers write for
  GuardKit's reader, so that is the reading they are judged by;
* :func:`split_frontmatter_text` cuts a task file at its ``---`` lines with a plain regular expression;
* :func:`expected_state_block` and :func:`expected_plan` are small reference models of the two
  updates, written from their documented meaning (``StateUpdate``'s and ``PlanUpdate``'s
  docstrings), over the data the independent reader gives;
* :func:`yaml_key_names` draws key names from YAML's grammar (any printable text, double-quoted;
  single-quoted when it has no line break; plain when the plain-scalar production allows it).

Both sides of every comparison are read by the same reader, so where ruamel and PyYAML resolve a
plain scalar differently (``yes``, dates) the comparison is still like with like.
"""

from __future__ import annotations

import io
import re
from typing import Any

from hypothesis import strategies as st
from ruamel.yaml import YAML
from ruamel.yaml.resolver import VersionedResolver, implicit_resolvers

_DELIMITER = re.compile(r"---[ \t]*(?:\r?\n|\Z)")
_YAML_11 = (1, 1)
#: Where ruamel's YAML 1.1 table is wider than the 1.1 type repository as PyYAML spells it: the
#: booleans without the one-letter y/Y/n/N; integers with an octal ``0`` (``-_`` is a string);
#: floats with a dot and a digit (``00000e0``, a short commit hash, is a string, not 0.0).
_OVERRIDES_11 = {
    "tag:yaml.org,2002:bool": re.compile(r"^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE"
                                         r"|on|On|ON|off|Off|OFF)$"),
    "tag:yaml.org,2002:int": re.compile(r"""^(?:[-+]?0b[0-1_]+
                                            |[-+]?0[0-7_]+
                                            |[-+]?(?:0|[1-9][0-9_]*)
                                            |[-+]?0x[0-9a-fA-F_]+
                                            |[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$""", re.X),
    "tag:yaml.org,2002:float": re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
                                              |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
                                              |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
                                              |[-+]?\.(?:inf|Inf|INF)
                                              |\.(?:nan|NaN|NAN))$""", re.X),
}


class _GuardKitResolver(VersionedResolver):
    """ruamel's YAML 1.1 resolution table, narrowed to what GuardKit's reader resolves."""

    @property
    def versioned_resolver(self) -> Any:
        if _YAML_11 not in self._version_implicit_resolver:
            for versions, tag, regexp, first in implicit_resolvers:
                if _YAML_11 in versions:
                    self.add_version_implicit_resolver(_YAML_11, tag, _OVERRIDES_11.get(tag, regexp), first)
        return self._version_implicit_resolver[_YAML_11]


def read_yaml(text: str) -> Any:
    """``text`` read by ruamel.yaml's pure-Python safe loader (duplicate keys are an error there too)."""
    reader = YAML(typ="safe", pure=True)
    reader.version = _YAML_11
    reader.Resolver = _GuardKitResolver
    return reader.load(io.StringIO(text))


def split_frontmatter_text(text: str) -> tuple[str, str]:
    """(YAML text, body) of a task file: between the first two lines that are ``---`` plus blanks."""
    text = text.removeprefix("\ufeff")
    opening = _DELIMITER.match(text)
    assert opening, f"no opening '---' line: {text[:40]!r}"
    pos = opening.end()
    while pos <= len(text):
        closing = _DELIMITER.match(text, pos)
        if closing:
            return text[opening.end():pos], text[closing.end():]
        newline = text.find("\n", pos)
        if newline < 0:
            break
        pos = newline + 1
    raise AssertionError(f"no closing '---' line: {text[:80]!r}")


def read_frontmatter(text: str) -> tuple[dict[Any, Any], str]:
    """(data, body) of a task file, read independently of ``guardkit_state.taskfile``."""
    yaml_text, body = split_frontmatter_text(text)
    data = read_yaml(yaml_text)
    assert isinstance(data, dict), f"frontmatter is not a mapping: {data!r}"
    return data, body


def _put(pairs: list[tuple[Any, Any]], key: Any, value: Any, before: tuple[str, ...]) -> None:
    """Set ``key`` in an ordered list of pairs: in place when present, else before the first of ``before``."""
    for index, (name, _) in enumerate(pairs):
        if name == key:
            pairs[index] = (key, value)
            return
    at = next((index for index, (name, _) in enumerate(pairs) if name in before), len(pairs))
    pairs.insert(at, (key, value))


def expected_state_block(block: Any, scalars: dict[str, Any], criteria: dict[str, str] | None,
                         turns: list[dict[str, Any]]) -> dict[Any, Any]:
    """The state block after one update, as ``StateUpdate`` documents it.

    Scalars are set in place, or added before ``criteria``/``turns``; ``criteria`` (when given) is
    the whole new map, added before ``turns`` only when it has entries; turns are appended, and a
    block always ends up with a ``turns`` key (a null one stays null when nothing is appended).
    """
    pairs = list(block.items()) if isinstance(block, dict) else []
    for key, value in scalars.items():
        _put(pairs, key, value, ("criteria", "turns"))
    present = dict(pairs)
    if criteria is not None and (criteria or "criteria" in present):
        _put(pairs, "criteria", dict(criteria), ("turns",))
    if turns or "turns" not in present:
        _put(pairs, "turns", list(present.get("turns") or []) + [dict(turn) for turn in turns], ())
    return dict(pairs)


def expected_plan(data: dict[Any, Any], tasks: dict[str, dict[str, Any]], execution: dict[str, Any],
                  top_level: dict[str, Any]) -> dict[Any, Any]:
    """A feature plan after one update, as ``PlanUpdate`` documents it: each named task's values set
    (existing keys in place, new ones after its last key), ``execution`` merged (a null or missing one
    becomes a mapping), then the top-level values."""
    out = dict(data)
    if any(tasks.values()):
        entries = [dict(task) if isinstance(task, dict) else task for task in out["tasks"]]
        for task_id, values in tasks.items():
            (entry,) = [task for task in entries if isinstance(task, dict) and task.get("id") == task_id]
            entry.update(values)
        out["tasks"] = entries
    if execution:
        old = out.get("execution")
        out["execution"] = {**(old if isinstance(old, dict) else {}), **execution}
    out.update(top_level)
    return out


def same(a: Any, b: Any) -> bool:
    """Equal by value, type and key order, recursively (``1``, ``True`` and ``1.0`` differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


# --------------------------------------------------------------------------- key shapes from the grammar

#: YAML's c-printable set, less the line breaks (a key written on one line) and the BOM.
_PRINTABLE = st.characters(codec="utf-8", exclude_categories=("Cs", "Cc"), exclude_characters="\ufeff\u2028\u2029\x85")
#: Characters YAML gives a meaning to (c-indicator), and the ones a plain key is made of mostly.
_INDICATORS = "-?:,[]{}#&*!|>'\"%@`"
_NAME_CHARS = st.one_of(st.sampled_from("abcxyz_019 ." + _INDICATORS), st.sampled_from("éü日本😀"), _PRINTABLE)
_FLOW_INDICATORS = set(",[]{}")


def plain_allowed(name: str) -> bool:
    """Whether ``name`` can be written as a plain implicit key in block context (YAML 1.2 ns-plain).

    The first character is not an indicator, unless it is ``?``, ``:`` or ``-`` followed by a
    non-space; no ``": "`` or ``" #"`` inside, no trailing ``:``, no leading or trailing blanks,
    no tab (PyYAML refuses tabs in plain scalars), nothing outside c-printable.
    """
    if not name or name != name.strip(" ") or "\t" in name or ": " in name or " #" in name or name.endswith(":"):
        return False
    if name.startswith(("---", "...")):
        return False  # at column 0 a document marker, not a key
    first, rest = name[0], name[1:]
    if first in _INDICATORS and not (first in "?:-" and rest and rest[0] not in " "):
        return False
    # Flow indicators inside a block-context plain key are allowed by YAML 1.2, but PyYAML (the
    # product's reader, YAML 1.1) ends a simple key at some of them: keep plain keys clear of them.
    return not (_FLOW_INDICATORS & set(name))


def yaml_key_names() -> st.SearchStrategy[str]:
    """Key names drawn from the characters YAML's grammar distinguishes (indicators, blanks, non-ASCII)."""
    return st.text(_NAME_CHARS, min_size=1, max_size=10)


def key_forms(name: str) -> list[str]:
    """The ways ``name`` may be written as a key: always double-quoted, single-quoted when every
    character is printable, plain when :func:`plain_allowed`, and as an explicit ``? key``."""
    forms = ["double", "explicit"]
    if all(ch.isprintable() or ch == " " for ch in name):
        forms.append("single")
    if plain_allowed(name):
        forms += ["plain"] * 3
    return forms


def key_text(name: str, form: str) -> str:
    """``name`` written as a key in ``form`` (double quotes escape as YAML's ``\\uXXXX``/``\\"``)."""
    if form in ("double", "explicit"):
        quoted = '"' + "".join(ch if ch.isprintable() and ch not in '"\\' else _escape(ch) for ch in name) + '"'
        return quoted if form == "double" else f"? {quoted}\n"
    if form == "single":
        return "'" + name.replace("'", "''") + "'"
    return name


def _escape(ch: str) -> str:
    if ch in '"\\':
        return "\\" + ch
    code = ord(ch)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
