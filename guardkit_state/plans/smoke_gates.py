"""GuardKit's smoke gates: a command run in the feature worktree after given waves, halting the
feature when its exit code is not the one expected.

A plan's ``smoke_gates`` mapping (GuardKit's keys, GuardKit's meaning)::

    smoke_gates:
      after_wave: [3, 4]        # a wave number, a list of them, or ``all`` (after every wave)
      command: |                # run through the shell, in the feature worktree
        set -e
        pytest tests/smoke -x -q
      expected_exit: 0          # default 0
      timeout: 120              # seconds, default 120; the command's process group is killed after it
      exit5_is_hard_fail: false # pytest's exit 5 ("no tests collected") is a warning unless true

A gate runs once the wave's approved tasks are merged into the feature branch. A mismatch stops the
feature there (the plan's status becomes ``failed``; the feature worktree and branch are kept, so
the user can look, fix and ``--resume``, which runs the gate again). Each run is recorded in the
plan's ``execution.smoke_gate_runs`` (one entry per wave, the latest), which ``show`` and
``report`` read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guardkit_state.errors import FeaturePlanError
from guardkit_state.plans.plan import FeaturePlan
from guardkit_state.process.command import run_command

#: GuardKit's defaults.
DEFAULT_TIMEOUT = 120.0
DEFAULT_EXPECTED_EXIT = 0
#: pytest's "no tests were collected" exit code.
PYTEST_NO_TESTS = 5
#: The output kept in the plan (its tail): enough to see why, not a log.
OUTPUT_KEPT = 2000


@dataclass(frozen=True)
class SmokeGate:
    """A plan's ``smoke_gates``. ``after_waves`` is None for ``all``."""

    after_waves: frozenset[int] | None
    command: str
    expected_exit: int = DEFAULT_EXPECTED_EXIT
    timeout: float = DEFAULT_TIMEOUT
    exit5_is_hard_fail: bool = False

    def applies_after(self, wave: int) -> bool:
        return self.after_waves is None or wave in self.after_waves

    def describe(self) -> str:
        waves = "every wave" if self.after_waves is None else \
            "wave " + ", ".join(str(n) for n in sorted(self.after_waves))
        first = next((line.strip() for line in self.command.splitlines()
                      if line.strip() and line.strip() != "set -e"), self.command.strip())
        more = " …" if len([line for line in self.command.splitlines() if line.strip()]) > 2 else ""
        return (f"after {waves}: {first}{more} (expects exit {self.expected_exit}, timeout "
                f"{self.timeout:g} s{'' if self.exit5_is_hard_fail else ', exit 5 a warning'})")


@dataclass(frozen=True)
class SmokeRun:
    """One run of the gate: after which wave, how it ended, and the tail of its output.

    ``outcome``: ``passed``, ``warning`` (pytest's exit 5 where that is not a hard failure),
    ``failed`` (another exit code) or ``timed_out``.
    """

    wave: int
    outcome: str
    exit_code: int | None
    expected_exit: int
    seconds: float
    output: str
    at: str = ""

    @property
    def halts(self) -> bool:
        return self.outcome in ("failed", "timed_out")

    def describe(self) -> str:
        got = "timed out" if self.exit_code is None else f"exit {self.exit_code}"
        return f"smoke gate after wave {self.wave}: {self.outcome} ({got}, expected {self.expected_exit})"

    def to_dict(self) -> dict[str, Any]:
        return {"wave": self.wave, "outcome": self.outcome, "exit_code": self.exit_code,
                "expected_exit": self.expected_exit, "seconds": round(self.seconds, 2), "at": self.at,
                "output": self.output}

    @classmethod
    def from_dict(cls, data: Any) -> SmokeRun | None:
        """A recorded run, or None for an entry that is not one (the plan is the user's file too)."""
        if not isinstance(data, dict) or not isinstance(data.get("wave"), int):
            return None
        code = data.get("exit_code")
        expected = data.get("expected_exit")
        seconds = data.get("seconds")
        return cls(data["wave"], str(data.get("outcome", "?")), code if isinstance(code, int) else None,
                   expected if isinstance(expected, int) else DEFAULT_EXPECTED_EXIT,
                   float(seconds) if isinstance(seconds, (int, float)) else 0.0,
                   str(data.get("output") or ""), str(data.get("at") or ""))


def read_smoke_gate(plan: FeaturePlan) -> SmokeGate | None:
    """The plan's ``smoke_gates``, or None when it has none.

    Raises:
        FeaturePlanError: a value that cannot be used (names the key and what was expected).
    """
    raw = plan.data.get("smoke_gates")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _bad(plan, "", "a mapping (after_wave, command, expected_exit, timeout)", raw)
    command = raw.get("command")
    if not isinstance(command, str) or not command.strip():
        raise _bad(plan, ".command", "a shell command", command)
    return SmokeGate(_after_waves(plan, raw.get("after_wave")), command,
                     _expected_exit(plan, raw.get("expected_exit")),
                     _seconds(plan, raw.get("timeout")), raw.get("exit5_is_hard_fail") is True)


def _after_waves(plan: FeaturePlan, value: Any) -> frozenset[int] | None:
    if value == "all":
        return None
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values):
        raise _bad(plan, ".after_wave", "a wave number, a list of wave numbers, or 'all'", value)
    return frozenset(values)


def _expected_exit(plan: FeaturePlan, value: Any) -> int:
    if value is None:
        return DEFAULT_EXPECTED_EXIT
    if not isinstance(value, int) or isinstance(value, bool):
        raise _bad(plan, ".expected_exit", "a whole number", value)
    return value


def _seconds(plan: FeaturePlan, value: Any) -> float:
    if value is None:
        return DEFAULT_TIMEOUT
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 86_400:
        raise _bad(plan, ".timeout", "seconds, more than 0", value)
    return float(value)


def _bad(plan: FeaturePlan, key: str, expected: str, value: Any) -> FeaturePlanError:
    return FeaturePlanError(f"smoke_gates{key} is {value!r}", path=plan.path, pointer=f"$.smoke_gates{key}",
                            expected=expected)


def run_smoke_gate(gate: SmokeGate, worktree: Path, wave: int, *, at: str = "",
                   pid_file: Path | None = None) -> SmokeRun:
    """Run ``gate``'s command in ``worktree`` (through the shell, in a session of its own, killed with
    its whole process group at the timeout, as is what it leaves running) and judge its exit code.

    ``pid_file`` records the gate while it runs: a run SIGKILLed meanwhile leaves it running, and the
    next run stops it (:func:`~guardkit_state.process.command.stop_orphans`) before it runs a gate.
    """
    started = time.monotonic()
    done = run_command(["/bin/sh", "-c", gate.command], cwd=worktree, timeout=gate.timeout, session=True,
                       merge_stderr=True, keep_stdout=4 * OUTPUT_KEPT, pid_file=pid_file,
                       what=f"the smoke gate after wave {wave}")
    text = done.stdout.decode("utf-8", "replace")[-OUTPUT_KEPT:]
    return SmokeRun(wave, judge(gate, done.returncode), done.returncode, gate.expected_exit,
                    time.monotonic() - started, text, at)


def judge(gate: SmokeGate, exit_code: int | None) -> str:
    """GuardKit's verdict on an exit code (None: timed out) (pure)."""
    if exit_code is None:
        return "timed_out"
    if exit_code == gate.expected_exit:
        return "passed"
    if exit_code == PYTEST_NO_TESTS and gate.expected_exit == 0 and not gate.exit5_is_hard_fail:
        return "warning"
    return "failed"


def recorded_runs(plan: FeaturePlan) -> list[SmokeRun]:
    """The gate runs the plan records (``execution.smoke_gate_runs``), by wave."""
    raw = plan.execution.raw.get("smoke_gate_runs") if plan.execution is not None else None
    runs = [SmokeRun.from_dict(item) for item in raw] if isinstance(raw, list) else []
    return sorted((r for r in runs if r is not None), key=lambda r: r.wave)


def with_run(plan: FeaturePlan, run: SmokeRun) -> list[dict[str, Any]]:
    """``execution.smoke_gate_runs`` with ``run`` in place of any earlier run after its wave."""
    kept = [r for r in recorded_runs(plan) if r.wave != run.wave]
    return [r.to_dict() for r in sorted([*kept, run], key=lambda r: r.wave)]


__all__ = ["DEFAULT_TIMEOUT", "SmokeGate", "SmokeRun", "judge", "read_smoke_gate", "recorded_runs", "run_smoke_gate",
           "with_run"]
