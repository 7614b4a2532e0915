"""The task file store: read a task's frontmatter, state and criteria; write the state surgically.

A :class:`TaskFile` is read once (capped read, strict parse; :func:`read_task_settled` for a file
about to be written, never a half-saved one) and then updated in memory by each
:meth:`TaskFile.apply`, which splices the file's text and writes it atomically. Just before the
rename the file is compared with the text the splice was made on: if an editor saved it meanwhile,
the splice is redone on the new text, so no user edit is lost. Cross-process locking is the
caller's job (the turn lifecycle).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guardkit_state.errors import DuplicateKeyError, ParseError, TurnError
from guardkit_state.model import AutobuildState, Criterion
from guardkit_state.store import reads
from guardkit_state.store.legacy import whole_number
from guardkit_state.store.turn_files import TurnStore
from guardkit_state.taskfile.criteria_text import extract_criteria
from guardkit_state.taskfile.discovery import task_id_from_filename
from guardkit_state.taskfile.frontmatter import STATE_KEY, FrontmatterSplit, ParsedFrontmatter, parse_frontmatter
from guardkit_state.yamltext.yaml_writer import read_settled, recall, remember, unchanged, write_verified

if TYPE_CHECKING:  # the splice is imported by a write only: a read never needs it
    from guardkit_state.taskfile.splice import SpliceResult, StateUpdate
    from guardkit_state.yamltext.strict_yaml import DuplicateKey

log = logging.getLogger("guardkit_state.taskfile.document")
#: One line per repeated key of a task file read (the CLI shows these on stderr).
duplicates_log = logging.getLogger("guardkit_state.taskfile.duplicates")


@dataclass
class TaskFile:
    """One task file: its text, frontmatter data, body, state block and acceptance criteria.

    Attributes:
        path: the file.
        text: the whole file as text (kept in step with every :meth:`apply`).
        data: the frontmatter mapping (``{}`` when the file has none).
        body: the markdown after the frontmatter.
        task_id: the frontmatter ``id``, else the id at the start of the file name.
        state: the ``autobuild_state`` (or legacy ``feature_build``) block, None when absent.
        state_key: the key the state lives under (``autobuild_state`` for a new block).
        criteria: the acceptance criteria, ``AC-001`` ... in order.
    """

    path: Path
    text: str
    data: dict[str, Any]
    body: str
    task_id: str
    state: AutobuildState | None
    state_key: str
    criteria: list[Criterion]
    split: FrontmatterSplit
    _raw: bytes = field(repr=False, default=b"")
    #: The strict parse of ``text`` (from the load or the last write's verification): the next
    #: write locates keys from it, so a write costs one full parse, of its new text.
    _parsed: ParsedFrontmatter | None = field(repr=False, default=None, compare=False)
    #: The file's identity when ``text`` was read from it (None: not known), and when (monotonic).
    _identity: reads.Identity | None = field(repr=False, default=None, compare=False)
    _read_at: float = field(repr=False, default=0.0, compare=False)
    #: The store whose turn states this text stayed behind through a settled read's pauses (a kill
    #: between a turn's state and its append; a stale save): confirming it unchanged waits no more.
    _behind: Path | None = field(repr=False, default=None, compare=False)

    # ------------------------------------------------------------------ reading

    @classmethod
    def load(cls, path: Path | str) -> TaskFile:
        """Read and strictly parse a task file.

        Raises:
            FileTooLargeError, ParseError (bad UTF-8), FrontmatterError, DuplicateKeyError,
            GuardkitStateError (the file cannot be read).
        """
        path = Path(path)
        identity = reads.file_identity(path)  # taken first: a write during the read shows as a change
        task = cls.from_bytes(reads.read_bytes_capped(path), path)
        task._identity, task._read_at = identity, time.monotonic()
        return task

    @classmethod
    def from_bytes(cls, raw: bytes, path: Path, *, warn: bool = True,
                   parsed: ParsedFrontmatter | None = None) -> TaskFile:
        """Build a TaskFile from a file's bytes (as read from ``path``; ``parsed``: their parse, when
        the caller made it).

        A key repeated in the frontmatter (GuardKit's whole-file re-dumps leave some) is read as its
        last value, as GuardKit reads it, with a one-line warning (``warn=False``: the caller reports
        it itself); such a file is not written to.
        """
        text = reads.decode_utf8(raw, path)
        # The reading of these very bytes this process last made (its own write's, verified, or a
        # read's): a file read again unchanged (a server answering calls, a feature's tasks) is not
        # parsed again. Only a file holding loop state is kept: the long frontmatters, read often.
        known = parsed or recall(path, raw)
        parsed = known if isinstance(known, ParsedFrontmatter) else parse_frontmatter(text, path=path, keep_last=True)
        if known is None and parsed.state_key is not None:
            remember(path, raw, parsed)
        if parsed.duplicates and warn:
            warn_duplicates(path, duplicates_note(path, parsed.duplicates))
        data = parsed.data
        key = parsed.state_key
        state = parsed.state(path)
        task_id = data.get("id")
        if not isinstance(task_id, str) or not task_id.strip():
            task_id = task_id_from_filename(path.name)
        return cls(
            path=path,
            text=text,
            data=data,
            body=parsed.split.body,
            task_id=task_id.strip(),
            state=state,
            state_key=key or STATE_KEY,
            criteria=extract_criteria(data, parsed.split.body),
            split=parsed.split,
            _raw=raw,
            _parsed=parsed,
        )

    @property
    def title(self) -> str | None:
        return _str_or_none(self.data.get("title"))

    @property
    def status(self) -> str | None:
        return _str_or_none(self.data.get("status"))

    @property
    def task_type(self) -> str | None:
        return _str_or_none(self.data.get("task_type"))

    @property
    def complexity(self) -> int | None:
        return whole_number(self.data.get("complexity"))

    @property
    def feature_id(self) -> str | None:
        return _str_or_none(self.data.get("feature_id"))

    @property
    def has_frontmatter(self) -> bool:
        return self.split.has_frontmatter

    def confirmed(self, store: TurnStore) -> TaskFile:
        """This object when the file is still the one read, a settle pause later (an editor saving it
        in place at the read would have changed it by then), and reads whole (:meth:`looks_half_saved`);
        else the file read again, settled (:func:`read_task_settled`).

        A file seen changed is remembered as contended: see :meth:`apply`.
        """
        if unchanged(self.path, self._identity, self._read_at) and (
                self._behind == store.directory or not self.looks_half_saved(store)):
            return self
        task = read_task_settled(self.path, store)
        if task._raw != self._raw:
            _CONTENDED.add(self.path)
        return task

    def looks_half_saved(self, store: TurnStore) -> bool:
        """True when this text is empty, or lists fewer turns than ``store`` holds turn states for.

        A file caught mid-way through an in-place save (empty, or cut short) looks like that; so does
        one whose last entry a stale save really dropped (its turn is then rolled forward).
        """
        if not self.text.strip():  # emptied by a save between its truncate and its write: never a task
            return True
        recorded = len(self.state.turns) if self.state else 0
        return store.exists("turn_state", recorded + 1)

    def is_stale(self) -> bool:
        """True when the file on disk is no longer the text this object holds."""
        return not reads.holds(self.path, self._raw)

    # ------------------------------------------------------------------ writing

    def check_writable(self) -> None:
        """Refuse (before anything is written) a file whose frontmatter repeats a key: which of the
        two values a write should keep is the user's call.

        Raises:
            DuplicateKeyError: naming the key, both lines, and what to do.
        """
        duplicates = self._parsed.duplicates if self._parsed is not None else ()
        if duplicates:
            first = duplicates[0]
            raise DuplicateKeyError(
                f"{describe_duplicates(duplicates)}; not written: keep one line of each key (GuardKit "
                "reads the last), then run again", path=self.path, line=first.line,
                expected="each key once per mapping")

    def apply(self, update: StateUpdate) -> SpliceResult:
        """Splice ``update`` into the file and write it atomically (nothing is written for a no-op).

        The state goes to the key the file already has. Just before replacing the file it is
        compared with the text the splice was made on; if it changed since it was read (an editor
        saved it), it is read again, settled, and the splice re-applied to it. Afterwards this object
        reflects the new text and state.

        Raises:
            FrontmatterError, DuplicateKeyError: the file (or its new version) cannot be spliced.
            GuardkitStateError: the write failed (the original file is untouched).
        """
        from guardkit_state.taskfile.splice import SpliceResult, splice_state

        wanted = update = replace(update, key=self.state_key)
        result = SpliceResult(self.text, "noop")

        def edit(raw: bytes) -> str | None:
            nonlocal result, update
            if raw != self._raw:
                # An editor saved meanwhile: redo the splice on its text so neither the edit nor
                # the turn is lost.
                _CONTENDED.add(self.path)
                log.info("%s changed on disk since it was read; re-applying the update to it", self.path)
                self._adopt(TaskFile.from_bytes(raw, self.path))
            self.check_writable()
            update = self._without_present_turns(wanted)
            result = splice_state(self.text, update, path=self.path, parsed=self._parsed)
            return None if result.method == "noop" else result.text

        def landed(_text: str) -> bytes | None:
            self._after_write(result, update)
            return None if self._landed(update) else self._raw

        # The first attempt trusts the text it was loaded from: an editor save since then is caught
        # by the check just before the rename (after the slow fsync), and the next attempt re-reads.
        write_verified(self.path, self._raw, edit, attempts=REAPPLY_ATTEMPTS, name="taskfile", what="task file",
                       landed=landed)
        return result

    def _landed(self, update: StateUpdate) -> bool:
        """True when the write just made is still on disk (or a later save kept the update).

        An editor that checked the file just before our rename saves its stale copy just after it.
        A file another writer has been seen changing is looked at again after each of
        :data:`VERIFY_PAUSES` (a busy machine can hold the editor between its check and its save
        for several milliseconds); an uncontended write is checked once, at no pause. False: a
        stale copy replaced the update, and this object now holds that copy to re-apply onto.
        """
        for pause in VERIFY_PAUSES if self.path in _CONTENDED else (0.0,):
            if pause:
                time.sleep(pause)  # (a zero pause would still give the CPU away on a busy machine)
            identity = reads.file_identity(self.path)  # taken first: it is this text's only if it still holds it
            if reads.holds(self.path, self._raw):
                self._identity, self._read_at = identity, time.monotonic()
                continue
            other = read_task_settled(self.path)
            self._adopt(other)
            if not other._contains(update):
                log.warning("%s was overwritten by a copy older than this update; re-applying it", self.path)
                return False
        return True

    def _contains(self, update: StateUpdate) -> bool:
        """True when this text already holds ``update`` (its turns, scalars and top-level keys)."""
        from guardkit_state.taskfile.splice import plain_data

        block = self.data.get(self.state_key)
        if not isinstance(block, dict):
            return not update.touches_state and all(
                self.data.get(k) == plain_data(v) for k, v in update.top_level.items())
        turns = {whole_number(t.get("turn")) for t in block.get("turns") or [] if isinstance(t, dict)}
        if any(t.get("turn") not in turns for t in update.append_turns):
            return False
        if any(block.get(k) != plain_data(v) for k, v in update.block_scalars.items()):
            return False
        return all(self.data.get(k) == plain_data(v) for k, v in update.top_level.items())

    def _without_present_turns(self, update: StateUpdate) -> StateUpdate:
        """``update`` minus turns this text already lists; a *different* entry of the same turn is a conflict.

        Re-applying onto a changed file must never list a turn twice (resume counts the turns).
        """
        block = self.data.get(self.state_key)
        # Keyed by number: a hand-written `turn: '1'` is turn 1, never a second one.
        listed = {whole_number(t.get("turn")): t for t in (block.get("turns") or []) if isinstance(t, dict)} \
            if isinstance(block, dict) else {}
        keep = []
        for entry in update.append_turns:
            present = listed.get(entry.get("turn"))
            if present is None:
                keep.append(entry)
            elif present.get("timestamp") != entry.get("timestamp"):
                raise TurnError(f"turn {entry.get('turn')} was recorded in {self.path.name} by another writer "
                                "meanwhile; nothing was written", path=self.path, turn=entry.get("turn"),
                                fix="let one writer record the task's turns at a time")
        last = max((n for n in listed if isinstance(n, int)), default=0)
        numbers = [entry.get("turn") for entry in keep]
        if numbers and numbers != list(range(last + 1, last + 1 + len(numbers))):
            # Never write a gap: the turns are the history, and resume counts them.
            raise TurnError(f"{self.path.name} lists turns up to {last} but this update would add turn(s) "
                            f"{', '.join(map(str, numbers))}: entries were dropped by another writer; "
                            "nothing was written (resume rebuilds them from their files)",
                            path=self.path, turn=numbers[0], expected=f"turn {last + 1} next")
        return update if len(keep) == len(update.append_turns) else replace(update, append_turns=keep)

    def _adopt(self, other: TaskFile) -> None:
        for name in ("text", "data", "body", "task_id", "state", "state_key", "criteria", "split", "_raw", "_parsed",
                     "_identity", "_read_at", "_behind"):
            setattr(self, name, getattr(other, name))

    def _after_write(self, result: SpliceResult, update: StateUpdate) -> None:
        """Bring the in-memory view up to date from the parse the write was verified with."""
        had_frontmatter = self.split.has_frontmatter
        parsed = result.parsed
        assert parsed is not None  # every written result was verified, and carries its parse
        self.text = result.text
        self._raw = result.text.encode("utf-8")
        self._parsed = parsed
        self._identity = None  # known once the write is seen to stand (:meth:`_landed`)
        self._behind = None
        remember(self.path, self._raw, parsed)
        self.split = parsed.split
        self.body = parsed.split.body
        self.data = parsed.data
        if not update.touches_state:
            return
        self.state_key = update.key
        self.state = parsed.state(self.path)
        if not had_frontmatter:
            self.criteria = extract_criteria(self.data, self.body)


#: How often :meth:`TaskFile.apply` re-reads and re-applies when other writers keep saving the file.
REAPPLY_ATTEMPTS = 200
#: How long after its rename a write to a contended task file is checked for a stale editor save.
VERIFY_PAUSES = (0.002, 0.01, 0.03)

#: Task files another writer was seen changing in this process (they pay :data:`VERIFY_PAUSES`).
_CONTENDED: set[Path] = set()


def read_task_settled(path: Path, store: TurnStore | None = None, *, confirm: bool = True) -> TaskFile:
    """The task file as a writer must see it: read through the one settle algorithm
    (:func:`~guardkit_state.yamltext.yaml_writer.read_settled`), never empty or half-saved and, with
    ``store``, never listing fewer turns than the store holds turn states for.

    A partial file must never number a turn (nor be refused as a broken task file): it is read again
    after each settle pause (under a second in all). A file that stays unparsable is what it is (a
    busy-file error where its bytes kept changing); one that stays behind the store is returned (a
    turn a stale save really dropped is then rolled forward). ``confirm=False`` takes the first whole
    reading without waiting for the settle pause: the caller confirms it later (:meth:`TaskFile.confirmed`).
    """
    def whole(task: TaskFile) -> bool:
        return store is None or not task.looks_half_saved(store)

    task: TaskFile
    snapshot = read_settled(path, partial(_whole_task, path=path), whole=whole, confirm=confirm)
    task = snapshot.value
    task._identity, task._read_at = snapshot.identity, snapshot.at
    if store is not None and task.text.strip() and task.looks_half_saved(store):
        task._behind = store.directory  # its pauses waited out: it stays behind (see :meth:`TaskFile.confirmed`)
    return task


def _whole_task(raw: bytes, path: Path) -> TaskFile:
    if not raw.strip():  # caught between an editor's truncate and its write: never a task's bytes
        raise ParseError("the task file is empty", path=path, expected="a task file: its frontmatter and text")
    return TaskFile.from_bytes(raw, path)


def duplicates_note(path: Path, duplicates: Sequence[DuplicateKey]) -> str:
    """The warning line of a task file that repeats a key (``path:line: duplicate key ...``)."""
    return (f"{path}:{duplicates[0].line}: {describe_duplicates(duplicates)}: the last value is read "
            "(as GuardKit reads it)")


def warn_duplicates(path: Path | str, note: str) -> None:
    """Log ``note`` (:func:`duplicates_note`) for the task file ``path``: the CLI shows it once, in
    full for the task a command is about, and folds the others into one line."""
    duplicates_log.warning("%s", note, extra={"task_file": str(path)})


def describe_duplicates(duplicates: Sequence[DuplicateKey], *, shown: int = 3) -> str:
    """``duplicate key 'status' on lines 12 and 20, 'tags' on lines 13 and 25 (and 2 more)``."""
    parts = [f"{d.key!r} on lines {d.first_line} and {d.line}" for d in duplicates[:shown]]
    more = f" (and {len(duplicates) - shown} more)" if len(duplicates) > shown else ""
    return f"duplicate key {', '.join(parts)}{more}"


def _str_or_none(value: Any) -> str | None:
    if value is None:
        return None
    return str(value)

__all__ = [
    "TaskFile",
    "read_task_settled",
]
