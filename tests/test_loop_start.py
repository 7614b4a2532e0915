"""Where a loop starts (``loop/start.py``): the copy of the task it continues is read once before turn 1,
and every refusal of a start is one check, made before anything exists and again under the lock.

Spies wrap the real functions (they count calls and pass everything through); the files, the git
repository and the worktree are real.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from guardkit_state.agents.protocol import CallableAgent
from guardkit_state.errors import InputError, ResumeError
from guardkit_state.loop import start as loop_start
from guardkit_state.loop.events import Event, TurnStarted
from guardkit_state.loop.run import LoopOptions, run_task_loop
from guardkit_state.store import reads
from guardkit_state.yamltext import strict_yaml

from .test_loop import TASK, _repo, coach_verifying, scripted_player


def _count_before_turn_1(monkeypatch: pytest.MonkeyPatch) -> tuple[Counter[str], Any]:
    """Reads of task files (by file name and folder) and YAML parses until turn 1 starts, and the loop's
    ``on_event`` that says when it does."""
    calls: Counter[str] = Counter()
    started = [False]
    # The frontmatter reader imports the parser where it parses: it is counted at its home.
    real_read, real_parse = reads.read_bytes_capped, strict_yaml.parse_yaml

    def read(path: Path, **kwargs: Any) -> bytes:
        if not started[0] and Path(path).suffix == ".md":
            calls[f"read {Path(path).parent.parent.parent.name}"] += 1  # tasks/backlog/X.md: its checkout
        return real_read(path, **kwargs)

    def parse(text: str, **kwargs: Any) -> Any:
        calls["parse"] += not started[0]
        return real_parse(text, **kwargs)

    def on_event(event: Event) -> None:
        started[0] = started[0] or isinstance(event, TurnStarted)

    monkeypatch.setattr(reads, "read_bytes_capped", read)
    monkeypatch.setattr(strict_yaml, "parse_yaml", parse)
    return calls, on_event


@pytest.mark.parametrize("worktree", [False, True])
def test_a_loop_reads_the_task_file_once_before_turn_1(git_repo: Path, monkeypatch: pytest.MonkeyPatch,
                                                       worktree: bool) -> None:
    root = _repo(git_repo)
    calls, on_event = _count_before_turn_1(monkeypatch)
    result = run_task_loop(root, TASK, CallableAgent(scripted_player), coach_verifying(1),
                           LoopOptions(use_worktree=worktree), on_event=on_event)
    assert result.outcome is not None and result.outcome.value == "approved"
    # Read and parsed once where the refusals are checked, its reading confirmed (not read again)
    # under the lock; a fresh worktree's own copy is read once more: another file.
    expected = {f"read {root.name}": 1, "parse": 1} if not worktree else \
        {f"read {root.name}": 1, f"read {TASK}": 1, "parse": 2}
    assert calls == expected, dict(calls)


def test_a_resumed_loop_reads_its_worktree_copy_once_before_its_turn(git_repo: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    root = _repo(git_repo)

    def stop_in_turn_2(request: Any) -> dict[str, Any]:
        if request.turn == 2:
            raise KeyboardInterrupt
        return scripted_player(request)

    with pytest.raises(KeyboardInterrupt):
        run_task_loop(root, TASK, CallableAgent(stop_in_turn_2), coach_verifying(2))
    calls, on_event = _count_before_turn_1(monkeypatch)
    run_task_loop(root, TASK, CallableAgent(scripted_player), coach_verifying(2), LoopOptions(resume=True),
                  on_event=on_event)
    # The main checkout's copy is not read; the worktree's once (its parse known already: this process wrote it).
    assert calls[f"read {TASK}"] == 1 and calls[f"read {root.name}"] == 0 and calls["parse"] <= 1, dict(calls)


def test_every_refusal_of_a_start_is_the_one_check_before_and_under_the_lock(git_repo: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    root = _repo(git_repo)
    seen: list[bool] = []
    real = loop_start.check_start

    def counting(*args: Any, **kwargs: Any) -> None:
        seen.append(kwargs["own"])
        real(*args, **kwargs)

    monkeypatch.setattr("guardkit_state.loop.run.check_start", counting)
    with pytest.raises(ResumeError, match="has no loop state to resume"):
        run_task_loop(root, TASK, CallableAgent(scripted_player), coach_verifying(1), LoopOptions(resume=True))
    # Checked on the main checkout's copy; no worktree nor branch to resume from: refused before one is made.
    assert seen == [False] and not (root / ".guardkit" / "worktrees" / TASK).exists()
    seen.clear()
    run_task_loop(root, TASK, CallableAgent(scripted_player), coach_verifying(1))
    assert seen == [False, True]  # on the main checkout's copy (the worktree to be made), then the worktree's
    seen.clear()
    with pytest.raises(InputError, match="was approved; pass --reopen"):
        run_task_loop(root, TASK, CallableAgent(scripted_player), coach_verifying(1))
    assert seen == [True]  # the worktree's copy, found before anything was made: refused there
