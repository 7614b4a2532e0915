"""The environment every git command and every agent runs in: the user's, without the variables
that tell git where the repository is.

A git hook, an IDE terminal or a parent ``git rebase -x`` exports ``GIT_DIR``/``GIT_WORK_TREE``/
``GIT_INDEX_FILE`` ...; inherited, they make git act on *that* repository and index whatever the
working directory says, so a turn commit would land on the user's checked-out branch. guardkit-state
always names the repository by the directory it runs git in, so these are removed — in one place,
here — from git's environment and from the agents' (an agent's own ``git commit`` must land in its
worktree too). So are the variables that change how git reads a pathspec
(``GIT_LITERAL_PATHSPECS`` ...): the loop's commands use pathspec magic (``:(exclude)``), which
``GIT_LITERAL_PATHSPECS=1`` turns into a literal name that matches nothing, so every turn commit
failed. Identity (``GIT_AUTHOR_*``/``GIT_COMMITTER_*``), ``GIT_SSH*`` and
``GIT_CONFIG_*`` are the user's wishes, not locations, and are kept.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

#: Variables that locate a repository, its index or its objects (git's ``local_repo_env`` list,
#: plus the discovery limits): never inherited by git or an agent.
REPOSITORY_VARIABLES = frozenset({
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    "GIT_PREFIX",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_GRAFT_FILE",
    "GIT_REPLACE_REF_BASE",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_SHALLOW_FILE",
    "GIT_QUARANTINE_PATH",
    "GIT_INTERNAL_SUPER_PREFIX",
})


#: Variables that change how git reads every pathspec: the loop's own pathspecs (``:(exclude)``,
#: ``:(glob)``) mean what they say only without them.
PATHSPEC_VARIABLES = frozenset({
    "GIT_LITERAL_PATHSPECS",
    "GIT_GLOB_PATHSPECS",
    "GIT_NOGLOB_PATHSPECS",
    "GIT_ICASE_PATHSPECS",
})

_REMOVED = REPOSITORY_VARIABLES | PATHSPEC_VARIABLES


def clean_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) without :data:`REPOSITORY_VARIABLES` and
    :data:`PATHSPEC_VARIABLES`."""
    source = os.environ if base is None else base
    return {key: value for key, value in source.items() if key not in _REMOVED}


__all__ = ["PATHSPEC_VARIABLES", "REPOSITORY_VARIABLES", "clean_environment"]
