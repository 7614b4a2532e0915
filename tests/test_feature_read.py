"""The read side of features: ``show FEAT-X``, ``status`` with features, ``log FEAT-X``, and a task's
turns read from the feature's copy once its worktree is pruned. Each repository is made by running
a real feature (real git, scripted subprocess agents: ``tests/feature_agents``)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guardkit_state.cli.app import run as cli_run
from guardkit_state.features.build import FeatureOptions, build_feature
from guardkit_state.inspect.feature_log import read_feature_log
from guardkit_state.inspect.feature_view import feature_view
from guardkit_state.inspect.status import feature_status
from guardkit_state.taskfile.locate import locate_task

from .conftest import commit_on_branch, git_answer_sizes, run_git
from .feature_support import FEATURE_BRANCH, FEATURE_ID, FeatureProject, TaskSpec, count_git_runs, git, make_feature

T1, T2, T3 = "TASK-FB-001", "TASK-FB-002", "TASK-FB-003"
WAVES = [[T1, T2], [T3]]


def _specs(**overrides: dict[str, Any]) -> list[TaskSpec]:
    specs = {T1: TaskSpec(T1), T2: TaskSpec(T2), T3: TaskSpec(T3, [T1, T2])}
    for task_id, values in overrides.items():
        for key, value in values.items():
            setattr(specs[task_id.replace("_", "-")], key, value)
    return list(specs.values())


def _build(project: FeatureProject, options: FeatureOptions | None = None) -> Any:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in project.env().items():
            patch.setenv(name, value)
        return build_feature(project.root, FEATURE_ID, *project.agents(), options or FeatureOptions())


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli_run(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    code, out, err = cli(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FeatureProject]:
    """A feature run to its end: T1 approved in turn 2, T2 and T3 in turn 1, all merged."""
    project = make_feature(tmp_path_factory.mktemp("finished"), _specs(TASK_FB_001={"approve_at": 2}), WAVES)
    assert _build(project).exit_code == 0
    yield project


def test_show_feature_lists_waves_tasks_and_nothing_next(finished: FeatureProject,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    data = cli_json(capsys, "show", FEATURE_ID, "--repo", str(finished.root))
    assert (data["feature_id"], data["started"], data["plan_status"], data["wave_source"]) == \
        (FEATURE_ID, True, "completed", "parallel_groups")
    rows = [[(t["task_id"], t["status"], t["turns"], t["outcome"], t["merged"], t["decisions"])
             for t in wave["tasks"]] for wave in data["waves"]]
    assert rows == [[(T1, "completed", 2, "approved", True, ["feedback", "approve"]),
                     (T2, "completed", 1, "approved", True, ["approve"])],
                    [(T3, "completed", 1, "approved", True, ["approve"])]]
    first = data["waves"][0]["tasks"][0]
    assert first["criteria"]["total"] == 1 and first["criteria"]["verified"] == 1
    merges = read_feature_log(finished.root, FEATURE_ID).merges
    assert first["merge_commit"] == merges[0].sha
    assert data["next"] == {"wave": None, "run": [], "merge": [], "stopped_by": [],
                            "text": f"nothing: every wave is merged into {FEATURE_BRANCH}", "command": None,
                            "skipped": []}
    assert data["totals"] == {"tasks": 3, "completed": 3, "turns": 4}
    # The plan's path names the same feature; the plain text shows the waves and the next step.
    assert cli_json(capsys, "show", ".guardkit/features/FEAT-FB.yaml", "--repo", str(finished.root)) == data
    code, out, _ = cli(capsys, "show", FEATURE_ID, "--repo", str(finished.root))
    assert code == 0 and "wave 1" in out and "wave 2" in out and "next: nothing" in out
    assert f"{T1}  completed    2 turn(s)" in out


def test_log_feature_lists_merges_in_plan_order_and_each_tasks_turns(finished: FeatureProject,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    data = cli_json(capsys, "log", FEATURE_ID, "--repo", str(finished.root))
    assert [(m["task_id"], m["wave"]) for m in data["merges"]] == [(T1, 1), (T2, 1), (T3, 2)]
    assert all(len(m["sha"]) == 40 and m["date"] for m in data["merges"])
    turns = {t["task_id"]: [(e["turn"], e["decision"]) for e in t["turns"]] for t in data["tasks"]}
    assert turns == {T1: [(1, "feedback"), (2, "approve")], T2: [(1, "approve")], T3: [(1, "approve")]}
    assert all(t["merge"]["task_id"] == t["task_id"] for t in data["tasks"])
    code, out, _ = cli(capsys, "log", FEATURE_ID, "--repo", str(finished.root))
    assert code == 0 and out.count("wave 1") == 2 and f"{T1} (completed): turns from" in out
    assert out.startswith(f"{FEATURE_ID}: 3/3 task(s) done · 4 turn(s)\n")


def test_status_lists_features_with_their_progress(finished: FeatureProject,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    (summary,) = feature_status(finished.root)
    assert (summary.feature_id, summary.status, summary.done, summary.total, summary.waves,
            summary.completed_waves, summary.total_turns) == (FEATURE_ID, "completed", 3, 3, 2, [1, 2], 4)
    # --json alone keeps its shape (a list of task rows); --features adds the features beside it.
    assert isinstance(cli_json(capsys, "status", "--repo", str(finished.root)), list)
    both = cli_json(capsys, "status", "--features", "--repo", str(finished.root))
    assert [f["feature_id"] for f in both["features"]] == [FEATURE_ID] and both["features"][0]["done"] == 3
    assert isinstance(both["tasks"], list)
    code, out, _ = cli(capsys, "status", "--repo", str(finished.root))
    assert code == 0 and "features" in out and f"{FEATURE_ID}  completed    3/3 task(s) done  wave 2/2" in out


@pytest.fixture()
def pruned(tmp_path: Path) -> FeatureProject:
    """A finished feature whose task worktrees and branches were removed ('worktrees prune')."""
    project = make_feature(tmp_path, _specs(TASK_FB_001={"approve_at": 2}), WAVES)
    assert _build(project).exit_code == 0
    for task_id in (T1, T2, T3):
        git(project.root, "worktree", "remove", str(project.task_worktree(task_id)))
        git(project.root, "branch", "-D", f"autobuild/{task_id}")
    return project


def test_task_commands_read_the_feature_copy_after_the_worktree_is_pruned(
        pruned: FeatureProject, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(pruned.root)
    shown = cli_json(capsys, "show", T1, "--repo", root)
    assert [t["turn"] for t in shown["turns"]] == [1, 2] and shown["outcome"] == "approved"
    assert shown["copy"]["source"] == "feature worktree" and shown["copy"]["feature_id"] == FEATURE_ID
    assert shown["path"] == str(pruned.feature_worktree / "tasks/backlog/TASK-FB-001-part.md")
    code, out, _ = cli(capsys, "show", T1, "--repo", root)
    assert code == 0 and f"read from the feature worktree copy ({FEATURE_ID})" in out
    code, out, err = cli(capsys, "context", T1, "--repo", root)
    assert code == 0 and "feature worktree copy" in err and out.strip()
    assert cli_json(capsys, "context", T1, "--repo", root)["turn"] == 3
    logged = cli_json(capsys, "log", T1, "--repo", root)
    assert logged["source"] == f"feature branch {FEATURE_BRANCH}"
    assert [(e["turn"], e["decision"]) for e in logged["turns"]] == [(1, "feedback"), (2, "approve")]
    # The feature view agrees: same turns, read from the feature branch's merges.
    view = feature_view(pruned.root, FEATURE_ID)
    assert [(r.task_id, r.status, r.turns) for r in view.tasks] == [(T1, "completed", 2), (T2, "completed", 1),
                                                                     (T3, "completed", 1)]


def test_without_the_feature_worktree_the_feature_branch_is_read_through_git(
        pruned: FeatureProject, capsys: pytest.CaptureFixture[str]) -> None:
    git(pruned.root, "worktree", "remove", str(pruned.feature_worktree))
    location = locate_task(pruned.root, T1)
    assert (location.source, location.rev, location.in_worktree) == ("feature branch", FEATURE_BRANCH, False)
    assert "from git" in location.note
    shown = cli_json(capsys, "show", T1, "--repo", str(pruned.root))
    assert [t["decision"] for t in shown["turns"]] == ["feedback", "approve"]
    assert shown["copy"]["rev"] == FEATURE_BRANCH
    # Once the feature is merged into the checked-out branch, the main checkout is the copy again.
    git(pruned.root, "stash", "-q")  # the plan file the run updated
    git(pruned.root, "merge", "-q", "--no-edit", FEATURE_BRANCH)
    again = locate_task(pruned.root, T1)
    assert (again.source, again.rev) == ("main", None)
    assert [t["turn"] for t in cli_json(capsys, "show", T1, "--repo", str(pruned.root))["turns"]] == [1, 2]


def test_a_merge_conflict_shows_blocked_paths_and_stops_next(tmp_path: Path) -> None:
    shared = {"file": "src/shared.txt", "mode": "replace"}
    project = make_feature(tmp_path, _specs(TASK_FB_001=shared, TASK_FB_002=shared), WAVES)
    assert _build(project).task(T2).status == "blocked"
    view = feature_view(project.root, FEATURE_ID)
    rows = {r.task_id: r for r in view.tasks}
    assert (rows[T2].status, rows[T2].conflicts, rows[T2].merged) == ("blocked", ("src/shared.txt",), False)
    assert (rows[T1].status, rows[T3].status) == ("completed", "pending")
    assert (view.next.wave, view.next.run, view.next.stopped_by) == (1, (), (T2,))
    assert "blocked (src/shared.txt)" in view.next.text and view.next.command is None


def test_a_failed_task_and_a_feature_not_started(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = make_feature(tmp_path, _specs(TASK_FB_001={"approve_at": 0}), WAVES)
    fresh = feature_view(project.root, FEATURE_ID)
    assert not fresh.started and [r.status for r in fresh.tasks] == ["pending"] * 3
    assert (fresh.next.wave, fresh.next.run) == (1, (T1, T2))
    assert fresh.next.command is not None and "--resume" not in fresh.next.command
    assert _build(project, FeatureOptions(max_turns=2)).exit_code == 1
    view = feature_view(project.root, FEATURE_ID)
    failed = view.tasks[0]
    assert (failed.status, failed.outcome, failed.turns) == ("failed", "max_turns_exceeded", 2)
    assert failed.criteria is not None and failed.criteria.rejected == 1
    assert (view.next.wave, view.next.stopped_by) == (1, (T1,))
    # The failed task's own worktree is still there: show reads it, as for any loop.
    assert locate_task(project.root, T1).source == "worktree"


def test_a_task_branch_the_feature_branch_does_not_reach_is_read_through_git(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_feature(tmp_path, _specs(TASK_FB_001={"approve_at": 0}), WAVES)
    assert _build(project, FeatureOptions(max_turns=2)).exit_code == 1
    git(project.root, "worktree", "remove", str(project.task_worktree(T1)))
    calls = count_git_runs(monkeypatch)
    location = locate_task(project.root, T1)
    assert (location.source, location.rev, location.in_worktree) == ("task branch", f"autobuild/{T1}", False)
    # Whether the task's branch exists is read from the autobuild/ branches listed once, not asked again.
    assert not [call for call in calls if call[:1] == ("show-ref",)], calls


def test_max_parallel_on_a_task_is_noted_and_ignored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = make_feature(tmp_path, _specs(), WAVES)
    player, coach = project.agents()
    env = {**project.env(), "NO_COLOR": "1"}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        code, _, err = cli(capsys, "feature-build", T1, "--repo", str(project.root), "--player", player.command,
                           "--coach", coach.command, "--max-parallel", "2")
    assert code == 0, err
    assert "--max-parallel applies to features (FEAT-ID) only" in err
    help_text = subprocess.run([sys.executable, "-m", "guardkit_state", "feature-build", "--help"], capture_output=True,
                               text=True, check=False, cwd=project.root).stdout
    assert "TASK-ID|FEAT-ID" in help_text and "feature-build FEAT-AUTH" in help_text


def test_a_task_file_over_the_cap_on_the_feature_branch_is_refused_unread(
        pruned: FeatureProject, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # A blob one byte over the cap pushed at the task's file (an agent's, a person's, a hostile
    # worker's): 'show' reads that copy as it reads one on disk: refused before a byte is read.
    from guardkit_state.store.reads import MAX_FILE_BYTES

    git(pruned.root, "worktree", "remove", str(pruned.feature_worktree))
    rel = "tasks/backlog/TASK-FB-001-part.md"
    commit_on_branch(pruned.root, FEATURE_BRANCH, rel, b"#" * (MAX_FILE_BYTES + 1))
    before = git(pruned.root, "for-each-ref"), git(pruned.root, "status", "--porcelain")
    answers = git_answer_sizes(monkeypatch)
    code, out, err = cli(capsys, "show", T1, "--repo", str(pruned.root))
    assert (code, out) == (2, "")
    assert err == (f"error: {FEATURE_BRANCH}:{rel}: file is {MAX_FILE_BYTES + 1} bytes, over the "
                   f"{MAX_FILE_BYTES}-byte limit (expected at most {MAX_FILE_BYTES} bytes)\n")
    assert max(answers) < MAX_FILE_BYTES
    assert (git(pruned.root, "for-each-ref"), git(pruned.root, "status", "--porcelain")) == before
    # The MCP server's reads of a task go through the same location: the same typed error.
    from guardkit_state.errors import FileTooLargeError
    from guardkit_state.mcp_server.answers import task_file

    with pytest.raises(FileTooLargeError, match=f"{FEATURE_BRANCH}:{rel}: file is {MAX_FILE_BYTES + 1} bytes"):
        task_file(pruned.root, T1)
    assert max(answers) < MAX_FILE_BYTES


def test_feature_merges_are_read_whatever_a_merge_subject_holds(git_repo: Path) -> None:
    # A person merges by hand with any subject: separators in it neither end the merge's record nor
    # start a made-up one (a merge of TASK-FB-009 in wave 1 at a sha nobody committed).
    from guardkit_state.git.repo import GitRepo
    from guardkit_state.inspect.feature_log import feature_merges

    made_up = "\x1f".join(["f" * 40, "2026-01-01T00:00:00+00:00", "forged", FEATURE_ID, "TASK-FB-009", "1"])
    shas = []
    trailers = f"Guardkit-Feature: {FEATURE_ID}\nGuardkit-Task: {T1}\nGuardkit-Wave: 1\n"
    for n, message in enumerate([f"merge {T1}\n\n{trailers}", f"by hand\x1e\n{made_up}\x1e"]):
        run_git(git_repo, "checkout", "-q", "-b", f"side-{n}", "main")
        run_git(git_repo, "commit", "-q", "--allow-empty", "-m", f"work {n}")
        run_git(git_repo, "checkout", "-q", "main")
        run_git(git_repo, "merge", "-q", "--no-ff", "--cleanup=verbatim", "-m", message, f"side-{n}")
        shas.append(run_git(git_repo, "rev-parse", "HEAD").strip())
    repo = GitRepo.discover(git_repo)
    assert repo is not None
    assert [(m.sha, m.task_id, m.wave) for m in feature_merges(repo, "main", FEATURE_ID)] == \
        [(shas[0], T1, 1), (shas[1], None, None)]
