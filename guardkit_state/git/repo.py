"""Git behind one small module: one short function per question, failures turned into advice.

Every git call guardkit-state makes goes through :class:`GitRepo`, which runs the git CLI through
GitPython's command wrapper (it honours hooks and the user's config; GitPython's index API is 4x
slower and is not used). ``-z`` output is parsed by the pure helpers of :mod:`gitparse`.

A turn commit (:func:`commit_turn`) never raises for a git failure: the turn's files are already
written when it is called, so a failing hook or a locked index is *returned* in
:class:`CommitResult` for the caller to report.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from guardkit_state.errors import GitError, InputError, UnsafePathError
from guardkit_state.git.locks import (
    STALE_LOCK_SECONDS as STALE_LOCK_SECONDS,  # re-exported: callers import it from here
)
from guardkit_state.git.locks import remove_stale_locks
from guardkit_state.git.parse import LOG_FORMAT, parse_turn_log
from guardkit_state.git.parse import TRAILER_KEYS as TRAILER_KEYS  # re-exported: callers import these from here
from guardkit_state.git.parse import StatusEntry as StatusEntry
from guardkit_state.git.parse import TurnCommit as TurnCommit
from guardkit_state.git.parse import parse_status_z as parse_status_z
from guardkit_state.git.parse import parse_worktree_list_z as parse_worktree_list_z
from guardkit_state.store.fsio import TEMP_NAME, TEMP_PREFIX, validate_task_id

log = logging.getLogger("guardkit_state.git.repo")

#: The identity used when the user has none configured, so a missing identity never fails a turn.
FALLBACK_NAME = "guardkit-state"
FALLBACK_EMAIL = "autobuild@localhost"

#: How many recent commits are searched for an existing commit of the same turn (resume after a
#: kill). The interrupted turn's commit, when it exists, is HEAD or very near it.
DEDUPE_DEPTH = 64

#: Pathspecs ``commit_all`` leaves out: the local search index (guardkit-state's own temp files
#: are left out by exact name, see ``_own_temp_files``). User paths are never read as pathspec
#: magic (a file named ``:(glob)*`` is just a file).
_LITERAL = ("--literal-pathspecs",)
_NEVER_COMMIT = (":(exclude).guardkit/index",)
#: Under ``.guardkit/`` as anywhere else, only the exact names of our own temp files are ours: the one
#: ``fsio.atomic_write_bytes`` gives (``.gks-tmp-<name>.<pid>.<ns>``) and the one an agent's pid
#: file is written through (``.gks-tmp-<report>.agent.json.<pid>``). An agent's own
#: ``.guardkit/notes/.gks-tmp-plan.md`` is real work.
_ATOMIC_TEMP = re.compile(rf"{TEMP_NAME.pattern}|{re.escape(TEMP_PREFIX)}.+\.agent\.json\.[1-9][0-9]*")

_ADVICE = "Is git installed, and is this a git repository?"


def branch_for(task_id: str) -> str:
    """The branch a task's loop runs on: ``autobuild/TASK-ID``."""
    return f"autobuild/{task_id}"


@dataclass(frozen=True)
class CommitResult:
    """What a turn commit did: ``sha`` when committed, else ``skipped`` or ``error`` says why."""

    sha: str | None
    error: str | None = None
    skipped: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def committed(self) -> bool:
        return self.sha is not None and self.skipped is None and self.error is None

    def to_dict(self) -> dict[str, Any]:
        return {"sha": self.sha, "error": self.error, "skipped": self.skipped, "notes": list(self.notes)}


class GitRepo:
    """A git working tree (the main checkout or a linked worktree), queried through the git CLI.

    Build one with :meth:`discover`. ``root`` is the working tree's top level, ``git_dir`` its own
    admin directory (``.git`` or ``.git/worktrees/NAME``) and ``common_dir`` the shared one.
    """

    def __init__(self, root: Path, git_dir: Path, common_dir: Path) -> None:
        self.root = root
        self.git_dir = git_dir
        self.common_dir = common_dir
        self._identity_args: list[str] | None = None
        self._cmd = _git_module().cmd.Git(str(root))

    def __repr__(self) -> str:
        return f"GitRepo({str(self.root)!r})"

    # -- discovery -------------------------------------------------------------------------

    @classmethod
    def discover(cls, path: str | Path) -> GitRepo | None:
        """The working tree containing ``path``; None when git is missing or there is no repo.

        The caller then works without commits and says so once.
        """
        start = Path(path)
        if start.is_file():
            start = start.parent
        try:
            gitmod = _git_module()
        except GitError as exc:
            log.info("git is not available: %s", exc.message)
            return None
        if not start.is_dir():
            return None
        try:
            status, out, _err = gitmod.cmd.Git(str(start)).execute(
                ["git", "rev-parse", "--path-format=absolute", "--show-toplevel", "--absolute-git-dir",
                 "--git-common-dir"],
                with_extended_output=True, with_exceptions=False,
            )
        except (gitmod.exc.GitCommandNotFound, OSError) as exc:
            log.info("git is not available: %s", exc)
            return None
        lines = out.splitlines()
        if status != 0 or len(lines) != 3:
            return None  # not inside a working tree (or inside a bare repo / .git itself)
        return cls(Path(lines[0]), Path(lines[1]), Path(lines[2]))

    # -- the one place git runs ------------------------------------------------------------

    def run(self, *args: str, cwd: Path | None = None, check: bool = True, stdin: bytes | None = None,
            pre: Sequence[str] = ()) -> tuple[int, bytes, str]:
        """Run ``git [pre] args`` in the working tree; raise :class:`GitError` on failure when ``check``."""
        command = ["git", *pre, *args]
        runner = self._cmd if cwd is None else _git_module().cmd.Git(str(cwd))
        gitmod = _git_module()
        try:
            with contextlib.ExitStack() as stack:
                istream = None
                if stdin is not None:
                    istream = stack.enter_context(tempfile.TemporaryFile())
                    istream.write(stdin)
                    istream.seek(0)
                status, out, err = runner.execute(
                    command, istream=istream, with_extended_output=True, with_exceptions=False,
                    stdout_as_string=False, strip_newline_in_stdout=False,
                )
        except gitmod.exc.GitCommandNotFound as exc:
            raise GitError(f"git is not installed or not on PATH. {_ADVICE}", command=command) from exc
        except OSError as exc:
            raise GitError(f"cannot run git: {exc}", command=command, path=self.root) from exc
        stderr = err.decode("utf-8", "replace") if isinstance(err, bytes) else str(err or "")
        stdout = out if isinstance(out, bytes) else str(out or "").encode()
        if check and status != 0:
            # Some failures ("nothing to commit") are reported on stdout only.
            detail = stderr if stderr.strip() else stdout.decode("utf-8", "replace")
            raise _git_error(command, status, detail, self.root)
        return status, stdout, stderr

    def text(self, *args: str, cwd: Path | None = None) -> str:
        """stdout of a git command that must succeed, decoded, without the trailing newline."""
        return self.run(*args, cwd=cwd)[1].decode("utf-8", "replace").rstrip("\n")

    def ok(self, *args: str, cwd: Path | None = None) -> bool:
        """True when a git command exits 0 (for yes/no questions)."""
        return self.run(*args, cwd=cwd, check=False)[0] == 0

    # -- questions -------------------------------------------------------------------------

    def head_sha(self) -> str | None:
        """The commit HEAD points at; None on an unborn branch."""
        status, out, _ = self.run("rev-parse", "-q", "--verify", "HEAD^{commit}", check=False)
        return out.decode().strip() if status == 0 else None

    def current_branch(self) -> str | None:
        """The checked-out branch's short name; None when HEAD is detached."""
        status, out, _ = self.run("symbolic-ref", "-q", "--short", "HEAD", check=False)
        return out.decode().strip() if status == 0 else None

    def branch_exists(self, name: str) -> bool:
        return self.ok("rev-parse", "-q", "--verify", f"refs/heads/{name}")

    def resolve(self, rev: str) -> str | None:
        """The commit sha ``rev`` names, or None."""
        status, out, _ = self.run("rev-parse", "-q", "--verify", f"{rev}^{{commit}}", check=False)
        return out.decode().strip() if status == 0 else None

    def upstream_of(self, branch: str) -> str | None:
        """The local branch ``branch`` tracks (its recorded base), or None."""
        status, out, _ = self.run("rev-parse", "-q", "--abbrev-ref", f"{branch}@{{upstream}}", check=False)
        return out.decode().strip() or None if status == 0 else None

    def status(self, paths: Iterable[str | Path] | None = None, *, cwd: Path | None = None) -> list[StatusEntry]:
        """``git status`` entries (untracked files included), limited to ``paths`` when given."""
        args = ["status", "--porcelain", "-z", "--untracked-files=all"]
        if paths is not None:
            args += ["--", *(str(p) for p in paths)]
        return parse_status_z(self.run(*args, cwd=cwd)[1])

    def is_dirty(self, paths: Iterable[str | Path] | None = None, *, cwd: Path | None = None) -> bool:
        """True when the working tree (or just ``paths``) has changes or untracked files."""
        return bool(self.status(paths, cwd=cwd))

    def identity_args(self) -> list[str]:
        """``-c user.name=... -c user.email=...`` for whatever identity the user has not configured."""
        if self._identity_args is None:
            _, out, _ = self.run("config", "-z", "--get-regexp", r"^(user|author|committer)\.(name|email)$",
                                 check=False)
            keys = {entry.split("\n", 1)[0].lower() for entry in out.decode("utf-8", "replace").split("\0") if entry}
            args: list[str] = []
            for part, fallback in (("name", FALLBACK_NAME), ("email", FALLBACK_EMAIL)):
                env_set = os.environ.get(f"GIT_AUTHOR_{part.upper()}") and os.environ.get(
                    f"GIT_COMMITTER_{part.upper()}")
                if not env_set and f"user.{part}" not in keys and not (
                        {f"author.{part}", f"committer.{part}"} <= keys):
                    args += ["-c", f"user.{part}={fallback}"]
            if args:
                log.info("no git identity configured in %s; committing as %s <%s>", self.root,
                         FALLBACK_NAME, FALLBACK_EMAIL)
            self._identity_args = args
        return list(self._identity_args)

    # -- writes ----------------------------------------------------------------------------

    def commit_paths(self, paths: Sequence[str | Path], message: str, *, force: Sequence[str | Path] = ()) -> str:
        """Commit exactly ``paths`` (new, changed or deleted) and nothing else; return the sha.

        Other staged or dirty files of the user stay as they were. On failure the paths are
        unstaged again so the user's next ``git commit`` does not pick them up. Those of ``paths``
        also in ``force`` are committed even where a ``.gitignore`` rule hides them.
        """
        rel = [self._relative(p) for p in paths]
        present = [p for p in rel if (self.root / p).exists() or (self.root / p).is_symlink()]
        missing = [p for p in rel if p not in present]
        if missing:  # a deleted file can be committed only if git knows it
            tracked = self.run("ls-files", "-z", "--", *missing, pre=_LITERAL)[1].decode().split("\0")
            missing = [p for p in missing if p in tracked]
        forced = {self._relative(p) for p in force}
        rest = [p for p in present if p not in forced]
        if rest:
            self._add(rest)  # drops paths the user's .gitignore excludes
        self._add_forced([p for p in present if p in forced])
        present = [p for p in present if p in forced or p in rest]
        targets = present + missing
        if not targets:
            raise GitError("nothing to commit: none of the given paths exist or are committable",
                           command=["commit"])
        try:
            self._commit("-m", message, "--", *targets, literal=True)
        except GitError:
            with contextlib.suppress(GitError):
                self.run("reset", "-q", "--", *present, pre=_LITERAL)
            raise
        return self.text("rev-parse", "HEAD")

    def commit_all(self, message: str, *, force: Sequence[str | Path] = ()) -> str:
        """Commit every change in a *managed* worktree, untracked files included; return the sha.

        The local index data (``.guardkit/index/``) and guardkit-state's own temp files (left by
        interrupted atomic writes) are never committed; other files are, whatever their name.
        Ignored files are not, except the exact paths in ``force``.
        """
        self.run("add", "-A", "--", ".", *_NEVER_COMMIT, *self._own_temp_files())
        self._add_forced([self._relative(p) for p in force if os.path.lexists(self.root / self._relative(p))])
        self._commit("-m", message)
        return self.text("rev-parse", "HEAD")

    def _own_temp_files(self) -> list[str]:
        """``:(exclude,literal)`` pathspecs for untracked temp files of ours (``.guardkit/`` included)."""
        out = self.run("ls-files", "-z", "--others", "--exclude-standard", "--", f":(glob)**/{TEMP_PREFIX}*")[1]
        paths = out.decode("utf-8", "surrogateescape").split("\0")
        return [f":(exclude,literal){p}" for p in paths if _ATOMIC_TEMP.fullmatch(p.rsplit("/", 1)[-1])]

    def _commit(self, *args: str, literal: bool = False) -> None:
        try:
            self.run("commit", "-q", "--no-edit", *args,
                     pre=[*(_LITERAL if literal else ()), *self.identity_args()])
        except GitError as exc:
            hooks = [] if _nothing_to_commit(exc) or ".lock'" in exc.stderr else self._commit_hooks()
            if not hooks:
                raise
            raise GitError(f"{exc.message} — the {'/'.join(hooks)} hook rejected the commit (git hooks run as "
                           "configured; fix what it reports, or commit the turn yourself)",
                           command=exc.command, returncode=exc.returncode, stderr=exc.stderr, path=exc.path) from exc

    def _commit_hooks(self) -> list[str]:
        """The commit hooks that would run here (``core.hooksPath`` honoured)."""
        hooks = Path(self.text("rev-parse", "--git-path", "hooks"))
        hooks = hooks if hooks.is_absolute() else self.root / hooks
        return [n for n in ("pre-commit", "prepare-commit-msg", "commit-msg")
                if (hooks / n).is_file() and os.access(hooks / n, os.X_OK)]

    def _add(self, paths: list[str]) -> None:
        try:
            self.run("add", "--", *paths, pre=_LITERAL)
        except GitError as exc:
            if "ignored by one of your .gitignore" not in exc.stderr:
                raise
            # Respect the user's ignore rules: commit what is not ignored, say what was left out.
            ignored = set(self.run("check-ignore", "-z", "--", *paths, check=False, pre=_LITERAL)[1]
                          .decode().split("\0"))
            keep = [p for p in paths if p not in ignored]
            log.warning("not committing ignored paths: %s", ", ".join(sorted(ignored - {""})))
            if keep:
                self.run("add", "--", *keep, pre=_LITERAL)
            paths[:] = keep

    def _add_forced(self, paths: list[str]) -> None:
        """``git add -f`` of exact file paths (never a directory: that would take all it holds)."""
        files = [p for p in paths if not (self.root / p).is_dir()]
        if files:
            self.run("add", "-f", "--", *files, pre=_LITERAL)

    def ignore_rules(self, paths: Sequence[str | Path]) -> dict[str, str]:
        """The ``.gitignore`` rule (``file:line:pattern``) hiding each of ``paths`` that one hides."""
        rel = [self._relative(p) for p in paths]
        if not rel:
            return {}
        out = self.run("check-ignore", "-v", "-z", "--stdin", check=False,
                       stdin=b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in rel))[1]
        fields = out.decode("utf-8", "surrogateescape").split("\0")
        rules: dict[str, str] = {}
        for source, line, pattern, path in zip(fields[0::4], fields[1::4], fields[2::4], fields[3::4], strict=False):
            if source and not pattern.startswith("!"):  # a "!pattern" match un-ignores the path
                rules[path] = f"{source}:{line}:{pattern}"
        return rules

    def _relative(self, path: str | Path) -> str:
        p = Path(path)
        if p.is_absolute():
            try:
                p = p.relative_to(self.root)
            except ValueError:
                try:
                    p = Path(os.path.realpath(p)).relative_to(os.path.realpath(self.root))
                except ValueError:
                    raise UnsafePathError("path is outside the repository", path=path,
                                          expected=f"a path inside {self.root}") from None
        return p.as_posix()

    # -- locks -----------------------------------------------------------------------------

    def remove_stale_index_lock(self) -> list[Path]:
        """Remove lock files a killed git command left behind; return what was removed.

        Looks at ``index.lock`` and ``HEAD.lock`` of this working tree and the current branch's
        ref lock; see :func:`~guardkit_state.git.locks.remove_stale_locks` for when one is stale.
        """
        return remove_stale_locks(self.root, self.git_dir, self.common_dir, self.current_branch())

    # -- turn commits ----------------------------------------------------------------------

    def find_turn_commit(self, task_id: str, turn: int, *, rev: str = "HEAD",
                         depth: int | None = DEDUPE_DEPTH) -> str | None:
        """The newest commit on ``rev`` whose trailers say ``Task: task_id`` and ``Turn: turn``."""
        for commit in self.turn_commits(task_id, rev=rev, depth=depth):
            if commit.turn == turn:
                return commit.sha
        return None

    def turn_commits(self, task_id: str, *, rev: str = "HEAD", depth: int | None = None) -> list[TurnCommit]:
        """Turn commits of ``task_id`` reachable from ``rev``, newest first (by trailers).

        ``depth`` looks only at the newest ``depth`` commits (git's ``--grep`` with
        ``--max-count`` would still walk the whole history when nothing matches).
        """
        args = ["log", f"--format={LOG_FORMAT}"]
        if depth is None:
            args += ["-E", f"--grep=^Task: {re.escape(task_id)}$"]
        else:
            args.append(f"--max-count={depth}")
        status, out, stderr = self.run(*args, rev, "--", check=False)
        if status != 0:
            if "unknown revision" in stderr or "bad revision" in stderr or "does not have any commits" in stderr:
                return []
            raise _git_error(["git", *args, rev], status, stderr, self.root)
        return [c for c in parse_turn_log(out.decode("utf-8", "replace")) if c.task_id == task_id]


def commit_turn(
    repo: GitRepo | None,
    *,
    task_id: str,
    turn: int,
    decision: str | Enum,
    mode: str | Enum,
    paths: Sequence[str | Path] | None = None,
    managed_worktree: bool,
    force_paths: Sequence[str | Path] = (),
) -> CommitResult:
    """Make the one commit of a completed turn; never raises for a git failure.

    In a managed worktree (``managed_worktree=True``) every change is committed, untracked files
    included; elsewhere only ``paths`` (required) are. ``force_paths`` (exact files: the turn's own
    reports) are committed even where a ``.gitignore`` rule hides them. The message is
    ``autobuild(TASK): turn N <decision>`` with ``Task:``/``Turn:``/``Decision:``/``Mode:``
    trailers. If a commit for this Task and Turn already exists near HEAD (resume after a kill),
    nothing is committed and ``skipped`` says so. A stale ``index.lock`` is removed and the commit
    retried once. Raises :class:`InputError` only for misuse (bad id, no paths outside a worktree).
    """
    validate_task_id(task_id)
    if repo is None:
        return CommitResult(None, skipped="not a git repository (or git is not installed): turn not committed")
    if not managed_worktree and not paths:
        raise InputError("outside a managed worktree the paths to commit must be given",
                         task_id=task_id, turn=turn, expected="paths=[...]")
    decision_s, mode_s = _value(decision), _value(mode)
    message = turn_message(task_id, turn, decision_s, mode_s)
    notes: list[str] = []
    try:
        existing = repo.find_turn_commit(task_id, turn)
        if existing:
            return CommitResult(existing, skipped=f"turn {turn} of {task_id} is already committed as {existing[:12]}")
        for attempt in (1, 2):
            try:
                sha = (repo.commit_all(message, force=force_paths) if managed_worktree
                       else repo.commit_paths(list(paths or []), message, force=force_paths))
                break
            except GitError as exc:
                if attempt == 1 and ".lock': File exists" in exc.stderr:
                    removed = repo.remove_stale_index_lock()
                    if removed:
                        notes.append("removed stale git lock " + ", ".join(str(p) for p in removed))
                        continue
                if _nothing_to_commit(exc):
                    return CommitResult(None, skipped="nothing to commit", notes=tuple(notes))
                raise
    except GitError as exc:
        log.warning("turn %s of %s not committed: %s", turn, task_id, exc)
        return CommitResult(None, error=_one_line(exc), notes=tuple(notes))
    if repo.identity_args():
        notes.append(f"no git identity configured; committed as {FALLBACK_NAME} <{FALLBACK_EMAIL}>")
    return CommitResult(sha, notes=tuple(notes))


def turn_message(task_id: str, turn: int, decision: str, mode: str) -> str:
    """The commit message of a turn: subject, blank line, one trailer block git can parse."""
    trailers = {"Task": task_id, "Turn": str(turn), "Decision": decision, "Mode": mode}
    for key, value in trailers.items():
        if not value or "\n" in value or "\r" in value:
            raise InputError(f"invalid trailer value for {key}: {value!r}", task_id=task_id, turn=turn,
                             expected="a non-empty single-line value")
    block = "\n".join(f"{k}: {v}" for k, v in trailers.items())
    return f"autobuild({task_id}): turn {turn} {decision}\n\n{block}\n"


def _value(v: str | Enum) -> str:
    return str(v.value) if isinstance(v, Enum) else str(v)


def _nothing_to_commit(exc: GitError) -> bool:
    text = (exc.stderr or "") + " " + exc.message
    return "nothing to commit" in text or "no changes added to commit" in text or "nothing added to commit" in text


def _one_line(exc: GitError) -> str:
    return " ".join(str(exc).split())


def _git_error(command: list[str], status: int, stderr: str, root: Path) -> GitError:
    detail = stderr.strip().splitlines()
    first = next((line for line in detail if line.startswith(("fatal:", "error:"))), detail[-1] if detail else "")
    shown = " ".join(command[:4])
    message = f"'{shown}' failed (exit {status})" + (f": {first}" if first else "")
    if "index.lock" in stderr:
        message += " — another git process is running, or a killed one left a lock behind"
    return GitError(message, command=command, returncode=status, stderr=stderr, path=root)


_GIT_MODULE: Any = None


def _git_module() -> Any:
    """Import GitPython lazily; a missing git executable becomes a :class:`GitError`."""
    global _GIT_MODULE
    if _GIT_MODULE is None:
        try:
            import git  # lazy: importing fails when the git executable is missing
        except ImportError as exc:
            raise GitError(f"git is not available ({str(exc).splitlines()[0]}). {_ADVICE}") from exc
        _GIT_MODULE = git
    return _GIT_MODULE
