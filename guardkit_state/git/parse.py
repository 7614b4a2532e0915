"""Pure parsers of git's machine-readable (``-z``, custom ``--format``) output, for :mod:`gitstore`."""

from __future__ import annotations

from dataclasses import dataclass

TRAILER_KEYS = ("Task", "Turn", "Decision", "Mode")


@dataclass(frozen=True)
class StatusEntry:
    """One line of ``git status --porcelain -z``."""

    code: str
    path: str
    orig_path: str | None = None


@dataclass(frozen=True)
class TurnCommit:
    """A commit made by :func:`commit_turn`, read back from its trailers."""

    sha: str
    date: str
    subject: str
    task_id: str
    turn: int
    decision: str | None
    mode: str | None


_FIELD, _RECORD = "\x1f", "\x1e"
LOG_FORMAT = _FIELD.join(
    ["%H", "%cI", "%s", *(f"%(trailers:key={k},valueonly,separator=%x2C)" for k in TRAILER_KEYS)]
).replace("\x1f", "%x1f") + "%x1e"


def parse_turn_log(text: str) -> list[TurnCommit]:
    """Parse ``git log --format=LOG_FORMAT`` output into turn commits (bad records skipped)."""
    commits: list[TurnCommit] = []
    for record in text.split(_RECORD):
        fields = record.strip("\n").split(_FIELD)
        if len(fields) != 3 + len(TRAILER_KEYS):
            continue
        sha, date, subject, task, turn, decision, mode = (f.strip() for f in fields)
        if not turn.isdigit():
            continue
        commits.append(TurnCommit(sha, date, subject, task, int(turn), decision or None, mode or None))
    return commits


def parse_status_z(data: bytes) -> list[StatusEntry]:
    """Parse ``git status --porcelain -z``: ``XY path\\0`` (renames add ``orig\\0``)."""
    entries: list[StatusEntry] = []
    parts = data.decode("utf-8", "surrogateescape").split("\0")
    i = 0
    while i < len(parts):
        item = parts[i]
        i += 1
        if len(item) < 4:
            continue
        code, path = item[:2], item[3:]
        orig = None
        if code[0] in "RC" or code[1] in "RC":
            orig = parts[i] if i < len(parts) else None
            i += 1
        entries.append(StatusEntry(code, path, orig))
    return entries


def parse_worktree_list_z(data: bytes) -> list[dict[str, str]]:
    """Parse ``git worktree list --porcelain -z`` into one dict per worktree.

    Keys: ``worktree``, ``HEAD``, ``branch`` (full ref), and flags ``bare``, ``detached``,
    ``locked``, ``prunable`` (value = reason or ``""``).
    """
    result: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for item in data.decode("utf-8", "surrogateescape").split("\0"):
        if not item:
            if current:
                result.append(current)
                current = {}
            continue
        key, _, value = item.partition(" ")
        current[key] = value
    if current:
        result.append(current)
    return result
