"""The invariants of the remote chaos campaign, read from the bare remote and the agents' log.

* **Each turn recorded once on the remote**: every task branch holds one turn commit per turn, 1..n,
  and the task file merged into the feature branch lists turns 1..n once each.
* **No recorded turn lost**: every state a task branch ever had on the remote (each update the
  remote's ``reference-transaction`` hook logged) lists a prefix of the final turns, and every update
  of a loop branch continued the one before (no history replaced).
* **A turn's Player run again only when its holder died before pushing it**: the feature branch says
  whose run of each turn was kept (the Player's line in ``src/<TASK>.txt``); every other run of that
  turn was started earlier, by a worker incarnation that was then killed.
* **Merges in plan order**, each task once.
"""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.feature_support import FEATURE_BRANCH, merged_tasks, task_rel

ZERO = "0" * 40


class ChaosViolation(AssertionError):
    """An invariant of the campaign did not hold (the message says which, and where)."""


@dataclass
class RemoteHistory:
    """What the remote's hook logged: every committed ref update, in order."""

    updates: list[tuple[str, str, str]] = field(default_factory=list)  # (old, new, ref)

    @classmethod
    def read(cls, log: Path) -> RemoteHistory:
        found = cls()
        if log.exists():
            for line in log.read_text().splitlines():
                parts = line.split()
                if len(parts) == 3:
                    found.updates.append((parts[0], parts[1], parts[2]))
        return found

    def of(self, prefix: str) -> list[tuple[str, str, str]]:
        return [update for update in self.updates if update[2].startswith(prefix)]


def git(cwd: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, input=stdin, check=False)
    if done.returncode != 0:
        raise ChaosViolation(f"git {' '.join(args)} failed in {cwd}: {done.stderr.strip()}")
    return done.stdout


def messages(repo: Path, shas: list[str]) -> dict[str, str]:
    """The commit messages of ``shas`` (one ``cat-file --batch``)."""
    if not shas:
        return {}
    out = subprocess.run(["git", "cat-file", "--batch"], cwd=repo, input=("\n".join(shas) + "\n").encode(),
                         capture_output=True, check=False).stdout
    found: dict[str, str] = {}
    pos = 0
    while pos < len(out):
        header_end = out.index(b"\n", pos)
        header = out[pos:header_end].decode().split()
        if len(header) < 3:  # "<sha> missing"
            pos = header_end + 1
            continue
        size = int(header[2])
        body = out[header_end + 1:header_end + 1 + size].decode("utf-8", "replace")
        found[header[0]] = body.split("\n\n", 1)[1] if "\n\n" in body else ""
        pos = header_end + 1 + size + 1
    return found


def _turns_in(text: str) -> list[tuple[int, str]]:
    state = yaml.safe_load(text.split("---\n")[1]).get("autobuild_state") or {}
    return [(int(t["turn"]), str(t["decision"])) for t in state.get("turns") or []]


def check_remote(bare: Path, tasks: list[str], approve_at: dict[str, int], history: RemoteHistory) -> dict[str, int]:
    """Every invariant read from the remote; raises :class:`ChaosViolation`. Figures: turns, branch updates."""
    merged = merged_tasks(bare)
    if merged != tasks:
        raise ChaosViolation(f"merges not in plan order (or a task merged twice or never): {merged} != {tasks}")
    final: dict[str, list[tuple[int, str]]] = {}
    for task in tasks:
        turns = _turns_in(git(bare, "show", f"{FEATURE_BRANCH}:{task_rel(task).as_posix()}"))
        want = [(n, "approve" if n == approve_at[task] else "feedback") for n in range(1, approve_at[task] + 1)]
        if turns != want:
            raise ChaosViolation(f"{task}: the merged task file lists turns {turns}, expected {want}")
        final[task] = turns
        logged = git(bare, "log", "--format=%(trailers:key=Task,valueonly,separator=)%x1f"
                     "%(trailers:key=Turn,valueonly,separator=)%x1e", f"autobuild/{task}").split("\x1e")
        trailers = [turn.strip() for who, _, turn in (entry.strip().partition("\x1f") for entry in logged)
                    if who.strip() == task and turn.strip()]
        if sorted(trailers, key=int) != [str(n) for n in range(1, approve_at[task] + 1)]:
            raise ChaosViolation(f"{task}: its branch on the remote holds turn commits {trailers} (each turn once)")
    updates = history.of("refs/heads/autobuild/")
    for old, new, ref in updates:
        if new == ZERO:
            raise ChaosViolation(f"{ref} was deleted on the remote ({old[:10]})")
        if old != ZERO and subprocess.run(["git", "merge-base", "--is-ancestor", old, new], cwd=bare,
                                          check=False).returncode != 0:
            raise ChaosViolation(f"{ref} moved from {old[:10]} to {new[:10]}, which does not continue it")
        task = ref.rsplit("/", 1)[-1]
        if task in final:
            seen = _turns_in(git(bare, "show", f"{new}:{task_rel(task).as_posix()}"))
            if seen != final[task][:len(seen)]:
                raise ChaosViolation(f"{task}: the remote held turns {seen} at {new[:10]}; "
                                     f"the end holds {final[task]}: a recorded turn was lost or changed")
    return {"turns": sum(len(t) for t in final.values()), "branch_updates": len(updates)}


def kept_runs(bare: Path, tasks: list[str]) -> dict[tuple[str, int], str]:
    """Whose Player run of each turn the feature branch kept: (task, turn) -> incarnation."""
    kept: dict[tuple[str, int], str] = {}
    for task in tasks:
        for line in git(bare, "show", f"{FEATURE_BRANCH}:src/{task}.txt").splitlines():
            words = line.split()  # "<TASK> turn <N> by <inc>"
            kept[(task, int(words[2]))] = words[4]
    return kept


def check_player_runs(log: Path, kept: dict[tuple[str, int], str], killed: dict[str, float]) -> dict[str, int]:
    """A turn's Player run again only when the incarnation that ran it before was killed (before its
    push: its run was not kept). Figures: Player runs, and runs again."""
    starts: dict[tuple[str, int], list[tuple[float, str]]] = defaultdict(list)
    for line in log.read_text().splitlines() if log.exists() else []:
        entry: dict[str, Any] = json.loads(line)
        if entry["role"] == "player" and entry["event"] == "start":
            starts[(entry["task"], entry["turn"])].append((entry["at"], entry["inc"]))
    again = 0
    for key, inc in kept.items():
        runs = sorted(starts.get(key, []))
        mine = [at for at, who in runs if who == inc]
        if not mine:
            raise ChaosViolation(f"{key}: the kept run is {inc}'s, which never started that turn's Player")
        for at, who in runs:
            if who == inc and at == mine[-1]:
                continue
            again += 1
            if who not in killed:
                raise ChaosViolation(f"{key}: the Player ran again, though {who}, which ran it at t={at:.2f}, was "
                                     f"never killed (runs {runs}, kept {inc}'s)")
            if at > mine[-1]:
                raise ChaosViolation(f"{key}: {who} ran the Player at t={at:.2f}, after the run that was kept "
                                     f"({inc}'s at t={mine[-1]:.2f}): a pushed turn was run again")
    return {"player_runs": sum(len(v) for v in starts.values()), "player_runs_again": again}


def claim_figures(bare: Path, clones: list[Path], history: RemoteHistory) -> dict[str, int]:
    """Claims attempted (claim commits made in every clone, retries included), won (created on the
    remote), and takeovers that landed on it."""
    attempted = 0
    for clone in clones:
        listing = subprocess.run(["git", "cat-file", "--batch-all-objects",
                                  "--batch-check=%(objecttype) %(objectname)"],
                                 cwd=clone, capture_output=True, text=True, check=False).stdout.split("\n")
        commits = [line.split()[1] for line in listing if line.startswith("commit ")]
        attempted += sum(text.startswith("guardkit claim ") for text in _subjects(clone, commits))
    claims = history.of("refs/guardkit/claims/")
    landed = messages(bare, [new for _, new, _ in claims if new != ZERO])
    return {"claims_attempted": attempted, "claims_won": sum(old == ZERO and new != ZERO for old, new, _ in claims),
            "takeovers": sum(text.startswith("guardkit takeover ") for text in _subjects_of(landed))}


def _subjects(clone: Path, shas: list[str]) -> list[str]:
    raw = messages(clone, shas)
    return _subjects_of(raw)


def _subjects_of(raw: dict[str, str]) -> list[str]:
    return [text.split("\n", 1)[0] for text in raw.values()]


__all__ = ["ChaosViolation", "RemoteHistory", "check_player_runs", "check_remote", "claim_figures", "kept_runs"]
