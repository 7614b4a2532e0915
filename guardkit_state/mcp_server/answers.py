"""What each tool of the MCP server answers, as JSON-ready data, without the SDK; each function's
docstring (up to its ``Raises:``) is its tool's description, what the agent is told.

Every answer is read from the files when it is asked for (the server keeps nothing between
calls), through the functions the CLI's commands call, and where the CLI has a ``--json`` the
answer is that JSON: ``show`` is ``show --json``, ``status`` is ``status --json --features``.
Recording a turn is :func:`~guardkit_state.turns.lifecycle.record_turn`, as ``record`` calls it:
the same validation, refusals and "already recorded" answers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from guardkit_state.errors import AlreadyRecordedError, FileTooLargeError, GuardkitStateError, InputError, safe
from guardkit_state.store.layout import names_feature

if TYPE_CHECKING:
    from guardkit_state.index.searching import Backend


def error_line(exc: GuardkitStateError | str) -> str:
    """The one line the CLI prints for ``exc`` (without colour): a tool error's text. A value echoed
    in it (a path holding a newline or an escape sequence) is escaped as the CLI escapes it."""
    return "error: " + safe(exc).replace("\n", "\\n")


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
    """Every task with loop state (turns, last decision, criteria counts) and every feature plan
    with its progress: the JSON of `guardkit-state status --json --features`. Start here."""
    from guardkit_state.inspect.status import feature_status, repo_status

    return _kept(root, ("status",), lambda: {"tasks": [s.to_dict() for s in repo_status(root)],
                                             "features": [f.to_dict() for f in feature_status(root)]})


def show(root: Path, task_id: str) -> dict[str, Any]:
    """One task's loop: status, turns (decision and feedback of each), criteria, stall, and the
    resume point (which turn comes next and how). Given a FEAT-ID, the feature's waves instead.
    The JSON of `guardkit-state show TASK-ID --json`."""
    return feature(root, task_id) if names_feature(task_id) else _task_shown(root, task_id)


def _task_shown(root: Path, ref: str) -> dict[str, Any]:
    from guardkit_state.inspect.task_view import task_view

    return _kept(root, ("show", ref), lambda: task_view(root, ref).to_dict())


def feature(root: Path, feature_id: str) -> dict[str, Any]:
    """A feature's waves × tasks from its plan, the files and git: each task's status, turns,
    criteria and merge, the totals, and what runs next. The JSON of `show FEAT-ID --json`."""
    from guardkit_state.inspect.feature_view import feature_view

    return _kept(root, ("feature", feature_id), lambda: feature_view(root, feature_id).to_dict())


def context(root: Path, task_id: str, turn: int | None = None) -> dict[str, Any]:
    """The continuation context the Player of turn `turn` (default: the next) starts from: the
    previous turn's summary and feedback and the cumulative criteria, in markdown ("context").
    Read it before working a turn. The JSON of `guardkit-state context TASK-ID --json`."""
    from guardkit_state.inspect.task_view import continuation_context

    return _kept(root, ("context", task_id, turn), lambda: continuation_context(root, task_id, turn).to_dict())


def criteria(root: Path, task_id: str) -> dict[str, Any]:
    """The criteria ledger after the last recorded turn: each acceptance criterion's status
    (verified, rejected, pending), the turn that set it, and whether only an approval implies
    it; with the counts and any stall. Verified criteria stay verified in later turns."""
    shown = _task_shown(root, task_id)
    return {key: shown[key] for key in ("task_id", "status", "criteria", "criteria_counts", "stall", "copy")}


def turn_reports(root: Path, task_id: str, turn: int | None = None) -> dict[str, Any]:
    """What recorded turn `turn` (default: the last) left: the Player's report, the Coach's
    decision and the assembled turn state (blockers, tests, coverage, gates, what next)."""
    from guardkit_state.inspect.turn_reports import turn_reports as read_reports

    return _kept(root, ("turn_reports", task_id, turn), lambda: read_reports(root, task_id, turn).to_dict())


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
    """Search past turns (feedback, blockers, tests, gates), tasks, features and configuration:
    how a blocker looked in other tasks. From the index when it is fresh, else the files
    ("backend" and "note" say which). The JSON of `guardkit-state search --json`."""
    from guardkit_state.index import make_filters
    from guardkit_state.index import search as search_index

    filters = make_filters(task=task, feature=feature, decision=decision, since=since)
    result = search_index(root, query, groups=list(groups) if groups else None, limit=max(1, limit),
                          backend=backend, filters=filters)
    return result.to_dict() | {"query": query}


def record(root: Path, task_id: str, *, player: dict[str, Any] | None = None, coach: dict[str, Any] | None = None,
           player_file: str | None = None, coach_file: str | None = None, mode: str | None = None,
           max_turns: int | None = None, reopen: bool = False) -> dict[str, Any]:
    """Record the next turn from the Player's report and the Coach's decision (each inline or
    as a file), as `guardkit-state record` does: both are validated first (their schemas, the
    task and turn they name, known criterion ids) and a bad one is refused with nothing
    written; the ledger, stall and outcome are updated. Sending the very reports of a
    recorded turn again answers "already_recorded": true (nothing to do). Returns the JSON
    of `record --json`.

    A report file is read as `record` reads `--player`/`--coach` (a relative path is
    relative to the repository).

    Raises:
        InputError: a report given twice or not at all, a missing file, or what ``record`` refuses.
        UnsafePathError: a report file outside the repository (after symlinks).
        AlreadyRecordedError: the reports name a recorded turn but differ from its reports.
    """
    from guardkit_state.taskfile.resolve import pinned, resolve_task
    from guardkit_state.turns.lifecycle import record_turn

    player_data, player_path = _report(root, "player", player, player_file)
    coach_data, coach_path = _report(root, "coach", coach, coach_file)
    # The task resolved once, its copy pinned for the whole call, as the CLI pins a command's task:
    # every lookup of the id during the call gets that file.
    found = resolve_task(root, task_id)
    with pinned(found):
        try:
            done = record_turn(root, found.task_id, player_data, coach_data, mode=mode, max_turns=max_turns,
                               player_path=player_path, coach_path=coach_path, reopen=reopen)
        except AlreadyRecordedError as exc:
            if not exc.identical:
                raise
            return {"task_id": exc.task_id, "turn": exc.turn, "already_recorded": True, "message": exc.message}
    return done.to_dict()


def claim_next_task(root: Path, feature_id: str, remote: str, *, worker: str | None = None,
                    lease_seconds: float | None = None) -> dict[str, Any]:
    """Claim the next ready task of a feature built through a git remote, as a
    `feature-build --remote` worker would: the first task that has to run in the wave whose
    turn has come, not claimed by anyone, by one atomic push of its claim ref. Answers
    status "claimed" (task_id, claim_ref, lease_until, the task branch and what to do next),
    "nothing_ready" or "lost_race" (ask again), with the reason."""
    from guardkit_state.remote.ready import DEFAULT_LEASE
    from guardkit_state.remote.ready import claim_next_task as claim_next

    lease = DEFAULT_LEASE if lease_seconds is None else lease_seconds
    done = claim_next(root, feature_id, remote, worker=worker, lease=lease)
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
    """Release your claim on a task (when done or giving up) so another worker can take it:
    deleted from the remote only while it is still the claim of `worker`; "released": false
    (with the reason) when it is gone or someone else's."""
    from guardkit_state.remote.ready import release_claim as release

    return release(root, feature_id, task_id, remote, worker)


def release_quarantined_task(root: Path, feature_id: str, task_id: str, remote: str) -> dict[str, Any]:
    """Release a task the workers quarantined (its runs ended in a dead worker or a crashed
    loop too often: `feature` and `guardkit-state show FEAT --remote` list them, with why)
    so they claim it again, as `guardkit-state feature-build FEAT --release TASK` does: its
    failed runs are cleared in its history on the remote. "released": false (with the
    reason) when it has no failed run to clear. For a person's decision: release a task
    only once what killed its runs is fixed."""
    from guardkit_state.remote.quarantine import release_task

    return release_task(root, feature_id, task_id, remote).to_dict()


def _report(root: Path, name: str, given: dict[str, Any] | None,
            file: str | None) -> tuple[dict[str, Any], Path | None]:
    """A report given inline or as a file; exactly one of the two."""
    from guardkit_state.store.jsonio import load_json, parse_json
    from guardkit_state.store.reads import MAX_FILE_BYTES
    from guardkit_state.store.safe_paths import resolve_inside

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
    path = root / (file or "")  # an absolute path stays itself
    # The agent names a file of the repository it was given: one outside it (by '..', an absolute
    # path or a symlink) would be copied into the turn's records and served back by turn_reports.
    resolve_inside(root, path)
    if not path.is_file():
        raise InputError(f"{name}_file {file}: no such file")
    return load_json(path), path


__all__ = ["claim_next_task", "context", "criteria", "error_line", "feature", "names_feature", "record",
           "release_claim", "release_quarantined_task", "search", "show", "status", "task_file", "turn_reports"]
