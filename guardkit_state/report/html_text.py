"""Untrusted agent text made inert for HTML, and the small formatters the page uses.

Everything an agent wrote (a summary, feedback, an issue, even a criterion's text) goes through
:func:`esc`: ANSI escape sequences are removed (a colour code means nothing in a page and would
otherwise show as noise), other control characters and the bidirectional and invisible
formatting characters become visible ``\\xNN``/``\\uNNNN`` escapes (so text cannot display in an
order other than the one it has), and ``& < > " '`` become entities. The page never puts agent
text into a URL, an attribute name, a style or a script: ``javascript:`` is just characters.
"""

from __future__ import annotations

import html
import re
from datetime import datetime

from guardkit_state.errors import safe

#: CSI (``ESC [ ... final``), OSC (``ESC ] ... BEL`` or ``ESC \\``), and the two-byte ESC sequences;
#: the 8-bit CSI (U+009B) too.
_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[@-Z\\-_]"
    r"|\x9b[0-?]*[ -/]*[@-~]"
)
#: How much of one text field the page shows; the files keep the whole text.
FIELD_CHARS = 8000


def clean(text: object) -> str:
    """``text`` without ANSI sequences, its other control characters shown as escapes."""
    value = "" if text is None else str(text)
    value = value.replace("\r\n", "\n")
    return safe(_ANSI.sub("", value))  # what is left after the sequences: as escapes


def clip(text: str, limit: int = FIELD_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters in the files)"


def esc(text: object, limit: int = FIELD_CHARS) -> str:
    """Untrusted ``text`` as inert HTML text (safe in element content and in quoted attributes)."""
    return html.escape(clip(clean(text), limit), quote=True)


def one_line(text: object, limit: int = 160) -> str:
    """``text`` cleaned, on one line, cut to ``limit`` characters (not yet escaped)."""
    flat = " ".join(clean(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def duration(seconds: float | None) -> str:
    """``2.5 s``, ``3 min 04 s``, ``1 h 02 min``; ``—`` when unknown."""
    if seconds is None:
        return "—"
    if seconds < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def when(timestamp: str | None) -> str:
    """An ISO timestamp as ``2026-11-21 08:25:24`` (to the second, as written); other text as it is."""
    if not timestamp:
        return ""
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError:
        return timestamp
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def number(value: object) -> str:
    """A gate's value as people read it: ``80``, ``82.5``, ``yes``/``no``, ``—``."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
