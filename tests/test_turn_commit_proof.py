"""A turn commit is one the loop can prove it made (its ledger, on the task's branch, after the run's
base), and exit 0 means it is there: a Player's look-alike commit, an earlier run merged into the
base, a hook's footer, a removed ``.git`` link or a refused commit never pass for one. Real git,
real hooks and configuration, real subprocess agents (``tests/feature_agents``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from guardkit_state.features.build import FeatureOptions, build_feature
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.worktrees import WorktreeManager
from guardkit_state.inspect.review import read_turn_log
from guardkit_state.loop.run import LoopOptions, run_task_loop

from .feature_support import (
    FEATURE_BRANCH,
    FEATURE_ID,
    FeatureProject,
    TaskSpec,
    git,
    make_feature,
    merged_tasks,
    task_rel,
    task_text,
)

T1, T2 = "TASK-FB-001", "TASK-FB-002"
LOOK_ALIKE = (f"git add -A && git commit -q -m 'autobuild({T1}): turn 1 approve' "
              f"-m 'Task: {T1}\nTurn: 1\nDecision: approve\nMode: fresh_start'")


def _env(project: FeatureProject, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in project.env().items():
        monkeypatch.setenv(name, value)


def _feature(project: FeatureProject, monkeypatch: pytest.MonkeyPatch, *, resume: bool = False) -> Any:
    _env(project, monkeypatch)
    return build_feature(project.root, FEATURE_ID, *project.agents(), FeatureOptions(resume=resume))


def _task(project: FeatureProject, monkeypatch: pytest.MonkeyPatch, task_id: str = T1, *, resume: bool = False,
          max_turns: int | None = None) -> Any:
    _env(project, monkeypatch)
    return run_task_loop(project.root, task_id, *project.agents(), LoopOptions(resume=resume, max_turns=max_turns))


def _hook(root: Path, name: str, body: str) -> None:
    hook = root / ".git" / "hooks" / name
    hook.write_text("#!/bin/sh\n" + body)
    hook.chmod(0o755)


def _tree(root: Path, rev: str) -> list[str]:
    return git(root, "ls-tree", "-r", "--name-only", rev).split()


def test_a_players_look_alike_turn_commit_is_ordinary_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1, shell=LOOK_ALIKE)])
    result = _feature(project, monkeypatch)
    assert (result.status, result.exit_code) == ("completed", 0), result.reason
    # The loop's own turn commit holds the turn's reports and task file, and that is what was merged.
    files = _tree(project.root, FEATURE_BRANCH)
    assert f".guardkit/autobuild/{T1}/turn_state_turn_1.json" in files
    task_copy = git(project.root, "show", f"{FEATURE_BRANCH}:{task_rel(T1).as_posix()}")
    assert "autobuild_state" in task_copy
    subjects = git(project.root, "log", "--format=%s", f"autobuild/{T1}").splitlines()
    assert subjects[:2] == [f"autobuild({T1}): turn 1 approve"] * 2


def test_a_rerun_after_the_first_run_was_merged_commits_its_own_work(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1)])
    root = project.root
    first = _task(project, monkeypatch)
    assert first.exit_code == 0, first.reason
    git(root, "merge", "-q", "--no-ff", "-m", "merge first run", f"autobuild/{T1}")
    pruned = WorktreeManager(GitRepo.discover(root)).prune()  # type: ignore[arg-type]
    assert [w.task_id for w in pruned.removed] == [T1]
    # Re-run from scratch: its recorded state removed, the Player now writes another file.
    git(root, "rm", "-q", "-r", f".guardkit/autobuild/{T1}")
    (root / task_rel(T1)).write_text(task_text(T1))
    git(root, "commit", "-q", "-am", "reset the task for a re-run")
    project.spec_file.write_text(json.dumps({T1: {**TaskSpec(T1).agent_spec(), "file": "src/second.txt"}}))
    second = _task(project, monkeypatch)
    assert second.exit_code == 0, second.reason
    assert "src/second.txt" in _tree(root, f"autobuild/{T1}")
    assert second.commits and second.commits[-1].committed
    assert git(project.task_worktree(T1), "status", "--porcelain") == ""


def test_a_commit_msg_footer_after_the_trailers_does_not_hide_the_turn_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1)])
    # The footer is a paragraph of its own: git's trailer parser then sees only it.
    _hook(project.root, "commit-msg", 'printf "\\nReviewed-by: the hook\\n" >> "$1"\n')
    result = _feature(project, monkeypatch)
    assert (result.status, result.exit_code) == ("completed", 0), result.reason
    merges = git(project.root, "log", "--first-parent", "--merges", "--format=%B", FEATURE_BRANCH)
    assert f"Guardkit-Task: {T1}" in merges and "Reviewed-by: the hook" in merges
    assert f"src/{T1}.txt" in _tree(project.root, FEATURE_BRANCH)
    logged = read_turn_log(project.root, T1).entries  # `log` lists the turn although git's trailer parser sees none
    assert [(e.turn, e.decision) for e in logged] == [(1, "approve")]
    assert logged[0].sha == git(project.root, "rev-parse", f"autobuild/{T1}").strip()
    again = _task(project, monkeypatch, resume=True)
    assert again.exit_code == 0, again.reason


def test_a_removed_worktree_git_link_is_repaired_and_the_turn_committed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1, shell="rm .git")])
    result = _task(project, monkeypatch)
    assert result.exit_code == 0, result.reason
    assert (project.task_worktree(T1) / ".git").is_file()
    assert f".guardkit/autobuild/{T1}/coach_turn_1.json" in _tree(project.root, f"autobuild/{T1}")
    assert any("lost its .git link" in note for note in result.notes)


def test_a_git_link_rewritten_to_the_main_repository_is_repaired_and_main_untouched(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The Player points its worktree's .git at the main checkout's git dir: git there is on `main`,
    # and the turn commit landed on the user's main (exit 0).
    project = make_feature(tmp_path, [TaskSpec(T1, shell=f"echo 'gitdir: {tmp_path}/project/.git' > .git")])
    main_before = git(project.root, "rev-parse", "main")
    result = _task(project, monkeypatch)
    assert result.exit_code == 0, result.reason
    assert git(project.root, "rev-parse", "main") == main_before
    assert git(project.root, "status", "--porcelain") == ""
    assert f"src/{T1}.txt" in _tree(project.root, f"autobuild/{T1}")
    assert any("pointed to another git directory" in note for note in result.notes), result.notes


def test_resume_after_the_git_link_was_removed_repairs_the_worktree(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1, approve_at=2)])
    first = _task(project, monkeypatch, max_turns=1)
    assert first.exit_code == 1
    os.remove(project.task_worktree(T1) / ".git")
    second = _task(project, monkeypatch, resume=True, max_turns=2)
    assert second.exit_code == 0, second.reason
    assert git(project.root, "log", "--format=%s", f"autobuild/{T1}").splitlines()[:2] == [
        f"autobuild({T1}): turn 2 approve", f"autobuild({T1}): turn 1 feedback"]


def test_a_refused_commit_is_an_error_naming_gits_reason_and_resume_commits_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1)])
    git(project.root, "config", "commit.gpgsign", "true")
    git(project.root, "config", "gpg.program", "false")
    result = _task(project, monkeypatch)
    assert result.exit_code == 1
    assert "gpg failed to sign" in (result.commit_error or ""), result.reason
    assert "\n" not in result.reason and "--resume" in result.reason
    git(project.root, "config", "commit.gpgsign", "false")
    again = _task(project, monkeypatch, resume=True)
    assert again.exit_code == 0, again.reason
    assert f".guardkit/autobuild/{T1}/coach_turn_1.json" in _tree(project.root, f"autobuild/{T1}")


def test_a_post_commit_hook_that_moves_head_back_is_no_turn_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `git commit` exits 0, then the hook undoes it: HEAD (the base commit) was taken for the turn's.
    project = make_feature(tmp_path, [TaskSpec(T1)])
    _hook(project.root, "post-commit", "git reset -q --soft HEAD~1\n")
    result = _task(project, monkeypatch)
    assert result.exit_code == 1
    assert "HEAD is not a new commit" in (result.commit_error or ""), result.reason
    os.remove(project.root / ".git" / "hooks" / "post-commit")
    again = _task(project, monkeypatch, resume=True)
    assert again.exit_code == 0, again.reason
    assert f"src/{T1}.txt" in _tree(project.root, f"autobuild/{T1}")


def test_a_refused_turn_commit_does_not_hold_back_an_approved_sibling(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1), TaskSpec(T2)], [[T1, T2]])
    _hook(project.root, "pre-commit",
          f'if git diff --cached --name-only | grep -q "src/{T1}.txt"; then echo "lint: {T1} refused" >&2; '
          'exit 1; fi\n')
    result = _feature(project, monkeypatch)
    assert (result.status, result.exit_code) == ("stopped", 1)
    assert merged_tasks(project.root) == [T2]
    first = result.task(T1)
    assert first.status == "failed" and "pre-commit hook rejected" in first.reason, first.reason
    assert "its files say it did not end" not in first.reason
    os.remove(project.root / ".git" / "hooks" / "pre-commit")
    again = _feature(project, monkeypatch, resume=True)
    assert (again.status, again.exit_code) == ("completed", 0), again.reason
    assert merged_tasks(project.root) == [T2, T1]


def test_an_agents_edit_to_the_recorded_history_is_reverted_and_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Turn 2's Player rewrites turn 1's decision in its worktree's task file.
    edit = (f"{sys.executable} -c \"import pathlib,os; p=pathlib.Path('{task_rel(T1).as_posix()}'); "
            "t=p.read_text(); os.environ['GUARDKIT_TURN']=='2' and p.write_text(t.replace('decision: feedback', "
            "'decision: approve', 1))\"")
    project = make_feature(tmp_path, [TaskSpec(T1, approve_at=2, shell=edit)])
    result = _task(project, monkeypatch)
    assert result.exit_code == 0, result.reason
    notes = [n for n in result.notes if "changed the recorded history" in n]
    assert len(notes) == 1 and "turn 1's entry (decision 'feedback' → 'approve')" in notes[0], result.notes
    committed = git(project.root, "show", f"autobuild/{T1}:{task_rel(T1).as_posix()}")
    assert [line.strip() for line in committed.splitlines() if line.strip().startswith("decision:")] == [
        "decision: feedback", "decision: approve"]
    flags = git(project.root, "log", "--format=%(trailers:key=History-Restored,valueonly)%x1e", f"autobuild/{T1}")
    assert [f.strip() for f in flags.split("\x1e")][:2] == ["turn 1's entry (decision 'feedback' → 'approve')", ""]


def test_a_kill_between_the_commit_and_its_ledger_line_is_resumed_with_one_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1)])
    player, coach = project.agents()
    env = {**os.environ, **project.env()}
    argv = [sys.executable, "-m", "guardkit_state", "feature-build", T1, "--player", player.command,
            "--coach", coach.command]
    killed = subprocess.run(argv, cwd=project.root, env={**env, "GUARDKIT_STATE_CRASH_AT": "git.after_commit"},
                            capture_output=True, text=True, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    resumed = subprocess.run([*argv, "--resume"], cwd=project.root, env=env, capture_output=True, text=True,
                             check=False)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    subjects = git(project.root, "log", "--format=%s", f"autobuild/{T1}").splitlines()
    assert subjects.count(f"autobuild({T1}): turn 1 approve") == 1


@pytest.mark.parametrize("switch", ["git checkout -q -b elsewhere", "git checkout -q --detach"])
def test_a_player_that_switches_its_worktree_off_the_task_branch_gets_no_approval(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, switch: str) -> None:
    project = make_feature(tmp_path, [TaskSpec(T1, shell=switch)])
    result = _task(project, monkeypatch)
    # The turn commit would land on the agent's branch (or nowhere): not approved, and said why.
    assert result.exit_code == 1
    assert f"not on autobuild/{T1}" in result.reason and "an agent switched it" in result.reason, result.reason
    assert f"src/{T1}.txt" not in _tree(project.root, f"autobuild/{T1}")
    git(project.task_worktree(T1), "switch", "-q", f"autobuild/{T1}")
    again = _task(project, monkeypatch, resume=True)
    assert again.exit_code == 0, again.reason
    assert f".guardkit/autobuild/{T1}/coach_turn_1.json" in _tree(project.root, f"autobuild/{T1}")


def test_a_player_resetting_the_branch_does_not_drop_the_earlier_turns_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Turn 2's Player runs `git reset --hard HEAD~1`: turn 1's commit and its reports leave the worktree.
    reset = 'test "$GUARDKIT_TURN" = 2 && git reset -q --hard HEAD~1'
    project = make_feature(tmp_path, [TaskSpec(T1, approve_at=2, shell=reset)])
    result = _task(project, monkeypatch)
    assert result.exit_code == 0, result.reason
    files = _tree(project.root, f"autobuild/{T1}")
    for turn in (1, 2):
        for kind in ("player_turn", "coach_turn", "turn_state_turn"):
            assert f".guardkit/autobuild/{T1}/{kind}_{turn}.json" in files, files
    assert any("removed the recorded files of earlier turns (player_turn_1.json" in n for n in result.notes), \
        result.notes


def test_a_task_file_the_player_removed_is_put_back_with_its_recorded_turns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Turn 2's Player deletes its worktree's task file: the turn's write failed, and --resume found
    # only main's copy (no turns) and refused for good.
    remove = f'test "$GUARDKIT_TURN" = 2 && rm {task_rel(T1).as_posix()}'
    project = make_feature(tmp_path, [TaskSpec(T1, approve_at=2, shell=remove)])
    result = _task(project, monkeypatch)
    assert result.exit_code == 0, result.reason
    assert any("the task file itself (removed)" in note for note in result.notes), result.notes
    committed = git(project.root, "show", f"autobuild/{T1}:{task_rel(T1).as_posix()}")
    assert [line.strip() for line in committed.splitlines() if line.strip().startswith("decision:")] == [
        "decision: feedback", "decision: approve"]


def test_a_task_id_the_player_rewrote_is_put_back_and_the_feature_merges_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # With the id rewritten in its worktree's task file, the feature could not find the task's copy:
    # "approved by the Coach in turn 1, but its files say it did not end".
    rewrite = f'sed -i "s/^id: {T1}$/id: TASK-OTHER/" {task_rel(T1).as_posix()}'
    project = make_feature(tmp_path, [TaskSpec(T1, shell=rewrite)])
    result = _feature(project, monkeypatch)
    assert (result.status, result.exit_code) == ("completed", 0), result.reason
    assert merged_tasks(project.root) == [T1]
    committed = git(project.root, "show", f"{FEATURE_BRANCH}:{task_rel(T1).as_posix()}")
    assert f"id: {T1}\n" in committed and "TASK-OTHER" not in committed


def test_work_the_player_reported_but_a_gitignore_rule_kept_out_is_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The Player ignores its own output: approved with exit 0 and not a word that src/T1.txt is not committed.
    project = make_feature(tmp_path, [TaskSpec(T1, shell="echo 'src/TASK-*' >> .gitignore")])
    result = _task(project, monkeypatch)
    assert result.exit_code == 0, result.reason
    assert f"src/{T1}.txt" not in _tree(project.root, f"autobuild/{T1}")
    assert [n for n in result.notes if "kept out of the commit" in n] == [
        f"turn 1: the Player's report lists files a .gitignore rule kept out of the commit: src/{T1}.txt "
        "(.gitignore:1:src/TASK-*); 'git add -f' them in the worktree if they are work"]


def test_without_a_worktree_a_player_switching_the_users_branch_gets_no_approval(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # In the user's own checkout the turn commit followed the agent onto its new branch, exit 0.
    project = make_feature(tmp_path, [TaskSpec(T1, shell="git checkout -q -b elsewhere")])
    _env(project, monkeypatch)
    result = run_task_loop(project.root, T1, *project.agents(), LoopOptions(use_worktree=False))
    assert result.exit_code == 1
    assert "not on main" in result.reason and "an agent switched it" in result.reason, result.reason
    assert git(project.root, "log", "--format=%s", "elsewhere").splitlines() == ["initial"]


def test_earlier_turns_files_over_the_cap_in_git_are_not_restored_nor_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # As above, with every recorded file over the cap (monkeypatched small: the ledger, in the git
    # folder an agent's worktree shares, can name a commit holding gigabytes there): none is read.
    from guardkit_state.store import reads

    reset = 'test "$GUARDKIT_TURN" = 2 && git reset -q --hard HEAD~1'
    project = make_feature(tmp_path, [TaskSpec(T1, approve_at=2, shell=reset)])
    monkeypatch.setattr(reads, "MAX_FILE_BYTES", 60)
    result = _task(project, monkeypatch)
    assert result.exit_code == 0, result.reason
    assert any("recorded files of earlier turns (player_turn_1.json, coach_turn_1.json, turn_state_turn_1.json); "
               "not restored" in n for n in result.notes), result.notes
    files = _tree(project.root, f"autobuild/{T1}")
    assert f".guardkit/autobuild/{T1}/player_turn_1.json" not in files
