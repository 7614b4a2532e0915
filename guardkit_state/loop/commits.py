"""The loop's git side: one commit per recorded turn, and the turn a kill left uncommitted."""

from __future__ import annotations

from collections.abc import Callable

from guardkit_state.errors import GitError
from guardkit_state.git import turn_ledger
from guardkit_state.git.checkouts import repair_worktree_link
from guardkit_state.git.commits import CommitResult, commit_turn
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.runner import one_line
from guardkit_state.turns.completion import utc_now
from guardkit_state.turns.lifecycle import TurnLifecycle, TurnRecord


class TurnCommits:
    """Commits the turns of one run of the loop.

    In a managed worktree every change is committed (the Player's code and the turn's files);
    elsewhere only the exact files of the turn, so a user's unrelated edits stay out of it.
    ``note`` says what the user should know (a turn recorded but not committed, a ``.gitignore``
    rule overridden).
    """

    def __init__(self, git: GitRepo, task_id: str, *, managed_worktree: bool, note: Callable[[str], None]) -> None:
        self.git = git
        self.task_id = task_id
        self.managed_worktree = managed_worktree
        self.note = note
        self._reports_ignored: bool | None = None  # asked of git once, at the first commit
        #: Why the last turn's commit failed (git's own words), for the run's outcome.
        self.last_error: str | None = None

    def start_run(self) -> None:
        """A fresh start: commits of an earlier run of the task (merged since) are not this run's."""
        turn_ledger.start_run(self.git, self.task_id, utc_now())

    def verified(self, turn: int) -> str | None:
        """The commit of ``turn`` this run of the loop made, on the checkout's branch; or None."""
        return self.git.find_turn_commit(self.task_id, turn)

    def _repair(self) -> str | None:
        """Restore a managed worktree's ``.git`` link an agent removed; the failure's words, or None."""
        if not self.managed_worktree:
            return None
        try:
            text = repair_worktree_link(self.git.common_dir, self.git.root)
        except GitError as exc:
            return one_line(exc)
        if text:
            self.note(text)
        return None

    def commit_pending(self, lifecycle: TurnLifecycle) -> None:
        """Commit the last recorded turn if it has no commit: a kill between the frontmatter append
        and the git commit leaves one."""
        state = lifecycle.task.state
        last = state.turns[-1] if state is not None and state.turns else None
        if last is None:
            return
        self.last_error = self._repair()
        if self.last_error is not None or self.verified(last.turn):
            return
        own = self._turn_files(lifecycle, last.turn)
        paths = None if self.managed_worktree else [*own, str(lifecycle.task.path)]
        result = commit_turn(self.git, task_id=self.task_id, turn=last.turn, decision=last.decision,
                             mode=last.mode or "recovering_state", paths=paths,
                             managed_worktree=self.managed_worktree, force_paths=self._forced(own))
        self.last_error = result.error
        if result.committed:
            self.note(f"committed turn {last.turn}, which was recorded but not committed before")
        elif result.error:
            self.note(f"turn {last.turn} is recorded but still not committed: {result.error}")

    def commit(self, lifecycle: TurnLifecycle, record: TurnRecord, *, restored: str | None = None) -> CommitResult:
        """The commit of the turn just recorded (a git failure is said, never raised); ``restored``
        names the recorded entry an agent changed in this turn (a ``History-Restored`` trailer)."""
        number = record.turn_state.turn_number
        repair_error = self._repair()
        if repair_error is not None:
            self.last_error = repair_error
            self.note(f"turn {number} recorded but not committed: {repair_error}")
            return CommitResult(None, error=repair_error)
        paths = None if self.managed_worktree else [str(p) for p in record.written]
        result = commit_turn(self.git, task_id=self.task_id, turn=number, decision=record.entry.decision,
                             mode=record.turn_state.mode, paths=paths, managed_worktree=self.managed_worktree,
                             force_paths=self._forced(self._turn_files(lifecycle, number)),
                             trailers={"History-Restored": restored} if restored else None)
        self.last_error = result.error
        if result.error:
            self.note(f"turn {number} recorded but not committed: {result.error}")
        return result

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
