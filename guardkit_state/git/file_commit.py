"""A commit that changes one file of another commit, made without a checkout (``mktree``, ``commit-tree``).

For a worker, or a person, writing an entry into a task's history on its branch when no worktree of
the task is (or should be) at hand: the clone's checkouts and indexes are never touched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from guardkit_state.git.repo import GitRepo


def commit_file_change(repo: GitRepo, parent: str, path: str, data: bytes, message: str) -> str:
    """The sha of a new commit on ``parent`` whose tree is ``parent``'s with the file ``path``
    (``/``-separated, relative to the tree's root) holding ``data``; its mode kept when it was there.

    Raises:
        GitError: git refused (``parent`` is no commit).
    """
    blob = repo.run("hash-object", "-w", "--stdin", stdin=data)[1].decode().strip()
    tree = _with_file(repo, repo.text("rev-parse", "--verify", f"{parent}^{{tree}}"), path.split("/"), blob)
    return repo.run("commit-tree", tree, "-p", parent, "-m", message, pre=repo.identity_args())[1].decode().strip()


def _with_file(repo: GitRepo, tree: str | None, parts: list[str], blob: str) -> str:
    """``tree`` (None: an empty one) with ``parts`` (a path, split) set to ``blob``; its sha."""
    entries: dict[bytes, bytes] = {}  # name -> "mode type sha\tname"
    if tree is not None:
        for entry in repo.run("ls-tree", "-z", tree)[1].split(b"\0"):
            if entry:
                entries[entry.split(b"\t", 1)[1]] = entry
    name = parts[0].encode()
    old = entries.get(name)
    if len(parts) == 1:
        mode = old.split(b" ", 1)[0] if old is not None and old.split(b" ")[1] == b"blob" else b"100644"
        entries[name] = mode + b" blob " + blob.encode() + b"\t" + name
    else:
        sub = old.split(b" ")[2].split(b"\t")[0].decode() if old is not None and old.split(b" ")[1] == b"tree" else None
        entries[name] = b"040000 tree " + _with_file(repo, sub, parts[1:], blob).encode() + b"\t" + name
    listing = b"".join(entry + b"\0" for entry in entries.values())
    return repo.run("mktree", "-z", stdin=listing)[1].decode().strip()


__all__ = ["commit_file_change"]
