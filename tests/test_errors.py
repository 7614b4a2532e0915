"""``errors``: one line per error, ``(expected ...)`` only for an input's form, then what to do."""

from __future__ import annotations

import subprocess
from pathlib import Path

from guardkit_state.errors import GuardkitStateError, LockedError, WriteVerificationError

from .e2e_support import GUARDKIT_STATE, clean_env


def test_an_error_with_an_expected_form_and_a_fix_reads_message_form_then_fix() -> None:
    error = GuardkitStateError("file is empty", path="gates.yaml", pointer="$.profiles",
                               expected="a 'profiles' mapping", fix="or delete the file to use the built-in gates")
    assert str(error) == ("gates.yaml: $.profiles: file is empty (expected a 'profiles' mapping); "
                          "or delete the file to use the built-in gates")
    assert error.to_dict()["fix"] == "or delete the file to use the built-in gates"


def test_a_condition_that_is_no_input_has_a_fix_and_no_expected() -> None:
    error = LockedError("another guardkit-state process holds this lock", path="x.lock", fix="wait for it to finish")
    assert str(error) == "x.lock: another guardkit-state process holds this lock; wait for it to finish"
    assert "expected" not in str(error)


def test_a_fix_the_message_already_says_is_not_repeated() -> None:
    assert str(GuardkitStateError("run it again; try again", fix="try again")) == "run it again; try again"


def test_a_write_verification_error_says_to_report_the_bug() -> None:
    error = WriteVerificationError("the splice would change a line; nothing was written", path="t.md", line=3)
    assert str(error) == ("t.md:3: the splice would change a line; nothing was written; the file is unchanged; "
                          "please report this as a guardkit-state bug")


def test_a_command_outside_a_repository_says_what_to_do_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run([str(GUARDKIT_STATE), "worktrees", "--repo", str(tmp_path)], capture_output=True,
                          text=True, env=clean_env(NO_COLOR="1", GIT_CEILING_DIRECTORIES=str(tmp_path.parent)),
                          timeout=60, check=False)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (f"error: {tmp_path}: not a git repository (or git is not installed); "
                           "run it in a git repository, or give --repo DIR\n")
