"""Reviewing a loop from git: the turn log and the diff of one turn.

Both look at commits (found by their ``Task:``/``Turn:`` trailers on ``autobuild/TASK-ID``, or on
the current branch once that branch is merged or deleted), never at a worktree's files, so they
work from the main checkout while a loop runs and after the branch is merged. Without git the log
falls back to the ``turn_state_turn_N.json`` files on disk.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from guardkit_state.errors import GitError, GuardkitStateError, TurnError
from guardkit_state.git.checkouts import worktrees_home
from guardkit_state.git.commits import turn_commits
from guardkit_state.git.parse import TurnCommit
from guardkit_state.git.repo import GitRepo
from guardkit_state.model import Fields
from guardkit_state.store import reads
from guardkit_state.store.jsonio import parse_json
from guardkit_state.store.layout import STATE_DIR, artifacts_dir, branch_for, worktree_path
from guardkit_state.store.reads import decode_utf8, read_bytes_capped
from guardkit_state.store.safe_paths import validate_task_id
from guardkit_state.store.turn_files import turn_state_number
from guardkit_state.taskfile.locate import autobuild_branches_at, feature_branch_of_task
from guardkit_state.taskfile.read_scope import scoped
from guardkit_state.taskfile.resolve import find_task, resolve_task

log = logging.getLogger("guardkit_state.inspect.review")



@dataclass(frozen=True)
class TurnLogEntry(Fields):
    """One turn of a task as the log shows it."""

    turn: int
    sha: str | None
    decision: str | None
    mode: str | None
    date: str | None
    verified_count: int | None
    delta: tuple[str, ...] = ()
    subject: str | None = None


@dataclass
class TurnLog:
    """The turns of a task plus where they were read from."""

    task_id: str
    source: str
    entries: list[TurnLogEntry] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "source": self.source, "notes": self.notes,
                "turns": [e.to_dict() for e in self.entries]}


def read_turn_log(repo_root: str | Path, task_id: str) -> TurnLog:
    """The turns of ``task_id``, oldest first (sha, decision, mode, date, criteria delta), with their
    source (``autobuild/TASK`` branch, current branch, or files) and notes.

    ``task_id`` may be the path of a task file. Raises :class:`TaskNotFoundError` when the task has
    neither a file nor any recorded turn.
    """
    root = Path(repo_root)
    task_id = _task_id_of(root, task_id)
    # Found once per read: 'log FEAT-X' reads each of its tasks' logs.
    repo = scoped(("git repo", os.fspath(root)), partial(GitRepo.discover, root))
    if repo is None:
        on_disk = _states_from_files(_state_dir_on_disk(root, task_id))
        return _known(root, TurnLog(task_id, "files", _entries([], on_disk),
                                    ["not a git repository (or no git): turns read from files only"]))
    rev, source = _log_rev(repo, task_id)
    commits = _oldest_first_unique(turn_commits(repo, task_id, rev=rev))
    # Bounded as a turn state on disk is read: a blob of gigabytes on a task branch (an agent's commit,
    # a person's push) is never read, and its turn is shown without its criteria.
    blobs = [found[2] if found is not None and found[1] == "blob" else None
             for found in repo.objects([f"{c.sha}:{_state_path(task_id, c.turn)}" for c in commits],
                                       max_bytes=reads.MAX_FILE_BYTES)]
    states: dict[int, dict[str, Any]] = {}
    for commit, blob in zip(commits, blobs, strict=True):
        if blob is not None:
            states[commit.turn] = _parse_state(blob, commit.turn)
    notes: list[str] = []
    # Turns written but not (yet) committed: from the loop's worktree, else this checkout.
    disk = _states_from_files(_state_dir_on_disk(repo.root, task_id))
    uncommitted = {t: s for t, s in disk.items() if t not in {c.turn for c in commits}}
    if uncommitted:
        notes.append("turn(s) " + ", ".join(map(str, sorted(uncommitted))) + " have files but no commit")
        states.update(uncommitted)
    return _known(root, TurnLog(task_id, source, _entries(commits, states), notes))


def turn_diff(repo_root: str | Path, task_id: str, turn: int, *, stat: bool = False,
              state_only: bool = False) -> str:
    """The commit of turn ``turn`` as ``git show`` text: the code and the state it changed.

    ``state_only`` limits the diff to the task file and ``.guardkit/autobuild/TASK-ID/``;
    ``stat`` shows a diffstat instead of the patch. Raises :class:`GitError` outside a
    repository and :class:`TurnError` when no commit of that turn exists.
    """
    task_id = _task_id_of(Path(repo_root), task_id)
    repo = GitRepo.discover(Path(repo_root))
    if repo is None:
        if not _states_from_files(_state_dir_on_disk(Path(repo_root), task_id)):
            find_task(repo_root, task_id)  # an unknown task is the problem to name first
        raise GitError("not a git repository (or git is not installed): turn diffs need git",
                       path=Path(repo_root), task_id=task_id, turn=turn,
                       fix="run it in the project's checkout")
    rev, source = _log_rev(repo, task_id)
    commits = turn_commits(repo, task_id, rev=rev)
    commit = next((c for c in commits if c.turn == turn), None)
    if commit is None:
        if not commits:
            find_task(repo_root, task_id)  # an unknown task is said as such, not as a missing turn
        raise TurnError(f"no commit of turn {turn} for {task_id} on {source}", task_id=task_id, turn=turn,
                        fix=f"'guardkit-state log {task_id}' lists the turns that were committed")
    args = ["show", "--no-color", "--no-ext-diff", "--format=medium", "--stat" if stat else "--patch", commit.sha, "--"]
    if state_only:
        args += state_pathspecs(task_id)
    # A file over the cap a file on disk is read under (a blob of gigabytes pushed in a turn commit)
    # is diffed as git diffs a binary file: named, never read into the patch.
    big = ("-c", f"core.bigFileThreshold={reads.MAX_FILE_BYTES}")
    return repo.run(*args, pre=big)[1].decode("utf-8", "replace")


def state_pathspecs(task_id: str) -> list[str]:
    """Pathspecs of a task's state: its task file (exact id) and its ``.guardkit/autobuild`` folder."""
    return [
        f":(glob)tasks/**/{task_id}-*.md",
        f":(glob)tasks/**/{task_id}.md",
        f":(glob){(STATE_DIR / task_id).as_posix()}/**",
    ]


def criteria_delta(previous: dict[str, str], current: dict[str, str]) -> tuple[str, ...]:
    """``+AC-002`` newly verified, ``-AC-003`` no longer verified (a regression), in id order."""
    was = {k for k, v in previous.items() if v == "verified"}
    now = {k for k, v in current.items() if v == "verified"}
    return tuple([f"+{k}" for k in sorted(now - was)] + [f"-{k}" for k in sorted(was - now)])


# -- helpers ---------------------------------------------------------------------------------


def _task_id_of(root: Path, task: str) -> str:
    """The id of ``task``: an id as given (checked), or the id of the task file a path names."""
    return resolve_task(root, task).task_id if task.endswith(".md") else validate_task_id(task)


def _known(root: Path, result: TurnLog) -> TurnLog:
    """``result``, unless the task has no turn anywhere and no file: then it is an unknown task.

    A task whose turns GuardKit listed in its frontmatter without commits or turn files says so,
    rather than looking like a task with no history.
    """
    if result.entries:
        return result
    path = find_task(root, result.task_id)
    from guardkit_state.taskfile.document import TaskFile  # here: the CLI builds its parser without YAML

    try:
        state = TaskFile.load(path).state
    except GuardkitStateError:
        return result
    if state is not None and state.turns:
        result.notes.append(f"no turn commits or turn files; the task file lists {len(state.turns)} turn(s) "
                            f"(see 'guardkit-state show {result.task_id}')")
    return result


def _log_rev(repo: GitRepo, task_id: str) -> tuple[str, str]:
    branch = branch_for(task_id)
    if branch in autobuild_branches_at(repo.root):  # listed once for the read (locate asked already)
        return f"refs/heads/{branch}", f"branch {branch}"
    # A task a feature ran and merged (its own branch pruned since): its turn commits are on the
    # feature branch until the feature is merged into this checkout.
    feature = feature_branch_of_task(repo, repo.root, task_id)
    if feature is not None:
        return f"refs/heads/{feature[1]}", f"feature branch {feature[1]}"
    current = scoped(("current branch", os.fspath(repo.root)), repo.current_branch)
    return "HEAD", f"current branch {current}" if current else "HEAD (detached)"


def _oldest_first_unique(commits: list[TurnCommit]) -> list[TurnCommit]:
    """Newest-first commits -> one per turn (the newest), ordered by turn."""
    by_turn = {commit.turn: commit for commit in reversed(commits)}  # a turn's newest is put last, and stays
    return [by_turn[t] for t in sorted(by_turn)]


def _entries(commits: list[TurnCommit], states: dict[int, dict[str, Any]]) -> list[TurnLogEntry]:
    by_turn = {c.turn: c for c in commits}
    entries: list[TurnLogEntry] = []
    previous: dict[str, str] = {}
    for turn in sorted(set(by_turn) | set(states)):
        commit = by_turn.get(turn)
        state = states.get(turn, {})
        status = state.get("acceptance_criteria_status")
        status = {str(k): str(v) for k, v in status.items()} if isinstance(status, dict) else {}
        verified = state.get("verified_count")
        if not isinstance(verified, int):
            verified = sum(1 for v in status.values() if v == "verified") if status else None
        # (A turn without criteria read, its state unreadable or over the cap, loses none it had.)
        entries.append(TurnLogEntry(
            turn=turn,
            sha=commit.sha if commit else None,
            decision=(commit.decision if commit else None) or _str(state.get("coach_decision")),
            mode=(commit.mode if commit else None) or _str(state.get("mode")),
            date=commit.date if commit else _str(state.get("completed_at")),
            verified_count=verified,
            delta=criteria_delta(previous, status) if status else (),
            subject=commit.subject if commit else None,
        ))
        if status:
            previous = status
    return entries


def _state_path(task_id: str, turn: int) -> str:
    return (STATE_DIR / task_id / f"turn_state_turn_{turn}.json").as_posix()


def _state_dir_on_disk(root: Path, task_id: str) -> Path:
    # The loop's worktrees live under the main checkout, also when asked from a linked worktree.
    worktree = artifacts_dir(worktree_path(worktrees_home(root), task_id), task_id)
    return worktree if worktree.is_dir() else artifacts_dir(root, task_id)


def _states_from_files(directory: Path) -> dict[int, dict[str, Any]]:
    states: dict[int, dict[str, Any]] = {}
    if not directory.is_dir():
        return states
    for entry in directory.iterdir():
        turn = turn_state_number(entry.name)
        if turn is not None:
            try:
                states[turn] = _parse_state(read_bytes_capped(entry), turn)
            except Exception as exc:
                log.warning("skipping %s: %s", entry, exc)
    return states


def _parse_state(blob: bytes, turn: int) -> dict[str, Any]:
    """A turn state's text (committed, or on disk) read as strictly as the store reads one: bounded
    nesting, no NaN or infinite numbers, no duplicate keys; one refused is shown without criteria."""
    name = f"turn_state_turn_{turn}.json"
    try:
        data = parse_json(decode_utf8(blob, Path(name)), path=name)
    except GuardkitStateError as exc:
        log.warning("%s is not valid JSON (%s); shown without criteria", name, exc)
        return {}
    return data if isinstance(data, dict) else {}


def _str(value: object) -> str | None:
    return str(value) if value is not None else None
