"""Pure parsers of git's machine-readable (``-z``, custom ``--format``, ``cat-file --batch``) output."""

from __future__ import annotations

from collections.abc import Sequence
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


def log_format(fields: Sequence[str]) -> str:
    """A ``git log --format`` printing each commit's ``fields`` (``%H``, ``%s``, a trailer's
    value...), each value followed by a NUL (:func:`parse_log` reads it)."""
    return "".join(f"{field}%x00" for field in fields)


def parse_log(text: str, count: int) -> list[list[str]]:
    """``git log`` output in a :func:`log_format` of ``count`` fields: each commit's values, stripped.

    Every value ends at a NUL, which git never prints inside a subject or a trailer: a subject is
    anyone's text (an agent commits in its worktree, a person merges by hand), and a separator in
    it must neither end its record nor start a made-up one (as :func:`parse_refs` reads refs)."""
    values = text.split("\0")
    return [[value.strip() for value in values[i:i + count]] for i in range(0, len(values) - count, count)]


_LOG_FIELDS = ("%H", "%cI", "%s", *(f"%(trailers:key={k},valueonly,separator=%x2C)" for k in TRAILER_KEYS))
LOG_FORMAT = log_format(_LOG_FIELDS)


def parse_turn_log(text: str) -> list[TurnCommit]:
    """Parse ``git log --format=LOG_FORMAT`` output into turn commits (bad records skipped)."""
    commits: list[TurnCommit] = []
    for sha, date, subject, task, turn, decision, mode in parse_log(text, len(_LOG_FIELDS)):
        if turn.isascii() and turn.isdigit():
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


def parse_cat_file_batch(out: bytes, count: int) -> list[tuple[str, str, bytes] | None]:
    """The ``count`` answers of ``git cat-file --batch``, in order: (object id, type, content) each,
    None where git said ``<spec> missing`` (or ``ambiguous``)."""
    answers: list[tuple[str, str, bytes] | None] = []
    pos = 0
    for _ in range(count):
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        pos = end + 1
        if len(header) == 3 and header[2].isdigit():
            size = int(header[2])
            answers.append((header[0].decode("ascii"), header[1].decode("ascii"), out[pos:pos + size]))
            pos += size + 1
        else:
            answers.append(None)
    return answers


def parse_tree(raw: bytes, oid_bytes: int) -> dict[str, str]:
    """A tree object's entries as ``cat-file`` gives its content: name -> object id (hex);
    ``oid_bytes`` is the repository's hash size (20 for SHA-1, 32 for SHA-256)."""
    entries: dict[str, str] = {}
    pos = 0
    while pos < len(raw):
        nul = raw.index(b"\0", pos)
        _mode, _, name = raw[pos:nul].partition(b" ")
        entries[name.decode("utf-8", "surrogateescape")] = raw[nul + 1:nul + 1 + oid_bytes].hex()
        pos = nul + 1 + oid_bytes
    return entries


def ref_format(atoms: Sequence[str]) -> str:
    """A ``for-each-ref --format`` printing each ref's ``atoms`` (``refname``, ``objectname``,
    ``contents``...), each value followed by a NUL (:func:`parse_refs` reads it)."""
    return "".join(f"%({atom})%00" for atom in atoms)


def parse_refs(out: bytes, count: int) -> list[tuple[str, ...]]:
    """``for-each-ref`` output in a :func:`ref_format` of ``count`` atoms: one tuple of values per ref.

    Every value ends at a NUL, which no ref name or object id holds and no message either (git
    prints a message up to its first NUL): a message cannot add a ref to the listing, as one
    carrying any other separator could (a claim commit is written by anyone with push access).
    A ref name is decoded so that it goes back to git as it came (``surrogateescape``)."""
    values = out.split(b"\0")
    return [(values[i].lstrip(b"\n").decode("utf-8", "surrogateescape"),
             *(value.decode("utf-8", "replace") for value in values[i + 1:i + count]))
            for i in range(0, len(values) - 1, count)]
