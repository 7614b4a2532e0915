"""The loop's git side: one commit per recorded turn, and the turn a kill left uncommitted."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from guardkit_state.errors import FileTooLargeError, GitError, GuardkitStateError, one_line
from guardkit_state.git import turn_ledger
from guardkit_state.git.checkouts import repair_worktree_link
from guardkit_state.git.commits import CommitResult, commit_turn, find_turn_commit
from guardkit_state.git.repo import UNREAD, GitRepo, Unread
from guardkit_state.store.fsio import atomic_write_bytes
from guardkit_state.store.jsonio import load_json
from guardkit_state.turns.clock import utc_now
from guardkit_state.turns.lifecycle import TurnLifecycle, TurnRecord


class TurnCommits:
    """Commits the turns of one run of the loop.

    In a managed worktree every change is committed (the Player's code and the turn's files);
    elsewhere only the exact files of the turn, so a user's unrelated edits stay out of it.
    ``note`` says what the user should know (a turn recorded but not committed, a ``.gitignore``
    rule overridden).
    """

    def __init__(self, git: GitRepo, task_id: str, *, managed_worktree: bool, note: Callable[[str], None],
                 branch: str | None = None) -> None:
        self.git = git
        self.task_id = task_id
        self.managed_worktree = managed_worktree
        #: The branch turn commits are made and verified on, whatever an agent checked out meanwhile:
        #: the managed worktree's task branch, or the branch the user's checkout was on at the start
        #: (None: a detached checkout, whose HEAD is taken as it is).
        self.branch = branch
        self.note = note
        self._reports_ignored: bool | None = None  # asked of git once, at the first commit
        #: Why the last turn's commit failed (git's own words), for the run's outcome.
        self.last_error: str | None = None

    def start_run(self) -> None:
        """A fresh start: commits of an earlier run of the task (merged since) are not this run's."""
        turn_ledger.start_run(self.git, self.task_id, utc_now())

    def verified(self, turn: int) -> str | None:
        """The commit of ``turn`` this run of the loop made, on the task's branch; or None."""
        rev = f"refs/heads/{self.branch}" if self.branch else "HEAD"
        return find_turn_commit(self.git, self.task_id, turn, rev=rev)

    def missing(self, lifecycle: TurnLifecycle) -> str | None:
        """Why the last recorded turn's commit, made by this run, is not on the branch (git's own
        reason); None when it is there (or no turn is recorded)."""
        state = lifecycle.task.state
        if state is None or not state.turns or self.verified(state.turns[-1].turn):
            return None
        branch = self.branch or self.git.current_branch() or "HEAD"
        why = self.last_error or "git made no commit of it"
        return f"turn {state.turns[-1].turn}'s commit is not on {branch}: {why}"

    def _repair(self, known: tuple[str, str | None] | None = None) -> tuple[str | None, str | Unread | None]:
        """Restore a managed worktree's ``.git`` link an agent removed, and refuse to commit on any
        branch but :attr:`branch` (an agent that ran ``git switch``/``checkout --detach``): the
        failure's words (or None), and HEAD's commit as read then (the commit's parent to check,
        nothing moving HEAD in between: the agents have exited); ``known``: HEAD as the caller knows it."""
        if self.managed_worktree:
            try:
                text = repair_worktree_link(self.git.common_dir, self.git.root)
            except GitError as exc:
                return one_line(exc), UNREAD
            if text:
                self.note(text)
        head, ref = known or self.git.head()  # one git call for both, or none
        current = ref.removeprefix("refs/heads/") if ref is not None and ref.startswith("refs/heads/") else None
        if self.branch and current != self.branch:
            on = f"branch '{current}'" if current else "a detached HEAD"
            return (f"the checkout {self.git.root} is on {on}, not on {self.branch} (an agent switched it); "
                    f"'git -C {self.git.root} switch {self.branch}' takes the turn's files back to it"), head
        return None, head

    def commit_pending(self, lifecycle: TurnLifecycle) -> None:
        """Commit the last recorded turn if it has no commit: a kill between the frontmatter append
        and the git commit leaves one."""
        state = lifecycle.task.state
        last = state.turns[-1] if state is not None and state.turns else None
        if last is None:
            return
        self.last_error, head = self._repair()
        if self.last_error is not None or self.verified(last.turn):
            return
        own = self._turn_files(lifecycle, last.turn)
        paths = None if self.managed_worktree else [*own, str(lifecycle.task.path)]
        result = commit_turn(self.git, task_id=self.task_id, turn=last.turn, decision=last.decision,
                             mode=last.mode or "recovering_state", paths=paths,
                             managed_worktree=self.managed_worktree, force_paths=self._forced(own), head=head)
        self.last_error = result.error
        if result.committed:
            self.note(f"committed turn {last.turn}, which was recorded but not committed before")
        elif result.error:
            self.note(f"turn {last.turn} is recorded but still not committed: {result.error}")

    def commit(self, lifecycle: TurnLifecycle, record: TurnRecord, *, restored: str | None = None,
               seen: Collection[str] = (), head: tuple[str, str | None] | None = None) -> CommitResult:
        """The commit of the turn just recorded (a git failure is said, never raised); ``restored``
        names the recorded entry an agent changed in this turn (a ``History-Restored`` trailer); ``seen``:
        the files ``git status`` listed changed after this turn's Player (so no ``.gitignore`` rule hides them);
        ``head``: HEAD's commit and branch ref as the Coach's restore left them (no agent ran since)."""
        number = record.turn_state.turn_number
        repair_error, before = self._repair(head)
        if repair_error is not None:
            self.last_error = repair_error
            self.note(f"turn {number} recorded but not committed: {repair_error}")
            return CommitResult(None, error=repair_error)
        self._restore_earlier_turn_files(lifecycle, number)
        paths = None if self.managed_worktree else [str(p) for p in record.written]
        result = commit_turn(self.git, task_id=self.task_id, turn=number, decision=record.entry.decision,
                             mode=record.turn_state.mode, paths=paths, managed_worktree=self.managed_worktree,
                             force_paths=self._forced(self._turn_files(lifecycle, number)),
                             trailers={"History-Restored": restored} if restored else None, head=before)
        self.last_error = result.error
        if result.error:
            self.note(f"turn {number} recorded but not committed: {result.error}")
        elif result.committed and self.managed_worktree:
            self._say_ignored_work(number, [name for name in _reported_files(lifecycle, number) if name not in seen])
        return result

    def _say_ignored_work(self, number: int, listed: list[str]) -> None:
        """Name the files the Player's report lists that a ``.gitignore`` rule kept out of the commit:
        the approval is of work that is not on the branch (a rule the agent added, or a secret it
        should not commit — which is why they are named, not forced in)."""
        present = [name for name in listed if name and not Path(name).is_absolute() and ".." not in Path(name).parts
                   and (self.git.root / name).is_file()]
        try:
            rules = self.git.ignore_rules(present) if present else {}
        except GitError:
            return
        if rules:
            shown = ", ".join(f"{path} ({rule})" for path, rule in sorted(rules.items())[:5])
            self.note(f"turn {number}: the Player's report lists files a .gitignore rule kept out of the commit: "
                      f"{shown}; 'git add -f' them in the worktree if they are work")

    def _restore_earlier_turn_files(self, lifecycle: TurnLifecycle, number: int) -> None:
        """Put back the per-turn files of this run's earlier turns that an agent removed (``git reset
        --hard``, ``rm -r .guardkit``), from the commits the loop made of them: they are the loop's
        memory of those turns, and the turn's commit would otherwise drop them from the branch."""
        newest = {entry.turn: entry.sha for entry in turn_ledger.entries(self.git, self.task_id)
                  if entry.turn < number}
        restored: list[str] = []
        refused: list[str] = []
        for turn, sha in sorted(newest.items()):
            for kind in ("player_turn", "coach_turn", "turn_state"):
                path = lifecycle.store.path(kind, turn)
                if os.path.lexists(path):
                    continue
                try:  # (the ledger sits in the git folder an agent's worktree shares: it can name any commit)
                    data = self.git.blob(sha, path.relative_to(self.git.root).as_posix())
                except FileTooLargeError:
                    refused.append(path.name)  # never read: a reading of it on disk would refuse it too
                    continue
                if data is not None:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    atomic_write_bytes(path, data)
                    restored.append(path.name)
        if restored:
            self.note(f"turn {number}: an agent removed the recorded files of earlier turns ({', '.join(restored)}); "
                      "restored them from the loop's own commits")
        if refused:
            self.note(f"turn {number}: an agent removed the recorded files of earlier turns ({', '.join(refused)}); "
                      "not restored: the commits the loop's ledger names hold them over the size cap")

    @staticmethod
    def _turn_files(lifecycle: TurnLifecycle, number: int) -> list[str]:
        """The exact per-turn files of turn ``number`` the store holds (its reports and turn state)."""
        paths = (lifecycle.store.path(kind, number) for kind in ("player_turn", "coach_turn", "turn_state"))
        return [str(p) for p in paths if p.is_file()]

    def _forced(self, own: list[str]) -> list[str]:
        """``own`` when a ``.gitignore`` rule hides the turn files (asked once per run), else nothing.

        The reports are the loop's memory: a commit without them would leave ``log`` without
        criteria deltas and a merged branch without its history, so they are committed anyway,
        and the rule overridden is said once.
        """
        if self._reports_ignored is None and own:
            rules = self.git.ignore_rules(own)
            self._reports_ignored = bool(rules)
            if rules:
                shown = sorted(set(rules.values()))
                self.note(f"committing {self.task_id}'s turn files although {', '.join(shown)} ignores them "
                          "(exact paths only: player_turn_N.json, coach_turn_N.json, turn_state_turn_N.json)")
        return own if self._reports_ignored else []


def _reported_files(lifecycle: TurnLifecycle, number: int) -> list[str]:
    """The files the Player's report of turn ``number`` claims (``claimed_files`` when git saw others)."""
    try:
        report = load_json(lifecycle.store.path("player_turn", number))
    except GuardkitStateError:
        return []
    if not isinstance(report, dict):
        return []
    inner = report.get("claimed_files")
    claimed: dict[str, Any] = inner if isinstance(inner, dict) else report
    names = [*(claimed.get("files_created") or []), *(claimed.get("files_modified") or [])]
    return [name for name in names if isinstance(name, str)]

