"""The turn-commit ledgers of tasks built by several machines, carried through the remote.

A commit counts as a task's turn commit only when it is in the task's ledger
(:mod:`guardkit_state.git.turn_ledger`), which lives in one clone's git directory. A task continued
on another machine (its turns pushed by one worker, resumed or merged by another) needs those
entries there too, or its pushed turns would look like anyone's commits and be run again. So each
turn's push carries the ledger: ``refs/guardkit/ledgers/<FEAT>/<TASK>`` points at a commit on the
empty tree whose message lists the entries (``<sha> <turn> <decision> <mode>``) of the commits on
the pushed branch, pushed with the branch in one ``git push --atomic``; a worker fetching the
branch imports the entries it lacks into its own ledger. Only workers write these refs (under
their claims), as only the loop writes a local ledger; an entry is trusted only for a commit on
the task's branch (the ledger's own rule).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from guardkit_state.git import turn_ledger
from guardkit_state.remote.branches import RefRecord, list_refs, task_ref_place
from guardkit_state.store.safe_paths import validate_task_id

if TYPE_CHECKING:
    from guardkit_state.git.repo import GitRepo

LEDGERS_PREFIX = "refs/guardkit/ledgers"
_ENTRY = re.compile(r"^([0-9a-f]{40,64}) ([1-9][0-9]{0,5}) (\S+) (\S+)$", re.MULTILINE)


@dataclass
class RemoteLedgers:
    """One feature's ledgers on one remote, as a worker's clone carries them."""

    repo: GitRepo
    remote: str
    feature: str

    def ref(self, task: str) -> str:
        return f"{LEDGERS_PREFIX}/{validate_task_id(self.feature)}/{validate_task_id(task)}"

    def refspec(self, task: str, branch_sha: str) -> str:
        """A forced refspec pushing the ledger of the commits on ``branch_sha`` (with the branch)."""
        # The tip itself (a turn's commit, pushed as it is made) is on it without asking git.
        lines = [f"{e.sha} {e.turn} {e.decision} {e.mode}" for e in turn_ledger.entries(self.repo, task)
                 if e.sha == branch_sha
                 or self.repo.run("merge-base", "--is-ancestor", e.sha, branch_sha, check=False)[0] == 0]
        tree = self.repo.empty_tree()
        message = f"guardkit turn ledger of {task}\n\n" + "\n".join(lines) + "\n"
        _, out, _ = self.repo.run("commit-tree", tree, "-m", message, pre=self.repo.identity_args())
        return f"+{out.decode().strip()}:{self.ref(task)}"

    @property
    def seen(self) -> str:
        return f"refs/guardkit/seen/{self.remote}/ledgers/{self.feature}"

    def fetch_refspec(self) -> str:
        """What a fetch of the feature's ledgers asks (to join a fetch of the branches)."""
        return f"+{LEDGERS_PREFIX}/{self.feature}/*:{self.seen}/*"

    def import_fetched(self, listing: list[RefRecord] | None = None) -> int:
        """Add the entries of the ledgers fetched last that this clone lacks; how many were added
        (from ``listing`` when the refs were listed already: :func:`list_refs`)."""
        added = 0
        for name, _, message in list_refs(self.repo, self.seen) if listing is None else listing:
            place = task_ref_place(name, self.seen)
            if place is None or not place[1]:
                continue  # no task's ledger ref: at another depth, or named by no task id
            task = place[0]
            known = {(e.sha, e.turn) for e in turn_ledger.entries(self.repo, task)}
            for entry in _entries(message):
                if (entry.sha, entry.turn) not in known:
                    turn_ledger.record(self.repo, task, entry)
                    added += 1
        return added

    def fetched(self, task: str, listing: list[RefRecord]) -> list[turn_ledger.ProvenTurnCommit]:
        """The entries of ``task``'s ledger as the fetch that listed ``listing`` brought it, by turn."""
        ref = f"{self.seen}/{task}"
        message = next((message for name, _, message in listing if name == ref), "")
        return sorted(_entries(message), key=lambda entry: entry.turn)


def _entries(message: str) -> list[turn_ledger.ProvenTurnCommit]:
    return [turn_ledger.ProvenTurnCommit(sha, int(turn), decision, mode)
            for sha, turn, decision, mode in _ENTRY.findall(message)]


__all__ = ["LEDGERS_PREFIX", "RemoteLedgers"]
