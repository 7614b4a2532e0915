"""The remote chaos campaign: worker clones on one bare remote, killed, restarted, on a bad network.

N clones of one bare repository, half reaching it over ``file://``, half over ``git daemon`` on
loopback through :class:`~tests.reliability.chaos_proxy.ChaosProxy` (delays, drops, stalls); some
of them with a clock skewed by minutes (``GUARDKIT_STATE_CLOCK_SKEW``). One worker process of
``feature-build FEAT --remote origin`` runs in each. The campaign SIGKILLs workers (with their
agents: the machine dies) at random moments — while a Player runs, at a random instant, or inside
a named step of the protocol (``GUARDKIT_STATE_CRASH_AT``: in a push, in a merge, in a takeover) —
and restarts each in its clone, at once or a while later. A task quarantined by its workers (its
runs killed too often) is released as a person would. When every worker has finished, the
invariants of :mod:`~tests.reliability.chaos_checks` are checked. Every draw comes from one seed.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.feature_support import FEATURE_ID, TaskSpec, make_feature
from tests.remote_support import clone, git_daemon, make_bare

from .chaos_checks import (
    ChaosViolation,
    RemoteHistory,
    check_player_runs,
    check_remote,
    claim_figures,
    git,
    kept_runs,
)
from .chaos_proxy import ChaosProxy

AGENT = Path(__file__).resolve().parent / "agents" / "chaos_agent.py"
#: The named steps a worker may be armed to die in, and how often each is reached in one worker's life.
CRASH_POINTS = {"remote.before_push": 4, "remote.after_push": 4, "remote.after_claim": 2, "remote.after_takeover": 1,
                "remote.takeover_recorded": 1, "remote.merged": 1, "loop.after_player": 3, "git.after_commit": 3}


@dataclass(frozen=True)
class Plan:
    """How big the campaign is; every random choice is drawn from ``seed``."""

    seed: int
    workers: int = 6
    kills: int = 10
    waves: tuple[int, ...] = (6, 2, 1)  # tasks per wave
    lease: float = 6.0
    sleep: float = 0.4  # the Player's seconds per turn
    # Clocks minutes off, on machines behind the proxy (their beats meet its faults): the first one
    # ahead of the others to run a Player is lost for good there (its claim waits for another worker).
    skews: tuple[tuple[int, float], ...] = ((1, 300.0), (3, -240.0))
    kill_gap: tuple[float, float] = (1.0, 4.0)  # seconds between two kills
    deadline: float = 300.0

    def tasks(self) -> list[TaskSpec]:
        rng = random.Random(self.seed)
        specs: list[TaskSpec] = []
        previous: list[str] = []
        for size in self.waves:
            wave = [f"TASK-FB-{len(specs) + n + 1:03d}" for n in range(size)]
            for task in wave:
                deps = sorted(rng.sample(previous, min(2, len(previous)))) if previous else []
                specs.append(TaskSpec(task, dependencies=deps, approve_at=rng.choice((1, 2, 2, 3))))
            previous = wave
        return specs


@dataclass
class Incarnation:
    slot: int
    name: str
    proc: subprocess.Popen[bytes]
    err: Path
    armed: str | None
    started: float


@dataclass
class Figures:
    kills: Counter[str] = field(default_factory=Counter)
    starts: int = 0
    releases: int = 0
    quarantined: list[str] = field(default_factory=list)
    takebacks: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"kills": sum(self.kills.values()), "kills_by_kind": dict(sorted(self.kills.items())),
                "worker_starts": self.starts, "releases": self.releases, "takebacks": self.takebacks}


class Campaign:
    """One run of the campaign in ``base`` (see the module docstring)."""

    def __init__(self, base: Path, plan: Plan) -> None:
        self.base, self.plan = base, plan
        self.rng = random.Random(plan.seed)
        self.specs = plan.tasks()
        self.project = make_feature(base, self.specs)
        self.bare = make_bare(base, self.project.root)
        self.hook_log = base / "ref-updates.log"
        hook = self.bare / "hooks" / "reference-transaction"
        hook.write_text(f'#!/bin/sh\n[ "$1" = committed ] && cat >> "{self.hook_log}"\nexit 0\n')
        hook.chmod(0o755)
        self.log = base / "agents.jsonl"
        self.clones: list[Path] = []
        self.live: dict[int, Incarnation] = {}
        self.done: set[int] = set()
        self.lost: set[int] = set()  # machines that never come back
        self.restarts: list[tuple[float, int]] = []
        self.killed: dict[str, float] = {}
        self.figures = Figures()
        self.kills_left = plan.kills
        self.trail: list[str] = []
        self.t0 = time.monotonic()

    # -- the run --------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        with git_daemon(self.base) as daemon, ChaosProxy(("127.0.0.1", daemon.port), self.plan.seed) as proxy:
            for slot in range(self.plan.workers):  # cloned directly; then half of them reach it through the proxy
                self.clones.append(clone(self.bare.as_uri(), self.base / f"machine-{slot}"))
                if slot % 2:
                    git(self.clones[-1], "remote", "set-url", "origin", proxy.url(self.bare.name))
            try:
                for slot in range(self.plan.workers):
                    self._start(slot)
                self._until_done()
            finally:
                for incarnation in list(self.live.values()):
                    self._kill(incarnation, "teardown", count=False)
            network = dict(proxy.counts)
        return self._check(network)

    def _until_done(self) -> None:
        next_kill = self._now() + self.rng.uniform(1.0, 3.0)
        while len(self.done) + len(self.lost) < self.plan.workers:
            if self._now() > self.plan.deadline:
                raise ChaosViolation(f"the feature did not complete in {self.plan.deadline:.0f} s")
            for slot, incarnation in list(self.live.items()):
                if incarnation.proc.poll() is not None:
                    self._ended(slot, incarnation)
            self._lose_a_machine()
            if self.kills_left > 0 and self._now() >= next_kill and self.live:
                self._kill_one()
                next_kill = self._now() + self.rng.uniform(*self.plan.kill_gap)
            for due, slot in sorted(self.restarts):
                if due <= self._now():
                    self.restarts.remove((due, slot))
                    self._start(slot)
            time.sleep(0.05)

    def _now(self) -> float:
        return time.monotonic() - self.t0

    def _start(self, slot: int) -> None:
        self.figures.starts += 1
        name = f"w{slot}.{self.figures.starts}"
        armed = None
        if self.kills_left > 0 and (self.figures.starts <= self.plan.workers or self.rng.random() < 0.4):
            # Each first worker armed in another step (in a merge, a takeover, a push ...), then at random.
            points = sorted(CRASH_POINTS)
            point = points[slot % len(points)] if self.figures.starts <= self.plan.workers else self.rng.choice(points)
            armed = f"{point}:{self.rng.randint(1, CRASH_POINTS[point])}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARDKIT_", "FEATURE_", "CHAOS_"))}
        env.update(self.project.env(), NO_COLOR="1", CHAOS_LOG=str(self.log), CHAOS_INC=name,
                   CHAOS_SLEEP=str(self.plan.sleep))
        if armed:
            env["GUARDKIT_STATE_CRASH_AT"] = armed
        skew = dict(self.plan.skews).get(slot)
        if skew is not None:
            env["GUARDKIT_STATE_CLOCK_SKEW"] = str(skew)
        agent = f"{sys.executable} -S {AGENT}"
        argv = [sys.executable, "-m", "guardkit_state", "feature-build", FEATURE_ID, "--repo", str(self.clones[slot]),
                "--player", f"{agent} player", "--coach", f"{agent} coach", "--remote", "origin",
                "--poll", "0.2", "--lease", str(self.plan.lease)]
        err = self.base / f"{name}.err"
        with err.open("wb") as sink:
            proc = subprocess.Popen(argv, cwd=self.clones[slot], env=env, stdin=subprocess.DEVNULL,
                                    stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
        self.live[slot] = Incarnation(slot, name, proc, err, armed, self._now())
        self.trail.append(f"t={self._now():.1f} start {name}" + (f" armed {armed}" if armed else ""))

    def _ended(self, slot: int, incarnation: Incarnation) -> None:
        del self.live[slot]
        code = incarnation.proc.returncode
        self.trail.append(f"t={self._now():.1f} {incarnation.name} exit {code}")
        self._count_takebacks(incarnation)
        if code == -signal.SIGKILL:  # it died in the step it was armed for
            self._dead(incarnation, f"point:{(incarnation.armed or '?').split(':')[0]}")
            return
        if code == 0:
            self.done.add(slot)
            return
        if code == 1 and ": stopped — " in incarnation.err.read_text(errors="replace") and "quarantined after" in \
                incarnation.err.read_text(errors="replace").rsplit(": stopped — ", 1)[1]:
            self._release_quarantined()  # (another worker's stop may have released it already)
            self.restarts.append((self._now() + 0.2, slot))
            return
        raise ChaosViolation(f"{incarnation.name} exited {code}: {incarnation.err.read_text()[-3000:]}")

    def _lose_a_machine(self) -> None:
        """A machine whose clock is ahead, lost for good in a Player: its claim waits for a worker
        whose clock is minutes behind it (once)."""
        ahead = {slot for slot, skew in self.plan.skews if skew > 0} & self._in_player() if not self.lost else set()
        if ahead:
            doomed = min(ahead)
            self.lost.add(doomed)
            self._kill(self.live.pop(doomed), "player, machine lost")

    def _kill_one(self) -> None:
        running, merging = self._in_player(), self._merging()
        roll = self.rng.random()
        if running and roll < 0.45:
            victim, kind = self.live[self.rng.choice(sorted(running))], "player"
        elif merging is not None and roll < 0.7:
            victim, kind = self.live[merging], "merger"
        else:
            victim, kind = self.live[self.rng.choice(sorted(self.live))], "random"
        self._kill(victim, kind)
        del self.live[victim.slot]
        self._count_takebacks(victim)

    def _kill(self, incarnation: Incarnation, kind: str, *, count: bool = True) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(incarnation.proc.pid, signal.SIGKILL)  # the worker and its git: started by this campaign
        incarnation.proc.wait()
        if count:
            self.trail.append(f"t={self._now():.1f} kill {incarnation.name} ({kind})")
            self._dead(incarnation, kind)
        else:
            self._kill_agents(incarnation.name)

    def _dead(self, incarnation: Incarnation, kind: str) -> None:
        """A worker died (the machine): its agents too; counted; restarted at once or later."""
        self._kill_agents(incarnation.name)
        self.killed[incarnation.name] = self._now()
        self.figures.kills[kind] += 1
        self.kills_left -= 1
        if incarnation.slot in self.lost:
            return
        later = self.rng.random() < 0.5
        delay = self.rng.uniform(1.0, 2.5 * self.plan.lease) if later else self.rng.uniform(0.0, 0.3)
        self.restarts.append((self._now() + delay, incarnation.slot))

    def _agents(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]

    def _in_player(self) -> set[int]:
        """Slots whose worker is running a Player now."""
        ended = {(e["inc"], e["task"], e["turn"]) for e in self._agents() if e["event"] == "end"}
        names = {incarnation.name: slot for slot, incarnation in self.live.items()}
        return {names[e["inc"]] for e in self._agents() if e["role"] == "player" and e["event"] == "start"
                and e["inc"] in names and (e["inc"], e["task"], e["turn"]) not in ended}

    def _merging(self) -> int | None:
        """The slot whose worker holds the merge claim now, if one does."""
        held = subprocess.run(["git", "for-each-ref", "--format=%(contents)",
                               f"refs/guardkit/claims/{FEATURE_ID}/MERGE-WAVES"], cwd=self.bare, capture_output=True,
                              text=True, check=False).stdout
        worker = next((line.split(": ", 1)[1] for line in held.splitlines()
                       if line.startswith("Guardkit-Worker: ")), None)
        for slot, incarnation in self.live.items():
            if worker is not None and f"worker {worker} on " in incarnation.err.read_text(errors="replace"):
                return slot
        return None

    def _kill_agents(self, name: str) -> None:
        for entry in self._agents():
            if entry["inc"] == name:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(int(entry["pgid"]), signal.SIGKILL)  # an agent this campaign's worker started

    def _count_takebacks(self, incarnation: Incarnation) -> None:
        with contextlib.suppress(OSError):
            self.figures.takebacks += incarnation.err.read_text(errors="replace").count(
                "a worker of this clone that died")

    def _release_quarantined(self) -> bool:
        """Release, as a person would, the tasks the workers quarantined; False when there was none."""
        shown = subprocess.run([sys.executable, "-m", "guardkit_state", "show", FEATURE_ID, "--remote", "origin",
                                "--json"], cwd=self.clones[0], capture_output=True, text=True, check=False)
        if shown.returncode != 0:
            return False
        stuck = [task["task_id"] for task in json.loads(shown.stdout)["tasks"] if task["state"] == "quarantined"]
        for task in stuck:
            subprocess.run([sys.executable, "-m", "guardkit_state", "feature-build", FEATURE_ID, "--release", task],
                           cwd=self.clones[0], capture_output=True, check=True)
            self.figures.releases += 1
            self.figures.quarantined.append(task)
        return bool(stuck)

    # -- the end ---------------------------------------------------------------------------

    def _check(self, network: dict[str, int]) -> dict[str, Any]:
        tasks = [spec.task_id for spec in self.specs]
        history = RemoteHistory.read(self.hook_log)
        figures: dict[str, Any] = {"seed": self.plan.seed, "workers": self.plan.workers, "tasks": len(tasks),
                                   "seconds": round(self._now(), 1), **self.figures.to_dict()}
        figures |= check_remote(self.bare, tasks, {s.task_id: s.approve_at for s in self.specs}, history)
        figures |= check_player_runs(self.log, kept_runs(self.bare, tasks), self.killed)
        figures |= claim_figures(self.bare, self.clones, history)
        figures |= {"duplicates": 0, "lost_turns": 0, "network": network}
        return figures

    def diagnosis(self) -> str:
        tails = [f"--- {path.name}\n{path.read_text(errors='replace')[-1500:]}"
                 for path in sorted(self.base.glob("w*.err"))[-6:]]
        return "\n".join(["trail:", *self.trail[-40:], *tails])


def run_chaos(base: Path, plan: Plan) -> dict[str, Any]:
    """Run the campaign; on a violation, the seed and what happened are in the error."""
    campaign = Campaign(base, plan)
    try:
        return campaign.run()
    except ChaosViolation as exc:
        raise ChaosViolation(f"seed {plan.seed} (rerun: GUARDKIT_CHAOS_SEED={plan.seed}): {exc}\n"
                             f"{campaign.diagnosis()}") from None
    except Exception as exc:  # the harness itself failed: the seed is told all the same
        raise ChaosViolation(f"seed {plan.seed} (rerun: GUARDKIT_CHAOS_SEED={plan.seed}): {type(exc).__name__}: "
                             f"{exc}\n{campaign.diagnosis()}") from exc


__all__ = ["CRASH_POINTS", "Campaign", "Plan", "run_chaos"]
