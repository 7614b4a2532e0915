"""``doctor``'s git side, each problem on a real repository set up to have it: real git config, real
hooks, a real bare remote (with a real server-side hook where the remote must refuse)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from guardkit_state.git.repo import GitRepo
from guardkit_state.inspect.doctor import run_doctor
from guardkit_state.inspect.doctor_git import git_checks, rehearse, remote_checks
from guardkit_state.inspect.doctor_records import Check, DoctorReport

from .conftest import run_git
from .e2e_support import GUARDKIT_STATE, clean_env


@pytest.fixture(autouse=True)
def _own_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No global git config of the machine's user (its signing or hooks settings would leak in)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))


def repo_of(root: Path) -> GitRepo:
    found = GitRepo.discover(root)
    assert found is not None
    return found


def only(checks: list[Check] | DoctorReport, subject: str) -> Check:
    listed = checks.checks if isinstance(checks, DoctorReport) else checks
    matches = [c for c in listed if c.subject == subject]
    assert len(matches) == 1, [c.to_dict() for c in listed]
    return matches[0]


def hook(root: Path, name: str, script: str) -> None:
    path = root / ".git" / "hooks" / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)


def untouched(root: Path) -> tuple[str, str, str, str]:
    """What the rehearsal must leave as it found it: refs, worktrees, status, and the objects' count aside."""
    return (run_git(root, "for-each-ref"), run_git(root, "worktree", "list", "--porcelain"),
            run_git(root, "status", "--porcelain", "--ignored"), run_git(root, "stash", "list"))


def test_the_rehearsal_of_a_ready_repository_is_ok_and_leaves_nothing_behind(git_repo: Path) -> None:
    before = untouched(git_repo)
    checks = rehearse(repo_of(git_repo))
    assert [(c.subject, c.status) for c in checks] == [("turn commit and merge", "ok")]
    assert untouched(git_repo) == before


def test_commit_signing_without_a_key_is_a_problem(git_repo: Path) -> None:
    run_git(git_repo, "config", "commit.gpgsign", "true")
    run_git(git_repo, "config", "gpg.format", "ssh")  # and no user.signingkey
    check = only(run_doctor(git_repo), "commit signing")
    assert check.status == "problem"
    assert check.detail == ("commit.gpgsign is on and git cannot sign a turn commit (with no user.signingkey set): "
                            "fatal: either user.signingkey or gpg.ssh.defaultKeyCommand needs to be configured")
    assert check.fix == ("set a key git can use (git config user.signingkey KEY), or turn signing off in this "
                         "repository: git config commit.gpgsign false")


def test_a_failing_pre_commit_hook_is_a_problem_naming_what_it_said(git_repo: Path) -> None:
    hook(git_repo, "pre-commit", 'echo "lint: trailing whitespace in guardkit-doctor-probe.txt" >&2\nexit 1')
    before = untouched(git_repo)
    report = run_doctor(git_repo)
    check = only(report, "pre-commit hook")
    assert check.status == "problem" and not report.ready
    assert check.detail == "the pre-commit hook refused a turn commit: lint: trailing whitespace in " \
        "guardkit-doctor-probe.txt"
    assert check.fix.startswith("make the hook pass on the loop's commits (it runs on every turn: ")
    assert untouched(git_repo) == before


def test_a_hook_that_passes_is_named_in_the_ok_line(git_repo: Path) -> None:
    # A turn's message carries Task: trailers, a feature merge's Guardkit-Task: ones.
    hook(git_repo, "commit-msg", 'grep -Eq "^(Guardkit-)?Task: " "$1"')
    assert only(rehearse(repo_of(git_repo)), "turn commit and merge").detail == \
        "a turn commit and a merge made in a throwaway worktree (hooks run: commit-msg)"


def test_a_commit_msg_hook_refusing_merges_is_a_problem(git_repo: Path) -> None:
    hook(git_repo, "commit-msg", 'grep -q "^Task: " "$1" || { echo "no Task: trailer" >&2; exit 1; }')
    check = only(rehearse(repo_of(git_repo)), "commit-msg hook")
    assert check.status == "problem"
    assert check.detail.startswith("the commit-msg hook refused a feature merge: ")
    assert check.fix.startswith("make the hook pass on the loop's merges too (")


def test_a_failing_post_checkout_hook_is_a_problem_and_its_worktree_removed(git_repo: Path) -> None:
    hook(git_repo, "post-checkout", 'echo "post-checkout: no node_modules" >&2\nexit 1')
    before = untouched(git_repo)
    check = only(rehearse(repo_of(git_repo)), "post-checkout hook")
    assert (check.status, check.detail) == (
        "problem", "the post-checkout hook failed on a loop's worktree checkout: post-checkout: no node_modules")
    assert untouched(git_repo) == before


def test_merge_verify_signatures_is_a_problem(git_repo: Path) -> None:
    run_git(git_repo, "config", "merge.verifySignatures", "true")
    check = only(run_doctor(git_repo), "merge.verifySignatures")
    assert check.status == "problem"
    assert check.fix.startswith("git config merge.verifySignatures false in this repository")


def test_lfs_files_with_a_required_filter_and_no_git_lfs_are_a_problem(git_repo: Path, tmp_path: Path) -> None:
    # A clone of a repository using LFS, its filter configured by 'git lfs install', on a machine
    # without git-lfs: PATH holds git (and the shell) only.
    (git_repo / "model.bin").write_text("version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 1\n")
    (git_repo / ".gitattributes").write_text("*.bin filter=lfs diff=lfs merge=lfs -text\n")
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-q", "-m", "lfs")
    for key, value in (("process", "git-lfs filter-process"), ("smudge", "git-lfs smudge -- %f"),
                       ("clean", "git-lfs clean -- %f"), ("required", "true")):
        run_git(git_repo, "config", f"filter.lfs.{key}", value)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in ("git", "sh"):
        (bin_dir / program).symlink_to(subprocess.run(["which", program], capture_output=True, text=True,
                                                      check=True).stdout.strip())
    done = subprocess.run([str(GUARDKIT_STATE), "doctor", "--repo", str(git_repo)], capture_output=True, text=True,
                          timeout=120, check=False, env=clean_env(NO_COLOR="1", PATH=str(bin_dir),
                                                                  HOME=os.environ["HOME"]))
    assert done.returncode == 1, done.stdout
    lines = [line for line in done.stdout.splitlines() if " git-lfs: " in line]
    assert lines[0].startswith("  problem  git-lfs: 1 file(s) are tracked with Git LFS and its filter is configured, "
                               "but git-lfs is not on PATH")
    assert lines[0].endswith("; fix: install Git LFS (https://git-lfs.com), then run 'git lfs install'")
    assert lines[1].startswith("  problem  git-lfs: a loop's worktree cannot be checked out: ")


def test_lfs_files_without_a_filter_are_a_warning(git_repo: Path) -> None:
    (git_repo / "model.bin").write_text("version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 1\n")
    (git_repo / ".gitattributes").write_text("*.bin filter=lfs diff=lfs merge=lfs -text\n")
    run_git(git_repo, "add", "-A")
    run_git(git_repo, "commit", "-q", "-m", "lfs")
    check = only(git_checks(repo_of(git_repo)), "git-lfs")
    assert check.status == "warning" and "pointer files" in check.detail


def test_a_worktree_whose_folder_is_gone_is_a_warning(git_repo: Path) -> None:
    gone = git_repo / ".guardkit" / "worktrees" / "TASK-X-1"
    run_git(git_repo, "worktree", "add", "-q", "-b", "autobuild/TASK-X-1", str(gone))
    subprocess.run(["rm", "-rf", str(gone)], check=True)
    check = only(git_checks(repo_of(git_repo)), "worktrees")
    assert check.status == "warning"
    assert check.detail == f"git still lists the worktree {gone}, whose folder is gone (branch autobuild/TASK-X-1)"
    assert check.fix == "git worktree prune (or 'guardkit-state worktrees prune' for a loop's)"


def test_a_stale_index_lock_is_a_warning(git_repo: Path) -> None:
    lock = git_repo / ".git" / "index.lock"
    lock.write_text("")
    check = only(git_checks(repo_of(git_repo)), "git locks")
    assert (check.status, check.fix) == ("warning", f"rm {lock}")


# ------------------------------------------------------------------------------------------ remote


@pytest.fixture
def with_remote(git_repo: Path, tmp_path: Path) -> tuple[Path, Path]:
    bare = tmp_path / "remote.git"
    run_git(tmp_path, "init", "-q", "--bare", str(bare))
    run_git(git_repo, "remote", "add", "origin", str(bare))
    run_git(git_repo, "push", "-q", "origin", "main")
    return git_repo, bare


def test_claim_refs_are_pushed_to_a_bare_remote_and_the_probe_deleted(with_remote: tuple[Path, Path]) -> None:
    root, bare = with_remote
    checks = remote_checks(repo_of(root), "origin")
    check = only(checks, "remote origin")
    assert check.status == "ok" and check.detail.startswith("claim refs can be pushed to origin (refs/guardkit/claims/")
    assert check.detail.endswith(" pushed and deleted)")
    assert run_git(bare, "for-each-ref", "refs/guardkit") == ""
    driver = only(checks, "merge driver")
    assert (driver.status, driver.fix) == ("warning", "run 'guardkit-state merge-driver --install' in this repository")


def test_a_remote_refusing_claim_refs_is_a_problem(with_remote: tuple[Path, Path]) -> None:
    root, bare = with_remote
    update = bare / "hooks" / "update"
    update.write_text('#!/bin/sh\ncase "$1" in refs/guardkit/*) echo "only branches here" >&2; exit 1;; esac\n')
    update.chmod(0o755)
    report = run_doctor(root, remote="origin")
    check = only(report, "remote origin")
    assert check.status == "problem" and not report.ready
    assert check.detail.startswith("remote 'origin' refuses claim refs: remote 'origin' refused the claim "
                                   "refs/guardkit/claims/FEAT-DOCTOR-PROBE/PROBE-")
    assert check.fix.startswith("let this user push refs/guardkit/* there")


def test_a_remote_taking_claims_but_refusing_their_deletion_is_a_warning_naming_the_push(
        with_remote: tuple[Path, Path]) -> None:
    root, bare = with_remote
    update = bare / "hooks" / "update"
    update.write_text('#!/bin/sh\n[ "$3" = 0000000000000000000000000000000000000000 ] && exit 1\nexit 0\n')
    update.chmod(0o755)
    checks = remote_checks(repo_of(root), "origin")
    pushed, left = [c for c in checks if c.subject == "remote origin"]
    assert pushed.status == "ok" and pushed.detail.endswith(" pushed)")
    ref = run_git(bare, "for-each-ref", "--format=%(refname)", "refs/guardkit").strip()
    assert left.status == "warning" and left.fix == f"git push origin :{ref}"


def test_an_unreachable_remote_is_a_problem(with_remote: tuple[Path, Path], tmp_path: Path) -> None:
    root, bare = with_remote
    bare.rename(tmp_path / "moved.git")
    check = only(remote_checks(repo_of(root), "origin"), "remote origin")
    assert check.status == "problem" and check.detail.startswith("remote 'origin' cannot be reached: ")
    assert check.fix == "check 'git ls-remote origin' works from this machine (network, credentials, URL)"


def test_an_unknown_remote_is_a_problem(git_repo: Path) -> None:
    check = only(remote_checks(repo_of(git_repo), "nowhere"), "remote nowhere")
    assert (check.status, check.fix) == ("problem", "'git remote -v' lists this repository's remotes")
    assert check.detail == f"no git remote named 'nowhere' in {git_repo}"


def test_a_doctor_stopped_by_sigterm_mid_rehearsal_leaves_no_worktree_behind(git_repo: Path, tmp_path: Path) -> None:
    # Found by the hostile pass: SIGTERM (a closed terminal, a CI timeout) during a slow pre-commit hook
    # left /tmp/guardkit-doctor-*/checkout registered as a worktree of the user's repository.
    started = tmp_path / "hook-started"
    hook(git_repo, "pre-commit", f"touch {started}\nsleep 30")
    before = untouched(git_repo)
    doctor = subprocess.Popen([str(GUARDKIT_STATE), "doctor"], cwd=git_repo, env=clean_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for _ in range(600):  # a bound on the wait for the hook to start, not a timing
            if started.exists() or doctor.poll() is not None:
                break
            subprocess.run(["sleep", "0.05"], check=True)
        assert started.exists(), doctor.communicate(timeout=60)
        doctor.terminate()
        doctor.communicate(timeout=60)
    finally:
        if doctor.poll() is None:
            doctor.kill()
            doctor.wait()
    assert doctor.returncode != 0
    assert untouched(git_repo) == before
