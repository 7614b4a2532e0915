"""What a write changes: :class:`StateUpdate`, its data twin :func:`apply_update_to_block`, and
the :class:`SpliceResult` a write returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from guardkit_state.taskfile.frontmatter import STATE_KEY, STATE_KEYS
from guardkit_state.yamltext.render import plain_data

if TYPE_CHECKING:
    from guardkit_state.taskfile.frontmatter import ParsedFrontmatter

SpliceMethod = Literal["noop", "splice", "rerender"]


@dataclass
class StateUpdate:
    """What to change in a task file's state block (and top-level scalars such as ``status``).

    Attributes:
        key: ``autobuild_state``, or ``feature_build`` when the file already has that key
            (the splice always writes to the key the file has).
        block_scalars: state keys to set (``current_turn``, ``last_updated`` ...): changed when
            different, added when missing.
        criteria: the desired full ``criteria`` map, or None to leave it alone.
        append_turns: turn-entry dicts, in key order, appended to ``turns``.
        top_level: top-level frontmatter keys to set (``status`` ...).
    """

    key: str = STATE_KEY
    block_scalars: dict[str, Any] = field(default_factory=dict)
    criteria: dict[str, str] | None = None
    append_turns: list[dict[str, Any]] = field(default_factory=list)
    top_level: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.key not in STATE_KEYS:
            raise ValueError(f"state key must be one of {STATE_KEYS}, not {self.key!r}")
        for name in ("criteria", "turns"):
            if name in self.block_scalars:
                raise ValueError(f"set {name!r} through its own field, not block_scalars")
        for name in STATE_KEYS:
            if name in self.top_level:
                raise ValueError(f"{name!r} is the state block, not a top-level scalar")

    @property
    def touches_state(self) -> bool:
        return bool(self.block_scalars or self.criteria is not None or self.append_turns)

    @property
    def is_empty(self) -> bool:
        return not (self.touches_state or self.top_level)


def apply_update_to_block(block: dict[str, Any] | None, update: StateUpdate) -> dict[str, Any]:
    """The state block dict after ``update``: the data twin of :func:`splice_state` (pure).

    New scalars go before ``criteria``/``turns``; a new ``criteria`` map before ``turns``.
    """
    out = dict(block or {})
    for key, value in update.block_scalars.items():
        if key in out:
            out[key] = plain_data(value)
        else:
            out = _insert_before(out, key, plain_data(value), ("criteria", "turns"))
    if update.criteria is not None:
        if "criteria" in out:
            out["criteria"] = dict(update.criteria)
        elif update.criteria:
            out = _insert_before(out, "criteria", dict(update.criteria), ("turns",))
    if update.append_turns or "turns" not in out:
        out["turns"] = list(out.get("turns") or []) + plain_data(update.append_turns)
    return out


def _insert_before(data: dict[str, Any], key: str, value: Any, before: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    placed = False
    for name, existing in data.items():
        if not placed and name in before:
            out[key] = value
            placed = True
        out[name] = existing
    if not placed:
        out[key] = value
    return out


@dataclass(frozen=True)
class SpliceResult:
    """The new text and how it was made: ``noop``, ``splice``, or ``rerender`` (with why).

    ``parsed`` is the strict parse of ``text`` the write was verified with (None for a no-op):
    the next write locates its keys from it instead of parsing the file again.
    """

    text: str
    method: SpliceMethod
    reason: str | None = None
    parsed: ParsedFrontmatter | None = field(default=None, repr=False, compare=False)
