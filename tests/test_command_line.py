"""The "continue with" commands: the run's own words, shell-quoted, pasteable as they are."""

from __future__ import annotations

import shlex

from hypothesis import given
from hypothesis import strategies as st

from guardkit_state.agents.protocol import CommandAgent
from guardkit_state.loop.command_line import build_argv, rerun_command
from guardkit_state.loop.outcome import LoopInterrupted


def test_rerun_command_quotes_agent_commands_and_adds_resume_once() -> None:
    argv = ["feature-build", "TASK-A-1", "--player", "claude -p 'do it'", "--coach", "python coach.py",
            "--resume", "--max-turns", "7"]
    command = rerun_command(argv, resume=True)
    assert command == ("guardkit-state feature-build TASK-A-1 --player 'claude -p '\"'\"'do it'\"'\"'' "
                       "--coach 'python coach.py' --max-turns 7 --resume")
    assert shlex.split(command) == ["guardkit-state", *[w for w in argv if w != "--resume"], "--resume"]


def test_a_fresh_start_command_has_no_resume() -> None:
    assert rerun_command(["feature-build", "FEAT-X", "--resume"], resume=False) == "guardkit-state feature-build FEAT-X"


def test_build_argv_takes_command_agents_commands_and_names_the_place_of_others() -> None:
    assert build_argv("TASK-A-1", CommandAgent("./p.sh $X"), object()) == (
        "feature-build", "TASK-A-1", "--player", "./p.sh $X", "--coach", "CMD")


def test_the_interrupt_line_of_a_loop_is_its_command_with_resume() -> None:
    stop = LoopInterrupted("TASK-A-1", turn=2, phase="coach", resumed=False,
                           argv=("feature-build", "TASK-A-1", "--player", "a b", "--coach", "c"))
    assert str(stop) == ("interrupted during turn 2 (coach): state saved; continue with "
                         "guardkit-state feature-build TASK-A-1 --player 'a b' --coach c --resume")


@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                        min_size=1), max_size=6))
def test_what_the_shell_reads_back_is_the_words_given(words: list[str]) -> None:
    command = rerun_command(["feature-build", *words], resume=True)
    expected = ["guardkit-state", "feature-build", *[w for w in words if w != "--resume"], "--resume"]
    assert shlex.split(command) == expected
