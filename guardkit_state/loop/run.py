"""The feature-build loop: Player, Coach, record, commit — until approved, stalled or out of turns.

All state is in files, so the loop can be stopped at any instant (Ctrl+C, SIGTERM, SIGKILL) and
continued with ``resume=True``: it rolls forward from the resume point (``docs/resume.md``) and
never redoes a finished turn or a report that is already on disk. Progress is told to the caller
as typed events (:mod:`guardkit_state.loop.events`).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

from guardkit_state.agents.protocol import Agent, agent_name, stop_orphaned_agents
from guardkit_state.config import ResolvedConfig, load_config
from guardkit_state.errors import AgentError, GuardkitStateError, InputError
from guardkit_state.git.checkouts import shared_lock_path
from guardkit_state.git.names import check_loop_ids
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.worktrees import WorktreeManager, check_base_branch
from guardkit_state.loop.agent_turn import (
    AgentRuns,
    ReadOnlyWatch,
    TurnBriefing,
    adopt_report,
    coach_change,
    failure_kind,
    interrupted_note,
    put_back_interrupted,
)
from guardkit_state.loop.command_line import build_argv
from guardkit_state.loop.events import (
    AgentStarted,
    EventSink,
    ModeSuggested,
    Note,
    ReportsReused,
    Resuming,
    TurnRecorded,
    TurnStarted,
    WorktreeReady,
    ignore,
)
from guardkit_state.loop.loop_commits import TurnCommits
from guardkit_state.loop.outcome import LoopInterrupted, LoopResult
from guardkit_state.loop.session import interrupts_as_exceptions, logging_to
from guardkit_state.loop.start import Start, check_start, find_start, nothing_to_resume
from guardkit_state.loop.worktree_watch import with_files_from_git, worktree_changes
from guardkit_state.model import Outcome, TurnMode
from guardkit_state.store.fsio import crash_point, remove_stale_temp_files
from guardkit_state.store.home import check_state_home
from guardkit_state.store.layout import artifacts_dir, log_file, status_cache_file
from guardkit_state.store.locks import exclusive_lock
from guardkit_state.store.safe_paths import resolve_inside, validate_task_id
from guardkit_state.store.turn_files import TurnStore
from guardkit_state.taskfile.document import TaskFile, read_task_settled
from guardkit_state.taskfile.locate import repository_at
from guardkit_state.taskfile.read_scope import listing_scope
from guardkit_state.turns.checks import checked_max_turns, checked_timeout, checked_usd
from guardkit_state.turns.lifecycle import TurnLifecycle, TurnRecord
from guardkit_state.turns.recorded_history import restore_recorded_history
from guardkit_state.turns.resume import ResumePoint, resume_point
from guardkit_state.turns.spend import over_limit
from guardkit_state.turns.turn_state import TurnRun
from guardkit_state.turns.verdicts import VERDICT_WORDS_KEY, describe_verdict_words

log = logging.getLogger("guardkit_state.loop.run")


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
    #: Take turns on a completed, cancelled, archived or approved task (refused otherwise).
    reopen: bool = False
    #: Stop once the agents' reported cost of this task's turns reaches this many USD, and start no
    #: turn that would pass it at the mean cost of the last turns (on ``resume`` too).
    max_cost: float | None = None
    #: USD already spent toward ``max_cost`` outside this task (a feature's other tasks).
    cost_before: float = 0.0
    #: The Player goes on with the agent session its previous turn reported (presets that can).
    continue_session: bool = False
    #: The command line that started the run (without the program name; the CLI passes its own):
    #: an interruption's "continue with" line repeats it. Default: built from the agents' commands.
    argv: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        checked_max_turns(self.max_turns)
        checked_timeout(self.turn_timeout)
        checked_usd(self.max_cost, name="max_cost")
        checked_usd(self.cost_before, name="cost_before", zero=True)


def run_task_loop(
    repo_root: Path,
    task_id: str,
    player: Agent,
    coach: Agent,
    options: LoopOptions | None = None,
    *,
    on_event: EventSink | None = None,
) -> LoopResult:
    """Run the Player/Coach loop on ``task_id`` until it ends; see the module docstring.

    ``on_event`` is called with each progress event (:mod:`guardkit_state.loop.events`): the one
    place a caller plugs in what should follow a recorded turn (the CLI: the index). A callback
    written for ``(kind, data)`` pairs is adapted with :func:`~guardkit_state.loop.events.as_kind_and_data`.

    Raises:
        ResumeError: ``resume`` with nothing to resume, or a fresh start over recorded turns.
        InputError: a closed task (terminal status, approved) without ``reopen``, its turn budget
            used up (``max_turns`` raises it), or an unknown ``base_branch``; refused before any
            lock, worktree or log exists.
        ConfigError: a malformed configuration file (the loop refuses to start).
        LockedError: another process is running this task's loop.
        LoopInterrupted: Ctrl+C / SIGTERM / SIGHUP; the files are consistent and ``resume=True``
            continues.
    """
    options = options or LoopOptions()
    repo_root = Path(repo_root).resolve()
    validate_task_id(task_id)
    run = _Run(repo_root, task_id, player, coach, options, on_event or ignore)
    try:
        return run.start()
    except KeyboardInterrupt as stop:
        argv = options.argv if options.argv is not None else build_argv(task_id, player, coach)
        raise LoopInterrupted(task_id, turn=run.turn, phase=run.phase, resumed=options.resume, argv=argv) from stop


class _Run:
    """One invocation of the loop (kept as an object so each step stays a small method)."""

    config: ResolvedConfig  # loaded by start(), which every other step follows

    def __init__(self, repo_root: Path, task_id: str, player: Agent, coach: Agent, options: LoopOptions,
                 emit: EventSink) -> None:
        self.repo_root = repo_root
        self.task_id = task_id
        self.player = player
        self.coach = coach
        self.options = options
        self.emit = emit
        self.result = LoopResult(task_id, None, "")
        self.uncosted: set[str] = set()  # agents said (once) to report no cost, under --max-cost
        self.git: GitRepo | None = None
        self.commits: TurnCommits | None = None
        self.managed_worktree = False
        self.worktree_rel: str | None = None
        self.task_branch: str | None = None
        self.base_branch: str | None = None
        # Where an interruption finds the loop: the turn under way and its phase.
        self.turn: int | None = None
        self.phase: str | None = None
        #: The recorded entry an agent changed during the turn under way (flagged in its commit).
        self.restored: str | None = None
        #: What a Coach a kill interrupted had changed, put back on --resume: its turn's error.
        self.coach_changed: str | None = None
        #: The files git listed changed after the Player of the turn under way (none: not asked this run).
        self.seen: frozenset[str] = frozenset()
        #: HEAD (commit, branch ref) as the Coach's restore left it in the turn under way (None: not known).
        self.head_now: tuple[str, str | None] | None = None

    def note(self, text: str) -> None:
        self.result.notes.append(text)
        log.info("%s", text)
        self.emit(Note(text))

    # -- setup -----------------------------------------------------------------------------
    def start(self) -> LoopResult:
        """Every refusal first (nothing exists yet), then the run itself, logged and under the lock."""
        check_state_home(self.repo_root)  # a .guardkit file, or a symlink leaving the repository
        self.config = load_config(self.repo_root)
        with listing_scope():  # reads alone, until the log: the repository found once for all of them
            self.git = repository_at(self.repo_root)
            found = find_start(self.repo_root, self.task_id,
                               worktree=self.options.use_worktree and self.git is not None)
            self._check_start(found.task, resume_point(found.task, found.store, max_turns=self.options.max_turns,
                                                       reopen=self.options.reopen), own=found.own)
        check_loop_ids(self.repo_root, [self.task_id], git=self.git is not None)
        if self.git is not None and self.options.base_branch is not None:
            check_base_branch(self.git, self.options.base_branch)  # a usage error, before the log exists
        with logging_to(log_file(self.repo_root)), interrupts_as_exceptions():
            self._run(found)
        return self.result

    def _check_start(self, task: TaskFile, point: ResumePoint, *, own: bool = True) -> None:
        options = self.options
        check_start(task, point, own=own, resume=options.resume, reopen=options.reopen, max_turns=options.max_turns)

    def _run(self, found: Start) -> None:
        # The task's lock (the one TurnLifecycle.locked takes) is held from before the branch and
        # worktree are created: a second run of the task is refused by it, never by git halfway.
        with exclusive_lock(shared_lock_path(self.repo_root, self.task_id), holder=self.task_id):
            lifecycle, checkout = self._prepare(found)
            self._tidy(lifecycle)
            point = self._resume_point(lifecycle)
            # The same check on the copy the loop holds: a worktree re-created from its branch may
            # say otherwise than the file read before it existed. Before any agent runs.
            self._check_start(lifecycle.task, point)
            self._resuming(point)
            if self.commits is not None and not self.options.resume:
                self.commits.start_run()  # an earlier run's turn commits (merged since) are not this run's
            # Before the "finished" exit: a kill after the approving turn's append but before its
            # commit must still get that turn committed on resume.
            if self.commits is not None:
                self.commits.commit_pending(lifecycle)
            if point.action == "finished":
                known = point.outcome in Outcome._value2member_map_
                self.result.outcome = Outcome(point.outcome) if known else Outcome.APPROVED
                self.result.reason = point.describe()
            else:
                self._loop(lifecycle, checkout, point)
            self._verify_committed(lifecycle)

    def _verify_committed(self, lifecycle: TurnLifecycle) -> None:
        """An approval counts (exit 0) only once its turn commit, made by this loop, is on the branch;
        otherwise the result says git's own reason, and ``--resume`` commits it once that is fixed."""
        if self.commits is None or self.result.outcome is not Outcome.APPROVED:
            return
        self.result.commit_error = self.commits.missing(lifecycle)
        if self.result.commit_error is None:
            return
        self.result.reason = (f"{self.result.reason}, but {self.result.commit_error}; once that is fixed, "
                              f"'guardkit-state feature-build {self.task_id} --resume' commits it")

    def _prepare(self, found: Start) -> tuple[TurnLifecycle, Path]:
        """The checkout (worktree created or found) and the lifecycle of its task copy; under the lock."""
        checkout = self._checkout(found.task)
        self.result.checkout = checkout
        if self.git is not None:
            self.commits = TurnCommits(self.git, self.task_id, managed_worktree=self.managed_worktree,
                                       note=self.note, branch=self.task_branch)
        task_path = checkout / found.main_path.relative_to(self.repo_root)
        if not task_path.exists():
            task_path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(found.main_path, task_path)
            self.note(f"task file is not committed on the base branch; copied it into {checkout}")
        # Under the lock (so already what TurnLifecycle.locked would refresh it to), and settled: an
        # editor saving in place at this instant must not number the next turn. The copy read before
        # the lock is kept when the file is still the one read (confirmed by its identity).
        store = TurnStore(artifacts_dir(checkout, self.task_id), self.task_id)
        task = found.task.confirmed(store) if found.task.path.exists() and task_path.samefile(found.task.path) else \
            read_task_settled(task_path, store)
        lifecycle = TurnLifecycle(task, root=checkout, max_turns=self.options.max_turns)
        advice = self.config.suggest_mode(lifecycle.task.complexity)
        if advice is not None:
            self.emit(ModeSuggested(advice))
        return lifecycle, checkout

    def _checkout(self, task: TaskFile) -> Path:
        if self.git is None:
            self.note("not a git repository (or git is not installed): turns are recorded without commits")
            return self.repo_root
        if not self.options.use_worktree:
            self.task_branch = self.git.current_branch()  # an agent's `git switch` must not move the turns
            return self.repo_root
        manager = WorktreeManager(self.git)
        recorded = task.state.worktree_path if task.state else None
        if self.options.resume:
            worktree, how = manager.find(self.task_id, recorded)
            if worktree is None and not (task.state and task.state.turns):
                # No worktree, no branch, no recorded turn: nothing to resume, so create nothing.
                raise nothing_to_resume(self.task_id)
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
        self.task_branch = worktree.branch
        self.base_branch = worktree.base_branch
        with contextlib.suppress(ValueError):
            # Relative to the main checkout, where find() looks it up (also when run from a linked worktree).
            self.worktree_rel = str(worktree.path.relative_to(manager.root))
        self.emit(WorktreeReady(worktree.path, worktree.branch))
        return worktree.path

    def _tidy(self, lifecycle: TurnLifecycle) -> None:
        # Every directory the loop writes into atomically: the store, its scratch, the task's, the log's,
        # and the read caches' (a kill while one was saved leaves its temp file there).
        directories = dict.fromkeys((lifecycle.store.directory, lifecycle.store.work_dir, lifecycle.task.path.parent,
                                     log_file(self.repo_root).parent, status_cache_file(self.repo_root).parent,
                                     status_cache_file(lifecycle.root).parent))
        removed = [path for directory in directories for path in remove_stale_temp_files(directory)]
        if removed:
            self.note(f"removed {len(removed)} temp file(s) left by an interrupted write")
        for text in stop_orphaned_agents(lifecycle.store.work_dir):
            self.note(text)
        if self.git is not None:
            for lock in self.git.remove_stale_index_lock():
                self.note(f"removed stale git lock {lock} (no git process held it)")
            held = put_back_interrupted(self.git, self.task_id)  # the killed Coach's change is never the turn's
            if held is not None:
                self.note(interrupted_note(held))
                self.coach_changed = coach_change(held, lifecycle.root, lifecycle.store.directory)

    def _resume_point(self, lifecycle: TurnLifecycle) -> ResumePoint:
        return resume_point(lifecycle.task, lifecycle.store, max_turns=lifecycle.max_turns,
                            reopen=self.options.reopen)

    def _resuming(self, point: ResumePoint) -> None:
        if self.options.resume:
            self.result.resumed_from = point
            self.emit(Resuming(point))
            log.info("resume %s: %s", self.task_id, point.describe())
            for text in point.notes:
                self.note(text)

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
            over = None if self.options.max_cost is None or point.action == "complete_from_reports" else \
                over_limit(lifecycle.root, self.task_id, limit=self.options.max_cost,
                           spent_elsewhere=self.options.cost_before)
            if over is not None:  # a turn completed from its reports calls no agent: it costs nothing
                self._finish(lifecycle, Outcome.COST_LIMIT_REACHED, over)
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
            stop = self._stop_reason(lifecycle, record)
            if stop is not None:
                self._finish(lifecycle, *stop)
                return

    def _stop_reason(self, lifecycle: TurnLifecycle, record: TurnRecord) -> tuple[Outcome, str] | None:
        """Why the loop must stop after ``record`` though the Coach may still approve: an agent failure
        that only repeats (the same twice in a row). (Under ``--max-cost`` an agent that reports no
        cost is said once here; the limit itself is :meth:`_over_cost`'s, before each turn.)"""
        state = record.turn_state
        kind = failure_kind(state.error or "") if state.failed_role else None
        if kind is not None:
            before = lifecycle.previous_turn_state(state.turn_number)
            if before is not None and before.failed_role == state.failed_role and \
                    failure_kind(before.error or "") == kind:
                role = str(state.failed_role).capitalize()
                return Outcome.AGENT_FAILED, (f"the {role} failed twice in a row ({kind}): "
                                              f"{' '.join((state.error or '').split())[:300]}")
        if self.options.max_cost is not None:
            for run in state.agent_runs.values():
                name = run.get("agent") if isinstance(run, dict) else None
                if isinstance(name, str) and run.get("cost_usd") is None and name not in self.uncosted:
                    # Said, not assumed: a limit that cannot see an agent's spending does not cap it.
                    self.uncosted.add(name)
                    self.note(f"--max-cost: {name} reports no cost, so its runs are not counted toward the limit")
        return None

    def _turn(self, lifecycle: TurnLifecycle, checkout: Path, number: int, action: str,
              mode: TurnMode | None) -> TurnRecord:
        self._check_store(lifecycle, checkout)
        active = lifecycle.begin_turn(mode)
        self.turn, self.phase = number, "starting"
        self.emit(TurnStarted(number, active.mode, action))
        briefing = TurnBriefing(self.config, lifecycle, checkout, number, active.mode, self.options.turn_timeout,
                                self.git, agent_name(self.player) if self.options.continue_session else None)
        runs = AgentRuns()
        self.seen, self.head_now = frozenset(), None
        error: str | None = None
        failed_role: str | None = None
        try:
            self._record_reports(lifecycle, number, action, briefing, runs)
        except (AgentError, InputError) as exc:
            # An agent that fails, or a report that is invalid, is still a turn: decision "error",
            # labelled with the role whose agent or report it was.
            error = _agent_reason(exc)
            failed_role = self.phase if self.phase in ("player", "coach") else None
            log.warning("turn %d of %s: %s", number, self.task_id, error)
        finally:
            for text in runs.notes:
                self.note(f"turn {number}: {text}")
        self._check_store(lifecycle, checkout)  # the agents ran in the checkout: a symlink they left is refused
        self._keep_recorded_history(lifecycle, number)
        task = lifecycle.task
        run = TurnRun(error, failed_role, runs.runs, self.worktree_rel if self.managed_worktree else None,
                      self.base_branch)
        return lifecycle.complete_turn(run, gate_profile=self.config.gate_profile(task.task_type, task.complexity))

    @staticmethod
    def _check_store(lifecycle: TurnLifecycle, checkout: Path) -> None:
        """Refuse a store an agent replaced by a symlink leaving the checkout (``.guardkit`` or
        ``.guardkit/autobuild/TASK``): the turn's reports would be written, and committed, elsewhere."""
        check_state_home(checkout)
        resolve_inside(checkout, lifecycle.store.directory)  # realpath: a link above it counts too

    def _keep_recorded_history(self, lifecycle: TurnLifecycle, number: int) -> None:
        """Undo an agent's edit to the recorded turns or criteria before the turn is written and committed."""
        changed = self.restored = restore_recorded_history(lifecycle.task, own_checkout=self.managed_worktree)
        if changed is not None:
            self.note(f"turn {number}: an agent changed the recorded history in {lifecycle.task.path.name} "
                      f"({changed}); restored what the loop recorded")

    def _record_reports(self, lifecycle: TurnLifecycle, number: int, action: str, briefing: TurnBriefing,
                        runs: AgentRuns) -> None:
        """Record the turn's two reports: each agent's, or the one an interrupted run left on disk."""
        if action == "complete_from_reports":
            self.emit(ReportsReused(number, ("player", "coach")))
            return
        self.phase = "player"  # from here a failure is the Player's (its briefing included)
        player = briefing.player_request()
        if action == "rerun_coach" or (
                action == "rerun_turn" and self._adopt_report(lifecycle, "player", player.report_file, number)):
            self.emit(ReportsReused(number, ("player",)))
            recorded = lifecycle.store.read_player(number)
        else:
            action = "run_turn"  # a fresh Player report: an earlier Coach report no longer applies
            self._agent_starts(number, "player")
            report = runs.run("player", self.player, player)
            if self.git is not None:  # the files the turn changed are git's to say, not the agent's
                briefing.changes = worktree_changes(self.git, briefing.checkout)
                self.seen = frozenset(entry.path for entry in briefing.changes)
                # The task file is the loop's (a copy it made in a worktree is not the Player's work).
                report = with_files_from_git(report, briefing.changes,
                                             exclude=_inside(lifecycle.task.path, briefing.checkout))
            recorded = lifecycle.record_player(report)
            crash_point("loop.after_player")
        self.phase = "coach"
        coach = briefing.coach_request(player, recorded.headline if recorded is not None else "")
        rerun = action in ("rerun_turn", "rerun_coach")
        if rerun and self.coach_changed is not None:  # its report, if it left one, judged what it had changed
            raise AgentError(self.coach_changed, task_id=self.task_id, turn=number)
        if rerun and self._adopt_report(lifecycle, "coach", coach.report_file, number):
            self.emit(ReportsReused(number, ("coach",)))
        else:
            self._agent_starts(number, "coach")
            # The worktree as the Player left it is the turn's: held while the Coach runs, put back after.
            watch = ReadOnlyWatch(self.git, briefing.checkout, lifecycle.store.directory, self.task_id)
            report = watch.run(lambda: runs.run("coach", self.coach, coach), note=self.note, turn=number)
            watch.check(coach)
            self.head_now = watch.restored.head_now if watch.restored is not None else None
            decision = lifecycle.record_coach(report)
            for line in describe_verdict_words(decision.extra.get(VERDICT_WORDS_KEY) or []):
                self.note(f"turn {number}: Coach verdict {line}")

    def _agent_starts(self, number: int, role: str) -> None:
        self.phase = role
        self.emit(AgentStarted(number, role))

    def _adopt_report(self, lifecycle: TurnLifecycle, role: str, raw: Path, number: int) -> bool:
        said = adopt_report(lifecycle, role, raw, number)
        if said:
            self.note(said)
        return said is not None

    def _after_turn(self, lifecycle: TurnLifecycle, record: TurnRecord) -> None:
        commit = self.commits.commit(lifecycle, record, restored=self.restored, seen=self.seen,
                                     head=self.head_now) if self.commits is not None else None
        if commit is not None:
            self.result.commits.append(commit)
        self.phase = "recorded"
        self.emit(TurnRecorded(record, commit))

    def _finish(self, lifecycle: TurnLifecycle, outcome: Outcome, reason: str) -> None:
        lifecycle.mark_outcome(outcome, reason=reason)
        self.result.outcome, self.result.reason = outcome, reason


def _inside(path: Path, root: Path) -> tuple[str, ...]:
    """``path`` relative to ``root`` (posix), as git names it; nothing when it lies outside."""
    path, root = path.resolve(), root.resolve()
    return (path.relative_to(root).as_posix(),) if path.is_relative_to(root) else ()


def _agent_reason(exc: GuardkitStateError) -> str:
    if isinstance(exc, AgentError):
        return exc.message
    return f"invalid report: {exc}"


__all__ = ["LoopInterrupted", "LoopOptions", "LoopResult", "run_task_loop"]
