"""A breaking task sent back by the merge queue: written into its history, committed on its branch.

The merge queue (:mod:`guardkit_state.features.merge_queue`) found that merging the task breaks the
feature's gate. Its approval stays in its history; an entry is appended to
``autobuild_state.sent_back`` in its task file (:mod:`guardkit_state.turns.sent_back`): the turn it
answers, the gate's command, exit code and the tail of its output, the candidate and what was merged
before it. Its loop then goes on with one more turn whose context carries that under MUST ADDRESS.
A task with no turn left in its budget ends instead: ``outcome: max_turns_exceeded``, the reason
naming the gate and its output (a larger ``--max-turns`` lets it go on, as for any task out of turns).

The entry is committed alone on the task's branch (``guardkit: TASK-Y sent back by the merge queue``,
trailer ``Guardkit-Sent-Back``) in the task's worktree (re-created from the branch where it is gone),
and the passing commit the task was merged onto is merged into the branch: the next turn works on,
and can run the gate against, the work it broke the gate with. Written once: a send-back already
recorded for the same approval (a run killed after the commit) is not written again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from guardkit_state.features.merge_queue import SendBack
from guardkit_state.git.checkouts import shared_lock_path
from guardkit_state.git.merge import is_ancestor, merge_in_progress
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.worktrees import WorktreeManager
from guardkit_state.model import Outcome
from guardkit_state.plans.smoke_gates import SmokeGate
from guardkit_state.store.layout import branch_for
from guardkit_state.store.locks import exclusive_lock
from guardkit_state.taskfile.document import TaskFile
from guardkit_state.taskfile.frontmatter import STATE_KEY
from guardkit_state.taskfile.resolve import resolve_task
from guardkit_state.taskfile.splice import StateUpdate
from guardkit_state.turns.checks import turn_budget
from guardkit_state.turns.clock import utc_now
from guardkit_state.turns.sent_back import SENT_BACK_KEY, gate_words, kept_output, sent_back_entries

TRAILER_SENT_BACK = "Guardkit-Sent-Back"
#: How long a send-back waits for the task's lock (its loop, just ended, may still be letting go).
LOCK_WAIT = 5.0


@dataclass(frozen=True)
class SendBackWritten:
    """What :func:`write_send_back` did: ``final`` when the task had no turn left (it ends failed)."""

    task_id: str
    final: bool
    entry: dict[str, object]
    tip: str | None


def write_send_back(repo: GitRepo, sent: SendBack, *, feature_branch: str, gate: SmokeGate,
                    max_turns: int | None, note: Callable[[str], None]) -> SendBackWritten:
    """Write ``sent`` into the task's history on its branch (see the module), under the task's lock
    (a loop of it started by hand meanwhile waits, or is refused, as for any second writer)."""
    with exclusive_lock(shared_lock_path(repo.root, sent.task.task_id), wait=LOCK_WAIT,
                        holder=f"the merge queue sending {sent.task.task_id} back"):
        return _write(repo, sent, feature_branch, gate, max_turns, note)


def _write(repo: GitRepo, sent: SendBack, feature_branch: str, gate: SmokeGate, max_turns: int | None,
           note: Callable[[str], None]) -> SendBackWritten:
    task_id = sent.task.task_id
    worktree = WorktreeManager(repo).create(task_id, feature_branch)
    task_repo = worktree.repo()
    path = resolve_task(worktree.path, task_id).path
    relative = str(path.relative_to(worktree.path))
    copy = TaskFile.load(path)
    turns = len(copy.state.turns) if copy.state is not None else 0
    final = turns >= turn_budget(copy, max_turns)
    earlier = [e for e in sent_back_entries(copy.state) if e.get("after_turn") == turns]
    entry = earlier[-1] if earlier else _entry(sent, feature_branch, gate, turns)
    if not earlier:
        scalars: dict[str, object] = {SENT_BACK_KEY: [*sent_back_entries(copy.state), entry],
                                      "last_updated": entry["at"]}
        if final:
            scalars |= {"outcome": Outcome.MAX_TURNS_EXCEEDED.value, "outcome_reason": _ended(entry, turns)}
        else:
            scalars["outcome"] = None
        status = Outcome.MAX_TURNS_EXCEEDED.task_status if final else "in_progress"
        copy.apply(StateUpdate(key=copy.state_key or STATE_KEY, block_scalars=scalars, top_level={"status": status}))
        message = (f"guardkit: {task_id} sent back by the merge queue: the gate {gate_words(entry)}\n\n"
                   f"Its approval in turn {turns} breaks the feature's gate merged into {feature_branch}"
                   f"{' after ' + ', '.join(sent.merged_before) if sent.merged_before else ''}; "
                   f"{'it has no turn left' if final else 'one more turn addresses it'}.\n\n"
                   f"{TRAILER_SENT_BACK}: {sent.wave}\n")
        task_repo.run("commit", "-q", "--no-verify", "-m", message, "--only", "--", relative,
                      pre=task_repo.identity_args())
    if not final:
        _take_in(task_repo, sent.base, task_id, feature_branch, note)
    return SendBackWritten(task_id, final, entry, task_repo.head_sha())


def _entry(sent: SendBack, feature_branch: str, gate: SmokeGate, turns: int) -> dict[str, object]:
    run = sent.run
    return {"after_turn": turns, "at": utc_now(), "wave": sent.wave, "feature_branch": feature_branch,
            "gate": gate.command.strip(), "exit_code": run.exit_code, "expected_exit": run.expected_exit,
            "outcome": run.outcome, "timeout": gate.timeout, "candidate": sent.candidate, "base": sent.base,
            "merged_before": list(sent.merged_before), "gate_runs": sent.runs, "output": kept_output(run.output)}


def _ended(entry: dict[str, object], turns: int) -> str:
    tail = " ".join(str(entry.get("output") or "").split())[-300:]
    return (f"approved in turn {turns}, but its merge breaks the feature's gate ({gate_words(entry)}) and it has no "
            f"turn left of {turns} (a larger --max-turns lets it go on){': ' + tail if tail else ''}")


def _take_in(repo: GitRepo, base: str, task_id: str, feature_branch: str, note: Callable[[str], None]) -> None:
    """Merge the passing commit ``base`` into the task's branch (once): what it broke the gate with."""
    if is_ancestor(repo, base, "HEAD"):
        return
    message = (f"guardkit: {task_id} takes in {feature_branch} at {base[:10]}\n\n"
               f"The work its merge broke the gate with, for its next turn.\n")
    status, _, stderr = repo.run("merge", "--no-ff", "--no-log", "--no-edit", "-q", "-m", message, base,
                                 check=False, pre=repo.identity_args())
    if status != 0:
        if merge_in_progress(repo):
            repo.run("merge", "--abort", check=False)
        note(f"{task_id}: {feature_branch} at {base[:10]} could not be merged into {branch_for(task_id)} "
             f"({' '.join(stderr.split())[:200]}); its next turn works without it")


__all__ = ["TRAILER_SENT_BACK", "SendBackWritten", "write_send_back"]
