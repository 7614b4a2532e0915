"""The gate's verdicts on a feature's candidates, kept where a kill cannot lose them mid-queue.

The merge queue (:mod:`guardkit_state.features.merge_queue`) may run the gate several times for one
wave (the wave's candidate, then a bisection). Each verdict is appended, as one JSON line, to
``<git common dir>/guardkit-state/merge-queue/FEAT-ID`` the moment the gate ends, keyed by what the
candidate is made of: the commit it starts from, each task's branch tip in merge order, and the gate
itself (command, expected exit, pytest's exit-5 rule). A queue interrupted at any instant and run
again builds the same candidates (new merge commits, the same key) and takes their verdicts from
here instead of running the gate again; a candidate made of anything else (a task's new turn, a
changed gate) has a key of its own.

Lines: a verdict (``key``, ``sha``, ``outcome``, ``exit_code`` ...), a commit known to pass (``good``:
one the queue landed the feature branch on), or ``reset`` (a fresh start of the feature, or a halt:
what came before is not trusted again). A line cut short by a kill is skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from guardkit_state.errors import GuardkitStateError
from guardkit_state.git.repo import GitRepo
from guardkit_state.plans.smoke_gates import SmokeGate, SmokeRun
from guardkit_state.store.fsio import append_line, atomic_write_text
from guardkit_state.store.jsonio import parse_json
from guardkit_state.store.layout import MERGE_QUEUE_IN_GIT_DIR
from guardkit_state.store.safe_paths import validate_task_id


def candidate_key(gate: SmokeGate, base: str, tips: Sequence[tuple[str, str]]) -> str:
    """The identity of a candidate: ``base`` with ``tips`` (task id, branch tip) merged in order,
    judged by ``gate``."""
    made_of = [gate.command, gate.expected_exit, gate.exit5_is_hard_fail, base, [list(tip) for tip in tips]]
    return hashlib.sha256(json.dumps(made_of).encode("utf-8")).hexdigest()


class GateVerdicts:
    """The verdicts of one feature, in one clone (see the module)."""

    def __init__(self, repo: GitRepo, feature_id: str) -> None:
        self.path: Path = repo.common_dir / MERGE_QUEUE_IN_GIT_DIR / validate_task_id(feature_id)
        self._runs: dict[str, SmokeRun] = {}
        self._good: set[str] = set()
        self._read()

    @property
    def gate_pid_file(self) -> Path:
        """Where the gate this feature's queue runs records itself while it runs (a killed run's is stopped)."""
        return self.path.with_name(self.path.name + ".gate.json")

    def _read(self) -> None:
        text = ""
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            text = self.path.read_text("utf-8", "replace")
        for line in text.splitlines():
            entry = _parsed(line)
            if entry is None:
                continue
            if "reset" in entry:
                self._runs.clear()
                self._good.clear()
            elif isinstance(entry.get("good"), str):
                self._good.add(entry["good"])
            elif isinstance(entry.get("key"), str):
                run = SmokeRun.from_dict(entry)
                if run is not None:
                    self._runs[entry["key"]] = run
                    if not run.halts and isinstance(entry.get("sha"), str):
                        self._good.add(entry["sha"])

    def verdict(self, key: str) -> SmokeRun | None:
        """The gate's recorded verdict on the candidate ``key``, or None when it never ran on it."""
        return self._runs.get(key)

    def passes(self, sha: str) -> bool:
        """True when the commit ``sha`` is known to pass the gate (it ran there, or a landing says so)."""
        return sha in self._good

    def record(self, key: str, sha: str, run: SmokeRun) -> None:
        """Keep the verdict ``run`` of the candidate ``key`` (the commit ``sha``), durably, now."""
        self._append({"key": key, "sha": sha, **run.to_dict()})
        self._runs[key] = run
        if not run.halts:
            self._good.add(sha)

    def good(self, sha: str) -> None:
        """The commit ``sha`` passes (the feature branch landed there after its candidate passed)."""
        if sha not in self._good:
            self._append({"good": sha})
            self._good.add(sha)

    def reset(self, why: str) -> None:
        """Forget every verdict (a fresh start, or a halt the user is to fix before ``--resume``): the
        file is replaced, at once, by the one line saying so (it never grows past one run's verdicts)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path, json.dumps({"reset": why}, ensure_ascii=False) + "\n")
        self._runs.clear()
        self._good.clear()

    def _append(self, entry: dict[str, Any]) -> None:
        append_line(self.path, json.dumps(entry, ensure_ascii=False, allow_nan=False, separators=(",", ":")))


def _parsed(line: str) -> dict[str, Any] | None:
    if not line.strip():
        return None
    try:
        entry = parse_json(line)
    except GuardkitStateError:
        return None
    return entry if isinstance(entry, dict) else None


__all__ = ["GateVerdicts", "candidate_key"]
