"""Terminal output: colour only on a terminal without ``NO_COLOR``; JSON for tools; safe text.

Agent feedback can contain ANSI escape sequences, control characters and bidirectional formatting
controls (U+202E and friends, which make text display in an order other than the one it has — the
"trojan source" trick); :func:`safe` shows them as visible escapes so ``show``, ``context`` and
``diff`` never let a report rewrite the user's terminal or disguise what it says, and
:meth:`Output.json` escapes them too (the JSON still parses to the same text). :func:`one_line`
fits long agent text on one line for human output; ``--json`` always keeps it whole.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO, TypeVar

from guardkit_state.errors import UNSEEN, GuardkitStateError, escape_char
from guardkit_state.errors import safe as safe  # re-exported: every command shows untrusted text through it
from guardkit_state.model import json_ready

#: Escaped in JSON and every output line too (json leaves them raw). None is ever part of our own styling.
_ALWAYS_ESCAPED = re.compile(f"[{UNSEEN}]")
_LINE_BREAKS = re.compile(r"\s*[\r\n]+\s*")
#: How much agent text (feedback, a summary) one line of human output shows.
ONE_LINE_CHARS = 200

_V = TypeVar("_V")

STYLES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "blue": "34", "cyan": "36"}
DECISION_STYLE = {"approve": "green", "feedback": "yellow", "reject": "red", "error": "red"}


def to_nowhere(stream: TextIO) -> None:
    """What is written to ``stream`` from now on (its buffer too) goes to the null device: its reader
    has gone, and Python's exit must not complain that it cannot flush it."""
    nowhere = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(nowhere, stream.fileno())
    finally:
        os.close(nowhere)


def one_line(text: object, limit: int = ONE_LINE_CHARS) -> str:
    """Untrusted text made :func:`safe` on one line (line breaks become spaces), cut to ``limit``
    characters with ``…``: a 25,000-character feedback must not flood the terminal."""
    flat = safe(_LINE_BREAKS.sub(" ", str(text)).strip())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _json_text(data: Any, indent: int | None = None) -> str:
    text = json.dumps(data, indent=indent, ensure_ascii=False, default=str)
    # json escapes C0 controls but not those above; \uNNNN keeps the value and the terminal safe.
    return _ALWAYS_ESCAPED.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def colour_enabled(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return hasattr(stream, "isatty") and stream.isatty()


@dataclass
class Output:
    """Where a command writes: stdout for results, stderr for errors and progress."""

    stdout: TextIO
    stderr: TextIO
    colour: bool
    json_mode: bool = False

    def style(self, text: str, *names: str) -> str:
        if not self.colour or not names:
            return text
        codes = ";".join(STYLES[n] for n in names)
        return f"\x1b[{codes}m{text}\x1b[0m"

    def decision(self, word: str) -> str:
        """A Coach decision (already :func:`safe`), padded to a column and coloured by what it says."""
        return self.style(f"{word:<8}", DECISION_STYLE.get(word, "dim"))

    def line(self, text: str = "") -> None:
        # Callers make agent text safe(); DEL, C1, bidi and invisible characters are caught here too,
        # for any value a command forgot (this layer adds no ESC of its own to mask, so only those are).
        self._emit(self.stdout, _ALWAYS_ESCAPED.sub(escape_char, text) + "\n")

    def json(self, data: Any) -> None:
        self._emit(self.stdout, _json_text(data, indent=2) + "\n")

    def result(self, value: _V, render: Callable[[_V, Output], object]) -> None:
        """What a command found, shown: its JSON with ``--json`` (records by their ``to_dict()``),
        else ``render(value, out)``."""
        if self.json_mode:
            self.json(json_ready(value))
        else:
            render(value, self)

    def note(self, text: str) -> None:
        """Progress and remarks: stderr, so stdout stays clean for pipes and ``--json``."""
        self._emit(self.stderr, _ALWAYS_ESCAPED.sub(escape_char, text) + "\n", flush=True)

    def error(self, text: str) -> None:
        prefix = "\x1b[31merror:\x1b[0m" if colour_enabled(self.stderr) else "error:"
        # One line, always: a value echoed in an error (a criterion id holding a newline) is escaped.
        flat = safe(text).replace("\r", "\\r").replace("\n", "\\n")
        self._emit(self.stderr, f"{prefix} {flat}\n")

    @staticmethod
    def _emit(stream: TextIO, text: str, *, flush: bool = False) -> None:
        """Write ``text`` to ``stream``. Once its reader has gone (``2>&1 | head``), what the command
        says there goes nowhere and the command goes on: a feature run's progress lines must not
        stop its work (it stopped mid-turn, and the command exited 0 with nothing built)."""
        try:
            stream.write(text)
            if flush:
                stream.flush()
        except BrokenPipeError:
            with contextlib.suppress(OSError, ValueError):
                to_nowhere(stream)

    def error_from(self, exc: GuardkitStateError) -> None:
        if self.json_mode:  # one compact line, escaped like json()
            self._emit(self.stdout, _json_text(exc.to_dict()) + "\n")
        self.error(str(exc))
