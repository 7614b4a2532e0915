"""Crash loops stop: a task whose runs keep ending badly is quarantined until a person releases it.

A run of a task through the remote ends badly when its worker dies (its claim taken over after its
lease, or taken back at once by a worker restarted in its clone: an entry of
``autobuild_state.takeovers``) or when its loop crashes (stops on an error before the task ended:
an entry of ``autobuild_state.crashes``, written by the worker before it lets the claim go). Both
are committed on the task's branch and pushed: they are counted on the remote, in the task's
history, whichever machines ran it. Once ``limit`` of them (``--quarantine-after``, default 3) have
happened since the last release, no worker claims the task again: it counts as failed for its wave
(the other tasks still run; then the workers stop, naming it) until a person runs
``guardkit-state feature-build FEAT --release TASK`` (or the MCP tool ``release_quarantined_task``),
which writes an entry of ``autobuild_state.releases`` (who, when, the runs it cleared) on the branch.
``show --remote`` and ``status --remote`` list the runs with the reason of each.
"""

from __future__ import annotations

import contextlib
import getpass
import socket
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from guardkit_state.errors import ClaimLostError, GuardkitStateError, InputError
from guardkit_state.features.progress import TaskState
from guardkit_state.git.file_commit import commit_file_change
from guardkit_state.git.repo import GitRepo
from guardkit_state.plans.plan import find_plan, load_plan
from guardkit_state.remote.branches import RemoteBranches
from guardkit_state.store.fsio import crash_point
from guardkit_state.store.layout import branch_for
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.taskfile.resolve import resolve_task
from guardkit_state.taskfile.splice import StateUpdate, splice_state
from guardkit_state.turns.clock import utc_now

#: Runs ending in a dead worker or a crashed loop before a task is quarantined, by default.
DEFAULT_LIMIT = 3
#: The outcome a quarantined task is read with (a failed task of its wave).
QUARANTINED = "quarantined"


@dataclass(frozen=True)
class FailedRun:
    """One run of the task that ended badly: when (as its writer's clock said), whose, and why."""

    at: str
    worker: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"at": self.at, "worker": self.worker, "reason": self.reason}


@dataclass(frozen=True)
class Quarantine:
    """The task's failed runs since its last release, and the limit that quarantines it."""

    task: str
    runs: tuple[FailedRun, ...] = ()
    limit: int = DEFAULT_LIMIT
    released: int = 0  # releases so far
    unreadable: str = ""  # why its task file on the remote's branch cannot be read: no worker can run it

    @property
    def quarantined(self) -> bool:
        return bool(self.unreadable) or len(self.runs) >= self.limit

    def reason(self, feature: str, remote: str) -> str:
        if self.unreadable:
            return (f"{self.unreadable}; no worker claims it until a readable one is pushed to {branch_for(self.task)} "
                    f"on {remote}")
        why = "; ".join(f"{run.reason} ({run.at})" for run in self.runs)
        return (f"quarantined after {len(self.runs)} runs that ended in a dead worker or a crash: {why}; no worker "
                f"claims it until it is released: guardkit-state feature-build {feature} --release {self.task} "
                f"--remote {remote}")

    def to_dict(self) -> dict[str, Any]:
        return {"quarantined": self.quarantined, "limit": self.limit, "failed_runs": [r.to_dict() for r in self.runs]}


def quarantine_in(copy: TaskFile | None, task: str) -> Quarantine:
    """The quarantine a task file's history tells (none recorded: an empty one)."""
    extra = copy.state.extra if copy is not None and copy.state is not None else {}
    takeovers, crashes, releases = (_entries(extra.get(key)) for key in ("takeovers", "crashes", "releases"))
    last = releases[-1] if releases else {}
    runs = [(entry, _took_over(entry)) for entry in takeovers[_count(last.get("takeovers")):]]
    runs += [(entry, _crashed(entry)) for entry in crashes[_count(last.get("crashes")):]]
    runs.sort(key=lambda found: str(found[0].get("at", "")))  # the writers' clocks: an order to read, no more
    limits = [_count(entry.get("quarantine_after")) for entry, _ in runs if _count(entry.get("quarantine_after"))]
    return Quarantine(task, tuple(run for _, run in runs), limits[-1] if limits else DEFAULT_LIMIT, len(releases))


def read_quarantine(repo: GitRepo, task: str, rev: str | None) -> Quarantine:
    """The quarantine of ``task`` as the commit ``rev`` (its branch on the remote) holds it; one whose
    task file there cannot be read (over the size cap, broken) is held back at once: every worker's
    loop would stop on it, and no crash could be written in it to count toward a quarantine."""
    return copy_and_quarantine(repo, task, rev)[1]


def copy_and_quarantine(repo: GitRepo, task: str, rev: str | None) -> tuple[TaskFile | None, Quarantine]:
    """The task file ``rev`` holds (None: none, or unreadable) and the quarantine it tells
    (:func:`read_quarantine`), from one reading of it."""
    if rev is None:
        return None, Quarantine(task)
    _, copy, refused = _copy_at(repo, task, rev)
    if refused is not None:
        return None, Quarantine(task, unreadable=f"its task file on the remote's branch cannot be read ({refused})")
    return copy, quarantine_in(copy, task)


def held_back(state: TaskState, quarantine: Quarantine, feature: str, remote: str) -> TaskState:
    """``state`` as the workers read it: a task that would run, quarantined, counts as failed."""
    if not state.runs or not quarantine.quarantined:
        return state
    return replace(state, phase="failed", outcome=QUARANTINED, reason=quarantine.reason(feature, remote), resume=False)


def crash_entry(*, worker: str, reason: str, limit: int) -> dict[str, object]:
    """An entry of ``autobuild_state.crashes`` (:func:`write_crash` adds the turns done)."""
    return {"at": utc_now(), "worker": worker, "reason": " ".join(reason.split())[:500], "quarantine_after": limit}


def write_crash(repo: GitRepo, branches: RemoteBranches, task: str, base: str, tip: str | None,
                entry: dict[str, object]) -> str:
    """The crash ``entry`` committed on the task's branch as the remote holds it (``tip``; None: it
    has none, started from ``base``) and pushed with a lease, without touching a checkout; the sha.

    Raises:
        ClaimLostError: the branch moved on the remote meanwhile. RemoteError: as a push.
    """
    parent = tip or base
    rel, copy = task_copy_at(repo, task, parent)
    if copy is None:
        raise InputError(f"{task}: its task file cannot be read at {parent[:10]}; the crash is not recorded",
                         task_id=task)
    entry = {**entry, "turns_done": len(copy.state.turns) if copy.state is not None else 0}
    sha = _commit_entry(repo, copy, rel, parent, "crashes", entry,
                        f"guardkit: {task} run by {entry['worker']} crashed\n\n{entry['reason']}\n\n"
                        f"Guardkit-Crash: {entry['worker']}\n")
    crash_point("remote.crash_recorded")
    return branches.push(branch_for(task), tip, sha=sha)


@dataclass(frozen=True)
class Release:
    """What ``feature-build FEAT --release TASK`` did."""

    feature: str
    task: str
    remote: str
    released: bool
    reason: str
    cleared: tuple[FailedRun, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"feature_id": self.feature, "task_id": self.task, "remote": self.remote, "released": self.released,
                "reason": self.reason, "cleared": [run.to_dict() for run in self.cleared]}


def release_task(repo_root: Path | str, feature: str, task: str, remote: str, *, by: str | None = None) -> Release:
    """Release ``task`` of ``feature`` from quarantine on ``remote``: its failed runs so far are
    cleared (an entry of ``autobuild_state.releases`` pushed on its branch), and workers claim it
    again. ``released`` False (nothing written) when it has no failed run since the last release.

    Raises:
        InputError: not a git repository, no such remote, plan or task of the feature.
        RemoteUnreachableError, RemoteRejectedError: as a push.
    """
    repo = GitRepo.discover(repo_root)
    if repo is None:
        raise InputError(f"{repo_root} is not a git repository", path=repo_root, expected="a clone of the remote")
    plan = load_plan(find_plan(repo.root, feature))
    if task not in {t.id for t in plan.tasks}:
        raise InputError(f"{task} is not a task of {plan.feature_id}", task_id=task,
                         expected=f"one of {', '.join(t.id for t in plan.tasks)}")
    branches = RemoteBranches(repo, remote)
    who = by or _person()
    for _ in range(5):  # a worker's push may land between the look and the release: look again
        tip = branches.fetch().get(branch_for(task))
        rel, copy = task_copy_at(repo, task, tip) if tip is not None else ("", None)
        found = quarantine_in(copy, task)
        if copy is None or not found.runs:
            return Release(plan.feature_id, task, remote, False, f"{task} has no failed run on {remote!r} since it "
                           "was last released: nothing to release")
        state = copy.state.extra if copy.state is not None else {}
        entry = {"at": utc_now(), "by": who, "takeovers": len(_entries(state.get("takeovers"))),
                 "crashes": len(_entries(state.get("crashes")))}
        assert tip is not None
        sha = _commit_entry(repo, copy, rel, tip, "releases", entry,
                            f"guardkit: {task} released from quarantine by {who}\n\n{len(found.runs)} failed run(s) "
                            f"cleared; workers claim it again.\n\nGuardkit-Release: {who}\n")
        try:
            branches.push(branch_for(task), tip, sha=sha)
        except ClaimLostError:
            continue
        was = "was quarantined" if found.quarantined else f"was not quarantined yet (limit {found.limit})"
        return Release(plan.feature_id, task, remote, True, f"{task} {was}; {len(found.runs)} failed run(s) cleared: "
                       f"workers claim it again", found.runs)
    raise ClaimLostError(f"{branch_for(task)} kept moving on {remote!r}; try again", path=repo.root, task_id=task)


# -- the task file on a commit ----------------------------------------------------------------


def task_copy_at(repo: GitRepo, task: str, rev: str) -> tuple[str, TaskFile | None]:
    """The task file's path (as the checkout has it) and its copy on ``rev`` (None: unreadable)."""
    rel, copy, _ = _copy_at(repo, task, rev)
    return rel, copy


def _copy_at(repo: GitRepo, task: str, rev: str) -> tuple[str, TaskFile | None, GuardkitStateError | None]:
    """:func:`task_copy_at`, and why the copy ``rev`` holds cannot be read (None: it can, or holds none)."""
    with contextlib.suppress(GuardkitStateError):
        path = resolve_task(repo.root, task).path
        rel = path.relative_to(repo.root).as_posix()
        try:  # (over the cap too: unreadable, as on disk, and never read)
            raw = repo.blob(rev, rel)
            return rel, TaskFile.from_bytes(raw, path) if raw is not None else None, None
        except InputError as exc:  # over the cap, or broken: what every reading of it would say
            return rel, None, exc
        except GuardkitStateError:  # (git failed: not known to be unreadable)
            return rel, None, None
    return "", None, None


def _commit_entry(repo: GitRepo, copy: TaskFile, rel: str, parent: str, key: str, entry: dict[str, object],
                  message: str) -> str:
    earlier = _entries(copy.state.extra.get(key)) if copy.state is not None else []
    update = StateUpdate(key=copy.state_key, block_scalars={key: [*earlier, entry]})
    text = splice_state(copy.text, update, path=copy.path).text
    return commit_file_change(repo, parent, rel, text.encode("utf-8"), message)


def _entries(value: object) -> list[dict[str, Any]]:
    return [entry for entry in value if isinstance(entry, dict)] if isinstance(value, list) else []


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _took_over(entry: dict[str, Any]) -> FailedRun:
    dead, by = str(entry.get("from", "?")), str(entry.get("by", "?"))
    how = ("a worker restarted in its clone took its claim back" if entry.get("how") == "restart"
           else "its claim stood still a whole lease")
    return FailedRun(str(entry.get("at", "?")), dead,
                     f"worker {dead} died after {entry.get('turns_done', '?')} turn(s) ({how}; taken over by {by})")


def _crashed(entry: dict[str, Any]) -> FailedRun:
    return FailedRun(str(entry.get("at", "?")), str(entry.get("worker", "?")),
                     f"the loop crashed after {entry.get('turns_done', '?')} turn(s): {entry.get('reason', '?')}")


def _person() -> str:
    with contextlib.suppress(Exception):  # no login name (a container): the host alone
        return f"{getpass.getuser()}@{socket.gethostname()}"
    return socket.gethostname()


__all__ = ["DEFAULT_LIMIT", "QUARANTINED", "FailedRun", "Quarantine", "Release", "copy_and_quarantine", "crash_entry",
           "held_back", "quarantine_in", "read_quarantine", "release_task", "task_copy_at", "write_crash"]
