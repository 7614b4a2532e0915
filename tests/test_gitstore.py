"""gitstore in real repositories: questions, path-limited commits, turn commits and their failures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from guardkit_state.errors import InputError
from guardkit_state.git.commits import commit_turn, turn_message
from guardkit_state.git.parse import StatusEntry, parse_status_z, parse_turn_log, parse_worktree_list_z
from guardkit_state.git.repo import FALLBACK_EMAIL, FALLBACK_NAME, GitRepo

from .conftest import run_git
from .gitloop import TASK_ID, make_project, run_turn, trailer_turns, write_turn


def _repo(root: Path) -> GitRepo:
    repo = GitRepo.discover(root)
    assert repo is not None
    return repo


def _commit_count(root: Path) -> int:
    return int(run_git(root, "rev-list", "--count", "HEAD"))


# -- pure helpers ---------------------------------------------------------------------------


def test_parse_status_z_handles_renames_and_spaces() -> None:
    data = b" M src/a b.py\0R  new.py\0old.py\0?? x\0"
    assert parse_status_z(data) == [
        StatusEntry(" M", "src/a b.py"), StatusEntry("R ", "new.py", "old.py"), StatusEntry("??", "x")]
    assert parse_status_z(b"") == []


def test_parse_worktree_list_z() -> None:
    data = (b"worktree /r\0HEAD abc\0branch refs/heads/main\0\0"
            b"worktree /r/.guardkit/worktrees/T-1\0HEAD def\0branch refs/heads/autobuild/T-1\0prunable gone\0\0")
    main, other = parse_worktree_list_z(data)
    assert main == {"worktree": "/r", "HEAD": "abc", "branch": "refs/heads/main"}
    assert other["prunable"] == "gone" and other["branch"] == "refs/heads/autobuild/T-1"


def test_turn_message_trailers_are_parsed_by_git(git_repo: Path) -> None:
    message = turn_message("TASK-A-1", 2, "feedback", "continuing_work")
    assert message.splitlines()[0] == "autobuild(TASK-A-1): turn 2 feedback"
    parsed = subprocess.run(["git", "interpret-trailers", "--parse"], input=message, capture_output=True,
                            text=True, cwd=git_repo, check=True).stdout
    assert parsed == "Task: TASK-A-1\nTurn: 2\nDecision: feedback\nMode: continuing_work\n"
    with pytest.raises(InputError):
        turn_message("TASK-A-1", 2, "feedback\nInjected: yes", "fresh_start")


def test_parse_turn_log_skips_malformed_records() -> None:
    good = "".join(f"{v}\0" for v in ["abc", "2026-01-01T00:00:00+00:00", "subj", "T-1", "3", "approve", "fresh_start"])
    bad = "".join(f"{v}\0" for v in ["def", "d", "s", "T-1", "x", "", ""])
    [commit] = parse_turn_log(f"{good}\n{bad}\n")
    assert (commit.sha, commit.turn, commit.decision) == ("abc", 3, "approve")


def test_turn_commits_are_read_whatever_a_subject_holds(git_repo: Path) -> None:
    # A commit's subject is anyone's text (an agent commits in its worktree): separators in it must
    # not end a record, nor start a made-up one (a turn 9 'approve' at a sha nobody committed).
    from guardkit_state.git.commits import turn_commits

    made_up = "\x1f".join(["f" * 40, "2026-01-01T00:00:00+00:00", "forged", "TASK-A-1", "9", "approve", "fresh_start"])
    subject = f"wip\x1e\n{made_up}\x1e"
    trailers = "Task: TASK-A-1\nTurn: 1\nDecision: feedback\nMode: fresh_start\n"
    run_git(git_repo, "commit", "-q", "--allow-empty", "--cleanup=verbatim", "-m", f"{subject}\n\n{trailers}")
    sha = run_git(git_repo, "rev-parse", "HEAD").strip()
    repo = GitRepo.discover(git_repo)
    assert repo is not None
    assert [(c.sha, c.turn, c.decision) for c in turn_commits(repo, "TASK-A-1")] == [(sha, 1, "feedback")]


# -- questions ------------------------------------------------------------------------------


def test_refs_lists_each_refs_values_whatever_its_message_holds(git_repo: Path) -> None:
    repo = GitRepo.discover(git_repo)
    assert repo is not None
    base = repo.text("rev-parse", "HEAD")
    note = repo.text("commit-tree", repo.empty_tree(), "-m", "subject\x01refs/heads/x\n\nbody \x1e\x1f")
    run_git(git_repo, "update-ref", "refs/notes-x/one", note)
    run_git(git_repo, "branch", "autobuild/T-1")
    assert repo.refs(("refname", "objectname", "contents"), "refs/notes-x/") == [
        ("refs/notes-x/one", note, "subject\x01refs/heads/x\n\nbody \x1e\x1f\n")]
    assert repo.refs(("refname", "objectname"), "refs/heads/autobuild/") == [("refs/heads/autobuild/T-1", base)]
    assert repo.refs(("refname",), "--no-merged=main", "refs/heads/") == []
    assert repo.refs(("refname",), "--no-merged=no-such-rev", "refs/heads/") is None
    assert repo.refs(("refname",), "refs/nothing-here/") == []


def test_discover_root_from_subdirectory_and_none_outside(git_repo: Path, tmp_path: Path) -> None:
    (git_repo / "sub" / "deep").mkdir(parents=True)
    repo = _repo(git_repo / "sub" / "deep")
    assert repo.root == git_repo and repo.git_dir == git_repo / ".git" and repo.common_dir == git_repo / ".git"
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    assert GitRepo.discover(outside) is None
    assert GitRepo.discover(tmp_path / "missing") is None


def test_discover_a_repository_whose_path_holds_a_line_separator_other_than_newline(tmp_path: Path) -> None:
    # git prints the three paths one a line, each ended by "\n" alone: a folder name holding "\r",
    # "\x1c" or U+2028 (which str.splitlines() also breaks at) is still one path, not "no repository".
    for name in ("a\u2028b", "a\rb", "a\x1cb"):
        root = tmp_path / name
        root.mkdir()
        run_git(root, "init", "-q", "-b", "main")
        repo = GitRepo.discover(root)
        assert repo is not None and repo.root == root and repo.common_dir == root / ".git", name


def test_head_branch_and_dirty_questions(git_repo: Path) -> None:
    repo = _repo(git_repo)
    assert repo.head_sha() == run_git(git_repo, "rev-parse", "HEAD").strip()
    assert repo.current_branch() == "main" and repo.branch_exists("main") and not repo.branch_exists("nope")
    assert not repo.is_dirty()
    (git_repo / "new.txt").write_text("x")
    assert repo.is_dirty() and repo.is_dirty(["new.txt"]) and not repo.is_dirty(["README.md"])
    run_git(git_repo, "checkout", "-q", "--detach")
    assert repo.current_branch() is None


def test_unborn_repository(tmp_path: Path) -> None:
    run_git(tmp_path, "init", "-q", "-b", "main")
    repo = _repo(tmp_path)
    assert repo.head_sha() is None and repo.current_branch() == "main"
    (tmp_path / "a.txt").write_text("a")
    result = commit_turn(repo, task_id="TASK-A-1", turn=1, decision="approve", mode="fresh_start",
                         paths=["a.txt"], managed_worktree=False)
    assert result.committed and _commit_count(tmp_path) == 1


# -- commits --------------------------------------------------------------------------------


def test_outside_a_worktree_only_the_given_paths_are_committed(git_repo: Path) -> None:
    make_project(git_repo)
    (git_repo / "README.md").write_text("# user edit, not ours\n")
    (git_repo / "user-notes.txt").write_text("untracked user file\n")
    (git_repo / "staged.txt").write_text("user staged this\n")
    run_git(git_repo, "add", "staged.txt")
    result = run_turn(git_repo, 1, managed=False)
    assert result.committed, result
    committed = set(run_git(git_repo, "show", "--format=", "--name-only", "HEAD").split())
    assert committed == {"src/feature.py", "src/module_1.py", "tasks/in_progress/TASK-GIT-001-git-native-loop.md",
                         *(f".guardkit/autobuild/{TASK_ID}/{n}_1.json" for n in ("player_turn", "coach_turn",
                                                                                  "turn_state_turn"))}
    status = run_git(git_repo, "status", "--porcelain")
    assert " M README.md" in status and "?? user-notes.txt" in status and "A  staged.txt" in status


def test_same_turn_twice_is_not_duplicated(git_repo: Path) -> None:
    make_project(git_repo)
    first = run_turn(git_repo, 1, managed=False)
    count = _commit_count(git_repo)
    again = commit_turn(_repo(git_repo), task_id=TASK_ID, turn=1, decision="feedback", mode="fresh_start",
                        paths=["src/feature.py"], managed_worktree=False)
    assert again.sha == first.sha and again.skipped and "already committed" in again.skipped
    assert _commit_count(git_repo) == count
    assert trailer_turns(git_repo, "HEAD") == ["1"]


def test_failing_commit_hook_is_reported_not_raised(git_repo: Path) -> None:
    make_project(git_repo)
    hook = git_repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho 'lint failed: trailing whitespace' >&2\nexit 1\n")
    hook.chmod(0o755)
    head = run_git(git_repo, "rev-parse", "HEAD")
    result = run_turn(git_repo, 1, managed=False)
    assert result.sha is None and result.error
    assert "lint failed: trailing whitespace" in result.error and "pre-commit hook rejected" in result.error
    assert run_git(git_repo, "rev-parse", "HEAD") == head
    assert (git_repo / ".guardkit" / "autobuild" / TASK_ID / "coach_turn_1.json").exists()  # files stay written
    # Nothing of ours is left staged for the user's next commit.
    assert run_git(git_repo, "diff", "--cached", "--name-only") == ""
    hook.unlink()
    assert commit_turn(_repo(git_repo), task_id=TASK_ID, turn=1, decision="feedback", mode="fresh_start",
                       paths=["src/feature.py"], managed_worktree=False).committed


def test_stale_index_lock_is_removed_and_the_commit_retried(git_repo: Path) -> None:
    make_project(git_repo)
    lock = git_repo / ".git" / "index.lock"
    lock.write_text("")
    result = run_turn(git_repo, 1, managed=False)
    assert result.committed, result
    assert not lock.exists()
    assert any("stale git lock" in n and "index.lock" in n for n in result.notes)


def test_index_lock_held_by_a_live_git_process_is_kept(git_repo: Path) -> None:
    make_project(git_repo)
    lock = git_repo / ".git" / "index.lock"
    lock.write_text("")
    live = subprocess.Popen(["git", "cat-file", "--batch"], cwd=git_repo, stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL)
    try:
        assert _repo(git_repo).remove_stale_index_lock() == []
        result = run_turn(git_repo, 1, managed=False)
        assert result.sha is None and result.error and "index.lock" in result.error
        assert lock.exists()
    finally:
        live.communicate(b"")


def test_no_identity_configured_uses_the_fallback(git_repo: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    make_project(git_repo)
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "empty-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("EMAIL", "")
    result = run_turn(git_repo, 1, managed=False)
    assert result.committed, result
    assert run_git(git_repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>").strip() == \
        f"{FALLBACK_NAME} <{FALLBACK_EMAIL}>|{FALLBACK_NAME} <{FALLBACK_EMAIL}>"
    assert any("no git identity" in n for n in result.notes)


def test_configured_identity_is_used(git_repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    make_project(git_repo)
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    run_git(git_repo, "config", "user.name", "Ada Lovelace")
    run_git(git_repo, "config", "user.email", "ada@example.com")
    result = run_turn(git_repo, 1, managed=False)
    assert result.committed and result.notes == ()
    assert run_git(git_repo, "log", "-1", "--format=%an <%ae>").strip() == "Ada Lovelace <ada@example.com>"


def test_no_repository_means_no_commit(tmp_path: Path) -> None:
    result = commit_turn(None, task_id=TASK_ID, turn=1, decision="approve", mode="fresh_start",
                         paths=["x"], managed_worktree=False)
    assert result.sha is None and result.error is None and "not a git repository" in (result.skipped or "")


def test_no_git_installed(git_repo: Path, tmp_path: Path) -> None:
    """With no git on PATH, discovery says None and the turn completes without a commit."""
    script = (
        "import sys\n"
        "from guardkit_state.git.commits import commit_turn\n"
        "from guardkit_state.git.repo import GitRepo\n"
        "repo = GitRepo.discover(sys.argv[1])\n"
        "r = commit_turn(repo, task_id='TASK-A-1', turn=1, decision='approve', mode='fresh_start',"
        " paths=['README.md'], managed_worktree=False)\n"
        "print(repo, r.sha, r.skipped)\n"
    )
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PATH"))}
    result = subprocess.run([sys.executable, "-c", script, str(git_repo)], capture_output=True, text=True,
                            env={**env, "PATH": str(empty_bin)}, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("None None not a git repository")


def test_misuse_outside_worktree_without_paths_raises(git_repo: Path) -> None:
    with pytest.raises(InputError):
        commit_turn(_repo(git_repo), task_id=TASK_ID, turn=1, decision="approve", mode="fresh_start",
                    managed_worktree=False)


def test_nothing_to_commit_is_skipped(git_repo: Path) -> None:
    result = commit_turn(_repo(git_repo), task_id=TASK_ID, turn=1, decision="approve", mode="fresh_start",
                         paths=["README.md"], managed_worktree=False)
    assert result.sha is None and result.skipped == "nothing to commit"


def test_managed_worktree_commit_includes_untracked_and_deleted_files(git_repo: Path) -> None:
    make_project(git_repo)
    write_turn(git_repo, 1)
    (git_repo / "README.md").unlink()
    result = commit_turn(_repo(git_repo), task_id=TASK_ID, turn=1, decision="feedback", mode="fresh_start",
                         managed_worktree=True)
    assert result.committed
    names = run_git(git_repo, "show", "--format=", "--name-status", "HEAD")
    assert "D\tREADME.md" in names and "A\tsrc/module_1.py" in names
    assert run_git(git_repo, "status", "--porcelain") == ""


def test_deleted_path_is_committed_as_deletion(git_repo: Path) -> None:
    make_project(git_repo)
    (git_repo / "src" / "feature.py").unlink()
    result = commit_turn(_repo(git_repo), task_id=TASK_ID, turn=1, decision="feedback", mode="fresh_start",
                         paths=["src/feature.py", "src/never-existed.py"], managed_worktree=False)
    assert result.committed, result
    assert run_git(git_repo, "show", "--format=", "--name-status", "HEAD").strip() == "D\tsrc/feature.py"


def test_managed_commit_leaves_out_index_data_and_temp_files(git_repo: Path) -> None:
    make_project(git_repo)
    write_turn(git_repo, 1)
    (git_repo / ".guardkit" / "index").mkdir(parents=True)
    (git_repo / ".guardkit" / "index" / "graph.db").write_text("local index")
    state = git_repo / ".guardkit" / "autobuild" / TASK_ID
    (state / ".gks-tmp-coach_turn_2.json.123.456789").write_text("{")
    result = commit_turn(_repo(git_repo), task_id=TASK_ID, turn=1, decision="feedback", mode="fresh_start",
                         managed_worktree=True)
    assert result.committed
    names = run_git(git_repo, "show", "--format=", "--name-only", "HEAD").split()
    assert f".guardkit/autobuild/{TASK_ID}/coach_turn_1.json" in names
    assert not any("index/" in n or ".gks-tmp-" in n for n in names)


def test_paths_are_literal_and_must_stay_inside_the_repo(git_repo: Path, tmp_path: Path) -> None:
    from guardkit_state.errors import UnsafePathError

    (git_repo / ":(glob)*.txt").write_text("odd name\n")
    (git_repo / "other.txt").write_text("must not be committed\n")
    result = commit_turn(_repo(git_repo), task_id=TASK_ID, turn=1, decision="approve", mode="fresh_start",
                         paths=[git_repo / ":(glob)*.txt"], managed_worktree=False)
    assert result.committed, result
    assert run_git(git_repo, "show", "--format=", "--name-only", "HEAD").split() == [":(glob)*.txt"]
    with pytest.raises(UnsafePathError):
        commit_turn(_repo(git_repo), task_id=TASK_ID, turn=2, decision="approve", mode="fresh_start",
                    paths=[tmp_path / "elsewhere.txt"], managed_worktree=False)


def test_blob_over_the_cap_is_refused_unread_naming_rev_path_and_cap(git_repo: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from guardkit_state.errors import FileTooLargeError

    from .conftest import commit_on_branch, git_answer_sizes

    commit_on_branch(git_repo, "main", "dir/big file.md", b"y" * 500)
    repo = GitRepo.discover(git_repo)
    assert repo is not None
    answers = git_answer_sizes(monkeypatch)
    with pytest.raises(FileTooLargeError) as raised:
        repo.blob("main", "dir/big file.md", limit=499)
    assert str(raised.value) == ("main:dir/big file.md: file is 500 bytes, over the 499-byte limit "
                                 "(expected at most 499 bytes)")
    assert max(answers) < 499, answers  # only its size was asked
    assert repo.blob("main", "dir/big file.md", limit=500) == b"y" * 500
    assert repo.blob("main", "dir/none.md") is None  # absent
    assert repo.blob("main", "dir") is None  # a tree, not a file
    assert repo.objects(["main:dir/big file.md", "main:README.md", "main:x"], max_bytes=499)[:1] == [None]


def test_sizes_answer_each_spec_whatever_breaks_a_line_for_python_in_its_path(git_repo: Path) -> None:
    # git answers one line per spec, ended by "\n" alone, and a missing spec's line repeats it: read
    # with str.splitlines(), a path holding "\r", "\x1c" or U+2028 made two lines of it, and the
    # reading crashed (ValueError) where it should say "none there".
    repo = GitRepo.discover(git_repo)
    assert repo is not None
    found = repo.sizes(["main:a\rb.md", "main:c\x1cd.md", "main:e\u2028f.md", "main:README.md"])
    assert found[:3] == [None, None, None]
    assert found[3] is not None and found[3][1] == "blob"
    assert repo.blob("main", "tasks/TASK-A-1-x\u2028y.md") is None


def test_a_file_named_with_bytes_no_utf8_is_read_out_of_git(git_repo: Path) -> None:
    # A name the file system gave with bytes no UTF-8 (kept by surrogateescape, as os.listdir keeps
    # it) goes to git as it came: the capped read sent it as strict UTF-8 (a UnicodeEncodeError
    # traceback where 'git show rev:path', an argument, read it).
    from .conftest import commit_on_branch

    name = "tasks/TASK-A-1-caf\udce9.md"  # the byte 0xe9 (latin-1 é)
    commit_on_branch(git_repo, "main", name, b"---\nid: TASK-A-1\n---\n")
    repo = GitRepo.discover(git_repo)
    assert repo is not None
    assert repo.blob("main", name) == b"---\nid: TASK-A-1\n---\n"
    assert repo.blob("main", "tasks/TASK-A-2-caf\udce9.md") is None
    [found] = repo.objects([f"main:{name}"])
    assert found is not None and found[2] == b"---\nid: TASK-A-1\n---\n"


def test_branches_named_lists_each_branch_whatever_breaks_a_line_for_python_in_its_name(git_repo: Path) -> None:
    # git takes U+2028 (or U+0085) in a branch name; read with str.splitlines(), the listing made two
    # names of it, the first a task branch that does not exist.
    from guardkit_state.git.repo import branches_named

    run_git(git_repo, "branch", "autobuild/TASK-A-1\u2028x")
    run_git(git_repo, "branch", "autobuild/TASK-A-2")
    assert branches_named(git_repo, "autobuild/") == {"autobuild/TASK-A-1\u2028x", "autobuild/TASK-A-2"}
