"""One exception tree for guardkit-state.

Every error carries the context a user needs to fix the problem: the file, the line or JSON
pointer, the task and turn, and what was expected. ``str(error)`` renders one line in the
``path:line: message`` / ``path: $.json.path: message`` form used by ``guardkit-state validate``.

    GuardkitStateError
    ├── InputError                     bad input: nothing on disk was changed (CLI exit 2)
    │   ├── ParseError                 a file's text cannot be read (YAML, JSON, encoding)
    │   │   ├── FrontmatterError       delimiters, tags, structure of a task file's frontmatter
    │   │   └── DuplicateKeyError      the same mapping key twice
    │   ├── SchemaError                a record does not match its JSON Schema
    │   │   └── SchemaVersionError     a file written by a newer major version
    │   ├── FileTooLargeError          over the size cap
    │   ├── InvalidTaskIdError         a task id that is not an id (``..``, ``/``, NUL ...)
    │   ├── UnsafePathError            a path (or symlink) leaving the repository
    │   └── ConfigError                a malformed configuration file
    ├── TaskNotFoundError              no task file with that exact id
    ├── AmbiguousTaskError             several task files with that exact id
    ├── TurnError                      the turn lifecycle was used out of order
    │   └── TurnAlreadyRecordedError   a recorded turn is immutable
    ├── LockedError                    another writer holds the task's lock
    ├── ResumeError                    no state to resume from
    ├── GitError                       a git command failed
    ├── AgentError                     a Player/Coach command failed (turn decision ``error``)
    └── IndexBackendError              the optional search index failed
        └── MissingExtraError          an optional extra is not installed
"""

from __future__ import annotations

from pathlib import Path


class GuardkitStateError(Exception):
    """Base of every error raised by guardkit-state.

    Attributes:
        message: what went wrong, in one sentence.
        path: the file concerned, if any.
        line: 1-based line number inside ``path``.
        pointer: JSON path (``$.criteria_verification[0].result``) inside ``path``.
        task_id: the task concerned, if any.
        turn: the turn concerned, if any.
        expected: what would have been accepted.
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
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = Path(path) if path is not None else None
        self.line = line
        self.pointer = pointer
        self.task_id = task_id
        self.turn = turn
        self.expected = expected

    def location(self) -> str:
        """``path:line`` or ``path: $.pointer`` (whichever is known), or ``""``."""
        where = str(self.path) if self.path is not None else ""
        if self.line is not None:
            where = f"{where}:{self.line}" if where else f"line {self.line}"
        if self.pointer is not None:
            where = f"{where}: {self.pointer}" if where else self.pointer
        return where

    def __str__(self) -> str:
        text = self.message
        if self.expected and "expected" not in text:
            text = f"{text} (expected {self.expected})"
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
        }


class InputError(GuardkitStateError):
    """Bad input; nothing on disk was changed."""


class ParseError(InputError):
    """A file's text cannot be parsed (YAML, JSON, encoding)."""


class FrontmatterError(ParseError):
    """A task file's frontmatter is not usable (delimiters, tags, structure)."""


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


class ConfigError(InputError):
    """A malformed configuration file (names the file and the key)."""


class TaskNotFoundError(GuardkitStateError):
    """No task file matches the id exactly."""


class AmbiguousTaskError(GuardkitStateError):
    """Several task files match the id exactly."""


class TurnError(GuardkitStateError):
    """The turn lifecycle was used out of order."""


class TurnAlreadyRecordedError(TurnError):
    """A recorded turn's files are immutable."""


class LockedError(GuardkitStateError):
    """Another process holds the task's lock."""


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
    """A Player or Coach failed: non-zero exit, timeout, or no valid report."""


class IndexBackendError(GuardkitStateError):
    """The optional search index failed; the files are unaffected."""


class MissingExtraError(IndexBackendError):
    """An optional extra is not installed; the message says which ``pip install`` fixes it."""
