"""The loop branches (``autobuild/*``) between a worker's clone and the remote.

The remote is the truth: before a worker decides anything it fetches the ``autobuild/*``
branches into ``refs/remotes/<remote>/autobuild/*`` and moves each local branch to the remote's
when the local one is behind (a branch checked out in one of this clone's worktrees is moved
there, by a fast-forward of that worktree). A local branch ahead of the remote (a turn committed
but not pushed) is left alone; its push is the next thing its worker does. So is one that another
process of the clone moves or creates between the fetch and the move (each is moved only from
where it was listed, a new one only where none is yet).

Pushes carry a lease (``--force-with-lease=<ref>:<expected>``): a turn or a merge is pushed only
onto the commit its worker last saw, so a worker whose claim was taken over cannot overwrite the
new holder's turns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from guardkit_state.errors import BranchMovedError, ClaimLostError, RemoteRejectedError, RemoteUnreachableError
from guardkit_state.git.stale_locks import remove_named_stale_lock
from guardkit_state.store.fsio import crash_point
from guardkit_state.store.layout import BRANCH_PREFIX
from guardkit_state.store.safe_paths import is_task_id

if TYPE_CHECKING:
    from guardkit_state.git.repo import GitRepo


#: How long a look at the remote's refs, or a claim's push, may take (seconds) before the remote
#: counts as unreachable (and is tried again): a live remote answers in well under a second, and a
#: heartbeat must not wait past its claim's next beat on a remote that took the connection and hangs.
REFS_TIMEOUT = 30.0
#: How long a fetch or a push of a branch may take: they carry a turn's files.
DATA_TIMEOUT = 600.0

#: A ref as :func:`list_refs` reads it: its name, its sha and its commit's message.
RefRecord = tuple[str, str, str]


#: How old a ref lock in a remote repository on this machine's file system must be before a worker
#: takes it for one a killed push left (a live push holds its locks for milliseconds).
REMOTE_LOCK_AGE = 30.0


#: How git names a lock file it found held (in its stderr; a remote's lines prefixed ``remote:``).
_HELD_LOCK = re.compile(r"Unable to create '([^']+\.lock)'")


def busy_lock(remote: str, ref: str, summary: str, stderr: str) -> str:
    """What a push the remote rejected for a held ref lock says: the lock file when git named it,
    and what to do if it lasts (a push that died there left it)."""
    named = _HELD_LOCK.search(stderr)
    held = f"; if this lasts, a push that died on the remote left {named.group(1)}: remove it there" if named else ""
    return f"remote {remote!r} could not lock {ref}: {summary}{held}"


def clear_remote_lock(repo: GitRepo, remote: str, stderr: str) -> bool:
    """Remove the ref lock a push's ``stderr`` names in ``remote``'s repository, when that is on this
    machine's file system (a ``file://`` URL or a path) and the lock is stale: a machine SIGKILLed in
    a push to such a remote kills the ``receive-pack`` it ran there, holding the ref's lock, and every
    later push to that ref fails on it ("failed to update ref"). A remote reached over a network
    cleans up after a client that died; its locks are never touched from here. True when removed."""
    status, out, _ = repo.run("remote", "get-url", remote, check=False)
    url = out.decode("utf-8", "replace").strip()
    if status != 0 or not url:
        return False
    if url.startswith("file://"):
        path = Path(unquote(urlsplit(url).path))
    elif "://" in url or (":" in url.split("/", 1)[0] and not url.startswith("/")):
        return False  # a network remote (ssh, https, git, scp-like host:path)
    else:
        path = (repo.root / url) if not url.startswith("/") else Path(url)
    if not path.is_dir():
        return False
    removed = remove_named_stale_lock(path, path, stderr, min_age=REMOTE_LOCK_AGE)
    return removed is not None


def fetch_refs(repo: GitRepo, remote: str, *refspecs: str, timeout: float) -> tuple[int, str]:
    """``git fetch --prune`` of ``refspecs`` from ``remote``: (exit status, stderr). A ref lock a git
    killed in an earlier fetch left in this clone (``packed-refs.lock``, a ref's ``.lock``) fails
    every fetch after it, as if the remote were down: it is removed once no git works here, and the
    fetch made again."""
    for _ in range(3):
        status, _, err = repo.run("fetch", "--quiet", "--no-tags", "--prune", remote, *refspecs, check=False,
                                  timeout=timeout)
        if status == 0 or remove_named_stale_lock(repo.root, repo.common_dir, err) is None:
            break
    return status, err


def lock_contention(summary: str) -> bool:
    """A push the remote rejected because it could not lock or update the ref (``failed to lock``,
    ``failed to update ref``): another push held it at that instant (or a git that died there left
    its lock), which is no refusal of the remote's: a hook or a permission says so otherwise."""
    return "(failed to update ref)" in summary or "(failed to lock)" in summary


def listed_refs(look: str) -> dict[str, str]:
    """``ls-remote``'s lines as ref -> sha."""
    refs: dict[str, str] = {}
    for line in look.splitlines():
        sha, _, ref = line.partition("\t")
        if ref:
            refs[ref] = sha
    return refs


def ls_remote(repo: GitRepo, remote: str, *patterns: str) -> str:
    """``git ls-remote --refs`` of the refs of ``remote`` that ``patterns`` name: its lines as text
    (a worker's look keeps them as they are; :func:`listed_refs` reads them). A name is decoded as
    :func:`~guardkit_state.git.parse.parse_refs` decodes the fetched copies (bytes no UTF-8 kept):
    a look compares the two."""
    status, out, err = repo.run("ls-remote", "--refs", remote, *patterns, check=False, timeout=REFS_TIMEOUT)
    if status != 0:
        raise RemoteUnreachableError(f"cannot reach remote {remote!r}: {first_line(err)[:200]}", path=repo.root)
    return out.decode("utf-8", "surrogateescape")


def remote_refs(repo: GitRepo, remote: str, pattern: str) -> dict[str, str]:
    """The refs of ``remote`` that ``pattern`` names: ref -> sha."""
    return listed_refs(ls_remote(repo, remote, pattern))


def list_refs(repo: GitRepo, *prefixes: str) -> list[RefRecord]:
    """The refs under ``prefixes`` (folders, without the trailing slash), in one ``for-each-ref``."""
    found = repo.refs(("refname", "objectname", "contents"), *(f"{prefix}/" for prefix in prefixes)) or []
    return [(name, sha, message) for name, sha, message in found]


def task_ref_place(name: str, prefix: str) -> tuple[str, bool] | None:
    """Where a ref under a folder of refs named by task (``prefix``: a feature's claims or ledgers
    on the remote, or the copy a clone fetched them to) stands, as every reader of them takes it:
    ``(task, True)`` for ``<prefix>/<TASK>``, the task's ref; ``(task, False)`` for a ref below it
    (``<prefix>/<TASK>/...``): not the task's, but in its way (git keeps no ref under another ref's
    name: the task's ref cannot be created while it is there); None for any other ref (its first
    name no task id): no task's, in the way of none. A ref pushed at ``<prefix>/x/<TASK>`` (by hand,
    or by a broken build) is never read as ``<TASK>``'s."""
    task, _, below = name.removeprefix(f"{prefix}/").partition("/")
    if not name.startswith(f"{prefix}/") or not is_task_id(task):
        return None
    return task, not below


@dataclass
class RemoteBranches:
    """The ``autobuild/*`` branches of one remote, as a worker's clone sees them."""

    repo: GitRepo
    remote: str
    #: The refs the last :meth:`fetch` listed.
    listing: list[RefRecord] = field(default_factory=list)

    def tracking(self, branch: str) -> str:
        return f"refs/remotes/{self.remote}/{branch}"

    def fetch(self, *also: str, listed: tuple[str, ...] = ()) -> dict[str, str]:
        """Fetch every ``autobuild/*`` branch (and the refspecs ``also``, in the same fetch); the
        branches' shas on the remote, by branch name. The refs after it, the local branches and
        those under the prefixes ``listed`` included, are kept in ``listing`` (one git call)."""
        prefix = BRANCH_PREFIX.rstrip("/")
        branches = f"+refs/heads/{prefix}/*:refs/remotes/{self.remote}/{prefix}/*"
        status, err = fetch_refs(self.repo, self.remote, branches, *also, timeout=DATA_TIMEOUT)
        if status != 0:
            raise RemoteUnreachableError(f"cannot fetch from {self.remote!r}: {first_line(err)}", path=self.repo.root)
        tracking = f"refs/remotes/{self.remote}/"
        self.listing = list_refs(self.repo, f"{tracking}{prefix}", f"refs/heads/{prefix}", *listed)
        return {name.removeprefix(tracking): sha for name, sha, _ in self.listing if name.startswith(tracking)}

    def sync(self, *also: str, listed: tuple[str, ...] = ()) -> dict[str, str]:
        """:meth:`fetch`, then every local branch behind its remote one moved up to it."""
        remote = self.fetch(*also, listed=listed)
        locals_ = {name.removeprefix("refs/heads/"): sha for name, sha, _ in self.listing
                   if name.startswith("refs/heads/")}
        checked_out: dict[str, str] | None = None
        moves: list[tuple[str, str, str | None]] = []  # (ref, new sha, old sha: None for a new branch)
        for branch, sha in remote.items():
            local = locals_.get(branch)
            if local == sha:
                continue
            if local is not None and not self.repo.ok("merge-base", "--is-ancestor", local, sha):
                continue  # ahead (a turn not pushed yet) or apart: its worker decides
            if checked_out is None:
                checked_out = self.checked_out()
            where = checked_out.get(branch)
            if where is None:
                moves.append((f"refs/heads/{branch}", sha, local))
            elif self._is_worktree(Path(where)):
                # Left as is when the worktree has files in the way (an interrupted turn): its loop resumes there.
                self.repo.run("merge", "--ff-only", "--quiet", sha, cwd=Path(where), check=False)
            # (A folder git still lists that is no worktree any more, its .git removed, is left alone:
            # git run there would find this clone's own checkout and move the user's branch.)
        self._move_branches(moves)
        return remote

    def _move_branches(self, moves: list[tuple[str, str, str | None]]) -> None:
        """Each ``(ref, sha, old)`` set to ``sha`` where it is still ``old`` (None: where it still does
        not exist, the zero oid): one ``update-ref --stdin`` for all (a fetch after a round of six
        workers brings a dozen new branches). Should one have moved or been made meanwhile by another
        process of this clone (a loop's turn, the branch a loop creates for its task, a person), that
        transaction changes nothing and each is set alone: that one is refused and left where it is,
        for its worker to decide on, as a branch ahead of the remote's or apart from it is."""
        updates = [(ref, sha, old or "0" * len(sha)) for ref, sha, old in moves]
        lines = "".join(f"update {ref} {sha} {old}\n" for ref, sha, old in updates)
        # (A name as the listing kept it, bytes no UTF-8 included: it goes back to git as it came.)
        stdin = lines.encode("utf-8", "surrogateescape")
        if len(updates) > 1 and self.repo.run("update-ref", "--stdin", stdin=stdin, check=False)[0] == 0:
            return
        for ref, sha, old in updates:
            self.repo.run("update-ref", ref, sha, old, check=False)

    def push(self, branch: str, expected: str | None, *, also: tuple[str, ...] = (), sha: str | None = None) -> str:
        """Push local ``branch`` (or the commit ``sha``, the branch left where it is) onto the remote's,
        which must be at ``expected`` (None: absent).

        Returns the sha pushed. Raises :class:`BranchMovedError` (a :class:`ClaimLostError`) when the
        remote branch moved (another worker pushed: this one's claim is gone; or, under a claim still
        held, a person did), :class:`ClaimLostError` when the local branch does not continue ``expected``
        (the lease forces the push: it would replace the remote's history), :class:`RemoteUnreachableError`, or
        :class:`RemoteRejectedError` for any other refusal.
        """
        sha = sha or self.repo.text("rev-parse", "--verify", f"refs/heads/{branch}^{{commit}}")
        ref = f"refs/heads/{branch}"
        if expected is not None and sha != expected and not self.repo.ok("merge-base", "--is-ancestor", expected, sha):
            # The lease forces the push: a branch apart from the remote's would replace its history.
            raise ClaimLostError(f"{branch} here does not continue {self.remote!r}'s ({expected[:10]}): "
                                 f"not pushed over it", path=self.repo.root)
        # ``also``: refs pushed with the branch, all or none (``--atomic``): a task's turn ledger.
        crash_point("remote.before_push")
        status, out, err = self.repo.run("push", "--porcelain", "--no-verify", *(["--atomic"] if also else []),
                                         f"--force-with-lease={ref}:{expected or ''}", self.remote,
                                         f"{sha}:{ref}", *also, check=False, timeout=DATA_TIMEOUT)
        crash_point("remote.after_push")  # landed (or refused), its answer not yet read
        lines = [line for line in out.decode("utf-8", "replace").splitlines() if "\t" in line]
        mine = [line for line in lines if f":{ref}\t" in line] or lines
        if status == 0 and lines and not any(line.startswith("!") for line in lines):
            self.repo.run("update-ref", self.tracking(branch), sha)
            return sha
        if not lines:
            raise RemoteUnreachableError(f"cannot push {branch} to {self.remote!r}: {first_line(err)}",
                                         path=self.repo.root)
        summary = mine[0].split("\t")[-1]
        # A push racing another one to the same ref can be refused by the remote's ref lock
        # ("failed to update ref"): whether the ref moved tells a lost race from a refusal.
        if "remote rejected" in summary and self._remote_sha(ref) == expected:
            # (An atomic push, a turn with its ledger, reports a held lock only as its transaction failed.)
            atomic_lock = "(atomic transaction failed)" in summary and _HELD_LOCK.search(err) is not None
            if lock_contention(summary) or atomic_lock:  # its lock was held: try again (a stale one here removed)
                clear_remote_lock(self.repo, self.remote, err)
                raise RemoteUnreachableError(busy_lock(self.remote, ref, summary, err), path=self.repo.root)
            said = remote_error(err)  # (why an atomic push failed: only the remote's own line says)
            raise RemoteRejectedError(f"remote {self.remote!r} refused {branch}: {summary}"
                                      + (f": {said}" if said else ""), path=self.repo.root)
        raise BranchMovedError(f"{branch} moved on {self.remote!r} ({summary}): another worker pushed to it",
                               path=self.repo.root)

    def push_ref(self, sha: str, ref: str) -> None:
        """Create ``ref`` on the remote at ``sha`` (a ref that is there already at ``sha`` is fine).

        Raises:
            RemoteUnreachableError: the remote could not be reached.
            RemoteRejectedError: the remote refused it, or holds ``ref`` at another commit.
        """
        status, out, err = self.repo.run("push", "--porcelain", "--no-verify", self.remote, f"{sha}:{ref}",
                                         check=False, timeout=DATA_TIMEOUT)
        lines = [line for line in out.decode("utf-8", "replace").splitlines() if "\t" in line]
        if status == 0 and lines and not lines[0].startswith("!"):
            return
        if not lines:
            raise RemoteUnreachableError(f"cannot push {ref} to {self.remote!r}: {first_line(err)}",
                                         path=self.repo.root)
        summary = lines[0].split("\t")[-1]
        if "remote rejected" in summary and lock_contention(summary):  # a lock held (or a killed push's): again
            clear_remote_lock(self.repo, self.remote, err)
            raise RemoteUnreachableError(busy_lock(self.remote, ref, summary, err), path=self.repo.root)
        raise RemoteRejectedError(f"remote {self.remote!r} refused {ref}: {summary}", path=self.repo.root)

    def fetch_branch(self, branch: str) -> str | None:
        """Fetch one branch into its remote-tracking ref; its sha on the remote (None: not there)."""
        status, err = fetch_refs(self.repo, self.remote, f"+refs/heads/{branch}:{self.tracking(branch)}",
                                 timeout=DATA_TIMEOUT)
        if status != 0:
            if self._remote_sha(f"refs/heads/{branch}") is None:
                self.repo.run("update-ref", "-d", self.tracking(branch), check=False)
                return None
            raise RemoteUnreachableError(f"cannot fetch {branch} from {self.remote!r}: {first_line(err)}",
                                         path=self.repo.root)
        return self.repo.resolve(self.tracking(branch))

    def _remote_sha(self, ref: str) -> str | None:
        return remote_refs(self.repo, self.remote, ref).get(ref)

    def _is_worktree(self, path: Path) -> bool:
        if not path.is_dir():
            return False
        status, out, _ = self.repo.run("rev-parse", "--show-toplevel", cwd=path, check=False)
        return status == 0 and Path(out.decode("utf-8", "replace").strip()).resolve() == path.resolve()

    def checked_out(self) -> dict[str, str]:
        """Branch -> the worktree of this clone that has it checked out."""
        _, out, _ = self.repo.run("worktree", "list", "--porcelain", check=False)
        found: dict[str, str] = {}
        path = ""
        for line in out.decode("utf-8", "replace").splitlines():
            if line.startswith("worktree "):
                path = line[len("worktree "):]
            elif line.startswith("branch refs/heads/"):
                found[line[len("branch refs/heads/"):]] = path
        return found


def remote_error(stderr: str) -> str:
    """The first error the remote's git itself reported in a push's ``stderr`` (``remote: error:
    cannot lock ref ...``), without its prefixes; empty when there is none (a hook's own lines are
    its own, and the push's report says it declined)."""
    for line in stderr.splitlines():
        said = line.strip().removeprefix("remote:").strip()
        if line.startswith("remote:") and said.startswith(("error:", "fatal:")):
            return said.partition(":")[2].strip()
    return ""


def first_line(text: str) -> str:
    """The line of git's stderr that says what failed (its first ``fatal:``/``error:``, else its first):
    a note or an error is one line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return next((line for line in lines if line.startswith(("fatal:", "error:"))), lines[0] if lines else "")


__all__ = ["REMOTE_LOCK_AGE", "RemoteBranches", "busy_lock", "clear_remote_lock", "fetch_refs", "first_line",
           "list_refs", "listed_refs", "lock_contention",
           "ls_remote", "remote_refs", "task_ref_place"]
