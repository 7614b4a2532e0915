"""Which project an index group belongs to: a name unique to one checkout, the same every time.

Groups are ``{project}__{group}``. The folder name alone would let two checkouts called ``proj``
share a server's groups, each ``sync`` deleting the other's turns. The project is
``{folder}_{id}``, ``id`` 10 hex digits of the SHA-256 of the repository's root commit and the
main checkout's absolute path: derived, not random, so every command and a rebuild after
``rm -rf .guardkit/index`` get the same ids, and a read writes nothing. The same repository at the
same path on two machines is one project: pin a name with ``GUARDKIT_INDEX_PROJECT``. A loop
worktree belongs to its main checkout. Writers cache the result in ``.guardkit/index/identity.json``
(recomputed when written for another path).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from pathlib import Path

from guardkit_state.errors import GitError
from guardkit_state.git.runner import execute
from guardkit_state.store.fsio import atomic_write_text
from guardkit_state.store.layout import WORKTREES_DIR, index_dir

IDENTITY_FILE = "identity.json"
#: Pins the project part of every group name (``[A-Za-z0-9_]`` after cleaning).
PROJECT_ENV = "GUARDKIT_INDEX_PROJECT"
_ID_LENGTH = 10


def sanitize_group_part(name: str) -> str:
    """``my-app.v2`` -> ``my_app_v2``: only ``[A-Za-z0-9_]`` survive; never empty."""
    cleaned = re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_")
    return cleaned or "project"


def checkout_root(repo_root: Path) -> Path:
    """The main checkout of ``repo_root`` (a loop worktree under ``.guardkit/worktrees`` maps to it)."""
    root = Path(repo_root).resolve()
    depth = len(WORKTREES_DIR.parts)
    if len(root.parts) > depth + 1 and root.parts[-depth - 1:-1] == WORKTREES_DIR.parts:
        return Path(*root.parts[:-depth - 1])
    return root


def project_identity(repo_root: Path, *, create: bool = False) -> str:
    """This checkout's project name, pinned (``GUARDKIT_INDEX_PROJECT``) or derived (root commit +
    path); ``create`` (writers only) keeps the derivation in the identity cache."""
    root = checkout_root(repo_root)
    pinned = os.environ.get(PROJECT_ENV, "").strip()
    if pinned:
        return sanitize_group_part(pinned)
    cached = _read_cache(root)
    commit = cached if cached is not None else root_commit(root)
    digest = hashlib.sha256(f"{commit}\0{root}".encode()).hexdigest()[:_ID_LENGTH]
    project = f"{sanitize_group_part(root.name)}_{digest}"
    if create and cached is None:
        with contextlib.suppress(OSError):
            path = index_dir(root) / IDENTITY_FILE
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, json.dumps({"path": str(root), "root_commit": commit,
                                                "project": project}, indent=2) + "\n")
    return project


def root_commit(root: Path) -> str:
    """The repository's first commit (the smallest id when histories were joined), or ``""``."""
    if not any(os.path.lexists(folder / ".git") for folder in (root, *root.parents)):
        return ""
    try:
        status, out, _ = execute(root, ["git", "rev-list", "--max-parents=0", "HEAD"], timeout=10)
    except GitError:
        return ""
    return min(out.decode("ascii", "replace").split(), default="") if status == 0 else ""


def _read_cache(root: Path) -> str | None:
    """The cached root commit, when the cache exists, is well formed and was written for this path."""
    with contextlib.suppress(OSError, ValueError):
        data = json.loads((index_dir(root) / IDENTITY_FILE).read_text(encoding="utf-8"))
        if isinstance(data, dict) and data.get("path") == str(root) and isinstance(data.get("root_commit"), str):
            return str(data["root_commit"])
    return None
