"""The per-task artifact store: ``.guardkit/autobuild/TASK-ID/{player_turn,coach_turn,turn_state_turn}_N.json``.

Reports are validated on write and on read, written atomically, and immutable once their turn is
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
import logging
import os
from pathlib import Path
from typing import Any

from guardkit_state.errors import TurnAlreadyRecordedError
from guardkit_state.model import CoachDecision, CompletionPromise, PlayerReport, TurnState
from guardkit_state.store.fsio import atomic_write_text
from guardkit_state.store.jsonio import dump_record, load_record
from guardkit_state.store.schemas import normalise

log = logging.getLogger("guardkit_state.store.turn_files")

FILE_PATTERNS = {
    "player_turn": "player_turn_{n}.json",
    "coach_turn": "coach_turn_{n}.json",
    "turn_state": "turn_state_turn_{n}.json",
}


def artifacts_dir(checkout_root: Path, task_id: str) -> Path:
    """Where a task's per-turn files live inside a checkout (main or worktree)."""
    return Path(checkout_root) / ".guardkit" / "autobuild" / task_id


class TurnStore:
    """Read and write one task's per-turn JSON files."""

    def __init__(self, directory: Path, task_id: str) -> None:
        self.directory = Path(directory)
        self.task_id = task_id
        self._cache: dict[Path, tuple[tuple[int, int, int, int], str]] = {}

    @property
    def work_dir(self) -> Path:
        """Scratch for the loop (context, prompt, incoming reports); ignored by git, never the truth."""
        return self.directory / ".work"

    def context_path(self, turn: int) -> Path:
        """The context file of ``turn``; it is written first, so it also marks a turn as begun."""
        return self.work_dir / f"context_turn_{turn}.md"

    def path(self, kind: str, turn: int) -> Path:
        return self.directory / FILE_PATTERNS[kind].format(n=turn)

    def exists(self, kind: str, turn: int) -> bool:
        return self.path(kind, turn).is_file()

    def write(self, kind: str, turn: int, data: dict[str, Any], *, recorded_turns: int) -> Path:
        """Validate ``data`` against its schema and write it atomically.

        Raises:
            TurnAlreadyRecordedError: ``turn`` is already recorded in the frontmatter.
            SchemaError: ``data`` is not a valid ``kind`` record (nothing is written).
        """
        if turn <= recorded_turns:
            raise TurnAlreadyRecordedError(
                f"turn {turn} is already recorded; its files are immutable",
                path=self.path(kind, turn), task_id=self.task_id, turn=turn,
                expected=f"turn {recorded_turns + 1}",
            )
        path = self.path(kind, turn)
        text = dump_record(kind, data, path=path)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._cache.pop(path, None)
        atomic_write_text(path, text)
        # What read() would return for these bytes (already validated above): the next turn reads it.
        self._remember(path, json.dumps(normalise(kind, json.loads(text), owned=True)[0], ensure_ascii=False))
        return path

    def _remember(self, path: Path, canonical: str) -> None:
        try:
            st = os.stat(path)
        except OSError:
            return
        self._cache[path] = ((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns), canonical)

    def read(self, kind: str, turn: int) -> dict[str, Any] | None:
        """The validated, normalised record, or ``None`` when the file does not exist.

        Served from memory while the file is unchanged since this store last validated it.
        """
        path = self.path(kind, turn)
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if not path.is_file():
            return None
        identity = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
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

    def recover_promises(self, turn: int) -> tuple[int, list[CompletionPromise]] | None:
        """The most recent earlier Player report's ``completion_promises`` (seed 003's fallback).

        Logs the exact INFO line of seed 003 when it finds some.
        """
        for earlier in range(turn - 1, 0, -1):
            if not self.exists("player_turn", earlier):
                continue
            try:
                report = self.read_player(earlier)
            except Exception as exc:  # an unreadable old report just isn't a source
                log.warning("skipping unreadable %s: %s", self.path("player_turn", earlier).name, exc)
                continue
            if report is not None and report.completion_promises:
                log.info("No completion_promises in current turn — recovered from player_turn_%d.json", earlier)
                return earlier, report.completion_promises
        return None
