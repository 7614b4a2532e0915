"""One exception tree for guardkit-state.

Every error carries the context a user needs to fix the problem: the file, the line or JSON
pointer, the task and turn, the form an input should have had (``expected``, only where an input
had one) and what to do about it (``fix``). ``str(error)`` renders one line in the
``path:line: message (expected FORM); FIX`` / ``path: $.json.path: message`` form used by
``guardkit-state validate`` and every command's ``error:`` line.

    GuardkitStateError
    ├── InputError                     bad input: nothing on disk was changed (CLI exit 2)
    │   ├── ParseError                 a file's text cannot be read (YAML, JSON, encoding)
    │   │   ├── FrontmatterError       delimiters, tags, structure of a task file's frontmatter
    │   │   │   └── WriteVerificationError  our own new text failed its check (exit 1, a bug); nothing written
    │   │   └── DuplicateKeyError      the same mapping key twice
    │   ├── SchemaError                a record does not match its JSON Schema
    │   │   └── SchemaVersionError     a file written by a newer major version
    │   ├── FileTooLargeError          over the size cap
    │   ├── InvalidTaskIdError         a task id that is not an id (``..``, ``/``, NUL ...)
    │   ├── UnsafePathError            a path (or symlink) leaving the repository
    │   ├── NotRegularFileError        a FIFO, socket, device or directory where a file must be
    │   ├── NotADirectoryStateError    .guardkit exists but is a file
    │   ├── UnwritableFileError        read-only, hard-linked, or its owner/group cannot be kept
    │   ├── ConfigError                a malformed configuration file
    │   └── FeaturePlanError           a feature plan that cannot be used as written
    │       └── WaveError              its waves cannot be formed (cycle, unknown dependency ...)
    ├── TaskNotFoundError              no task file with that exact id
    │   └── FeatureNotFoundError       no feature plan with that id
    ├── AmbiguousTaskError             several task files with that exact id
    ├── TurnError                      the turn lifecycle was used out of order
    │   └── TurnAlreadyRecordedError   a recorded turn is immutable
    │       └── AlreadyRecordedError   reports given for a turn already recorded (a retry?)
    ├── LockedError                    another writer holds the task's lock
    │   └── FileBusyError              another program kept saving the task file; nothing written
    ├── ResumeError                    no state to resume from
    ├── GitError                       a git command failed
    ├── AgentError                     a Player/Coach command failed (turn decision ``error``)
    └── IndexBackendError              the optional search index failed
        ├── MissingExtraError          an optional extra is not installed
        └── EmbedderMismatchError      asked for another embedder than the index's (also an InputError)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: How much of one value (an id, a pointer) an error line shows; longer values are cut and their
#: length said, so a hostile 5,000-character id cannot flood the terminal.
SHOWN_CHARS = 80
#: Limits for the other parts of an error line (a real path or message is well under these).
_PATH_CHARS, _POINTER_CHARS, _EXPECTED_CHARS, _FIX_CHARS, _MESSAGE_CHARS = 300, 200, 200, 300, 1000


def one_line(text: object, limit: int | None = None) -> str:
    """``text`` with every run of whitespace (line breaks too) one space, cut to ``limit`` with ``…``."""
    flat = " ".join(str(text).split())
    return flat if limit is None or len(flat) <= limit else flat[: limit - 1] + "…"


def first_few(items: Sequence[str], shown: int = 5) -> str:
    """The first ``shown`` of ``items``, comma-separated, and how many more (an error names a few files)."""
    text = ", ".join(items[:shown])
    return text + (f" and {len(items) - shown} more" if len(items) > shown else "")


def shorten(value: object, limit: int = SHOWN_CHARS) -> str:
    """``value`` as text, cut to ``limit`` characters plus ``… (N chars)`` when longer."""
    text = str(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} chars)"


#: Never shown raw, in an output line, JSON or a page: DEL and the C1 controls (U+009B is a CSI to some
#: terminals, U+0085 a line break); the bidirectional controls, embeddings and overrides (U+202A-U+202E),
#: isolates (U+2066-U+2069) and the invisible direction marks (U+200E, U+200F, U+061C), which display a
#: text in another order than it has (the "trojan source" trick); the line and paragraph separators
#: (U+2028, U+2029: a line break to many viewers) and the byte-order mark (U+FEFF: invisible, it splits a
#: word or hides a prefix); and lone surrogates (U+D800-U+DFFF: the bytes no UTF-8 of a name git or a file
#: system gave, kept by ``surrogateescape``), which no UTF-8 writer takes (a traceback, an MCP answer lost).
UNSEEN = "\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\u2028\u2029\ufeff\ud800-\udfff"
#: What :func:`safe` escapes: the C0 controls but tab and line feed, and :data:`UNSEEN`.
_CONTROL = re.compile(f"[\\x00-\\x08\\x0b-\\x1f{UNSEEN}]")


def safe(text: object) -> str:
    """Untrusted text made harmless to show (a terminal, a tool's error line, a page): control
    characters become ``\\xNN``, bidi and invisible ones ``\\uNNNN`` (tabs and newlines are kept)."""
    return _CONTROL.sub(escape_char, str(text))


def escape_char(match: re.Match[str]) -> str:
    """One character :func:`safe` escapes, as its escape."""
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte no UTF-8, as surrogateescape kept it: shown as that byte
        code -= 0xDC00
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


class GuardkitStateError(Exception):
    """Base of every error raised by guardkit-state.

    Attributes:
        message: what went wrong, in one sentence.
        path: the file concerned, if any.
        line: 1-based line number inside ``path``.
        pointer: JSON path (``$.criteria_verification[0].result``) inside ``path``.
        task_id: the task concerned, if any.
        turn: the turn concerned, if any.
        expected: the form the input should have had (``"a JSON object"``, ``"one of a, b"``): only
            where an input had an expected form; rendered ``(expected ...)``.
        fix: what to do about it (``"install it with: pipx inject ..."``, ``"wait for it to
            finish"``): rendered after a ``;``. A condition that is not an input's form (a lock
            held, an extra missing, a failed hook) has a ``fix``, never an ``expected``.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        pointer: str | None = None,
        task_id: str | None = None,
        turn: int | None = None,
        expected: str | None = None,
        fix: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = Path(path) if path is not None else None
        self.line = line
        self.pointer = pointer
        self.task_id = task_id
        self.turn = turn
        self.expected = expected
        self.fix = fix

    def location(self) -> str:
        """``path:line`` or ``path: $.pointer`` (whichever is known), or ``""``; long parts are cut."""
        where = shorten(self.path, _PATH_CHARS) if self.path is not None else ""
        if self.line is not None:
            where = f"{where}:{self.line}" if where else f"line {self.line}"
        if self.pointer is not None:
            pointer = shorten(self.pointer, _POINTER_CHARS)
            where = f"{where}: {pointer}" if where else pointer
        return where

    def described(self) -> str:
        """The message with the expected form (when the message does not already say it) and the fix, whole."""
        return _render(self.message, self.expected, self.fix)

    def __str__(self) -> str:
        # One readable line: values from hostile input are cut here; to_dict() keeps them whole.
        text = _render(shorten(self.message, _MESSAGE_CHARS),
                       shorten(self.expected, _EXPECTED_CHARS) if self.expected else None,
                       shorten(self.fix, _FIX_CHARS) if self.fix else None)
        where = self.location()
        return f"{where}: {text}" if where else text

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready view, for ``--json`` output."""
        return {
            "error": type(self).__name__,
            "message": self.message,
            "path": str(self.path) if self.path is not None else None,
            "line": self.line,
            "pointer": self.pointer,
            "task_id": self.task_id,
            "turn": self.turn,
            "expected": self.expected,
            "fix": self.fix,
        }


def _render(message: str, expected: str | None, fix: str | None) -> str:
    """``message (expected FORM); FIX``: each part only when given (and the form only when the
    message does not already say what it expected)."""
    text = message
    if expected and "expected" not in message:
        text = f"{text} (expected {expected})"
    if fix and fix not in message:
        text = f"{text}; {fix}"
    return text


class InputError(GuardkitStateError):
    """Bad input; nothing on disk was changed."""


class ParseError(InputError):
    """A file's text cannot be parsed (YAML, JSON, encoding)."""


class FrontmatterError(ParseError):
    """A task file's frontmatter is not usable (delimiters, tags, structure)."""


class WriteVerificationError(FrontmatterError):
    """A task file's new text did not read back as the intended update; nothing was written.

    ``pointer`` names the first differing key (``$.status``, ``$.autobuild_state.turns[3]``). A fault
    of guardkit-state's own writer, so the fix says to report it.
    """

    def __init__(self, message: str, **context: Any) -> None:
        context.setdefault("fix", "the file is unchanged; please report this as a guardkit-state bug")
        super().__init__(message, **context)


class DuplicateKeyError(ParseError):
    """A mapping defines the same key twice (PyYAML would silently keep the last one)."""


class SchemaError(InputError):
    """A record does not match its JSON Schema.

    ``problems`` holds every violation as ``(pointer, message)`` pairs sorted by pointer; the
    exception's own ``pointer``/``message`` are the first of them.
    """

    def __init__(
        self,
        message: str,
        *,
        problems: list[tuple[str, str]] | None = None,
        **context: object,
    ) -> None:
        super().__init__(message, **context)  # type: ignore[arg-type]
        self.problems = problems or []


class SchemaVersionError(SchemaError):
    """A file declares a newer major ``schema_version`` than this version understands."""


class FileTooLargeError(InputError):
    """A file is over the size cap and is refused before parsing."""


class InvalidTaskIdError(InputError):
    """A task id that cannot be an id (path separators, ``..``, NUL, control characters)."""


class UnsafePathError(InputError):
    """A path, or a symlink, that would leave the repository."""


class NotRegularFileError(InputError):
    """A path that must be a regular file is a FIFO, socket, device or directory."""


class NotADirectoryStateError(InputError):
    """``.guardkit`` (where the state lives) exists but is a file, not a directory."""


class UnwritableFileError(InputError):
    """A file the store must not replace: read-only, hard-linked, or its owner/group cannot be kept."""


class ConfigError(InputError):
    """A malformed configuration file (names the file and the key)."""


class TaskNotFoundError(GuardkitStateError):
    """No task file matches the id exactly."""


class FeatureNotFoundError(TaskNotFoundError):
    """No feature plan with that id in the repository."""


class FeaturePlanError(InputError):
    """A feature plan that cannot be used as written (a duplicate task id, waves that contradict
    the dependencies, a cycle, a layout a write cannot edit ...).

    ``task_ids`` names the tasks concerned (empty when the problem is not about tasks).
    """

    def __init__(self, message: str, *, task_ids: Sequence[str] = (), **context: Any) -> None:
        super().__init__(message, **context)
        self.task_ids = list(task_ids)


class WaveError(FeaturePlanError):
    """The waves of a plan cannot be formed: an unknown dependency, a cycle, a task listed in no
    wave or in two, or groups that contradict the dependencies. ``task_ids`` names the tasks."""


class AmbiguousTaskError(GuardkitStateError):
    """Several task files match the id exactly."""


class TurnError(GuardkitStateError):
    """The turn lifecycle was used out of order."""


class TurnAlreadyRecordedError(TurnError):
    """A recorded turn's files are immutable."""


class LockedError(GuardkitStateError):
    """Another process holds the task's lock."""


class FileBusyError(LockedError):
    """Another program kept saving the task file while an update was written; nothing was written.

    Like :class:`LockedError` it means "try again in a moment": the update was never applied.
    """


class ResumeError(GuardkitStateError):
    """There is nothing to resume."""


class GitError(GuardkitStateError):
    """A git command failed; ``command``, ``returncode`` and ``stderr`` say how."""

    def __init__(
        self,
        message: str,
        *,
        command: list[str] | None = None,
        returncode: int | None = None,
        stderr: str = "",
        **context: object,
    ) -> None:
        super().__init__(message, **context)  # type: ignore[arg-type]
        self.command = command or []
        self.returncode = returncode
        self.stderr = stderr


class AgentError(GuardkitStateError):
    """A Player or Coach failed: non-zero exit, timeout, or no valid report.

    ``run`` is what is known of the failed run (``agent``, ``model``, ``cost_usd`` ..., ``notes``), as a
    report's ``agent_run`` carries it for one that succeeded.
    """

    def __init__(self, message: str, *, run: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.run = run


class IndexBackendError(GuardkitStateError):
    """The optional search index failed; the files are unaffected."""


class MissingExtraError(IndexBackendError):
    """An optional extra is not installed; ``fix`` names the command that installs it into this copy
    (:func:`guardkit_state.extras.install_command`)."""


class EmbedderMismatchError(IndexBackendError, InputError):
    """The index was built with one embedder and the command asked for another (exit 2)."""


class AlreadyRecordedError(TurnAlreadyRecordedError):
    """Reports were given for a turn that is already recorded; nothing was written.

    ``identical`` is True when they are exactly the reports recorded for that turn (a ``record``
    retried after its commit point: nothing to do), False when they differ.
    """

    def __init__(self, message: str, *, identical: bool, **context: object) -> None:
        super().__init__(message, **context)  # type: ignore[arg-type]
        self.identical = identical


class RemoteError(GitError):
    """Work through a git remote failed (claims, pushes of turns and merges); see the subclasses."""


class RemoteUnreachableError(RemoteError):
    """The remote could not be reached (network, a stopped server, a moved path): wait and retry."""


class RemoteRejectedError(RemoteError):
    """The remote refused a push for a reason other than a lost race (a hook, permissions)."""


class ClaimLostError(RemoteError):
    """A claim this worker held is no longer its own (taken over after its lease, or released)."""


class BranchMovedError(ClaimLostError):
    """A branch moved on the remote since this worker last pushed it: its push (with a lease on
    the sha it last saw) was refused. Under a claim still held, someone other than a worker
    pushed it (a person, a force push)."""
