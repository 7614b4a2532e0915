"""The feature-build loop: Player, Coach, record, commit — until approved, stalled or out of turns.

All state is in files, so the loop can be stopped at any instant (Ctrl+C, SIGTERM, SIGKILL) and
continued with ``resume=True``: it rolls forward from the resume point (DESIGN.md section 3) and
never redoes a finished turn or a report that is already on disk.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from guardkit_state.config import ResolvedConfig, load_config, render_coach_prompt, render_player_role_section
from guardkit_state.errors import AgentError, GuardkitStateError, InputError, ResumeError
from guardkit_state.git.repo import CommitResult, GitRepo, commit_turn
from guardkit_state.git.worktrees import WorktreeManager, check_base_branch
from guardkit_state.loop.agents import Agent, TurnRequest, stop_orphaned_agents
from guardkit_state.loop.start import fresh_start_refused, preflight
from guardkit_state.model import Outcome, TurnMode
from guardkit_state.store.fsio import (
    atomic_write_text,
    crash_point,
    ensure_private_dir,
    exclusive_lock,
    remove_stale_temp_files,
    validate_task_id,
)
from guardkit_state.store.jsonio import load_json
from guardkit_state.store.turn_files import TurnStore, artifacts_dir
from guardkit_state.taskfile.document import TaskFile, find_task
from guardkit_state.turns.intake import check_may_continue, checked_max_turns, checked_timeout, read_task_settled
from guardkit_state.turns.lifecycle import TurnLifecycle, TurnRecord, shared_lock_path
from guardkit_state.turns.resume import ResumePoint, resume_point

log = logging.getLogger("guardkit_state.loop.run")

LOG_FILE = Path(".guardkit/logs/autobuild.log")

Event = Callable[[str, dict[str, Any]], None]


@dataclass
class LoopOptions:
    """How to run the loop; refused at construction (:class:`InputError`) when a value cannot work.

    A NaN or infinite timeout would only fail once the worktree exists and the Player runs.
    """

    max_turns: int | None = None
    resume: bool = False
    use_worktree: bool = True
    turn_timeout: float | None = None
    base_branch: str | None = None
    index_budget: float = 2.0
    #: Take turns on a completed, cancelled, archived or approved task (refused otherwise).
    reopen: bool = False

    def __post_init__(self) -> None:
        checked_max_turns(self.max_turns)
        checked_timeout(self.turn_timeout)
        checked_timeout(self.index_budget, name="index_budget")


@dataclass
class LoopResult:
    """How a run of the loop ended."""

    task_id: str
    outcome: Outcome | None
    reason: str
    turns: list[TurnRecord] = field(default_factory=list)
    commits: list[CommitResult] = field(default_factory=list)
    resumed_from: ResumePoint | None = None
    checkout: Path | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 0 if self.outcome is Outcome.APPROVED else 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "outcome": self.outcome.value if self.outcome else None,
            "reason": self.reason,
            "exit_code": self.exit_code,
            "checkout": str(self.checkout) if self.checkout else None,
            "resumed_from": self.resumed_from.to_dict() if self.resumed_from else None,
            "turns": [t.to_dict() for t in self.turns],
            "commits": [c.to_dict() for c in self.commits],
            "notes": self.notes,
        }


def feature_build(
    repo_root: Path,
    task_id: str,
    player: Agent,
    coach: Agent,
    options: LoopOptions | None = None,
    *,
    on_event: Event | None = None,
) -> LoopResult:
    """Run the Player/Coach loop on ``task_id`` until it ends; see the module docstring.

    Raises:
        ResumeError: ``resume`` with nothing to resume, or a fresh start over recorded turns.
        InputError: a closed task (terminal status, approved) without ``reopen``, or its turn budget
            used up (``max_turns`` raises it); refused before any lock, worktree or log exists.
        ConfigError: a malformed configuration file (the loop refuses to start).
        LockedError: another process is running this task's loop.
        KeyboardInterrupt: Ctrl+C / SIGTERM; the files are consistent and ``resume=True`` continues.
    """
    options = options or LoopOptions()
    emit = on_event or (lambda kind, data: None)
    repo_root = Path(repo_root).resolve()
    validate_task_id(task_id)
    config = load_config(repo_root)
    preflight(repo_root, task_id, reopen=options.reopen, resume=options.resume, use_worktree=options.use_worktree,
              max_turns=options.max_turns)
    with _log_to_file(repo_root / LOG_FILE), _interrupts_as_exceptions():
        return _Run(repo_root, task_id, player, coach, options, config, emit).run()


class _Run:
    """One invocation of the loop (kept as an object so each step stays a small method)."""

    def __init__(self, repo_root: Path, task_id: str, player: Agent, coach: Agent, options: LoopOptions,
                 config: ResolvedConfig, emit: Event) -> None:
        self.repo_root = repo_root
        self.task_id = task_id
        self.player = player
        self.coach = coach
        self.options = options
        self.config = config
        self.emit = emit
        self.result = LoopResult(task_id, None, "")
        self.git: GitRepo | None = None
        self.managed_worktree = False
        self.worktree_rel: str | None = None
        self.base_branch: str | None = None
        self._reports_ignored: bool | None = None  # asked of git once, at the first commit

    def note(self, text: str) -> None:
        self.result.notes.append(text)
        log.info("%s", text)
        self.emit("note", {"text": text})

    # -- setup -----------------------------------------------------------------------------
    def run(self) -> LoopResult:
        main_task_path = find_task(self.repo_root, self.task_id)
        main_task = TaskFile.load(main_task_path)
        self.git = GitRepo.discover(self.repo_root)
        if self.git is not None and self.options.base_branch is not None:
            check_base_branch(self.git, self.options.base_branch)  # a usage error, before anything exists
        # The task's lock (the one TurnLifecycle.locked takes) is held from before the branch and
        # worktree are created: a second run of the task is refused by it, never by git halfway.
        with exclusive_lock(shared_lock_path(self.repo_root, self.task_id), holder=self.task_id):
            lifecycle, checkout = self._prepare(main_task_path, main_task)
            self._tidy(lifecycle, checkout)
            point = self._resume_point(lifecycle)
            if point.action in ("closed", "out_of_turns"):
                # The worktree copy says otherwise than the file read before it existed (re-created
                # from its branch): refused all the same, before any agent runs.
                check_may_continue(lifecycle.task, point.next_turn, reopen=self.options.reopen,
                                   max_turns=lifecycle.max_turns, to="run more turns")
            self._check_start(point)
            # Before the "finished" exit: a kill after the approving turn's append but before its
            # commit must still get that turn committed on resume.
            self._commit_pending(lifecycle)
            if point.action == "finished":
                known = point.outcome in Outcome._value2member_map_
                self.result.outcome = Outcome(point.outcome) if known else Outcome.APPROVED
                self.result.reason = point.describe()
                return self.result
            self._loop(lifecycle, checkout, point)
        return self.result

    def _prepare(self, main_task_path: Path, main_task: TaskFile) -> tuple[TurnLifecycle, Path]:
        """The checkout (worktree created or found) and the lifecycle of its task copy; under the lock."""
        checkout = self._checkout(main_task)
        self.result.checkout = checkout
        task_path = checkout / main_task_path.relative_to(self.repo_root)
        if not task_path.exists():
            task_path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(main_task_path, task_path)
            self.note(f"task file is not committed on the base branch; copied it into {checkout}")
        # Loaded under the lock (so already what TurnLifecycle.locked would refresh it to), and
        # settled: an editor saving in place at this instant must not number the next turn.
        store = TurnStore(artifacts_dir(checkout, self.task_id), self.task_id)
        task = read_task_settled(task_path, store)
        lifecycle = TurnLifecycle(task, root=checkout, max_turns=self.options.max_turns)
        advice = self.config.suggest_mode(lifecycle.task.complexity)
        if advice is not None:
            # One advisory line; the full advice (with GuardKit's own pitfalls) is `suggest-mode`'s job.
            self.emit("advice", {"text": f"suggested mode for complexity {advice.complexity}: "
                                         f"{advice.mode.mode} ({advice.mode.ceremony_level} ceremony; advisory)"})
        return lifecycle, checkout

    def _checkout(self, task: TaskFile) -> Path:
        if self.git is None:
            self.note("not a git repository (or git is not installed): turns are recorded without commits")
            return self.repo_root
        if not self.options.use_worktree:
            return self.repo_root
        manager = WorktreeManager(self.git)
        recorded = task.state.worktree_path if task.state else None
        if self.options.resume:
            worktree, how = manager.find(self.task_id, recorded)
            if worktree is None and not (task.state and task.state.turns):
                # No worktree, no branch, no recorded turn: nothing to resume, so create nothing.
                raise ResumeError(
                    f"{self.task_id} has no loop state to resume; start it with "
                    f"'guardkit-state feature-build {self.task_id} --player CMD --coach CMD'",
                    task_id=self.task_id)
            if worktree is None:
                worktree = manager.create(self.task_id, self.options.base_branch)
            elif worktree.notes == () and how:
                log.info("%s", how)
        else:
            worktree = manager.create(self.task_id, self.options.base_branch)
        for text in worktree.notes:
            self.note(text)
        self.git = worktree.repo()
        self.managed_worktree = True
        self.base_branch = worktree.base_branch
        with contextlib.suppress(ValueError):
            # Relative to the main checkout, where find() looks it up (also when run from a linked worktree).
            self.worktree_rel = str(worktree.path.relative_to(manager.root))
        self.emit("worktree", {"path": str(worktree.path), "branch": worktree.branch})
        return worktree.path

    def _tidy(self, lifecycle: TurnLifecycle, checkout: Path) -> None:
        # Every directory the loop writes into atomically: the store, its scratch, the task's, the log's.
        removed = [path for directory in (lifecycle.store.directory, lifecycle.store.work_dir,
                                          lifecycle.task.path.parent, (self.repo_root / LOG_FILE).parent)
                   for path in remove_stale_temp_files(directory)]
        if removed:
            self.note(f"removed {len(removed)} temp file(s) left by an interrupted write")
        for text in stop_orphaned_agents(lifecycle.store.work_dir):
            self.note(text)
        if self.git is not None:
            for lock in self.git.remove_stale_index_lock():
                self.note(f"removed stale git lock {lock} (no git process held it)")

    def _resume_point(self, lifecycle: TurnLifecycle) -> ResumePoint:
        return resume_point(lifecycle.task, lifecycle.store, max_turns=lifecycle.max_turns,
                            reopen=self.options.reopen)

    def _check_start(self, point: ResumePoint) -> None:
        if self.options.resume:
            if point.action == "start":
                raise ResumeError(
                    f"{self.task_id} has no loop state to resume; start it with "
                    f"'guardkit-state feature-build {self.task_id} --player CMD --coach CMD'",
                    task_id=self.task_id)
            self.result.resumed_from = point
            self.emit("resume", point.to_dict())
            log.info("resume %s: %s", self.task_id, point.describe())
            for text in point.notes:
                self.note(text)
        elif point.recorded_turns > 0 or point.action in ("complete_from_reports", "rerun_coach"):
            raise fresh_start_refused(self.task_id, point.recorded_turns)

    def _commit_pending(self, lifecycle: TurnLifecycle) -> None:
        """A kill between the frontmatter append and the git commit leaves a turn to commit."""
        if self.git is None or lifecycle.task.state is None:
            return
        last = lifecycle.task.state.turns[-1] if lifecycle.task.state.turns else None
        if last is None or self.git.find_turn_commit(self.task_id, last.turn):
            return
        own = self._turn_files(lifecycle, last.turn)
        # Outside a managed worktree only the exact files of that turn are committed.
        paths = None if self.managed_worktree else [*own, str(lifecycle.task.path)]
        result = commit_turn(self.git, task_id=self.task_id, turn=last.turn, decision=last.decision,
                             mode=last.mode or "recovering_state", paths=paths,
                             managed_worktree=self.managed_worktree, force_paths=self._forced(own))
        if result.sha:
            self.note(f"committed turn {last.turn}, which was recorded but not committed before the interruption")

    # -- the loop --------------------------------------------------------------------------
    def _loop(self, lifecycle: TurnLifecycle, checkout: Path, point: ResumePoint) -> None:
        first = True
        while True:
            # Every turn starts from what the files say, not from what this process remembers: a
            # turn complete on disk but not listed (a stale editor save dropped it) is completed
            # from its reports instead of being run again.
            if not first:
                point = self._resume_point(lifecycle)
            first = False
            number = lifecycle.recorded_turns + 1
            if number > lifecycle.max_turns:
                self._finish(lifecycle, Outcome.MAX_TURNS_EXCEEDED,
                             f"the Coach did not approve within {lifecycle.max_turns} turns")
                return
            record = self._turn(lifecycle, checkout, number, point.action, point.mode)
            crash_point("loop.before_commit")  # turn recorded in the frontmatter, not yet committed
            self.result.turns.append(record)
            self._after_turn(lifecycle, record)
            if record.outcome is not None:
                reason = {
                    Outcome.APPROVED: f"approved by the Coach in turn {number}",
                    Outcome.UNRECOVERABLE_STALL: record.stall.reason if record.stall else "stalled",
                    Outcome.MAX_TURNS_EXCEEDED: f"the Coach did not approve within {lifecycle.max_turns} turns",
                }[record.outcome]
                self.result.outcome, self.result.reason = record.outcome, reason
                return

    def _turn(self, lifecycle: TurnLifecycle, checkout: Path, number: int, action: str,
              mode: TurnMode | None) -> TurnRecord:
        active = lifecycle.begin_turn(mode)
        self.emit("turn", {"turn": number, "mode": active.mode.value, "action": action})
        work = ensure_private_dir(lifecycle.store.work_dir)
        context_file = lifecycle.store.context_path(number)
        prompt_file = work / f"coach_prompt_turn_{number}.md"
        role_section = render_player_role_section(self.config)
        atomic_write_text(context_file, lifecycle.context_for(number, role_section=role_section))
        task = lifecycle.task
        previous = lifecycle.previous_turn_state(number)
        atomic_write_text(prompt_file, render_coach_prompt(
            self.config, task_id=self.task_id, title=task.title or self.task_id, task_type=task.task_type,
            complexity=task.complexity, criteria=task.criteria, previous_turn=previous, turn=number))
        player_raw, coach_raw = work / f"player_report_{number}.json", work / f"coach_report_{number}.json"
        player_request = TurnRequest(role="player", task_id=self.task_id, turn=number, mode=active.mode.value,
                                     workdir=checkout, task_file=task.path, context_file=context_file,
                                     report_file=player_raw, timeout=self.options.turn_timeout)
        coach_request = replace(player_request, role="coach", report_file=coach_raw, prompt_file=prompt_file,
                                player_report_file=lifecycle.store.path("player_turn", number))
        error: str | None = None
        if action == "complete_from_reports":
            self.emit("reuse", {"turn": number, "files": ["player", "coach"]})
        else:
            try:
                if action == "rerun_coach" or (
                        action == "rerun_turn" and self._adopt_report(lifecycle, "player", player_raw, number)):
                    self.emit("reuse", {"turn": number, "files": ["player"]})
                else:
                    action = "run_turn"  # a fresh Player report: an earlier Coach report no longer applies
                    self.emit("agent", {"turn": number, "role": "player"})
                    report = self.player.run(player_request)
                    lifecycle.record_player(report)
                    crash_point("loop.after_player")
                rerun = action in ("rerun_turn", "rerun_coach")
                if rerun and self._adopt_report(lifecycle, "coach", coach_raw, number):
                    self.emit("reuse", {"turn": number, "files": ["coach"]})
                else:
                    self.emit("agent", {"turn": number, "role": "coach"})
                    decision = self.coach.run(coach_request)
                    lifecycle.record_coach(decision)
            except (AgentError, InputError) as exc:
                error = _agent_reason(exc)
                log.warning("turn %d of %s: %s", number, self.task_id, error)
        profile = self.config.gate_profile(task.task_type, task.complexity)
        return lifecycle.complete_turn(error=error, gate_profile=profile, worktree_path=self._worktree_value(checkout),
                                       base_branch=self.base_branch)

    def _adopt_report(self, lifecycle: TurnLifecycle, role: str, raw: Path, number: int) -> bool:
        """On resume, record the report an agent finished before the kill instead of running it again.

        The agent's own report file (``.work/<role>_report_N.json``) survives a kill that lands
        between the agent's exit and the store's write; a valid one is that agent's finished work.
        An invalid or missing one is ignored (the agent runs again).
        """
        if not raw.is_file():
            return False
        try:
            data = load_json(raw)
            if not isinstance(data, dict):
                return False
            (lifecycle.record_player if role == "player" else lifecycle.record_coach)(data)
        except GuardkitStateError as exc:
            log.info("turn %d of %s: %s report %s not reused (%s)", number, self.task_id, role, raw, exc)
            return False
        self.note(f"turn {number}: reused the {role.capitalize()}'s report {raw.name}, "
                  "finished before the interruption")
        return True

    def _worktree_value(self, checkout: Path) -> str | None:
        return self.worktree_rel if self.managed_worktree else None

    def _after_turn(self, lifecycle: TurnLifecycle, record: TurnRecord) -> None:
        number = record.turn_state.turn_number
        if self.git is not None:
            paths = None if self.managed_worktree else [str(p) for p in record.written]
            commit = commit_turn(self.git, task_id=self.task_id, turn=number, decision=record.entry.decision,
                                 mode=record.turn_state.mode, paths=paths, managed_worktree=self.managed_worktree,
                                 force_paths=self._forced(self._turn_files(lifecycle, number)))
            self.result.commits.append(commit)
            if commit.error:
                self.note(f"turn {number} recorded but not committed: {commit.error}")
        self.emit("recorded", record.to_dict() | {"commit": self.result.commits[-1].to_dict() if self.git else None})
        self._index(lifecycle, number)

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
        if self._reports_ignored is None and self.git is not None and own:
            rules = self.git.ignore_rules(own)
            self._reports_ignored = bool(rules)
            if rules:
                shown = sorted(set(rules.values()))
                self.note(f"committing {self.task_id}'s turn files although {', '.join(shown)} ignores them "
                          "(exact paths only: player_turn_N.json, coach_turn_N.json, turn_state_turn_N.json)")
        return own if self._reports_ignored else []

    def _index(self, lifecycle: TurnLifecycle, number: int) -> None:
        try:
            from guardkit_state.index.after_turn import index_turn_best_effort
        except ImportError:
            return
        started = time.monotonic()
        outcome = index_turn_best_effort(self.repo_root, lifecycle.store.path("turn_state", number),
                                         budget_seconds=self.options.index_budget)
        log.info("index turn %d of %s: %s (%.2fs)", number, self.task_id, outcome, time.monotonic() - started)

    def _finish(self, lifecycle: TurnLifecycle, outcome: Outcome, reason: str) -> None:
        lifecycle.mark_outcome(outcome, reason=reason)
        self.result.outcome, self.result.reason = outcome, reason


def _agent_reason(exc: GuardkitStateError) -> str:
    if isinstance(exc, AgentError):
        return exc.message
    return f"invalid report: {exc}"


@contextlib.contextmanager
def _interrupts_as_exceptions() -> Iterator[None]:
    """SIGTERM and SIGHUP behave like Ctrl+C: a KeyboardInterrupt the loop turns into a saved stop.

    SIGHUP (a closed terminal, a dropped SSH session) would otherwise kill the loop without
    stopping its agent, which runs in a session of its own and would be left working unattended.
    """
    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signums = [signal.SIGTERM, *([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])]
    try:
        previous = {signum: signal.signal(signum, handler) for signum in signums}
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


@contextlib.contextmanager
def _log_to_file(path: Path) -> Iterator[None]:
    """Append the library's log to ``.guardkit/logs/autobuild.log`` for the duration of the loop."""
    ensure_private_dir(path.parent)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    root = logging.getLogger("guardkit_state")
    old_level = root.level
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.INFO:
        root.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        handler.close()
