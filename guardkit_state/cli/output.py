"""Terminal output: colour only on a terminal without ``NO_COLOR``; JSON for tools; safe text.

Agent feedback can contain ANSI escape sequences and control characters; :func:`safe` neutralises
them so ``show`` and ``context`` never let a report rewrite the user's terminal.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, TextIO

from ..errors import GuardkitStateError

_C1 = re.compile(r"[\x80-\x9f]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")

STYLES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "blue": "34", "cyan": "36"}


def safe(text: object) -> str:
    """Render untrusted text harmless for a terminal: control characters become ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


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

    @classmethod
    def for_args(cls, args: argparse.Namespace) -> Output:
        return cls(sys.stdout, sys.stderr, colour_enabled(sys.stdout), bool(getattr(args, "json", False)))

    def style(self, text: str, *names: str) -> str:
        if not self.colour or not names:
            return text
        codes = ";".join(STYLES[n] for n in names)
        return f"\x1b[{codes}m{text}\x1b[0m"

    def line(self, text: str = "") -> None:
        self.stdout.write(text + "\n")

    def json(self, data: Any) -> None:
        text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
        # json escapes C0 controls but not C1 ones (U+0080-U+009F; U+009B is a CSI to some terminals).
        self.stdout.write(_C1.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n")

    def note(self, text: str) -> None:
        """Progress and remarks: stderr, so stdout stays clean for pipes and ``--json``."""
        self.stderr.write(text + "\n")
        self.stderr.flush()

    def error(self, text: str) -> None:
        prefix = "\x1b[31merror:\x1b[0m" if colour_enabled(self.stderr) else "error:"
        self.stderr.write(f"{prefix} {safe(text)}\n")

    def error_from(self, exc: GuardkitStateError) -> None:
        if self.json_mode:
            self.stdout.write(json.dumps(exc.to_dict(), ensure_ascii=False) + "\n")
        self.error(str(exc))
