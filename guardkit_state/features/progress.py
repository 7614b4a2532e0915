"""Where each task of a feature stands, read from the files alone: its task file and git.

The plan file reports progress; it does not decide it. What a run does with a task is decided
from what a kill cannot make inconsistent: the task's own copy of its task file (in its worktree,
else on its branch), its turn commits (those its loop made: :mod:`guardkit_state.git.turn_ledger`),
and the feature branch's merge commits (found by their ``Guardkit-Task`` line). So a resumed run
never re-runs an approved task, never merges one twice, and continues an interrupted one at its
turn.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from guardkit_state.errors import GuardkitStateError
from guardkit_state.git.commits import find_turn_commit
from guardkit_state.git.merge import find_task_merge, is_ancestor, unmerged_tip, unmerged_tips
from guardkit_state.git.repo import GitRepo
from guardkit_state.model import Outcome
from guardkit_state.store import reads
from guardkit_state.store.layout import BRANCH_PREFIX, artifacts_dir, branch_for
from guardkit_state.store.turn_files import TurnStore
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.taskfile.resolve import resolve_task
from guardkit_state.taskfile.task_facts import remembered
from guardkit_state.turns.checks import closed_reason
from guardkit_state.turns.resume import resume_point
from guardkit_state.turns.sent_back import gate_words, pending_send_back

#: ``new``: never started; ``resume``: started and not ended (or an approval still uncommitted);
#: ``approved``: approved and committed, not yet merged; ``merged``: on the feature branch;
#: ``failed``: ended without approval; ``closed``: finished before this feature ran it (its task
#: file says completed, cancelled ... or approved, and it has no branch of its own).
Phase = Literal["new", "resume", "approved", "merged", "failed", "closed"]
#: The outcomes of a loop that ended without approval: a failed task, unless more turns are allowed.
#: (An agent failing the same way twice, or ``--max-cost``: ``feature-build TASK --resume`` goes on
#: with the task once that is fixed or raised.)
ENDED_UNAPPROVED = (Outcome.MAX_TURNS_EXCEEDED.value, Outcome.UNRECOVERABLE_STALL.value, Outcome.AGENT_FAILED.value,
                    Outcome.COST_LIMIT_REACHED.value)


@dataclass(frozen=True)
class TaskState:
    """One task as its files say: the phase, and its turns so far.

    ``resume`` says how its loop would start (from its files, or afresh); ``reason`` explains an
    ended loop; ``merge_commit`` is the merge on the feature branch (None when merged by hand).
    """

    task_id: str
    phase: Phase
    turns: int = 0
    decisions: tuple[str, ...] = ()
    outcome: str | None = None
    reason: str = ""
    merge_commit: str | None = None
    resume: bool = False

    @property
    def runs(self) -> bool:
        """True when the task's loop has to run (again)."""
        return self.phase in ("new", "resume")


@dataclass(frozen=True)
class FeatureGit:
    """The git side of a feature run: the main checkout, the feature branch and the worktrees folder.

    ``ahead``: task files read ahead (:func:`files_read_ahead`), by the commit and path they were read
    at; a reading finds its task's copy there while the task's branch is at that commit.
    """

    main: GitRepo
    root: Path
    feature_branch: str
    feature_worktree: Path
    worktrees: Path
    ahead: dict[tuple[str, str], bytes] = field(default_factory=dict, compare=False, repr=False)
    #: With files read ahead: the task branches the feature branch did not reach then (ref -> tip).
    unmerged: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def task_worktree(self, task_id: str) -> Path:
        return self.worktrees / task_id


def read_task_state(git: FeatureGit, task_id: str, *, max_turns: int | None = None,
                    known_unmerged: bool = False, merges: Mapping[str, str] | None = None,
                    has_branch: bool | None = None, tip_read: str | None = None) -> TaskState:
    """Where ``task_id`` stands (see the module docstring); reads only, never writes.

    ``max_turns`` is the run's turn budget: a task that used up a smaller one may go on.
    ``known_unmerged``: the caller knows no merge of the task is on the feature branch (its loop
    has just run, and only the caller merges), so the feature branch's history is not searched.
    ``merges``: the feature branch's merges as :func:`~guardkit_state.git.merge.task_merges` found
    them, when the caller reads several tasks (one search of its history for all).
    ``has_branch``: whether the task's branch exists, when the caller has just read it (None: git is asked);
    ``tip_read``: its tip as the caller has just read it (with files read ahead: a branch listed
    unmerged then at that very tip is not asked again).
    """
    branch = branch_for(task_id)
    merge = (None if known_unmerged else merges.get(task_id) if merges is not None
             else find_task_merge(git.main, task_id, git.feature_branch))
    has_branch = git.main.branch_exists(branch) if has_branch is None else has_branch
    worktree = git.task_worktree(task_id)
    own = worktree.is_dir() or has_branch
    # Once merged, the feature branch holds the task's file too (its own branch may be pruned since).
    source = branch if has_branch else git.feature_branch if merge is not None else None
    # With files read ahead, the question an approved task's reading asks anyway (is its branch merged?)
    # is asked first: its answer, the branch's tip, finds the task's copy among them.
    early = bool(git.ahead) and has_branch and merge is None and not known_unmerged and not worktree.is_dir()
    listed = git.unmerged.get(f"refs/heads/{branch}")
    tip = (listed if listed is not None and listed == tip_read
           else unmerged_tip(git.main, branch, git.feature_branch)) if early else None
    copy = _task_copy(git, task_id, worktree if worktree.is_dir() else None, source, tip)
    turns, decisions, outcome = _history(copy)
    if merge is not None:
        return TaskState(task_id, "merged", turns, decisions, "approved", "merged into the feature branch", merge)
    if not own:
        return _not_started(task_id, copy, turns, decisions)
    sent_back = pending_send_back(copy.state) if copy is not None else None
    approved = sent_back is None and (outcome == Outcome.APPROVED.value or decisions[-1:] == ("approve",))
    if approved:
        # Usually its branch is not merged yet: one git call then says so and gives its tip, which is
        # the approved turn's commit when its ledger says so (no merge-base asked for either). Else
        # (merged by hand, a commit on top, a branch unknown) each is asked as it always was.
        if not early and not known_unmerged:
            tip = unmerged_tip(git.main, branch, git.feature_branch)
        if find_turn_commit(git.main, task_id, turns, rev=branch, tip=tip) is None:
            # Approved in its files but killed before that turn's commit: the loop commits it.
            return TaskState(task_id, "resume", turns, decisions, "approved", "approval not committed yet", None, True)
        # (A branch just run holds its approved turn's commit, which no merge has taken yet.)
        if tip is None and not known_unmerged and is_ancestor(git.main, branch, git.feature_branch):
            return TaskState(task_id, "merged", turns, decisions, "approved", "merged into the feature branch")
        return TaskState(task_id, "approved", turns, decisions, "approved", f"approved by the Coach in turn {turns}")
    more_turns = outcome == Outcome.MAX_TURNS_EXCEEDED.value and max_turns is not None and max_turns > turns
    if outcome in ENDED_UNAPPROVED and not more_turns:
        return TaskState(task_id, "failed", turns, decisions, outcome, _ended_reason(copy, outcome, turns))
    if sent_back is not None:  # its approval broke the feature's gate: one more turn, with the gate's output
        return TaskState(task_id, "resume", turns, decisions, outcome, f"sent back by the merge queue: its merge "
                         f"broke the gate ({gate_words(sent_back)})", None, True)
    resume = turns > 0 or _turn_begun(copy, worktree)
    return TaskState(task_id, "resume", turns, decisions, outcome, "interrupted before it ended", None, resume)


def unstarted_state(root: Path, task_id: str) -> TaskState:
    """Where ``task_id`` stands when git holds no run of it (no merge, branch or worktree of its own):
    what :func:`read_task_state` answers then, read from the main checkout's copy alone (no git
    call), and kept in the task-file cache while that copy is unchanged (``status`` asks it of
    every task of every plan)."""
    try:
        path = resolve_task(root, task_id).path
    except GuardkitStateError:
        return _not_started(task_id, None, 0, ())

    def read() -> dict[str, Any]:
        copy = None
        with contextlib.suppress(GuardkitStateError):
            copy = TaskFile.load(path)
        turns, decisions, _ = _history(copy)
        state = _not_started(task_id, copy, turns, decisions)
        return {"phase": state.phase, "turns": state.turns, "decisions": list(state.decisions),
                "reason": state.reason, "resume": state.resume}

    known = remembered(path, root, "unstarted", read)
    return TaskState(task_id, known["phase"], known["turns"], tuple(known["decisions"]), None, known["reason"],
                     None, known["resume"])


def _not_started(task_id: str, copy: TaskFile | None, turns: int, decisions: tuple[str, ...]) -> TaskState:
    """A task without a worktree or branch of its own: closed before this run, or new."""
    if copy is not None and closed_reason(copy) is not None:
        return TaskState(task_id, "closed", turns, decisions, None, f"{task_id} {closed_reason(copy)}")
    # Turns recorded in the main checkout (a loop run there without a worktree) are continued.
    return TaskState(task_id, "new", turns, decisions, None, "", None, turns > 0)


def _history(copy: TaskFile | None) -> tuple[int, tuple[str, ...], str | None]:
    state = copy.state if copy is not None else None
    if state is None:
        return 0, (), None
    outcome = state.extra.get("outcome")
    return len(state.turns), tuple(t.decision for t in state.turns), outcome if isinstance(outcome, str) else None


def _ended_reason(copy: TaskFile | None, outcome: str, turns: int) -> str:
    state = copy.state if copy is not None else None
    told = state.extra.get("outcome_reason") if state is not None else None
    if isinstance(told, str) and told.strip():
        return told
    if outcome == Outcome.MAX_TURNS_EXCEEDED.value:
        return f"the Coach did not approve within {turns} turns"
    return "the loop stalled (the same feedback, no progress)"


def _task_copy(git: FeatureGit, task_id: str, worktree: Path | None, branch: str | None,
               tip: str | None = None) -> TaskFile | None:
    """The task file that holds the task's live state: its worktree's copy, else its branch's (read
    ahead at ``tip``, the branch's commit, when it was), else the main checkout's (or None when none
    can be read: the loop itself then says why)."""
    with contextlib.suppress(GuardkitStateError):
        if worktree is not None:
            return TaskFile.load(resolve_task(worktree, task_id).path)
        main_copy = resolve_task(git.root, task_id).path
        if branch is not None:
            rel = main_copy.relative_to(git.root).as_posix()
            raw = git.ahead.get((tip, rel)) if tip is not None else None
            if raw is None:  # (one over the cap is refused unread, as a copy on disk: no state read)
                raw = git.main.blob(branch, rel)
            if raw is not None:
                return TaskFile.from_bytes(raw, git.root / rel)
        return TaskFile.load(main_copy)
    return None


@contextlib.contextmanager
def files_read_ahead(git: FeatureGit, tips: Mapping[str, str]) -> Iterator[None]:
    """The task files of ``tips`` (task id -> a commit of its branch) read in one git call (``cat-file
    --batch``) for the readings made inside: :func:`read_task_state` of a task whose branch is still at
    that commit finds its copy there instead of asking git for it (one whose branch moved since, or
    whose file is not there, asks as always). Forgotten on leaving."""
    specs: dict[tuple[str, str], str] = {}
    for task_id, tip in tips.items():
        with contextlib.suppress(GuardkitStateError, ValueError):
            rel = resolve_task(git.root, task_id).path.relative_to(git.root).as_posix()
            if "\n" not in rel:  # (one spec a line)
                specs[(tip, rel)] = f"{tip}:{rel}"
    found: list[tuple[str, str, bytes] | None] = []
    with contextlib.suppress(GuardkitStateError):  # unread: each reading asks git, as without
        # (A file over the cap is not read ahead: its reading asks git for it, which refuses it unread.)
        found = git.main.objects(list(specs.values()), max_bytes=reads.MAX_FILE_BYTES)
    git.ahead.update({key: obj[2] for key, obj in zip(specs, found, strict=False)
                      if obj is not None and obj[1] == "blob"})
    # Which of the branches the feature branch does not reach, asked once for all of them.
    git.unmerged.update(unmerged_tips(git.main, f"refs/heads/{BRANCH_PREFIX}", git.feature_branch))
    try:
        yield
    finally:
        git.ahead.clear()
        git.unmerged.clear()


def _turn_begun(copy: TaskFile | None, worktree: Path) -> bool:
    """True when turn 1's files exist in the worktree (an interrupted first turn: resume it)."""
    if copy is None or not worktree.is_dir():
        return False
    task_id = copy.task_id or worktree.name
    store = TurnStore(artifacts_dir(worktree, task_id), task_id)
    with contextlib.suppress(GuardkitStateError):
        return resume_point(copy, store).action != "start"
    return False


__all__ = ["ENDED_UNAPPROVED", "FeatureGit", "Phase", "TaskState", "files_read_ahead", "read_task_state",
           "unstarted_state"]
