"""A git working tree, queried and committed to through the git CLI: one short method per question.

Every git call guardkit-state makes goes through :class:`GitRepo` (which runs git through
:mod:`guardkit_state.git.runner`). ``-z`` output is parsed by the pure helpers of
:mod:`guardkit_state.git.parse`; the turn commit itself, and reading turn commits back, are
:mod:`guardkit_state.git.commits`.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Self

from guardkit_state.errors import GitError, UnsafePathError
from guardkit_state.git.parse import StatusEntry, parse_cat_file_batch, parse_refs, parse_status_z, ref_format
from guardkit_state.git.runner import execute, git_error, nothing_to_commit
from guardkit_state.git.stale_locks import remove_stale_locks
from guardkit_state.store import reads
from guardkit_state.store.fsio import TEMP_NAME, TEMP_PREFIX
from guardkit_state.store.layout import RUNTIME_DIRS, RUNTIME_GLOBS

log = logging.getLogger("guardkit_state.git.repo")

#: The identity used when the user has none configured, so a missing identity never fails a turn.
FALLBACK_NAME = "guardkit-state"
FALLBACK_EMAIL = "autobuild@localhost"

#: Pathspecs ``commit_all`` leaves out: the loop's own runtime folders (the search index, caches, logs,
#: reports, agents' scratch, lock files: an agent writing there, a Coach too, commits nothing; the
#: worktree snapshot leaves them out alike), and guardkit-state's own temp files by exact name (see
#: ``_own_temp_files``). User paths are never read as pathspec magic (a file named ``:(glob)*`` is just a file).
_LITERAL = ("--literal-pathspecs",)
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


class Unread(enum.Enum):
    """A value the caller did not read (so the callee asks git); ``None`` is a value read (no HEAD)."""

    UNREAD = "unread"


UNREAD = Unread.UNREAD
_NEVER_COMMIT = (*(f":(exclude){path}" for path in RUNTIME_DIRS), *(f":(exclude,glob){glob}" for glob in RUNTIME_GLOBS))
#: Under ``.guardkit/`` as anywhere else, only the exact names of our own temp files are ours: the one
#: ``fsio.atomic_write_bytes`` gives (``.gks-tmp-<name>.<pid>.<ns>``) and the one an agent's pid
#: file is written through (``.gks-tmp-<report>.agent.json.<pid>``). An agent's own
#: ``.guardkit/notes/.gks-tmp-plan.md`` is real work.
_ATOMIC_TEMP = re.compile(rf"{TEMP_NAME.pattern}|{re.escape(TEMP_PREFIX)}.+\.agent\.json\.[1-9][0-9]*")



def branches_named(cwd: Path, prefix: str) -> frozenset[str]:
    """The local branches whose name starts with ``prefix`` (``autobuild/``) in the repository
    holding ``cwd``: one git call, no discovery first; none outside a repository or without git."""
    try:
        status, out, _ = execute(cwd, ["git", "for-each-ref", f"--format={ref_format(('refname',))}",
                                       f"refs/heads/{prefix}"])
    except GitError:
        return frozenset()
    if status != 0:
        return frozenset()
    heads = "refs/heads/"
    return frozenset(name[len(heads):] for (name,) in parse_refs(out, 1) if name.startswith(heads + prefix))


def _spec_lines(specs: Sequence[str]) -> bytes:
    """``specs`` (``rev:path``, ids) as ``git cat-file --batch`` reads them, one a line; a path as the
    file system gave it (``surrogateescape``: a name's bytes no UTF-8 go back to git as they came, as
    an argument to git does)."""
    return ("\n".join(specs) + "\n").encode("utf-8", "surrogateescape")


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
        self._empty_tree: str | None = None

    def __repr__(self) -> str:
        return f"GitRepo({str(self.root)!r})"

    # -- discovery -------------------------------------------------------------------------

    @classmethod
    def discover(cls, path: str | Path) -> Self | None:
        """The working tree containing ``path``; None when git is missing or there is no repo.

        The caller then works without commits and says so once.
        """
        start = Path(path)
        if start.is_file():
            start = start.parent
        if not start.is_dir():
            return None
        try:
            status, raw, _err = execute(start, ["git", "rev-parse", "--path-format=absolute", "--show-toplevel",
                                                "--absolute-git-dir", "--git-common-dir"])
        except GitError as exc:
            log.info("git is not available: %s", exc.message)
            return None
        out = raw.decode("utf-8", "surrogateescape")
        lines = out.removesuffix("\n").split("\n")  # one path a line: a path may hold "\r", U+2028
        if status != 0 or len(lines) != 3:
            return None  # not inside a working tree (or inside a bare repo / .git itself)
        return cls(Path(lines[0]), Path(lines[1]), Path(lines[2]))

    # -- the one place git runs ------------------------------------------------------------

    def run(self, *args: str, cwd: Path | None = None, check: bool = True, stdin: bytes | None = None,
            pre: Sequence[str] = (), timeout: float | None = None,
            index_file: Path | None = None) -> tuple[int, bytes, str]:
        """Run ``git [pre] args`` in the working tree; raise :class:`GitError` on failure when ``check``
        (``timeout``, ``index_file``: see :func:`~guardkit_state.git.runner.execute`)."""
        command = ["git", *pre, *args]
        status, stdout, stderr = execute(self.root if cwd is None else cwd, command, stdin=stdin, path=self.root,
                                         timeout=timeout, index_file=index_file)
        if check and status != 0:
            # Some failures ("nothing to commit") are reported on stdout only.
            detail = stderr if stderr.strip() else stdout.decode("utf-8", "replace")
            raise git_error(command, status, detail, self.root)
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

    def head(self) -> tuple[str | None, str | None]:
        """HEAD's commit (None on an unborn branch) and its branch's full ref (None when detached), in
        one git call (two on an unborn branch)."""
        status, out, _ = self.run("rev-parse", "HEAD", "--symbolic-full-name", "HEAD", check=False)
        lines = out.decode("utf-8", "surrogateescape").split()
        if status != 0 or len(lines) != 2:  # an unborn branch: no commit yet
            _, out, _ = self.run("symbolic-ref", "-q", "HEAD", check=False)
            return None, out.decode("utf-8", "surrogateescape").strip() or None
        return lines[0], (lines[1] if lines[1].startswith("refs/") else None)

    def empty_tree(self) -> str:
        """The empty tree's id, written in the repository (asked of git once per instance)."""
        if self._empty_tree is None:
            self._empty_tree = self.text("hash-object", "-t", "tree", "-w", "--stdin")
        return self._empty_tree

    def current_branch(self) -> str | None:
        """The checked-out branch's short name; None when HEAD is detached."""
        status, out, _ = self.run("symbolic-ref", "-q", "--short", "HEAD", check=False)
        return out.decode().strip() if status == 0 else None

    def branch_exists(self, name: str) -> bool:
        """True when ``name`` is exactly a local branch (``main~1`` or ``main^{tree}`` are not:
        ``rev-parse --verify refs/heads/NAME`` would take them as revisions of the branch)."""
        return self.ok("show-ref", "--verify", "-q", f"refs/heads/{name}")

    def resolve(self, rev: str) -> str | None:
        """The commit sha ``rev`` names, or None."""
        status, out, _ = self.run("rev-parse", "-q", "--verify", f"{rev}^{{commit}}", check=False)
        return out.decode().strip() if status == 0 else None

    def objects(self, specs: Sequence[str], *, max_bytes: int | None = None) -> list[tuple[str, str, bytes] | None]:
        """The objects ``specs`` name (``rev:path``, shas) by one ``git cat-file --batch``: (object id,
        type, content) each, None where missing, or (with ``max_bytes``) larger than that: their sizes
        are asked first (:meth:`sizes`), so a blob of gigabytes an agent committed is never read; the
        small ones are then read by the ids that answer gave (a ref moved meanwhile to a big one is
        not read either)."""
        if max_bytes is not None:
            sized = self.sizes(specs)
            small = list(dict.fromkeys(found[0] for found in sized if found is not None and found[2] <= max_bytes))
            by_id = dict(zip(small, self.objects(small), strict=True))
            return [by_id.get(found[0]) if found is not None else None for found in sized]
        if not specs:
            return []
        out = self.run("cat-file", "--batch", stdin=_spec_lines(specs))[1]
        return parse_cat_file_batch(out, len(specs))

    def refs(self, atoms: Sequence[str], *args: str) -> list[tuple[str, ...]] | None:
        """``git for-each-ref`` of ``args`` (patterns; filters such as ``--no-merged=REV``): each ref
        as the values of ``atoms`` (:func:`~guardkit_state.git.parse.parse_refs`), in one git call;
        None when git fails (a filter's revision unknown)."""
        status, out, _ = self.run("for-each-ref", f"--format={ref_format(atoms)}", *args, check=False)
        return parse_refs(out, len(atoms)) if status == 0 else None

    def sizes(self, specs: Sequence[str]) -> list[tuple[str, str, int] | None]:
        """(object id, type, size in bytes) of each object ``specs`` name, by one ``git cat-file
        --batch-check``; None where missing, and for a spec with a line break (one spec a line)."""
        asked = [spec for spec in specs if "\n" not in spec]
        answers: dict[str, tuple[str, str, int] | None] = {}
        if asked:
            out = self.run("cat-file", "--batch-check", stdin=_spec_lines(asked))[1]
            # One line per spec, each ended by "\n" alone: a missing spec's line repeats it, and
            # str.splitlines() would break it again at a "\r", "\x1c" or U+2028 its path may hold.
            lines = out.decode("utf-8", "replace").removesuffix("\n").split("\n")
            for spec, line in zip(asked, lines, strict=True):
                parts = line.split()  # "<id> <type> <size>", or "<spec> missing" (a spec may hold spaces)
                answers[spec] = (parts[0], parts[1], int(parts[2])) \
                    if len(parts) == 3 and parts[2].isascii() and parts[2].isdigit() else None
        return [answers.get(spec) for spec in specs]

    def blob(self, rev: str, path: str, *, limit: int | None = None) -> bytes | None:
        """The file ``path`` as ``rev`` holds it (None where it holds none), read under the cap a file on
        disk is read under (``limit``, by default :data:`~guardkit_state.store.reads.MAX_FILE_BYTES`):
        its size is asked first, so a blob of gigabytes committed there (an agent's, a person's, a
        hostile worker's push) is never read.

        Raises:
            FileTooLargeError: the blob is over the cap; names ``rev:path``, its size and the cap.
        """
        limit = reads.MAX_FILE_BYTES if limit is None else limit
        spec = f"{rev}:{path}"
        found = self.sizes([spec])[0]
        if found is None or found[1] != "blob":
            return None
        if found[2] > limit:
            raise reads.too_large(spec, f"file is {found[2]} bytes", limit)
        read = self.objects([found[0]])[0]  # by its id: the blob just measured, wherever the ref moved since
        return read[2] if read is not None else None

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
            return self._commit("-m", message, "--", *targets, literal=True)
        except GitError:
            with contextlib.suppress(GitError):
                self.run("reset", "-q", "--", *present, pre=_LITERAL)
            raise

    def commit_all(self, message: str, *, force: Sequence[str | Path] = (),
                   head: str | Unread | None = UNREAD) -> str:
        """Commit every change in a *managed* worktree, untracked files included; return the sha.

        The local index data (``.guardkit/index/``) and guardkit-state's own temp files (left by
        interrupted atomic writes) are never committed; other files are, whatever their name.
        Ignored files are not, except the exact paths in ``force``. ``head``: HEAD's commit as the
        caller read it (:meth:`head`) since the last thing that could move it, so it is not asked again.
        """
        self.run("add", "-A", "--", ".", *_NEVER_COMMIT, *self._own_temp_files())
        self._add_forced([self._relative(p) for p in force if os.path.lexists(self.root / self._relative(p))])
        return self._commit("-m", message, before=head)

    def _own_temp_files(self) -> list[str]:
        """``:(exclude,literal)`` pathspecs for untracked temp files of ours (``.guardkit/`` included)."""
        out = self.run("ls-files", "-z", "--others", "--exclude-standard", "--", f":(glob)**/{TEMP_PREFIX}*")[1]
        paths = out.decode("utf-8", "surrogateescape").split("\0")
        return [f":(exclude,literal){p}" for p in paths if _ATOMIC_TEMP.fullmatch(p.rsplit("/", 1)[-1])]

    def _commit(self, *args: str, literal: bool = False, before: str | Unread | None = UNREAD) -> str:
        """``git commit``; the new commit's sha, checked to be HEAD on top of the HEAD before it.

        A post-commit hook can move HEAD again (``git reset --soft HEAD~1``): ``git commit`` still
        exits 0, and HEAD afterwards is the commit *before* the turn. That is not a commit made.
        """
        if isinstance(before, Unread):
            before = self.head_sha()
        try:
            self.run("commit", "-q", "--no-edit", *args,
                     pre=[*(_LITERAL if literal else ()), *self.identity_args()])
        except GitError as exc:
            hooks = [] if nothing_to_commit(exc) or ".lock'" in exc.stderr else self._commit_hooks()
            if not hooks:
                raise
            raise GitError(f"{exc.message} — the {'/'.join(hooks)} hook rejected the commit (git hooks run as "
                           "configured; fix what it reports, or commit the turn yourself)",
                           command=exc.command, returncode=exc.returncode, stderr=exc.stderr, path=exc.path) from exc
        after, parents = self._head_and_parents()
        # On top of the HEAD before it: its parent (one git call), else (a hook that committed more) an ancestor.
        if after is None or after == before or (before is not None and before not in parents
                                                and not self.ok("merge-base", "--is-ancestor", before, after)):
            raise GitError("'git commit' exited 0 but HEAD is not a new commit on top of the one before it (a "
                           "post-commit hook moved it?); the turn is not committed", command=["git", "commit"],
                           path=self.root)
        return after

    def _head_and_parents(self) -> tuple[str | None, tuple[str, ...]]:
        """HEAD's commit and its parents (None and none on an unborn branch), in one git call."""
        status, out, _ = self.run("log", "-1", "--format=%H %P", "HEAD", "--", check=False)
        shas = out.decode("ascii", "replace").split() if status == 0 else []
        return (shas[0], tuple(shas[1:])) if shas else (None, ())

    def hooks_dir(self) -> Path:
        """Where git looks for this repository's hooks (``core.hooksPath`` honoured)."""
        hooks = Path(self.text("rev-parse", "--git-path", "hooks"))
        return hooks if hooks.is_absolute() else self.root / hooks

    def _commit_hooks(self) -> list[str]:
        """The commit hooks that would run here."""
        hooks = self.hooks_dir()
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

    def remove_stale_index_lock(self, *, refs: tuple[str, ...] = ()) -> list[Path]:
        """Remove lock files a killed git command left behind; return what was removed.

        Looks at ``index.lock`` and ``HEAD.lock`` of this working tree (and its ``refs``' locks), and
        the current branch's ref lock; see :func:`~guardkit_state.git.stale_locks.remove_stale_locks`
        for when one is stale.
        """
        return remove_stale_locks(self.root, self.git_dir, self.common_dir, self._branch_of_head_file(), refs=refs)

    def _branch_of_head_file(self) -> str | None:
        """The branch HEAD names, read from its file as git reads it (no git process: a ref lock is a
        file of the files backend, whose HEAD is this file); git is asked when the file says neither
        a branch nor a commit."""
        try:
            text = (self.git_dir / "HEAD").read_text(encoding="utf-8", errors="surrogateescape").strip()
        except OSError:
            text = ""
        if text.startswith("ref: refs/heads/"):
            return text.removeprefix("ref: refs/heads/")
        return None if _SHA.fullmatch(text) else self.current_branch()


__all__ = ["FALLBACK_EMAIL", "FALLBACK_NAME", "UNREAD", "GitRepo", "Unread", "branches_named"]
