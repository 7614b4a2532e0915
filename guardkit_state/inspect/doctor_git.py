"""``doctor``'s git side: what would refuse a turn commit or a merge, stale worktrees and locks, and
whether a remote takes claim refs.

Settings and hooks are not guessed at from the config: a turn commit and a merge are **rehearsed**
in a throwaway worktree (a detached checkout of HEAD in a temporary folder, removed afterwards; its
commits are on no branch), through the very functions a loop uses — ``GitRepo.commit_all`` with a
turn's message, :func:`~guardkit_state.git.merge.merge_branch` with a feature merge's — so signing,
hooks (``pre-commit``, ``commit-msg``, ``pre-merge-commit``, ``post-checkout``),
``merge.verifySignatures`` and LFS filters act exactly as they will in a loop. What failed is then
named, with its fix, from git's own words and the config that explains them.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import tempfile
from pathlib import Path

from guardkit_state.errors import GitError, GuardkitStateError
from guardkit_state.git.checkouts import worktree_records
from guardkit_state.git.commits import turn_message
from guardkit_state.git.merge import merge_branch, merge_message
from guardkit_state.git.merge_driver_setup import INSTALL_HINT, registration
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.stale_locks import live_git_process_in
from guardkit_state.inspect.doctor_records import NOTE, OK, PROBLEM, WARNING, Check
from guardkit_state.loop.session import interrupts_as_exceptions
from guardkit_state.remote.claims import ClaimBoard
from guardkit_state.store import layout

#: The ids the rehearsal's commits and the remote probe use (never a real task's or feature's).
PROBE_TASK = "TASK-DOCTOR-PROBE"
PROBE_FEATURE = "FEAT-DOCTOR-PROBE"
#: What git says when it cannot sign (after the hooks ran: the commit object is what failed to be written).
_SIGNING_WORDS = ("failed to sign", "signingkey", "signing key", "failed to write commit object", "gpg", "ssh-keygen")
_LFS_FIX = "install Git LFS (https://git-lfs.com), then run 'git lfs install'"


def git_checks(repo: GitRepo) -> list[Check]:
    """The rehearsal of a turn commit and a merge, LFS, and stale worktrees and locks."""
    if repo.head_sha() is None:
        return []  # the repository check already says a loop needs a commit
    return [*_lfs(repo), *rehearse(repo), *_stale_worktrees(repo), *_stale_locks(repo)]


def rehearse(repo: GitRepo) -> list[Check]:
    """A turn commit and a feature merge made in a throwaway worktree, as a loop makes them."""
    head = repo.head_sha()
    assert head is not None
    scratch = Path(tempfile.mkdtemp(prefix="guardkit-doctor-"))
    path = scratch / "checkout"
    # SIGTERM or SIGHUP (a closed terminal, a CI job's timeout) stops the rehearsal like Ctrl-C: its
    # worktree is removed below, never left registered in the user's repository.
    with interrupts_as_exceptions():
        try:
            status, _, err = repo.run("worktree", "add", "-q", "--detach", str(path), head, check=False)
            if status != 0:
                return [_checkout_problem(repo, err)]
            work = GitRepo.discover(path)
            if work is None:
                return [Check("commits", "worktree", PROBLEM, f"git made no usable worktree at {path}",
                              "run 'git worktree add' by hand to see why")]
            return _commit_and_merge(work, head)
        finally:
            status, _, _ = repo.run("worktree", "remove", "--force", str(path), check=False)
            shutil.rmtree(scratch, ignore_errors=True)
            if status != 0:
                repo.run("worktree", "prune", check=False)  # only ours can point at a folder just removed


def _commit_and_merge(work: GitRepo, head: str) -> list[Check]:
    (work.root / "guardkit-doctor-probe.txt").write_text("a rehearsed turn: a Player's change\n", encoding="utf-8")
    report = layout.artifacts_dir(work.root, PROBE_TASK) / "turn_state_turn_1.json"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text('{"turn_number": 1}\n', encoding="utf-8")
    try:
        turn = work.commit_all(turn_message(PROBE_TASK, 1, "feedback", "fresh_start"), force=[report])
    except GitError as exc:
        return [_commit_problem(work, exc)]
    work.run("checkout", "-q", "--detach", head)
    merged = merge_branch(work, turn, merge_message(PROBE_FEATURE, PROBE_TASK, branch=layout.branch_for(PROBE_TASK),
                                                    target=layout.branch_for(PROBE_FEATURE)))
    if not merged.merged:
        return [_merge_problem(work, merged.error or f"conflicts in {', '.join(merged.conflicts)}")]
    hooks = _hooks(work)
    ran = f" (hooks run: {', '.join(hooks)})" if hooks else ""
    signed = " and signed" if _config_true(work, "commit.gpgsign") else ""
    return [Check("commits", "turn commit and merge", OK,
                  f"a turn commit and a merge made{signed} in a throwaway worktree{ran}")]


def _checkout_problem(repo: GitRepo, stderr: str) -> Check:
    line = _first_error(stderr)
    if "lfs" in stderr.lower():
        return Check("commits", "git-lfs", PROBLEM, f"a loop's worktree cannot be checked out: {line}", _LFS_FIX)
    if "post-checkout" in _hooks(repo):
        said = _hook_output(stderr) or line
        return Check("commits", "post-checkout hook", PROBLEM,
                     f"the post-checkout hook failed on a loop's worktree checkout: {said}",
                     f"make the hook pass in a new worktree ({repo.hooks_dir()}; git runs it on 'git worktree add')")
    return Check("commits", "worktree", PROBLEM, f"a loop's worktree cannot be checked out: {line}",
                 "run 'git worktree add --detach /tmp/x HEAD' to see git's whole answer")


def _commit_problem(work: GitRepo, exc: GitError) -> Check:
    text = f"{exc.stderr}\n{exc.message}"
    line = _first_error(exc.stderr) or exc.message
    if _config_true(work, "commit.gpgsign") and any(word in text.lower() for word in _SIGNING_WORDS):
        key = _config(work, "user.signingkey")
        how = f"with key {key}" if key else "with no user.signingkey set"
        return Check("commits", "commit signing", PROBLEM,
                     f"commit.gpgsign is on and git cannot sign a turn commit ({how}): {line}",
                     "set a key git can use (git config user.signingkey KEY), or turn signing off in this "
                     "repository: git config commit.gpgsign false")
    hooks = [h for h in _hooks(work) if h in ("pre-commit", "prepare-commit-msg", "commit-msg")]
    if hooks:
        said = _hook_output(exc.stderr) or line
        return Check("commits", f"{hooks[0]} hook", PROBLEM,
                     f"the {'/'.join(hooks)} hook refused a turn commit: {said}",
                     f"make the hook pass on the loop's commits (it runs on every turn: {work.hooks_dir()}), or "
                     "fix what it reports")
    return Check("commits", "turn commit", PROBLEM, f"a turn commit failed: {line}",
                 "run 'git commit' in a scratch checkout to see git's whole answer")


def _merge_problem(work: GitRepo, error: str) -> Check:
    if _config_true(work, "merge.verifySignatures") or "signature" in error.lower():
        return Check("commits", "merge.verifySignatures", PROBLEM,
                     "merge.verifySignatures is on: a feature's merges of task branches are refused, as turn "
                     "commits carry no signature of a trusted key",
                     "git config merge.verifySignatures false in this repository (or sign turn commits with a "
                     "trusted key: commit.gpgsign, user.signingkey)")
    hooks = [h for h in _hooks(work) if h in ("pre-merge-commit", "prepare-commit-msg", "commit-msg")]
    if hooks:
        return Check("commits", f"{hooks[0]} hook", PROBLEM,
                     f"the {'/'.join(hooks)} hook refused a feature merge: {error}",
                     f"make the hook pass on the loop's merges too ({work.hooks_dir()}; a merge's message is "
                     "'Merge autobuild/TASK-ID into autobuild/FEAT-ID' with Guardkit-Feature/Guardkit-Task trailers)")
    return Check("commits", "merge", PROBLEM, f"a feature merge failed: {error}",
                 "run 'git merge --no-ff' of a branch by hand to see git's whole answer")


def _lfs(repo: GitRepo) -> list[Check]:
    """Files tracked through Git LFS need git-lfs in a worktree, or they are checked out as pointers."""
    status, out, _ = repo.run("ls-files", "-z", "--", ":(attr:filter=lfs)", check=False)
    files = [p for p in out.decode("utf-8", "replace").split("\0") if p] if status == 0 else []
    if not files:
        return []
    configured = _config(repo, "filter.lfs.process") or _config(repo, "filter.lfs.smudge")
    if configured is None:
        return [Check("commits", "git-lfs", WARNING,
                      f"{len(files)} file(s) are tracked with Git LFS ({files[0]} ...) but no LFS filter is "
                      "configured: a loop's worktree holds their pointer files, not their content", _LFS_FIX)]
    if shutil.which("git-lfs") is None:
        return [Check("commits", "git-lfs", PROBLEM if _config_true(repo, "filter.lfs.required") else WARNING,
                      f"{len(files)} file(s) are tracked with Git LFS and its filter is configured, but git-lfs is "
                      "not on PATH: a loop's worktree cannot be checked out", _LFS_FIX)]
    return [Check("commits", "git-lfs", OK, f"{len(files)} file(s) tracked with Git LFS; git-lfs is installed")]


def _stale_worktrees(repo: GitRepo) -> list[Check]:
    found = [Check("worktrees", "worktrees", WARNING,
                   f"git still lists the worktree {record['worktree']}, whose folder is gone"
                   + (f" (branch {record['branch'].removeprefix('refs/heads/')})" if record.get("branch") else ""),
                   "git worktree prune (or 'guardkit-state worktrees prune' for a loop's)")
             for record in worktree_records(repo) if "prunable" in record or not Path(record["worktree"]).exists()]
    return found or [Check("worktrees", "worktrees", OK, "no stale worktrees")]


def _stale_locks(repo: GitRepo) -> list[Check]:
    """Lock files of git's (index, HEAD, branch refs) that no live git process holds."""
    common = repo.common_dir
    candidates = [common / "index.lock", common / "HEAD.lock"]
    candidates += [p for d in (common / "worktrees").glob("*") for p in (d / "index.lock", d / "HEAD.lock")]
    candidates += list((common / "refs").rglob("*.lock")) if (common / "refs").is_dir() else []
    present = [p for p in candidates if p.is_file()]
    if present and live_git_process_in(repo.root, common):
        return [Check("worktrees", "git locks", NOTE, f"{len(present)} git lock file(s), held by a git process at work "
                      "(run doctor again once it is done)")]
    return [Check("worktrees", "git locks", WARNING, f"{p} was left by a git command that was killed: git refuses to "
                  "work there while it exists", f"rm {p}") for p in present] or \
        [Check("worktrees", "git locks", OK, "no stale git locks")]


def remote_checks(repo: GitRepo, remote: str) -> list[Check]:
    """Whether ``remote`` takes claim refs (a probe claim pushed, then deleted), and the merge driver."""
    probe = f"PROBE-{secrets.token_hex(4).upper()}"
    try:
        board = ClaimBoard(repo, remote)
        claim = board.claim(PROBE_FEATURE, probe, lease=60.0)
    except GuardkitStateError as exc:
        return [_remote_problem(remote, exc), *_merge_driver(repo)]
    if claim is None:
        checks = [Check("remote", f"remote {remote}", PROBLEM, f"a probe claim on {remote} was refused as a lost race",
                        "run doctor again")]
        return [*checks, *_merge_driver(repo)]
    try:
        released = board.release(claim)
    except GuardkitStateError as exc:
        released = False
        note = str(exc)
    else:
        note = ""
    checks = [Check("remote", f"remote {remote}", OK, f"claim refs can be pushed to {remote} ({claim.ref} pushed"
                    + (" and deleted)" if released else ")"))]
    if not released:
        why = f": {note}" if note else ""
        checks.append(Check("remote", f"remote {remote}", WARNING, f"the probe claim could not be deleted{why}",
                            f"git push {remote} :{claim.ref}"))
    return [*checks, *_merge_driver(repo)]


def _remote_problem(remote: str, exc: GuardkitStateError) -> Check:
    from guardkit_state.errors import RemoteRejectedError, RemoteUnreachableError

    if isinstance(exc, RemoteUnreachableError):
        return Check("remote", f"remote {remote}", PROBLEM, f"remote {remote!r} cannot be reached: {exc.message}",
                     f"check 'git ls-remote {remote}' works from this machine (network, credentials, URL)")
    if isinstance(exc, RemoteRejectedError):
        return Check("remote", f"remote {remote}", PROBLEM, f"remote {remote!r} refuses claim refs: {exc.message}",
                     "let this user push refs/guardkit/* there (a server hook, branch protection or permissions "
                     "refuse them)")
    return Check("remote", f"remote {remote}", PROBLEM, exc.message,
                 exc.fix or "'git remote -v' lists this repository's remotes")


def _merge_driver(repo: GitRepo) -> list[Check]:
    found = registration(repo)
    if found.registered:
        return [Check("remote", "merge driver", OK, "the merge driver for task files and plans is registered")]
    missing = "; ".join(found.missing())
    return [Check("remote", "merge driver", WARNING, f"the merge driver is not registered ({missing}): git merges "
                  "task files and plans from several machines as text", INSTALL_HINT)]


def _hooks(repo: GitRepo) -> list[str]:
    directory = repo.hooks_dir()
    return sorted(p.name for p in directory.iterdir() if p.is_file() and not p.name.endswith(".sample")
                  and p.stat().st_mode & 0o111) if directory.is_dir() else []


def _config(repo: GitRepo, key: str) -> str | None:
    status, out, _ = repo.run("config", "--get", key, check=False)
    return out.decode("utf-8", "replace").strip() or None if status == 0 else None


def _config_true(repo: GitRepo, key: str) -> bool:
    status, out, _ = repo.run("config", "--bool", "--get", key, check=False)
    return status == 0 and out.strip() == b"true"


def _first_error(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return next((line for line in lines if line.startswith(("error:", "fatal:"))), lines[0] if lines else "")


def _hook_output(stderr: str) -> str:
    """What a hook printed: the first line of git's stderr that is not git's own."""
    with contextlib.suppress(StopIteration):
        return next(line.strip() for line in stderr.splitlines()
                    if line.strip() and not line.startswith(("error:", "fatal:", "hint:")))
    return ""


__all__ = ["PROBE_FEATURE", "PROBE_TASK", "git_checks", "rehearse", "remote_checks"]
