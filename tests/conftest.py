"""Shared fixtures: the real GuardKit corpus (read in place), clean git environments."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

# The skip account printed at the end of every run (and CI's gate on unlisted skips).
from .skip_account import pytest_sessionfinish, pytest_unconfigure  # noqa: F401

REPO_ROOT = Path(__file__).resolve().parent.parent
CORPUS = REPO_ROOT.parent / "shared" / "corpus" / "guardkit"


def sigint_as_a_terminal_gives_it() -> None:
    """Give SIGINT back its default (KeyboardInterrupt) when this process started with it ignored.

    A shell without job control starts a background command (``pytest ... &``) with SIGINT ignored,
    and an ignored signal is inherited through exec: every worker a test starts would then ignore
    the Ctrl-C the test sends it (Python keeps an inherited SIG_IGN) and never stop. A Python
    handler here is reset to SIG_DFL in each child, so its children get SIGINT as a terminal gives it.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


sigint_as_a_terminal_gives_it()  # at import: in the run's process and in each xdist worker alike


@pytest.fixture(autouse=True)
def _clean_git_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inherited GIT_* variables (from a hook or an outer git) must not leak into test repos."""
    for name in list(os.environ):
        if name.startswith("GIT_"):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test Author")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "test@example.com")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test Author")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "test@example.com")
    monkeypatch.setenv("GRAPHITI_TELEMETRY_ENABLED", "false")
    monkeypatch.delenv("GUARDKIT_STATE_CRASH_AT", raising=False)


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """``../shared/corpus/guardkit`` read in place; tests using it skip when it is absent."""
    if not CORPUS.is_dir():
        pytest.skip(f"GuardKit corpus not found at {CORPUS} (it sits beside the clone in CI)")
    return CORPUS


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """A fresh git repository with one commit on ``main``."""
    root = tmp_path / "repo"
    root.mkdir()
    run_git(root, "init", "-q", "-b", "main")
    (root / "README.md").write_text("# test project\n")
    run_git(root, "add", "README.md")
    run_git(root, "commit", "-q", "-m", "initial")
    return root


def run_git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` and return stdout; fails the test on a non-zero exit."""
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"git {' '.join(args)} failed: {result.stderr}"
    return result.stdout


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def writable_copy(src: Path, dst: Path) -> Path:
    """Copy a file or tree of the (read-only) shared corpus with the modes a checkout would have.

    The corpus is mounted 0444/0555; the store refuses to replace a read-only task file, so a copy
    that kept those modes would test that refusal instead of the write.
    """
    if src.is_dir():
        shutil.copytree(src, dst, symlinks=True, copy_function=shutil.copyfile)
        for path in [dst, *dst.rglob("*")]:
            if not path.is_symlink():
                path.chmod(0o755 if path.is_dir() else 0o644)
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    return dst


def commit_on_branch(root: Path, branch: str, rel: str, data: bytes,
                     message: str = "a file pushed from elsewhere") -> str:
    """Commit ``data`` at ``rel`` on top of ``branch`` by git's plumbing (no checkout: as a push from
    another machine lands; ``data`` of megabytes is one compressed blob), moving the branch there.
    Returns the new commit."""
    def plumb(*args: str, stdin: bytes | None = None, index: Path | None = None) -> str:
        env = {**os.environ, **({"GIT_INDEX_FILE": str(index)} if index is not None else {})}
        done = subprocess.run(["git", *args], cwd=root, input=stdin, capture_output=True, env=env, check=False)
        assert done.returncode == 0, f"git {' '.join(args)} failed: {done.stderr!r}"
        return done.stdout.decode().strip()

    index = Path(plumb("rev-parse", "--absolute-git-dir")) / "commit-on-branch.index"
    blob = plumb("hash-object", "-w", "--stdin", stdin=data)
    plumb("read-tree", branch, index=index)
    plumb("update-index", "--add", "--cacheinfo", f"100644,{blob},{rel}", index=index)
    tree = plumb("write-tree", index=index)
    index.unlink()
    commit = plumb("commit-tree", tree, "-p", branch, "-m", message)
    plumb("update-ref", f"refs/heads/{branch}", commit)
    return commit


def git_answer_sizes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size (stdout bytes) of every answer git gives this process through ``GitRepo.run`` from
    now on (the real git runs): what a reading took into memory from git."""
    from guardkit_state.git.repo import GitRepo

    sizes: list[int] = []
    real = GitRepo.run

    def measured(self: GitRepo, *args: str, **kwargs: Any) -> tuple[int, bytes, str]:
        answer = real(self, *args, **kwargs)
        sizes.append(len(answer[1]))
        return answer

    monkeypatch.setattr(GitRepo, "run", measured)
    return sizes
