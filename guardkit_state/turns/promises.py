"""The completion-promise fallback: which earlier Player report's promises stand for a turn without any.

A Player that leaves ``completion_promises`` out of a turn has not withdrawn what it promised
earlier: the most recent earlier Player report that carries promises stands in for it, and the turn
state names that report (``completion_promises_source: player_turn_K.json``). When the Player left
them out and no earlier report has any, the turn state says so too (``completion_promises_source:
null``).

So the answer for turn N is, in the common case, one look at turn N-1: its Player report carries
promises (N-1), or its turn state already names the source (K, whose report is read to confirm
it), or says there is none. Only turns whose turn state does not tell (recorded by another tool or
an older version, or without a Player report) are read report by report.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from guardkit_state.errors import GuardkitStateError
from guardkit_state.store.turn_files import TurnStore

# The fallback's INFO line has always been the store's (filters and tests select it by that name).
log = logging.getLogger("guardkit_state.store.turn_files")

#: The turn-state key naming where a turn's promises came from (absent: its own report's).
SOURCE_KEY = "completion_promises_source"

_SOURCE_NAME = re.compile(r"^player_turn_([1-9][0-9]*)\.json$")
_UNTOLD = object()


def source_name(turn: int | None) -> str | None:
    """The value of :data:`SOURCE_KEY` for promises recovered from ``turn`` (None: from no report)."""
    return None if turn is None else f"player_turn_{turn}.json"


def promises_source(store: TurnStore, turn: int) -> int | None:
    """The most recent turn before ``turn`` whose readable Player report has completion promises.

    Logs an INFO line naming the report when there is one.
    """
    earlier = turn - 1
    while earlier >= 1:
        told = _told_source(store, earlier)
        if told is None:
            return None
        if told is not _UNTOLD:
            assert isinstance(told, int)
            if told < earlier and _has_promises(store, told):
                return _found(told)
            # The source it names no longer has promises (a file edited by hand): read on.
        elif _has_promises(store, earlier):
            return _found(earlier)
        earlier -= 1
    return None


def _found(turn: int) -> int:
    log.info("No completion_promises in current turn — recovered from player_turn_%d.json", turn)
    return turn


def _told_source(store: TurnStore, turn: int) -> Any:
    """What turn ``turn``'s state says of the promises before it: a turn, None, or nothing (``_UNTOLD``).

    A turn state records :data:`SOURCE_KEY` only when its Player report had no promises, so a turn
    state that tells also says that report has none.
    """
    try:
        data = store.read("turn_state", turn)
    except GuardkitStateError:
        return _UNTOLD
    if data is None or SOURCE_KEY not in data:
        return _UNTOLD
    value = data[SOURCE_KEY]
    if value is None:
        return None
    match = _SOURCE_NAME.match(value) if isinstance(value, str) else None
    return int(match.group(1)) if match else _UNTOLD


def _has_promises(store: TurnStore, turn: int) -> bool:
    """True when turn ``turn``'s Player report is readable and carries promises."""
    try:
        # The validated dict says it (a record built from it would say the same, at several times the cost).
        report = store.read("player_turn", turn)
    except Exception as exc:  # an unreadable old report just isn't a source
        log.warning("skipping unreadable %s: %s", store.path("player_turn", turn).name, exc)
        return False
    return report is not None and bool(report.get("completion_promises"))


__all__ = ["SOURCE_KEY", "promises_source", "source_name"]
