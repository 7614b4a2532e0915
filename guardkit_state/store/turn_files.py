"""The per-task artifact store: ``.guardkit/autobuild/TASK-ID/{player_turn,coach_turn,turn_state_turn}_N.json``.

GuardKit now writes its Coach's verdicts and evidence (``coach_turn_N.json``,
``coach_evidence_turn_N.json``) to ``.guardkit/autobuild-private/TASK-ID/``, out of its Player's
reach, and reads a report there first, then in ``autobuild/``: a report is read the same way here.
What this package writes goes to ``autobuild/``, as before.

Records are validated once before they are written (by :meth:`TurnStore.write`, or where they come
in, when the writer says so) and on read, written atomically, and immutable once their turn is
recorded in the task's frontmatter (the commit point): rewriting a recorded turn is an error, while
the files of an interrupted, unrecorded turn may be replaced by a re-run.

A long-lived store (one loop) reads the same earlier turn states on every turn (the ledger, the
stall window, the promise fallback). Each validated record is therefore kept in memory, as its
canonical JSON text, keyed on the file's identity (inode, size, mtime and ctime in ns): a hit is a
``json.loads`` instead of a parse and a schema validation, and any change to the file — an atomic
replace makes a new inode — is a miss. A new store (a new process, ``--resume``) starts empty.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from guardkit_state.errors import GuardkitStateError, SchemaError, TurnAlreadyRecordedError
from guardkit_state.model import CoachDecision, PlayerReport, TurnState
from guardkit_state.store import schemas
from guardkit_state.store.fsio import atomic_write_stat
from guardkit_state.store.jsonio import check_storable, dump_json, load_json, load_record
from guardkit_state.store.layout import GUARDKIT_DIR, STATE_DIR, WORK_DIR, private_artifacts_dir
from guardkit_state.store.layout import artifacts_dir as artifacts_dir  # re-exported: the folder is the layout's
from guardkit_state.store.reads import Identity, file_identity, identity_of

FILE_PATTERNS = {
    "player_turn": "player_turn_{n}.json",
    "coach_turn": "coach_turn_{n}.json",
    "turn_state": "turn_state_turn_{n}.json",
}
#: GuardKit's Coach evidence bundle of a turn (gates, tests, honesty, requirements): read, never written.
EVIDENCE_PATTERN = "coach_evidence_turn_{n}.json"
_EVIDENCE_NAME = re.compile(r"^coach_evidence_turn_([1-9][0-9]{0,8})\.json$")


class TurnStore:
    """Read and write one task's per-turn JSON files."""

    def __init__(self, directory: Path, task_id: str) -> None:
        self.directory = Path(directory)
        self.task_id = task_id
        self._cache: dict[Path, tuple[Identity, str]] = {}
        self._paths: dict[tuple[str, int], Path] = {}  # a turn's paths are asked for many times per turn
        home = self.directory.parent
        # ``<checkout>/.guardkit/autobuild/TASK-ID`` -> ``<checkout>/.guardkit/autobuild-private/TASK-ID``.
        self.private_directory: Path | None = (
            private_artifacts_dir(home.parent.parent, self.directory.name)
            if home.name == STATE_DIR.name and home.parent.name == GUARDKIT_DIR else None)
        self._private: bool | None = None  # whether that folder exists, looked at once

    def source(self, kind: str, turn: int) -> Path:
        """Where a turn's ``kind`` record is read from: GuardKit's private folder when it holds the
        file, else :meth:`path` (where this package writes it)."""
        return self._private_or(FILE_PATTERNS[kind].format(n=turn)) or self.path(kind, turn)

    def _private_or(self, name: str) -> Path | None:
        if self.private_directory is None:
            return None
        if self._private is None:
            self._private = self.private_directory.is_dir()
        if self._private:
            candidate = self.private_directory / name
            if file_identity(candidate) is not None:
                return candidate
        return None

    def evidence_path(self, turn: int) -> Path | None:
        """GuardKit's ``coach_evidence_turn_N.json`` of ``turn`` (private folder first), or None."""
        name = EVIDENCE_PATTERN.format(n=turn)
        found = self._private_or(name)
        if found is not None:
            return found
        public = self.directory / name
        return public if file_identity(public) is not None else None

    def evidence_turns(self) -> list[int]:
        """The turns GuardKit kept Coach evidence for (either folder), in order."""
        found: set[int] = set()
        for folder in (self.private_directory, self.directory):
            try:
                names = os.listdir(folder) if folder is not None else []
            except OSError:
                continue
            for name in names:
                match = _EVIDENCE_NAME.match(name)
                if match:
                    found.add(int(match.group(1)))
        return sorted(found)

    def read_evidence(self, turn: int) -> dict[str, Any] | None:
        """The Coach evidence GuardKit kept for ``turn`` (strict JSON, no schema: GuardKit's own
        shape, shown as it is), or None when there is none.

        Raises:
            ParseError, FileTooLargeError: the file is not strict JSON.
        """
        path = self.evidence_path(turn)
        if path is None:
            return None
        data = load_json(path)
        return data if isinstance(data, dict) else {"evidence": data}

    @property
    def work_dir(self) -> Path:
        """Scratch for the loop (context, prompt, incoming reports); ignored by git, never the truth."""
        return self.directory / WORK_DIR

    def context_path(self, turn: int) -> Path:
        """The context file of ``turn``; it is written first, so it also marks a turn as begun."""
        return self.work_dir / f"context_turn_{turn}.md"

    def path(self, kind: str, turn: int) -> Path:
        key = (kind, turn)
        found = self._paths.get(key)
        if found is None:
            found = self._paths[key] = self.directory / FILE_PATTERNS[kind].format(n=turn)
        return found

    def exists(self, kind: str, turn: int) -> bool:
        return self.source(kind, turn).is_file()

    def write(self, kind: str, turn: int, data: dict[str, Any], *, recorded_turns: int, checked: bool = False,
              canonical: bool = False) -> Path:
        """Write ``data`` as canonical JSON, atomically, checked against the ``kind`` schema first.

        ``checked``: the caller already checked ``data`` (a report is checked once, where it comes
        in: :mod:`guardkit_state.turns.intake`), and it is not checked again. ``canonical``: ``data``
        is exactly what :meth:`read` returns for the written file (a record built from a validated
        dict), remembered as written without being normalised again.

        Raises:
            TurnAlreadyRecordedError: ``turn`` is already recorded in the frontmatter.
            SchemaError: ``data`` is not a valid ``kind`` record, or holds something that cannot be
                written as UTF-8 JSON, named by its JSON path (nothing is written).
        """
        self._refuse_recorded(kind, turn, recorded_turns)
        path = self.path(kind, turn)
        if not checked:
            check_storable(data, path=path)
            schemas.check_record(kind, data, path=path)
        try:
            text = dump_json(data)
            encoded = text.encode("utf-8")
        except (SchemaError, UnicodeEncodeError):
            # Found cheaply, named precisely: the walk says which value and where.
            check_storable(data, path=path)
            raise
        self._cache.pop(path, None)
        try:
            written = atomic_write_stat(path, encoded)
        except GuardkitStateError:
            # The folder is there from the first turn on: it is looked for only when a write fails.
            if os.path.isdir(self.directory):
                raise
            self.directory.mkdir(parents=True, exist_ok=True)
            written = atomic_write_stat(path, encoded)
        assert written is not None  # None only when a precondition says no, and there is none
        # What read() would return for these bytes (already checked): the next turn reads it.
        self._cache[path] = (identity_of(written), text if canonical else
                             json.dumps(schemas.normalise(kind, json.loads(text), owned=True)[0], ensure_ascii=False))
        return path

    def _refuse_recorded(self, kind: str, turn: int, recorded_turns: int) -> None:
        if turn <= recorded_turns:
            raise TurnAlreadyRecordedError(
                f"turn {turn} is already recorded; its files are immutable",
                path=self.path(kind, turn), task_id=self.task_id, turn=turn,
                expected=f"turn {recorded_turns + 1}",
            )

    def read(self, kind: str, turn: int) -> dict[str, Any] | None:
        """The validated, normalised record, or ``None`` when the file does not exist.

        Served from memory while the file is unchanged since this store last validated it.
        """
        path = self.source(kind, turn)
        return self._read(kind, path, file_identity(path))

    def _read(self, kind: str, path: Path, identity: Identity | None) -> dict[str, Any] | None:
        if identity is None:
            return None
        hit = self._cache.get(path)
        if hit is not None and hit[0] == identity:
            copy: dict[str, Any] = json.loads(hit[1])  # a fresh copy: callers may mutate what they get
            return copy
        data = load_record(kind, path)
        self._cache[path] = (identity, json.dumps(data, ensure_ascii=False))
        return data

    def read_player(self, turn: int) -> PlayerReport | None:
        data = self.read("player_turn", turn)
        return None if data is None else PlayerReport.from_dict(data)

    def read_coach(self, turn: int) -> CoachDecision | None:
        data = self.read("coach_turn", turn)
        return None if data is None else CoachDecision.from_dict(data)

    def read_turn_state(self, turn: int) -> TurnState | None:
        data = self.read("turn_state", turn)
        return None if data is None else TurnState.from_dict(data)


def turn_state_number(name: str) -> int | None:
    """The turn of a file named ``turn_state_turn_N.json``, else None."""
    number = name.removeprefix("turn_state_turn_").removesuffix(".json")
    # (ASCII digits only: str.isdigit() is true of a superscript three too, which int() refuses)
    return int(number) if name.startswith("turn_state_turn_") and name.endswith(".json") and number.isascii() \
        and number.isdigit() else None
