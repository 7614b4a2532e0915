"""``feature-build FEAT-X``: the waves of a feature, their tasks in parallel, each isolated, merged in
plan order, resumable at any instant.

The feature runs on its own branch ``autobuild/FEAT-X`` (from the checked-out branch, or
``base_branch``) in its own worktree ``.guardkit/worktrees/FEAT-X``, never the user's checkout.
Wave after wave (:func:`~guardkit_state.plans.waves.plan_waves`), the wave's tasks run at the
same time (up to ``max_parallel``), each as the task loop in a process of its own, on
``autobuild/TASK-Y`` branched from the feature branch as it stands when the wave starts. When every
task of the wave has ended, the approved ones are merged into the feature branch in plan order, so
the result does not depend on which agent finished first. A conflict blocks that task (its branch
and worktree kept); a task that ends without approval lets its wave finish, then the feature stops
before the next wave, unless its failure does not stop the feature (``--no-stop-on-failure``,
:mod:`~guardkit_state.plans.failure_rules`): then the tasks that need it are skipped, the others run,
and the feature ends ``incomplete`` ("completed without" them).

Only this process writes the plan (:func:`~guardkit_state.plans.plan_writer.modify_plan`), and
the plan only reports: where each task stands is read from its files and git
(:mod:`guardkit_state.features.progress`), so ``resume=True`` after a kill at any instant ends
with the same tasks approved, the same turns, and one merge per task.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, replace
from pathlib import Path

from guardkit_state.agents.protocol import Agent
from guardkit_state.errors import GuardkitStateError, InputError
from guardkit_state.features.feature_checkout import FeatureCheckout
from guardkit_state.features.feature_events import (
    FeatureStarted,
    QueueStepped,
    TaskBlocked,
    TaskEnded,
    TaskMerged,
    TaskSentBack,
    TaskStarted,
    WaveStarted,
)
from guardkit_state.features.gate_verdicts import GateVerdicts
from guardkit_state.features.merge_queue import Approved, MergeQueue, SendBack
from guardkit_state.features.plan_report import Change, PlanReport
from guardkit_state.features.processes import ChildEnd, LoopJob, TaskPool
from guardkit_state.features.progress import FeatureGit, TaskState, read_task_state
from guardkit_state.features.result import FeatureInterrupted, FeatureResult, TaskOutcome, resume_command
from guardkit_state.features.send_back import write_send_back
from guardkit_state.git.checkouts import shared_lock_path
from guardkit_state.git.merge import MergeResult, merge_message
from guardkit_state.git.merge_driver_setup import unregistered_note
from guardkit_state.git.names import check_loop_ids
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.worktrees import check_base_branch
from guardkit_state.loop.command_line import build_argv
from guardkit_state.loop.events import EventSink, LoopEvent, Note, ignore
from guardkit_state.loop.run import LoopOptions
from guardkit_state.loop.session import interrupts_as_exceptions, logging_to
from guardkit_state.plans import plan_progress as progress_values
from guardkit_state.plans.failure_rules import skipped_by, skipped_reason, stops_on_failure
from guardkit_state.plans.merge_queue_log import QueueStep
from guardkit_state.plans.plan import FeaturePlan, find_plan, load_plan
from guardkit_state.plans.plan_checks import check_plan_identity, check_task_branches
from guardkit_state.plans.plan_splice import PlanUpdate
from guardkit_state.plans.smoke_gates import SmokeRun, read_smoke_gate
from guardkit_state.plans.waves import Waves, default_max_parallel, plan_waves
from guardkit_state.store.fsio import check_writable, crash_point
from guardkit_state.store.home import check_state_home
from guardkit_state.store.layout import branch_for, log_file
from guardkit_state.store.locks import exclusive_lock
from guardkit_state.taskfile.resolve import find_task
from guardkit_state.turns.checks import checked_max_turns, checked_timeout
from guardkit_state.turns.clock import utc_now
from guardkit_state.turns.spend import feature_spend, merged_task_spend

log = logging.getLogger("guardkit_state.features.build")

#: How long a run waits for the feature's lock (held a moment longer by the stopping task loops of
#: a run that was just killed).
LOCK_WAIT = 5.0


@dataclass
class FeatureOptions:
    """How to run a feature; refused at construction (:class:`InputError`) when a value cannot work.

    Attributes:
        max_parallel: task loops running at once (default: the plan's ``recommended_parallel``,
            capped by the machine's CPUs).
        max_turns: each task's turn budget (default: the task's own, else 5).
        resume: continue a feature run from its files.
        base_branch: what the feature branch starts from (default: the checked-out branch).
        turn_timeout: kill an agent running longer than this many seconds.
        max_cost: stop once the agents of the feature's tasks have reported this many USD: checked
            before each wave, and each task loop gets what is left (tasks of one wave running in
            parallel each get all of it, so a wave can go over by what its other tasks spend).
        stop_on_failure: False: a task that ends without approval does not stop the feature (the
            tasks that need it are skipped); True: every such task stops it; None: as the plan says
            (``stop_on_failure``, :mod:`~guardkit_state.plans.failure_rules`), else True.
    """

    max_parallel: int | None = None
    max_turns: int | None = None
    resume: bool = False
    base_branch: str | None = None
    turn_timeout: float | None = None
    max_cost: float | None = None
    continue_session: bool = False
    stop_on_failure: bool | None = None
    #: The command line that started the run (without the program name; the CLI passes its own):
    #: the "continue with" lines repeat it. Default: built from the agents' commands.
    argv: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        value = self.max_parallel
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise InputError(f"max_parallel must be a whole number of at least 1, not {value!r}")
        checked_max_turns(self.max_turns)
        checked_timeout(self.turn_timeout)


def build_feature(repo_root: Path | str, feature: str, player: Agent, coach: Agent,
                  options: FeatureOptions | None = None, *, on_event: EventSink | None = None) -> FeatureResult:
    """Run (or resume) the feature ``feature`` (an id ``FEAT-X`` or a plan file's path); see the module.

    ``on_event`` receives the run's progress (:mod:`guardkit_state.features.feature_events`) and each
    task loop's own events (:mod:`guardkit_state.loop.events`), ``task_id`` naming the task: the one
    place a caller plugs in what should follow a recorded turn (the CLI: the index).

    Returns the :class:`FeatureResult`: ``status`` ``completed`` (exit code 0) or ``stopped`` (1,
    with the reason: a task not approved, a merge conflict, a loop that died).

    Raises:
        FeatureNotFoundError, ParseError, SchemaError, WaveError, TaskNotFoundError: the plan or a
            task of it cannot be used; raised before anything starts.
        InputError: no git repository, or an unknown ``base_branch``.
        ResumeError: ``resume`` with nothing to resume, or a fresh start of a feature already started.
        LockedError: another run of this feature is under way.
        FeatureInterrupted: Ctrl+C / SIGTERM / SIGHUP; every task loop stopped with its state saved.
    """
    options = options or FeatureOptions()
    root = Path(repo_root).resolve()
    check_state_home(root)  # a .guardkit file, or a symlink leaving the repository
    plan_path = find_plan(root, feature)
    plan = load_plan(plan_path)
    check_writable(plan_path)  # the run reports into it: a plan it cannot write is refused before anything is made
    check_plan_identity(plan, plan_path)
    waves = plan_waves(plan)
    read_smoke_gate(plan)  # a gate that cannot run is said now, not after the first wave
    for task in plan.tasks:
        find_task(root, task.id)  # a missing task file is said now, not halfway through the feature
    git = GitRepo.discover(root)
    if git is None:
        raise InputError(f"{root} is not a git repository (or git is not installed): a feature's tasks run "
                         "in worktrees and are merged into a feature branch", path=root)
    check_loop_ids(root, [plan.feature_id, *(task.id for task in plan.tasks)])
    check_task_branches(git, plan, plan_path)
    if options.base_branch is not None:
        check_base_branch(git, options.base_branch)
    run = _FeatureRun(root, git, plan_path, plan, waves, (player, coach), options, on_event or ignore)
    return run.start()


class _FeatureRun:
    """One invocation of a feature run (an object so each step stays a small method)."""

    fgit: FeatureGit  # set by _prepare(), which every other step follows
    verdicts: GateVerdicts  # likewise
    #: The feature branch and worktree (merges happen there): a fresh run checks it out as its first tasks start.
    checkout: FeatureCheckout

    def __init__(self, root: Path, git: GitRepo, plan_path: Path, plan: FeaturePlan, waves: Waves,
                 agents: tuple[Agent, Agent], options: FeatureOptions, emit: EventSink) -> None:
        self.root, self.git, self.plan_path, self.plan, self.waves = root, git, plan_path, plan, waves
        self.player, self.coach = agents
        self.options = options
        self.emit = emit
        self.feature_id = plan.feature_id
        self.argv = options.argv if options.argv is not None else build_argv(plan.feature_id, *agents)
        self.branch = branch_for(plan.feature_id)
        max_parallel = options.max_parallel or default_max_parallel(plan)
        self.result = FeatureResult(plan.feature_id, plan_path, self.branch, None, waves.to_lists(), max_parallel)
        self.result.tasks = [TaskOutcome(task.id, waves.wave_of(task.id)) for task in plan.tasks]
        self.states: dict[str, TaskState] = {}
        self.gate = read_smoke_gate(plan)
        #: Set when a smoke gate stopped the feature (the plan then says failed).
        self.gate_failed = False
        self.gate_runs: dict[int, int] = {}  # per wave: the gate verdicts its queue took (numbered)
        self.pool = TaskPool(max_parallel, self._task_event)
        self.report = PlanReport(plan_path)  # what the run writes into its plan
        self.passed_over: list[str] = []  # failed tasks whose failure does not stop the feature

    def note(self, text: str) -> None:
        self.result.notes.append(text)
        log.info("%s: %s", self.feature_id, text)
        self.emit(Note(text))

    def start(self) -> FeatureResult:
        with logging_to(log_file(self.root)), interrupts_as_exceptions():
            # The children of a run killed a moment ago still hold this lock while they save their state.
            with exclusive_lock(shared_lock_path(self.root, self.feature_id), wait=LOCK_WAIT,
                                holder=f"feature {self.feature_id}"):
                try:
                    self._run()
                except KeyboardInterrupt as stop:
                    self._interrupted()
                    raise FeatureInterrupted(self.result, argv=self.argv) from stop
                except BaseException:
                    self.pool.stop()  # no task loop outlives the run that started it
                    with contextlib.suppress(GuardkitStateError):
                        self._flush()  # what the run did before it failed still shows in the plan
                    raise
        return self.result

    # -- setup -----------------------------------------------------------------------------
    def _run(self) -> None:
        self._prepare()
        # Where every task stands, from its files: a task's phase changes only in its own wave.
        for outcome in self.result.tasks:
            self._settle(read_task_state(self.fgit, outcome.task_id, max_turns=self.options.max_turns))
        self._write(lambda plan: progress_values.run_started(
            plan, worktree=str(self.fgit.feature_worktree), resumed=self.options.resume, now=utc_now()))
        self._reconcile()
        for number, wave in enumerate(self.waves, start=1):
            if self._over_budget():
                self.result.status = "stopped"
                break
            if not self._wave(number, wave):
                self.result.status = "stopped"
                break
            crash_point("feature.between_waves")
        else:
            self.result.ended(self.passed_over)
        self._feature_worktree()  # a run that ran and merged no task still leaves its worktree (else: a no-op)
        completed = self.result.status == "completed"
        failed = self.gate_failed or any(o.status in ("failed", "blocked") for o in self.result.tasks)
        self._write(lambda _plan: progress_values.run_ended(completed=completed, failed=failed,
                                                            waves=len(self.waves), now=utc_now()), now=True)

    def _prepare(self) -> None:
        """Fresh start or resume (checked under the lock), the feature worktree, repairs of a kill."""
        self.checkout = FeatureCheckout.prepare(self.git, self.feature_id, resume=self.options.resume,
                                                base_branch=self.options.base_branch, argv=self.argv,
                                                plan_path=self.plan_path,
                                                task_ids=[task.task_id for task in self.result.tasks], note=self.note)
        self.verdicts = GateVerdicts(self.git, self.feature_id)  # the merge queue's, read under the lock
        if not self.options.resume and self.verdicts.path.exists():
            self.verdicts.reset("a fresh start of the feature")  # an earlier run's are not this one's
        self.result.worktree = path = self.checkout.path
        self.fgit = FeatureGit(self.git, self.root, self.branch, path, self.checkout.worktrees)
        self.emit(FeatureStarted(self.feature_id, self.branch, path, self.waves.groups,
                                 self.pool.max_parallel, self.options.resume))

    def _feature_worktree(self) -> GitRepo:
        return self.checkout.repo()  # checked out on first need in a fresh run

    # -- a wave ----------------------------------------------------------------------------
    def _wave(self, number: int, task_ids: tuple[str, ...]) -> bool:
        """Run the wave's unfinished tasks, merge the approved ones through the queue, run again the
        ones it sent back, until none is; False when the feature stops here."""
        skipped = self._skip_dependents(task_ids)
        to_run = tuple(task_id for task_id in task_ids if self.states[task_id].runs)
        phases = tuple(self.states[task_id].phase for task_id in task_ids)
        self.emit(WaveStarted(number, len(self.waves), task_ids, to_run, phases))
        for task_id in skipped:
            self.note(f"{task_id} {self.result.task(task_id).reason}")
        self._write(lambda _plan: PlanUpdate(execution={"current_wave": number, "last_updated": utc_now()}))
        while True:
            if to_run:
                self.pool.run([self._job(self.states[task_id]) for task_id in to_run], starting=self._task_starting,
                              started=self._task_started, ended=self._task_ended)
            ready: list[TaskState] = []
            for task_id in task_ids:
                state = self.states[task_id]
                if state.runs:
                    if self.result.task(task_id).status == "failed":
                        continue  # its loop ended in an error: a sibling's approved work is still merged
                    break  # not ended: the tasks after it wait, so merges keep the plan's order
                if state.phase == "approved" and self.result.task(task_id).status != "blocked":
                    ready.append(state)  # (a conflict blocked it: it waits for the user, not the queue)
            if ready and not self._land(number, ready):
                return False
            # A task the queue sent back runs again (one more turn); its new approval re-enters the queue.
            to_run = tuple(state.task_id for state in ready if self.states[state.task_id].runs)
            if not to_run:
                return self._wave_done(number, task_ids)

    def _spent(self) -> float:
        return feature_spend(self.fgit.worktrees, (task.task_id for task in self.result.tasks),
                             self.fgit.feature_worktree)

    def _over_budget(self) -> bool:
        """True (the reason said) when the feature's agents have spent ``--max-cost`` already."""
        limit = self.options.max_cost
        if limit is None:
            return False
        spent = self._spent()
        if spent < limit:
            return False
        self.result.reason = f"--max-cost reached: ${spent:.4f} spent on {self.feature_id} (limit ${limit:g})"
        return True

    def _job(self, state: TaskState) -> LoopJob:
        # The task's loop counts its own turns and is told what the others spent, once each (the limit
        # less the feature's spend would count the task's own earlier turns twice on --resume).
        before = 0.0 if self.options.max_cost is None else max(
            self._spent() - merged_task_spend(self.fgit.worktrees, state.task_id, self.fgit.feature_worktree), 0.0)
        options = LoopOptions(max_turns=self.options.max_turns, resume=state.resume, base_branch=self.branch,
                              turn_timeout=self.options.turn_timeout, max_cost=self.options.max_cost,
                              cost_before=before, continue_session=self.options.continue_session)
        return LoopJob(state.task_id, self.root, self.player, self.coach, options)

    def _task_starting(self, job: LoopJob) -> None:
        outcome = self.result.task(job.task_id)
        outcome.ran, outcome.resumed = True, job.options.resume
        self._write(lambda plan: PlanUpdate(tasks={job.task_id: progress_values.task_started(
            job.task_id, plan, now=utc_now())}))

    def _task_started(self, job: LoopJob, pid: int | None) -> None:
        self.emit(TaskStarted(job.task_id, job.options.resume, pid))
        # Once the loop's process exists, the run's own work overlaps the loop's start-up: the feature
        # worktree (checked out before the plan is written, so the checkout it starts from shows
        # only the user's changes) and the plan write.
        self._feature_worktree()
        self._flush()

    def _task_event(self, task_id: str, event: LoopEvent | Note) -> None:
        self.emit(replace(event, task_id=task_id))

    def _task_ended(self, end: ChildEnd) -> None:
        """A child is reaped: where its task stands is read from its files, then written to the plan."""
        # Its loop has just run, so it was not merged (only this process merges, under the lock).
        state = read_task_state(self.fgit, end.task_id, max_turns=self.options.max_turns, known_unmerged=True)
        outcome = self._settle(state, end)
        self.emit(TaskEnded(outcome))
        # One task's end shows while the others still run; the last one's lands with what follows
        # (the merges, the next wave's start or the run's end), a moment later.
        self._write_task(end.task_id, now=bool(self.pool.running))

    def _settle(self, state: TaskState, end: ChildEnd | None = None) -> TaskOutcome:
        """Record ``state`` (and how its process ended) in the task's outcome."""
        self.states[state.task_id] = state
        outcome = self.result.task(state.task_id)
        outcome.turns, outcome.decisions, outcome.reason = state.turns, state.decisions, state.reason
        if state.phase == "merged":
            outcome.status, outcome.outcome, outcome.merge_commit = "completed", "approved", state.merge_commit
        elif state.phase == "approved":
            outcome.status, outcome.outcome = "in_progress", "approved"
        elif state.phase == "failed":
            outcome.status, outcome.outcome = "failed", state.outcome
        elif state.phase == "closed":
            outcome.status = "skipped"
        elif end is not None:
            error = end.kind in ("error", "done")
            outcome.status, outcome.outcome = ("failed", "error") if error else ("in_progress", "interrupted")
            outcome.reason = {"error": end.text, "done": f"{end.text}, but its files say it did not end",
                              "interrupted": f"{end.text}; its state is saved",
                              "died": f"{end.text} before it ended"}[end.kind]
        return outcome

    def _land(self, number: int, ready: list[TaskState]) -> bool:
        """Merge ``ready`` (approved, plan order) through the merge queue; False when its gate halts
        the feature (it fails on the feature branch before these merges too)."""
        def message(task: Approved) -> str:
            return merge_message(self.feature_id, task.task_id, branch=branch_for(task.task_id), target=self.branch,
                                 wave=number, summary=f"{task.task_id} approved in {task.turns} turn(s).")
        queue = MergeQueue(self._feature_worktree(), self.branch, number, self.gate, self.verdicts, message=message,
                           send_back=self._send_back, on_step=self._queue_step,
                           on_merged=lambda task, sha: self._merged(self.states[task], sha),
                           runs_before=self.gate_runs.get(number, 0), note=self.note)
        landing = queue.land([Approved(s.task_id, self.git.text("rev-parse", f"refs/heads/{branch_for(s.task_id)}"),
                                       s.turns) for s in ready])
        self.gate_runs[number] = queue.number
        for state in ready:
            if state.task_id in landing.blocked:
                self._blocked(state.task_id, landing.blocked[state.task_id])
        if landing.halted is None:
            return True
        self._halted(number, landing.halted)
        return False

    def _merged(self, state: TaskState, sha: str) -> None:
        task_id = state.task_id
        self.states[task_id] = replace(state, phase="merged", merge_commit=sha)
        outcome = self.result.task(task_id)
        outcome.status, outcome.merge_commit = "completed", sha
        outcome.reason = f"approved in {state.turns} turn(s) and merged"
        self.emit(TaskMerged(task_id, branch_for(task_id), sha, False))
        self._write_task(task_id)

    def _blocked(self, task_id: str, merged: MergeResult) -> None:
        outcome = self.result.task(task_id)
        outcome.status, outcome.conflicts = "blocked", merged.conflicts
        outcome.reason = (f"merge conflict in {', '.join(merged.conflicts)}" if merged.conflicts
                          else f"the merge was refused: {merged.error}")
        note = unregistered_note(self._feature_worktree(), merged.conflicts)
        if note is not None:  # git merged loop state as text: the driver would have merged it
            outcome.reason += f" ({note})"
        self.emit(TaskBlocked(task_id, branch_for(task_id), merged.conflicts, merged.error))
        self._write_task(task_id)

    def _send_back(self, sent: SendBack) -> bool:
        """The queue found ``sent.task`` breaking the gate: its history says so (its branch), then
        where it stands is read again (one more turn, or failed when it has none left)."""
        assert self.gate is not None  # only a gated queue sends back
        written = write_send_back(self.git, sent, feature_branch=self.branch, gate=self.gate,
                                  max_turns=self.options.max_turns, note=self.note)
        state = read_task_state(self.fgit, sent.task.task_id, max_turns=self.options.max_turns, known_unmerged=True)
        outcome = self._settle(state)
        if state.runs:  # no longer approved: it takes one more turn
            outcome.status, outcome.outcome = "in_progress", None
        self.emit(TaskSentBack(sent.task.task_id, sent.wave, sent.task.turns, written.final, sent.runs))
        self._write_task(sent.task.task_id)
        return written.final

    def _queue_step(self, step: QueueStep) -> None:
        self.emit(QueueStepped(step))
        self.report.queue_step(step)

    def _halted(self, number: int, run: SmokeRun) -> None:
        """The gate fails on the feature branch before the wave's merges too: the feature stops here,
        its worktree and branch kept for the user to look at; --resume runs the queue again."""
        self.gate_failed = True
        worktree = self._feature_worktree().root
        tail = " ".join(run.output.split())[-300:]
        self.result.reason = (f"{run.describe()} on {self.branch} before wave {number}'s merges too, so no task of it "
                              f"breaks it; the feature stops at wave {number} (its worktree {worktree} and branch "
                              f"{self.branch} are kept){': ' + tail if tail else ''}; once fixed, continue with "
                              f"{resume_command(self.feature_id, self.argv)}")

    def _wave_done(self, number: int, task_ids: tuple[str, ...]) -> bool:
        left = [self.result.task(t) for t in task_ids if self.states[t].phase not in ("merged", "closed")]
        stops = [o for o in left if o.status != "failed"
                 or stops_on_failure(self.plan, o.task_id, self.options.stop_on_failure)]
        if not stops:  # all merged or closed, or failed without stopping the feature (what needs them is skipped)
            self.passed_over += [o.task_id for o in left if o.task_id not in self.passed_over]
            self._write(lambda plan: progress_values.wave_completed(plan, number, now=utc_now()))
            return True
        first = stops[0]
        after = f"; the feature stops before wave {number + 1}" if number < len(self.waves) else ""
        if first.status == "blocked":
            why = (f"{first.task_id} is blocked: {first.reason}; its branch {branch_for(first.task_id)} and "
                   f"worktree are kept (merge it into {self.branch} by hand, then --resume)")
        elif first.status == "failed":
            why = f"{first.task_id} ended without approval ({first.outcome}): {first.reason}"
        else:
            why = (f"{first.task_id} did not end: {first.reason}{after}; continue with "
                   f"{resume_command(self.feature_id, self.argv)}")
            after = ""
        self.result.reason = why + after
        return False

    def _skip_dependents(self, task_ids: tuple[str, ...]) -> list[str]:
        """The wave's tasks that need a failed task (one that did not stop the feature) are skipped."""
        needs = skipped_by(self.passed_over, self.plan)
        skipped = [task_id for task_id in task_ids if task_id in needs and self.states[task_id].runs]
        for task_id in skipped:
            self.states[task_id] = replace(self.states[task_id], phase="closed")
            outcome = self.result.task(task_id)
            outcome.status, outcome.outcome = "skipped", "dependency_failed"
            outcome.reason = skipped_reason(needs[task_id])
            self._write_task(task_id)
        return skipped

    # -- interruption and the plan -----------------------------------------------------------
    def _interrupted(self) -> None:
        """Stop every running loop (state saved), then record the tasks that ended meanwhile."""
        self.result.status = "interrupted"
        ends = self.pool.stop()
        for end in ends:
            with contextlib.suppress(KeyboardInterrupt, GuardkitStateError):
                self._task_ended(end)
        with contextlib.suppress(KeyboardInterrupt, GuardkitStateError):
            self._flush()
        self.result.reason = f"interrupted; continue with {resume_command(self.feature_id, self.argv)}"

    def _reconcile(self) -> None:
        ended = [o for o in self.result.tasks if self.states[o.task_id].phase in ("merged", "approved", "failed")]
        self.report.reconcile(self.result.tasks, ended)

    def _write_task(self, task_id: str, *, now: bool = False) -> None:
        self.report.task(self.result.task(task_id), self.result.tasks, now=now)

    def _write(self, change: Change, *, now: bool = False) -> None:
        self.report.add(change, now=now)  # see features/plan_report.py: when the plan is written

    def _flush(self) -> None:
        self.report.flush()


__all__ = ["FeatureOptions", "build_feature"]
