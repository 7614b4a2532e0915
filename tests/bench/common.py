"""Shared pieces of the benchmarks: timing, the floor writer, realistic fixtures, the machine.

The fixtures are sized like the GuardKit corpus (median player report ~10 KB, coach decision a few
KB, task file ~4 KB with eight acceptance criteria) but generated, so the benchmarks run without
the corpus. Feedback text varies in its words (not only its numbers, which the stall detector
normalises away), so a long history never trips the stall rule and every turn is an ordinary one.
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TASK_ID = "TASK-BENCH-001"
CRITERIA = 8

_WORDS = ("token", "refresh", "session", "cookie", "header", "scope", "claim", "issuer", "audience",
          "expiry", "rotation", "revocation", "logout", "signature", "nonce", "cache", "retry", "timeout",
          "handler", "router", "schema", "migration", "fixture", "logging", "metrics", "tracing", "config",
          "secret", "vault", "policy", "role", "tenant")


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples), 3)


def timed_ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000.0


def run_ms(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    """Wall ms of the command ``argv``, exit 0 or 1 (validate exits 1 when a corpus file is invalid, as some are)."""
    with tempfile.TemporaryFile() as sink:
        start = time.perf_counter()
        code = subprocess.run(argv, cwd=cwd, env=env, stdout=sink, stderr=subprocess.STDOUT, check=False).returncode
        elapsed = (time.perf_counter() - start) * 1000.0
        if code not in (0, 1):
            sink.seek(0)
            raise RuntimeError(f"{' '.join(argv)} exited {code}: {sink.read()[-2000:]!r}")
    return elapsed


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return round(a / b, 2)


# ----------------------------------------------------------------------------------------- floor


def floor_write(path: Path, data: bytes) -> None:
    """The floor: temp file + write + fsync + replace + fsync of the directory, nothing else."""
    tmp = path.parent / f".floor-{path.name}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def read_all(paths: list[Path]) -> int:
    total = 0
    for path in paths:
        with open(path, "rb") as handle:
            total += len(handle.read())
    return total


# -------------------------------------------------------------------------------------- fixtures


def task_text(task_id: str = TASK_ID) -> str:
    """A realistic task file (~4 KB): frontmatter, description, eight checkbox criteria, notes."""
    criteria = "\n".join(f"- [ ] The {_WORDS[i]} {_WORDS[i + 8]} behaviour is implemented and covered by "
                         f"tests ({_WORDS[i + 16]} edge cases included)" for i in range(CRITERIA))
    notes = "\n".join(f"- Consider the {w} path: keep it configurable and document the default." for w in _WORDS)
    return (
        f"---\nid: {task_id}\ntitle: Token authentication with refresh and revocation\nstatus: in_progress\n"
        "task_type: feature\ncomplexity: 6\nfeature_id: FEAT-BENCH\npriority: high\n"
        "created_at: 2026-01-29T00:00:00Z   # unquoted date, kept as written\n"
        "tags: [auth, jwt, security]\ndependencies: [TASK-BENCH-000]\n---\n\n"
        f"# {task_id}: Token authentication\n\n## Description\n\n"
        + "Implement token-based authentication for the API. " * 12
        + f"\n\n## Acceptance Criteria\n\n{criteria}\n\n## Implementation Notes\n\n{notes}\n"
    )


def _word(turn: int, k: int) -> str:
    return _WORDS[(turn * 7 + k * 3) % len(_WORDS)]


def feedback_for(turn: int) -> str:
    # Two words picked from the turn number: signatures differ turn to turn (no stall).
    a, b = _WORDS[turn % len(_WORDS)], _WORDS[(turn // len(_WORDS) + 3 * turn) % len(_WORDS)]
    c = _WORDS[(turn // (len(_WORDS) ** 2) + 5) % len(_WORDS)]
    return f"Missing {a} {b} {c} handling; the integration tests for the {b} path fail."


def player_report(turn: int, task_id: str = TASK_ID) -> dict[str, Any]:
    """A Player report of ~9 KB, shaped like the corpus (promises with evidence for each criterion)."""
    promises = [{
        "criterion_id": f"AC-{i:03d}",
        "criterion_text": f"The {_WORDS[i - 1]} {_WORDS[i + 7]} behaviour is implemented and covered by tests",
        "status": "complete" if (i + turn) % 3 else "partial",
        "evidence": (f"Implemented in src/auth/{_WORDS[i - 1]}.py; covered by tests/test_{_WORDS[i - 1]}.py "
                     f"(turn {turn}). " + "The handler validates input, logs the decision and returns a typed "
                     "result; error paths raise domain errors that the router maps to 4xx responses. " * 4),
        "test_file": f"tests/test_{_WORDS[i - 1]}.py",
        "implementation_files": [f"src/auth/{_WORDS[i - 1]}.py", f"src/auth/{_word(turn, i)}_util.py"],
    } for i in range(1, CRITERIA + 1)]
    return {
        "task_id": task_id,
        "turn": turn,
        "files_modified": [f"src/auth/{_word(turn, k)}.py" for k in range(4)],
        "files_created": [f"tests/test_{_word(turn, k)}_{turn}.py" for k in range(3)],
        "tests_written": [f"tests/test_{_word(turn, k)}_{turn}.py::test_case_{k}" for k in range(6)],
        "tests_run": True,
        "tests_passed": turn % 4 != 0,
        "test_output_summary": f"{40 + turn} passed, {turn % 4} failed in 3.2s",
        "implementation_notes": (f"Turn {turn}: worked on the {_word(turn, 1)} and {_word(turn, 2)} paths. "
                                 + "Refactored the token service to separate issuing from validation. " * 10),
        "concerns": [f"The {_word(turn, 3)} behaviour depends on clock skew tolerance."],
        "requirements_addressed": [f"AC-{i:03d}" for i in range(1, CRITERIA + 1) if (i + turn) % 3],
        "requirements_remaining": [f"AC-{i:03d}" for i in range(1, CRITERIA + 1) if not (i + turn) % 3],
        "completion_promises": promises,
        "tests_passed_count": 40 + turn,
        "tests_failed_count": turn % 4,
        "coverage": 78.5,
        "lessons": [f"Keep the {_word(turn, 4)} fixture shared across tests"],
    }


def coach_decision(turn: int, task_id: str = TASK_ID) -> dict[str, Any]:
    """A Coach decision of ~3 KB: feedback, issues, a verdict per criterion, validation results."""
    feedback = feedback_for(turn)
    return {
        "task_id": task_id,
        "turn": turn,
        "decision": "feedback",
        "feedback": feedback,
        "issues": [{"severity": "must_fix", "category": "correctness", "description": feedback,
                    "location": f"src/auth/{_word(turn, 5)}.py:{10 + turn}"},
                   {"severity": "should_fix", "category": "style",
                    "description": f"Name the {_word(turn, 6)} constants consistently"}],
        "criteria_verification": [
            {"criterion_id": f"AC-{i:03d}", "result": "verified" if (i + turn) % 3 else "rejected",
             "notes": f"Checked the {_WORDS[i - 1]} path by reading the code and running its tests."}
            for i in range(1, CRITERIA + 1)],
        "validation_results": {"tests_passed_count": 40 + turn, "tests_failed_count": turn % 4,
                               "coverage": 80.0, "arch_score": 82},
        "rationale": "Most criteria hold; the failing integration tests block approval. " * 4,
        "what_to_try_next": f"Fix the {_word(turn, 7)} path first, then re-run the integration tests.",
    }


def make_task_repo(root: Path, task_id: str = TASK_ID) -> Path:
    path = root / "tasks" / "in_progress" / f"{task_id}-token-auth.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(task_text(task_id), encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------- machine


def machine() -> dict[str, Any]:
    """Where the numbers were taken: cores, python, platform, the disk under the temp dir."""
    import tempfile

    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
    }
    with open("/proc/cpuinfo", encoding="utf-8", errors="replace") if Path("/proc/cpuinfo").exists() \
            else open(os.devnull, encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    info["disk"] = _disk(Path(tempfile.gettempdir()))
    return info


def _disk(path: Path) -> str:
    """Filesystem type and device of ``path`` (from ``df``), best effort."""
    try:
        out = subprocess.run(["df", "-T", "-P", str(path)], capture_output=True, text=True, timeout=10).stdout
        fields = out.splitlines()[1].split()
        return f"{fields[1]} on {fields[0]} ({path})"
    except (OSError, IndexError, subprocess.SubprocessError):
        return f"unknown ({path})"


def cli_command() -> list[str]:
    """How a user runs the CLI: the console script next to this interpreter, else ``-m``."""
    script = Path(sys.executable).parent / "guardkit-state"
    return [str(script)] if script.exists() else [sys.executable, "-m", "guardkit_state"]
