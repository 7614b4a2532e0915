"""What a feature's agents have spent, as the remote's branches record it: ``--max-cost`` across machines.

On one machine a feature's tasks are read from their worktrees (:func:`~guardkit_state.turns.spend.
feature_spend`). A worker of ``feature-build --remote`` has in its clone only the turns it ran; the
others' are on the task branches it fetched. Each turn commit holds the turn's state
(``.guardkit/autobuild/TASK/turn_state_turn_N.json``, its agents' ``cost_usd``), so what a task spent
is read from its branch's tip as fetched, and from the feature branch's (a merged task's turns): the more of the two.

Reading is two ``git cat-file --batch`` calls for every task whose tip moved since the last reading
(the folders' trees, then the turn states not read before), none when none moved: a tip's spend is
kept by its sha, a turn state by its blob's (both never change).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from guardkit_state.git.parse import parse_tree
from guardkit_state.git.repo import GitRepo
from guardkit_state.store import reads
from guardkit_state.store.layout import STATE_DIR, branch_for
from guardkit_state.store.turn_files import turn_state_number
from guardkit_state.turns.spend import state_cost


@dataclass
class RemoteSpending:
    """Each task's spend at the tips a worker fetched, kept between readings; ``feature`` and its
    ``tasks`` for the readings of a whole feature (:meth:`reached`, :meth:`elsewhere`)."""

    repo: GitRepo
    feature: str = ""
    tasks: tuple[str, ...] = ()
    _at: dict[tuple[str, str], float] = field(default_factory=dict)  # (task, tip) -> USD
    _blobs: dict[str, float | None] = field(default_factory=dict)  # turn state blob -> USD

    def spent(self, tips: Mapping[str, str]) -> dict[str, float]:
        """USD the agents reported for every recorded turn of each task, at its tip ``tips[task]``
        (a commit this clone has); 0 for a task whose tip holds no turn state."""
        wanted = [(task, tip) for task, tip in tips.items() if (task, tip) not in self._at]
        if wanted:
            self._read(wanted)
        return {task: self._at[(task, tip)] for task, tip in tips.items()}

    def of_feature(self, remote: Mapping[str, str]) -> dict[str, float]:
        """What each task of the feature spent, as the remote's branches (as fetched: ``remote``, ref
        name -> sha) record it: the more of what its branch and the feature branch record (a merge
        brought its turns there; its branch may be gone since, or pushed again by a person at a
        commit without them: what was spent stays spent)."""
        feature_tip = remote.get(branch_for(self.feature))
        on_feature = self.spent(dict.fromkeys(self.tasks, feature_tip) if feature_tip else {})
        own = self.spent({task: tip for task in self.tasks if (tip := remote.get(branch_for(task)))})
        return {task: max(own.get(task, 0.0), on_feature.get(task, 0.0)) for task in self.tasks
                if task in own or task in on_feature}

    def reached(self, limit: float | None, remote: Mapping[str, str]) -> str | None:
        """Why no task may be claimed under ``--max-cost limit``, in the words one machine uses; or None."""
        if limit is None:
            return None
        spent = sum(self.of_feature(remote).values())
        return f"--max-cost reached: ${spent:.4f} spent on {self.feature} (limit ${limit:g})" if spent >= limit \
            else None

    def elsewhere(self, task: str, remote: Mapping[str, str]) -> float:
        """What the feature's other tasks spent (a task's loop counts its own turns itself)."""
        spent = self.of_feature(remote)
        return max(sum(spent.values()) - spent.get(task, 0.0), 0.0)

    def _read(self, wanted: list[tuple[str, str]]) -> None:
        # (Capped as a local reading is: an agent's commit can put gigabytes in the task's state folder.)
        folders = self.repo.objects([f"{tip}:{STATE_DIR.as_posix()}/{task}" for task, tip in wanted],
                                    max_bytes=reads.MAX_FILE_BYTES)
        states: dict[tuple[str, str], list[str]] = {}
        for (task, tip), found in zip(wanted, folders, strict=True):
            entries = parse_tree(found[2], len(found[0]) // 2) if found is not None and found[1] == "tree" else {}
            states[(task, tip)] = [oid for name, oid in entries.items() if turn_state_number(name) is not None]
        unread = sorted({oid for oids in states.values() for oid in oids} - self._blobs.keys())
        for oid, found in zip(unread, self.repo.objects(unread, max_bytes=reads.MAX_FILE_BYTES), strict=True):
            self._blobs[oid] = state_cost(found[2]) if found is not None and found[1] == "blob" else None
        for key, oids in states.items():
            self._at[key] = sum(self._blobs[oid] or 0.0 for oid in oids)


__all__ = ["RemoteSpending"]
