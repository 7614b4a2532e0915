"""The clean git environment: an inherited ``GIT_DIR``/``GIT_WORK_TREE``/``GIT_INDEX_FILE`` (a git
hook, an IDE terminal) never sends a turn commit, a merge or an agent's own git to the user's
checkout. Real repositories, real subprocess agents."""

from __future__ import annotations

from pathlib import Path

import pytest

from guardkit_state.features.build import FeatureOptions, build_feature

from .feature_support import FEATURE_BRANCH, FEATURE_ID, TaskSpec, git, make_feature, merged_tasks

T1 = "TASK-FB-001"


def test_clean_environment_drops_exactly_the_repository_and_pathspec_variables() -> None:
    from guardkit_state.git.environment import PATHSPEC_VARIABLES, REPOSITORY_VARIABLES, clean_environment

    base = dict.fromkeys(REPOSITORY_VARIABLES | PATHSPEC_VARIABLES, "/elsewhere") | {
        "PATH": "/bin", "GIT_AUTHOR_NAME": "Ann", "GIT_CONFIG_NOSYSTEM": "1", "GIT_SSH_COMMAND": "ssh"}
    assert clean_environment(base) == {"PATH": "/bin", "GIT_AUTHOR_NAME": "Ann", "GIT_CONFIG_NOSYSTEM": "1",
                                       "GIT_SSH_COMMAND": "ssh"}


def test_feature_run_from_a_hook_environment_leaves_the_users_checkout_and_index(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The Player commits on its own too: with GIT_DIR inherited, that commit would land on main.
    project = make_feature(tmp_path, [TaskSpec(T1, shell="git add -A && git commit -q -m 'player wip'")])
    root = project.root
    main_before = git(root, "rev-parse", "main")
    for name, value in project.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GIT_DIR", str(root / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(root))
    monkeypatch.setenv("GIT_INDEX_FILE", str(root / ".git" / "index"))
    result = build_feature(root, FEATURE_ID, *project.agents(), FeatureOptions())
    monkeypatch.delenv("GIT_DIR")
    monkeypatch.delenv("GIT_WORK_TREE")
    monkeypatch.delenv("GIT_INDEX_FILE")
    assert (result.status, result.exit_code) == ("completed", 0), result.reason
    assert git(root, "rev-parse", "main") == main_before
    assert git(root, "diff", "--cached", "--name-only") == ""
    assert git(root, "log", "--format=%s", "main") == "initial\n"
    assert merged_tasks(root) == [T1]
    files = git(root, "ls-tree", "-r", "--name-only", FEATURE_BRANCH).split()
    assert f"src/{T1}.txt" in files and f".guardkit/autobuild/{T1}/coach_turn_1.json" in files
    # The Player's own commit is on its task branch, under the loop's turn commit.
    subjects = git(root, "log", "--format=%s", f"autobuild/{T1}").splitlines()
    assert subjects[:2] == [f"autobuild({T1}): turn 1 approve", "player wip"]


def test_an_inherited_literal_pathspecs_setting_does_not_refuse_every_turn_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIT_LITERAL_PATHSPECS=1 made the loop's ':(exclude).guardkit/index' a literal name matching nothing.
    project = make_feature(tmp_path, [TaskSpec(T1)])
    for name, value in project.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GIT_LITERAL_PATHSPECS", "1")
    result = build_feature(project.root, FEATURE_ID, *project.agents(), FeatureOptions())
    assert (result.status, result.exit_code) == ("completed", 0), result.reason
    assert merged_tasks(project.root) == [T1]
