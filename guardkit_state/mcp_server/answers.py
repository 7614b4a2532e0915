"""What each tool of the MCP server answers, as JSON-ready data, without the SDK.

Every answer is read from the files when it is asked for (the server keeps nothing between
calls), through the functions the CLI's commands call, and where the CLI has a ``--json`` the
answer is that JSON: ``show`` is ``show --json``, ``status`` is ``status --json --features``.
Recording a turn is :func:`~guardkit_state.turns.lifecycle.record_turn`, as ``record`` calls it:
the same validation, refusals and "already recorded" answers.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from guardkit_state.errors import AlreadyRecordedError, FileTooLargeError, GuardkitStateError, InputError
from guardkit_state.store.layout import names_feature

if TYPE_CHECKING:
    from guardkit_state.index.searching import Backend


#: What the CLI's error line shows as escapes (``safe`` in cli/output.py, which this layer may not
#: import): C0 controls but tab and newline, DEL and C1, bidi controls, invisible separators.
_ESCAPED = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c"
                      "\u2028\u2029\ufeff]")


def error_line(exc: GuardkitStateError | str) -> str:
    """The one line the CLI prints for ``exc`` (without colour): a tool error's text. A value echoed
    in it (a path holding a newline or an escape sequence) is escaped as the CLI escapes it."""
    text = _ESCAPED.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) <= 0xFF
                        else f"\\u{ord(m.group()):04x}", str(exc))
    return "error: " + text.replace("\n", "\\n")


#: What a read answered, by question, with the generation of the repository's watch when it was
#: asked (:func:`~guardkit_state.taskfile.read_scope.generation`: the server watches what its reads
#: answer from). Asked again while the generation is the same, nothing it was read from changed:
#: the same answer, without a stat of each of thousands of task files (~25 ms on GuardKit's
#: repository, the whole of a warm ``status``). Without a watch (not Linux, a network file system,
#: a symlinked task file ...) every call reads the files, as the CLI does.
_KEPT: dict[tuple[Any, ...], tuple[int, Any]] = {}
_KEPT_MOST = 256

_T = TypeVar("_T")


def _kept(root: Path, question: tuple[Any, ...], read: Callable[[], _T]) -> _T:
    """``read()``'s answer to ``question``, kept while nothing the server watches changed (never
    changed by anyone: the SDK only serialises it)."""
    from guardkit_state.taskfile.read_scope import generation

    watched = generation(root)  # asked before anything is read: a change meanwhile moves it
    if watched is None:
        return read()
    key = (os.fspath(root), *question)
    hit = _KEPT.get(key)
    if hit is not None and hit[0] == watched:
        kept: _T = hit[1]
        return kept
    answer = read()
    if len(_KEPT) >= _KEPT_MOST:
        _KEPT.clear()
    _KEPT[key] = (watched, answer)
    return answer


def status(root: Path) -> dict[str, Any]:
    """Every task with loop state and every feature plan: ``status --json --features``."""
    from guardkit_state.inspect.status import feature_status, repo_status

    return _kept(root, ("status",), lambda: {"tasks": [s.to_dict() for s in repo_status(root)],
                                             "features": [f.to_dict() for f in feature_status(root)]})


def show(root: Path, ref: str) -> dict[str, Any]:
    """One task's loop (or, for a feature, its waves): ``show REF --json``."""
    return feature(root, ref) if names_feature(ref) else _task_shown(root, ref)


def _task_shown(root: Path, ref: str) -> dict[str, Any]:
    from guardkit_state.inspect.task_view import task_view

    return _kept(root, ("show", ref), lambda: task_view(root, ref).to_dict())


def feature(root: Path, ref: str) -> dict[str, Any]:
    """A feature's waves × tasks, its progress and what runs next: ``show FEAT-ID --json``."""
    from guardkit_state.inspect.feature_view import feature_view

    return _kept(root, ("feature", ref), lambda: feature_view(root, ref).to_dict())


def context(root: Path, ref: str, turn: int | None = None) -> dict[str, Any]:
    """The continuation context of turn ``turn`` (default: the next): ``context --json``."""
    from guardkit_state.inspect.task_view import continuation_context

    return _kept(root, ("context", ref, turn), lambda: continuation_context(root, ref, turn).to_dict())


def criteria(root: Path, ref: str) -> dict[str, Any]:
    """The criteria ledger after the last recorded turn: the ``criteria`` part of ``show --json``."""
    shown = _task_shown(root, ref)
    return {key: shown[key] for key in ("task_id", "status", "criteria", "criteria_counts", "stall", "copy")}


def turn_reports(root: Path, ref: str, turn: int | None = None) -> dict[str, Any]:
    """A recorded turn's Player report, Coach decision and turn state (default: the last turn)."""
    from guardkit_state.inspect.turn_reports import turn_reports as read_reports

    return _kept(root, ("turn_reports", ref, turn), lambda: read_reports(root, ref, turn).to_dict())


def task_file(root: Path, ref: str) -> str:
    """The text of the task file ``show`` reads (the loop's worktree copy while there is one)."""
    from guardkit_state.taskfile.locate import locate_task

    def read() -> str:
        task, _ = locate_task(root, ref).load()
        return task.text

    return _kept(root, ("task_file", ref), read)


def search(root: Path, query: str, *, groups: Sequence[str] | None = None, task: str | None = None,
           feature: str | None = None, decision: str | None = None, since: str | None = None,
           limit: int = 10, backend: Backend = "auto") -> dict[str, Any]:
    """Turns, tasks, features and configuration matching ``query``: ``search --json``."""
    from guardkit_state.index import make_filters
    from guardkit_state.index import search as search_index

    filters = make_filters(task=task, feature=feature, decision=decision, since=since)
    result = search_index(root, query, groups=list(groups) if groups else None, limit=max(1, limit),
                          backend=backend, filters=filters)
    return result.to_dict() | {"query": query}


def record(root: Path, ref: str, *, player: dict[str, Any] | None = None, coach: dict[str, Any] | None = None,
           player_file: str | None = None, coach_file: str | None = None, mode: str | None = None,
           max_turns: int | None = None, reopen: bool = False) -> dict[str, Any]:
    """Record one turn from a Player report and a Coach decision: ``record --json``.

    Each report is given inline or as a file of the repository (a relative path is relative to
    it), read as ``record`` reads ``--player``/``--coach``. The very reports of a recorded turn are answered "already
    recorded" (a retry, nothing to do), as ``record`` exits 0 for them.

    Raises:
        InputError: a report given twice or not at all, a missing file, or what ``record`` refuses.
        UnsafePathError: a report file outside the repository (after symlinks).
        AlreadyRecordedError: the reports name a recorded turn but differ from its reports.
    """
    from guardkit_state.turns.lifecycle import record_turn

    player_data, player_path = _report(root, "player", player, player_file)
    coach_data, coach_path = _report(root, "coach", coach, coach_file)
    with _pinned(root, ref) as task_id:
        try:
            done = record_turn(root, task_id, player_data, coach_data, mode=mode, max_turns=max_turns,
                               player_path=player_path, coach_path=coach_path, reopen=reopen)
        except AlreadyRecordedError as exc:
            if not exc.identical:
                raise
            return {"task_id": exc.task_id, "turn": exc.turn, "already_recorded": True, "message": exc.message}
    return done.to_dict()


def claim_next_task(root: Path, feature_id: str, remote: str, *, worker: str | None = None,
                    lease: float | None = None) -> dict[str, Any]:
    """Claim the next ready task of a feature on a remote, as a ``feature-build --remote`` worker
    would (:func:`~guardkit_state.remote.ready.claim_next_task`), with what the agent does next."""
    from guardkit_state.remote.ready import DEFAULT_LEASE
    from guardkit_state.remote.ready import claim_next_task as claim_next

    done = claim_next(root, feature_id, remote, worker=worker, lease=DEFAULT_LEASE if lease is None else lease)
    answer = done.to_dict()
    if done.claim is not None:
        task, branch, base = answer["task_id"], answer["branch"], answer["base_branch"]
        answer["next"] = (
            f"Work {task} on branch {branch} (from {remote}/{branch} if it exists, else from {remote}/{base}): "
            f"read `context`, record each turn with `record_turn`, and push {branch} to {remote} after each "
            f"turn. The claim is yours until lease_until (epoch seconds); it is not renewed, so after that "
            f"a worker may take the task over. Done or giving up: `release_claim` with worker "
            f"{done.worker!r}.")
    elif done.status == "lost_race":
        answer["next"] = "Call claim_next_task again: another claimant won these tasks."
    else:
        answer["next"] = (f"Nothing to claim now: `feature` or `guardkit-state show {feature_id} --remote "
                          f"{remote}` says who holds what.")
    return answer


def release_claim(root: Path, feature_id: str, task_id: str, remote: str, worker: str) -> dict[str, Any]:
    """Release ``worker``'s claim on a task (:func:`~guardkit_state.remote.ready.release_claim`)."""
    from guardkit_state.remote.ready import release_claim as release

    return release(root, feature_id, task_id, remote, worker)


def release_quarantined_task(root: Path, feature_id: str, task_id: str, remote: str) -> dict[str, Any]:
    """Release a quarantined task so workers claim it again, as ``feature-build FEAT --release TASK``
    does (:func:`~guardkit_state.remote.quarantine.release_task`)."""
    from guardkit_state.remote.quarantine import release_task

    return release_task(root, feature_id, task_id, remote).to_dict()


def _report(root: Path, name: str, given: dict[str, Any] | None,
            file: str | None) -> tuple[dict[str, Any], Path | None]:
    """A report given inline or as a file; exactly one of the two."""
    from guardkit_state.store.fsio import MAX_FILE_BYTES, resolve_inside
    from guardkit_state.store.jsonio import load_json, parse_json

    if (given is None) == (file is None):
        raise InputError(f"give the {name} report either inline ('{name}') or as a file ('{name}_file')",
                         expected=f"exactly one of {name}, {name}_file")
    if given is not None:
        # Read as `record` reads a report file: its text strict JSON (no NaN, bounded nesting)
        # under the same size cap. The JSON-RPC parser lets through what that reading refuses.
        text = json.dumps(given, ensure_ascii=False)
        size = len(text.encode("utf-8"))
        if size > MAX_FILE_BYTES:
            raise FileTooLargeError(f"the {name} report is {size} bytes, over the {MAX_FILE_BYTES}-byte limit",
                                    expected=f"at most {MAX_FILE_BYTES} bytes")
        checked: dict[str, Any] = parse_json(text, path=f"the {name} report")
        return checked, None
    path = Path(file or "")
    path = path if path.is_absolute() else root / path
    # The agent names a file of the repository it was given: one outside it (by '..', an absolute
    # path or a symlink) would be copied into the turn's records and served back by turn_reports.
    resolve_inside(root, path)
    if not path.is_file():
        raise InputError(f"{name}_file {file}: no such file")
    return load_json(path), path


@contextlib.contextmanager
def _pinned(root: Path, ref: str) -> Iterator[str]:
    """``ref`` (an id or a task file's path) resolved once, its copy pinned for the whole call,
    as the CLI pins a command's task (every lookup of the id during the call gets that file)."""
    from guardkit_state.taskfile.resolve import pinned, resolve_task

    found = resolve_task(root, ref)
    with pinned(found):
        yield found.task_id


__all__ = ["claim_next_task", "context", "criteria", "error_line", "feature", "names_feature", "record",
           "release_claim", "release_quarantined_task", "search", "show", "status", "task_file", "turn_reports"]
