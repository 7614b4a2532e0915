"""Which checkout is which: git's common directory, the main checkout, where loop worktrees live.

Asked of git (``rev-parse``, ``worktree list``), never by reading ``.git`` files by hand: a linked
worktree's or submodule's ``.git`` file and ``core.worktree`` change the answer, and git knows
them all (an inherited ``GIT_DIR`` does not: git runs without it, see
:mod:`guardkit_state.git.environment`). Two shortcuts: a checkout whose ``.git`` is a directory is
a main checkout, and that directory is its common one; a folder with no ``.git`` at or above it
has none. Saying so without running git keeps a recorded
turn from paying for a subprocess.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from guardkit_state.errors import GitError
from guardkit_state.git.parse import parse_worktree_list_z
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.stale_locks import live_git_process_in
from guardkit_state.store.layout import task_lock_file

#: ``git worktree list`` reads every worktree's admin folder, and one that a concurrent
#: ``git worktree add`` (a parallel task of a feature) is still writing fails the whole listing
#: ("failed to read .../worktrees/TASK-X/commondir"). It is complete within milliseconds: retried.
_LIST_RETRY_PAUSES = (0.02, 0.05, 0.1, 0.2, 0.4)

def common_git_dir(checkout: Path | str) -> Path | None:
    """The git directory shared by every working tree of ``checkout``'s repository; None without git."""
    root = Path(checkout)
    dot_git = root / ".git"
    if dot_git.is_dir():
        return dot_git
    if not any(os.path.lexists(folder / ".git") for folder in (root, *root.parents)):
        # No '.git' here or above: git (which runs without GIT_DIR) would find no working tree
        # either (it looks for exactly that), so it is not run.
        return None
    repo = GitRepo.discover(root)
    return None if repo is None else repo.common_dir


def shared_lock_path(checkout_root: Path | str, task_id: str) -> Path:
    """The task's lock file, shared by the main checkout and all its worktrees.

    Inside git it lives in the common git directory as git reports it (one per repository,
    whatever the worktree or submodule); without git, next to the task's turn files.
    """
    root = Path(checkout_root).resolve()
    return task_lock_file(root, task_id, common_git_dir(root))


def main_checkout_root(repo: GitRepo) -> Path:
    """The main working tree of ``repo``'s repository, asked of git (loop worktrees live under it).

    From the main checkout (a submodule's included) that is its own top level. From a linked
    worktree it is what git says for the common directory: a submodule's ``core.worktree``
    answers ``--show-toplevel`` there; otherwise ``git worktree list`` names it, unless that is
    the git directory itself (bare), when the given checkout is used.
    """
    if os.path.samefile(repo.git_dir, repo.common_dir):
        return repo.root
    status, out, _ = repo.run("rev-parse", "--path-format=absolute", "--show-toplevel",
                              cwd=repo.common_dir, check=False)
    if status == 0 and out.strip():
        return Path(out.decode("utf-8", "surrogateescape").strip())
    records = worktree_records(repo)
    if records and "bare" not in records[0]:
        first = Path(records[0]["worktree"])
        if first.is_dir() and not os.path.samefile(first, repo.common_dir):
            return first
    return repo.root


def worktree_records(repo: GitRepo) -> list[dict[str, str]]:
    """``git worktree list`` as one dict per worktree, retried while another worktree is half made
    (and listed once more after a killed ``git worktree add``'s admin folder is completed)."""
    for pause in _LIST_RETRY_PAUSES:
        status, out, err = repo.run("worktree", "list", "--porcelain", "-z", check=False)
        if status == 0:
            return parse_worktree_list_z(out)
        if "/worktrees/" not in err:
            break
        time.sleep(pause)
    else:
        _complete_killed_adds(repo)
    return parse_worktree_list_z(repo.run("worktree", "list", "--porcelain", "-z")[1])


def _complete_killed_adds(repo: GitRepo) -> None:
    """A ``git worktree add`` killed between creating its admin folder's ``commondir`` and writing it
    leaves the file empty, and git fails every listing (prune and remove too) for good. When no git
    process works in the repository, such a folder (still "locked: initializing": its add never
    finished) gets the line git writes there, so the worktree lists as half created and is discarded
    and made again as any killed add is (:meth:`WorktreeManager.find`)."""
    if live_git_process_in(repo.root, repo.common_dir):
        return
    for admin in sorted((repo.common_dir / "worktrees").glob("*/")):
        commondir, locked = admin / "commondir", admin / "locked"
        with contextlib.suppress(OSError):
            if commondir.stat().st_size == 0 and "initializing" in locked.read_text("utf-8", "replace"):
                commondir.write_text("../..\n", encoding="utf-8")


def worktrees_home(checkout: Path) -> Path:
    """The checkout whose ``.guardkit/worktrees/`` holds the loop worktrees of ``checkout``'s repository.

    Read commands run from a linked worktree or a submodule look there for a running loop's copy.
    A checkout with a ``.git`` directory is a main checkout, answered without running git.
    """
    root = Path(checkout)
    if (root / ".git").is_dir():
        return root
    if not any(os.path.lexists(folder / ".git") for folder in (root.absolute(), *root.absolute().parents)):
        return root  # in no git checkout at all: nothing to ask git (nor to load its library for)
    repo = GitRepo.discover(root)
    return root if repo is None else main_checkout_root(repo)



def repair_worktree_link(common_dir: Path, worktree: Path) -> str | None:
    """Restore the ``.git`` link of the linked worktree ``worktree`` when it is gone or points
    elsewhere; a note, or None.

    Without its ``.git`` file, git run in a worktree falls through to the repository above it (the
    main checkout) and a turn commit would miss the worktree's branch; a link rewritten to another
    git dir (``gitdir: <main>/.git``) sends it to that checkout's branch. ``git worktree repair`` is
    run with the repository named (``--git-dir``). Raises :class:`GitError` when it cannot restore it.
    """
    link = worktree / ".git"
    if not worktree.is_dir() or _links_here(link, common_dir):
        return None
    lost = not os.path.lexists(link)
    if not lost and (link.is_dir() and not link.is_symlink()):
        raise GitError(f"the worktree {worktree} has a .git directory of its own instead of its link to "
                       f"{common_dir} (made by an agent?); move it away and --resume", path=worktree)
    main = GitRepo(worktree, common_dir, common_dir)
    _, _, stderr = main.run("worktree", "repair", str(worktree), pre=["--git-dir", str(common_dir)],
                            cwd=common_dir, check=False)
    if not _links_here(link, common_dir):
        detail = " ".join(stderr.split()) or "no message"
        what = "lost its .git link" if lost else "has a .git link to another repository"
        raise GitError(f"the worktree {worktree} {what} and 'git worktree repair' could not restore "
                       f"it ({detail}); run 'git worktree prune' and --resume to re-create it from its branch",
                       path=worktree)
    if lost:
        return (f"the worktree {worktree} had lost its .git link (removed by an agent?); "
                "restored it with git worktree repair")
    return (f"the worktree {worktree}'s .git link pointed to another git directory (rewritten by an agent?); "
            "restored it with git worktree repair")


def _links_here(link: Path, common_dir: Path) -> bool:
    """``link`` is a ``gitdir:`` file naming an admin dir of ``common_dir`` that names ``link`` back."""
    try:
        if link.is_symlink() or not link.is_file():
            return False
        text = link.read_text("utf-8").strip()
        if not text.startswith("gitdir:"):
            return False
        admin = Path(text[len("gitdir:"):].strip())
        admin = admin if admin.is_absolute() else link.parent / admin
        if os.path.realpath(admin.parent) != os.path.realpath(common_dir / "worktrees"):
            return False
        back = Path((admin / "gitdir").read_text("utf-8").strip())
    except (OSError, UnicodeDecodeError):
        return False
    back = back if back.is_absolute() else admin / back  # worktree.useRelativePaths
    return os.path.realpath(back) == os.path.realpath(link)


__all__ = ["common_git_dir", "main_checkout_root", "repair_worktree_link", "shared_lock_path", "worktrees_home"]
