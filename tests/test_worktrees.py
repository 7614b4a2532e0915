"""WorktreeManager in real repositories: create, find/restore, list, prune, and the main checkout."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from guardkit_state.cli.app import run
from guardkit_state.errors import GitError, InputError
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.worktrees import WorktreeManager
from guardkit_state.inspect.review import read_turn_log

from .conftest import run_git
from .gitloop import TASK_ID, make_project, run_loop, run_turn, trailer_turns
from .helpers import killed_and_live_temp_files

BRANCH = f"autobuild/{TASK_ID}"


@pytest.fixture
def project(git_repo: Path) -> Path:
    return make_project(git_repo)


def _manager(root: Path) -> WorktreeManager:
    repo = GitRepo.discover(root)
    assert repo is not None
    return WorktreeManager(repo)


def _status(root: Path) -> str:
    return run_git(root, "status", "--porcelain", "--untracked-files=all")


def test_create_makes_branch_worktree_and_tracks_base(project: Path) -> None:
    wt = _manager(project).create(TASK_ID)
    assert wt.path == project / ".guardkit" / "worktrees" / TASK_ID
    assert wt.branch == BRANCH and wt.base_branch == "main" and wt.notes == ()
    assert run_git(wt.path, "symbolic-ref", "--short", "HEAD").strip() == BRANCH
    assert (
        run_git(project, "rev-parse", f"{BRANCH}@{{upstream}}").strip()
        == run_git(project, "rev-parse", "main").strip()
    )
    assert (project / ".guardkit" / "worktrees" / ".gitignore").read_text().splitlines()[-1] == "*"


def test_create_removes_the_temp_file_a_killed_write_of_the_folders_gitignore_left(project: Path) -> None:
    # A kill while the first create wrote ``.guardkit/worktrees/.gitignore`` leaves its temp file in a
    # folder no loop's tidy-up looks at (and the ``*`` written later hides it from git status): the
    # next create removes it. A live writer's (this process's) is kept.
    folder = project / ".guardkit" / "worktrees"
    folder.mkdir(parents=True)
    _, live = killed_and_live_temp_files(folder, ".gitignore", "# managed by guardkit-state")
    _manager(project).create(TASK_ID)
    assert sorted(p.name for p in folder.iterdir()) == sorted([".gitignore", live.name, TASK_ID])


def test_a_branch_made_first_is_checked_out_later_where_create_would_put_it(project: Path) -> None:
    (project / "README.md").write_text("# edited by the user\n")
    manager = _manager(project)
    made = manager.create_branch(TASK_ID)
    assert made.branch == BRANCH and made.base_branch == "main" and not made.path.exists()
    assert run_git(project, "rev-parse", "--abbrev-ref", f"{BRANCH}@{{upstream}}").strip() == "main"
    assert manager.find(TASK_ID, restore=False)[0] is None  # nothing checked out yet
    wt = manager.check_out(made)
    assert wt.path == made.path == project / ".guardkit" / "worktrees" / TASK_ID
    assert run_git(wt.path, "symbolic-ref", "--short", "HEAD").strip() == BRANCH
    assert any("uncommitted changes" in n for n in wt.notes)
    assert (wt.path / "README.md").read_text() == "# test project\n"
    found, _ = manager.find(TASK_ID)
    assert found is not None and found.path == wt.path and found.base_branch == "main"
    with pytest.raises(GitError):
        manager.create_branch(TASK_ID)  # the branch exists: never moved


def test_loop_leaves_main_checkout_status_unchanged(project: Path) -> None:
    before = _status(project)
    head = run_git(project, "rev-parse", "HEAD")
    run_loop(project)
    assert _status(project) == before == ""
    assert run_git(project, "rev-parse", "HEAD") == head


def test_dirty_main_checkout_is_left_alone(project: Path) -> None:
    (project / "README.md").write_text("# edited by the user\n")
    (project / "notes.txt").write_text("scratch\n")
    before = _status(project)
    wt, results = run_loop(project)
    assert any("uncommitted changes" in n for n in wt.notes)
    assert all(r.committed for r in results)
    assert _status(project) == before
    assert (project / "README.md").read_text() == "# edited by the user\n"
    assert not (wt.path / "notes.txt").exists()
    assert (wt.path / "README.md").read_text() == "# test project\n"


def test_detached_head_branches_from_the_commit(project: Path) -> None:
    head = run_git(project, "rev-parse", "HEAD").strip()
    run_git(project, "checkout", "-q", "--detach")
    wt, results = run_loop(project)
    assert any("detached" in n for n in wt.notes)
    assert wt.base_branch is None
    assert run_git(project, "merge-base", BRANCH, head).strip() == head
    assert trailer_turns(project, f"{head}..{BRANCH}") == ["1", "2", "3"]
    assert all(r.committed for r in results)


def test_base_branch_that_moved_is_reported_and_nothing_is_rewritten(project: Path) -> None:
    wt, _ = run_loop(project, turns=2)
    tip = run_git(project, "rev-parse", BRANCH).strip()
    (project / "other.txt").write_text("main moved on\n")
    run_git(project, "add", "other.txt")
    run_git(project, "commit", "-q", "-m", "main moves")
    [info] = _manager(project).list()
    assert (info.task_id, info.base_branch, info.ahead, info.behind, info.merged) == (TASK_ID, "main", 2, 1, False)
    # Resuming reuses the worktree as is (no rebase) and turn 3 continues on the same branch.
    again = _manager(project).create(TASK_ID)
    assert again.path == wt.path
    assert run_turn(again.path, 3).committed
    assert run_git(project, "rev-parse", f"{BRANCH}~1").strip() == tip
    assert [e.turn for e in read_turn_log(project, TASK_ID).entries] == [1, 2, 3]


def test_worktree_deleted_by_hand_is_pruned_and_recreated_from_branch(project: Path) -> None:
    wt, _ = run_loop(project, turns=2)
    shutil.rmtree(wt.path)
    manager = _manager(project)
    found, note = manager.find(TASK_ID, restore=False)
    assert found is None and "deleted by hand" in note and "re-creates" in note
    restored, note = manager.find(TASK_ID)
    assert restored is not None and restored.path == wt.path
    assert "re-created worktree" in note and "2 turn commit" in note
    assert (wt.path / ".guardkit" / "autobuild" / TASK_ID / "turn_state_turn_2.json").exists()
    assert run_turn(wt.path, 3).committed
    assert trailer_turns(project, f"main..{BRANCH}") == ["1", "2", "3"]


def test_branch_that_already_exists_is_reused(project: Path) -> None:
    wt, _ = run_loop(project, turns=1)
    run_git(project, "worktree", "remove", str(wt.path))  # an earlier run's worktree is gone, its branch stays
    again = _manager(project).create(TASK_ID)
    assert any("already exists" in n and "1 turn commit" in n for n in again.notes), again.notes
    assert run_turn(again.path, 2).committed
    assert trailer_turns(project, f"main..{BRANCH}") == ["1", "2"]


def test_branch_checked_out_elsewhere_is_a_git_error(project: Path) -> None:
    run_git(project, "branch", BRANCH)
    run_git(project, "checkout", "-q", BRANCH)
    with pytest.raises(GitError) as info:
        _manager(project).create(TASK_ID)
    assert "worktree add" in info.value.message


def test_find_with_a_path_recorded_on_another_machine_falls_back(project: Path) -> None:
    wt = _manager(project).create(TASK_ID)
    recorded = f"/Users/someone/Projects/app/.guardkit/worktrees/{TASK_ID}"
    found, note = _manager(project).find(TASK_ID, recorded)
    assert found is not None and found.path == wt.path
    assert "does not exist here" in note and recorded in note
    relative, _ = _manager(project).find(TASK_ID, f".guardkit/worktrees/{TASK_ID}")
    assert relative is not None and relative.path == wt.path


def test_find_nothing(project: Path) -> None:
    found, note = _manager(project).find("TASK-NONE-1")
    assert found is None and "no worktree" in note


def test_list_reports_dirty_and_prune_keeps_unmerged_work(project: Path) -> None:
    wt, _ = run_loop(project, turns=1)
    (wt.path / "wip.txt").write_text("not committed\n")
    manager = _manager(project)
    [info] = manager.list()
    assert info.dirty and not info.merged and info.ahead == 1
    result = manager.prune()
    assert result.removed == [] and "uncommitted" in result.kept[0][1]
    (wt.path / "wip.txt").unlink()
    result = manager.prune()
    assert result.removed == [] and "not merged" in result.kept[0][1]
    assert wt.path.exists() and GitRepo.discover(project).branch_exists(BRANCH)  # type: ignore[union-attr]


def test_prune_removes_merged_worktree_and_branch(project: Path) -> None:
    wt, _ = run_loop(project)
    run_git(project, "merge", "-q", "--ff-only", BRANCH)
    manager = _manager(project)
    assert manager.list()[0].merged
    planned = manager.prune(dry_run=True)
    assert [i.task_id for i in planned.removed] == [TASK_ID] and wt.path.exists()
    done = manager.prune()
    assert [i.task_id for i in done.removed] == [TASK_ID]
    assert not wt.path.exists() and not GitRepo.discover(project).branch_exists(BRANCH)  # type: ignore[union-attr]
    assert [e.turn for e in read_turn_log(project, TASK_ID).entries] == [1, 2, 3]  # history lives on in main
    assert _status(project) == ""


def test_fresh_worktree_is_not_pruned_and_force_removes_anything(project: Path) -> None:
    wt = _manager(project).create(TASK_ID)
    assert _manager(project).prune().kept[0][1].endswith("(no turn commits yet)")
    (wt.path / "wip.txt").write_text("x")
    result = _manager(project).prune(force=True)
    assert [i.task_id for i in result.removed] == [TASK_ID] and not wt.path.exists()


def test_cli_worktrees_list_and_prune(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_loop(project, turns=1)
    assert run(["worktrees", "--repo", str(project), "--json"]) == 0
    [item] = json.loads(capsys.readouterr().out)
    assert item["task_id"] == TASK_ID and item["ahead"] == 1 and item["merged"] is False
    assert run(["worktrees", "--repo", str(project)]) == 0
    assert f"{TASK_ID}" in capsys.readouterr().out
    assert run(["worktrees", "--repo", str(project), "prune", "--dry-run"]) == 0
    assert "kept TASK-GIT-001: not merged" in capsys.readouterr().out
    assert run(["worktrees", "prune", "--repo", str(project), "--force", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["removed"][0]["task_id"] == TASK_ID


def test_cli_worktrees_outside_git_exits_nonzero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["worktrees", "--repo", str(tmp_path)]) == 1
    assert "not a git repository" in capsys.readouterr().err


@pytest.mark.corpus
def test_real_recorded_worktree_paths_fall_back_to_this_checkout(project: Path, corpus_dir: Path) -> None:
    """Real task files record absolute worktree paths from another machine (often per feature)."""
    import re

    recorded = sorted({m.group(1) for f in (corpus_dir / "tasks").rglob("*.md")
                       for m in re.finditer(r"^\s*worktree_path:\s*['\"]?([^'\"\n]+)", f.read_text(errors="replace"),
                                            re.M)})
    assert recorded, "the corpus should hold recorded worktree paths"
    manager = _manager(project)
    wt = manager.create(TASK_ID)
    for path in recorded[:25]:
        found, note = manager.find(TASK_ID, path)
        assert found is not None and found.path == wt.path, (path, note)
        if not Path(path).exists():
            assert "does not exist here" in note


def test_listing_waits_out_a_worktree_another_process_is_still_creating(project: Path) -> None:
    # A parallel feature task's `git worktree add` writes its admin files while another lists
    # the worktrees; git fails the whole listing on the half-written one ("failed to read ...
    # commondir"). Here the half-written state is made by hand and completed 80 ms later.
    import threading

    from guardkit_state.git.checkouts import worktree_records

    manager = _manager(project)
    manager.create("TASK-OTHER-001")
    commondir = project / ".git" / "worktrees" / "TASK-OTHER-001" / "commondir"
    whole = commondir.read_bytes()
    commondir.write_bytes(b"")
    with pytest.raises(GitError):  # what git itself says about the half-made worktree
        GitRepo.discover(project).run("worktree", "list", "--porcelain", "-z")  # type: ignore[union-attr]
    finisher = threading.Timer(0.08, commondir.write_bytes, args=(whole,))
    finisher.start()
    records = worktree_records(GitRepo.discover(project))  # type: ignore[arg-type]
    finisher.join()
    assert any(Path(r["worktree"]).name == "TASK-OTHER-001" for r in records)  # it retried, and saw it whole


# -- create's base: what names a commit ------------------------------------------------------------
def test_a_base_that_names_a_tree_is_refused_as_input_before_anything_is_made(git_repo: Path) -> None:
    # refs/heads/main^{tree} "exists" to rev-parse --verify, so branch_exists() says yes; before
    # the change check_base_branch refused it (it names no commit) with InputError, up front.
    project = make_project(git_repo)
    with pytest.raises(InputError):
        _manager(project).create(TASK_ID, "main^{tree}")
    assert not (project / ".guardkit" / "worktrees").exists()


def test_a_base_relative_to_a_branch_starts_the_worktree_there(git_repo: Path) -> None:
    # main~1 is a commit, not a branch, but branch_exists("main~1") is True (rev-parse resolves
    # refs/heads/main~1), so the worktree is added with --track, which git refuses.
    project = make_project(git_repo)
    run_git(project, "commit", "-q", "--allow-empty", "-m", "second")
    wt = _manager(project).create(TASK_ID, "main~1")
    assert run_git(wt.path, "rev-parse", "HEAD").strip() == run_git(project, "rev-parse", "main~1").strip()


def test_a_worktree_add_killed_before_it_wrote_commondir_is_discarded_and_made_again(project: Path) -> None:
    # A `git worktree add` killed between creating its admin folder's ``commondir`` and writing it
    # leaves the file empty (the folder still "locked: initializing"): git then fails every listing
    # ("failed to read .../commondir: Success"), and prune does not mend it. With no git process
    # working there, the resume discards the half-made worktree and makes it again from its branch
    # (the feature campaign met it after a kill of the run while its task loops added their worktrees).
    manager = _manager(project)
    made = manager.create(TASK_ID)
    admin = project / ".git" / "worktrees" / TASK_ID
    (admin / "commondir").write_bytes(b"")
    (admin / "locked").write_text("initializing\n")
    found, note = _manager(project).find(TASK_ID)
    assert found is not None and found.path == made.path
    assert "half-created" in note
    assert run_git(found.path, "symbolic-ref", "--short", "HEAD").strip() == BRANCH
    assert "initializing" not in run_git(project, "worktree", "list", "--porcelain")
