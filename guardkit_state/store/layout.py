"""Where everything lives: every path under a checkout's ``.guardkit/`` folder, and the loop branch.

The single owner of the layout, so a path is spelled once and a newcomer finds it here. Pure
functions from a checkout root (the main checkout, or a loop's worktree) to a path; nothing is
read or created. The relative constants serve pathspecs, globs and messages; the functions join
them to a root::

    <checkout>/
      tasks/                                    the task files (TASKS_DIR)
      .guardkit/
        autobuild/TASK-ID/                      per-turn reports (artifacts_dir), scratch in .work/
        autobuild-private/TASK-ID/              GuardKit's Coach verdicts, evidence: read first (private_artifacts_dir)
        worktrees/TASK-ID/                      a loop's worktree, on branch autobuild/TASK-ID
        features/FEAT-*.yaml                    feature plans (features_dir)
        config/quality-gates.yaml               gate profiles (QUALITY_GATES_FILE)
        config/entity-overrides.yaml            overrides (OVERRIDES_FILE)
        index/                                  the local search index (index_dir)
        reports/TASK-ID.html                    the HTML report (report_file)
        cache/status.json                       the status cache (status_cache_file); plans.json ... (cache_file)
        logs/autobuild.log                      the loop's log (log_file)

The per-task lock lives in git's common directory when there is one (shared by every worktree):
:func:`task_lock_file`.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

TASKS_DIR = "tasks"
GUARDKIT_DIR = ".guardkit"

_HOME = Path(GUARDKIT_DIR)
#: Per-task turn files: ``.guardkit/autobuild/TASK-ID/``.
STATE_DIR = _HOME / "autobuild"
#: Where GuardKit keeps what its Player must not read (its Coach's verdicts and evidence):
#: ``.guardkit/autobuild-private/TASK-ID/``, read before ``autobuild/`` (as GuardKit reads them).
PRIVATE_STATE_DIR = _HOME / "autobuild-private"
#: Loop worktrees: ``.guardkit/worktrees/TASK-ID``.
WORKTREES_DIR = _HOME / "worktrees"
FEATURES_DIR = _HOME / "features"
CONFIG_DIR = _HOME / "config"
QUALITY_GATES_FILE = CONFIG_DIR / "quality-gates.yaml"
OVERRIDES_FILE = CONFIG_DIR / "entity-overrides.yaml"
INDEX_DIR = _HOME / "index"
REPORTS_DIR = _HOME / "reports"
STATUS_CACHE_FILE = _HOME / "cache" / "status.json"
LOG_FILE = _HOME / "logs" / "autobuild.log"
#: What the last unexpected error (a fault of guardkit-state itself) left: versions and traceback.
CRASH_LOG_FILE = _HOME / "logs" / "crash.log"
#: The loop's scratch folder inside a task's turn-file folder (context, prompts, incoming reports).
WORK_DIR = ".work"

#: The loop's own folders under ``.guardkit/`` that it writes while agents run, by design (other loops'
#: worktrees, the search index, caches, the log, the live reports), and its agents' scratch and the
#: plans' lock files (globs): machine-local, never an agent's work, never committed by a turn.
RUNTIME_DIRS = (WORKTREES_DIR.as_posix(), INDEX_DIR.as_posix(), STATUS_CACHE_FILE.parent.as_posix(),
                LOG_FILE.parent.as_posix(), REPORTS_DIR.as_posix())
RUNTIME_GLOBS = (f"{STATE_DIR.as_posix()}/*/{WORK_DIR}/**", f"{GUARDKIT_DIR}/**/.locks/**")
#: A feature's id starts so (its plan is ``.guardkit/features/FEAT-....yaml``).
FEATURE_PREFIX = "FEAT-"
#: The loop's branches: ``autobuild/TASK-ID``.
BRANCH_PREFIX = "autobuild/"
#: Inside git's common directory: ``guardkit-state/locks/TASK-ID.lock``.
LOCKS_IN_GIT_DIR = PurePosixPath("guardkit-state") / "locks"
#: Inside git's common directory: ``guardkit-state/turn-commits/TASK-ID``, the commits the loop made.
TURN_COMMITS_IN_GIT_DIR = PurePosixPath("guardkit-state") / "turn-commits"
#: Inside git's common directory: ``guardkit-state/merge-queue/FEAT-ID``, the gate's verdicts on candidates.
MERGE_QUEUE_IN_GIT_DIR = PurePosixPath("guardkit-state") / "merge-queue"
#: Inside git's common directory: ``guardkit-state/workers/<remote>/``, each live worker's lock and
#: the nonces of the claims it made (:mod:`guardkit_state.remote.own_claims`).
WORKERS_IN_GIT_DIR = PurePosixPath("guardkit-state") / "workers"


def tasks_dir(root: Path | str) -> Path:
    return Path(root) / TASKS_DIR


def artifacts_dir(root: Path | str, task_id: str) -> Path:
    """Where a task's per-turn files live inside a checkout (main or worktree)."""
    return Path(root) / STATE_DIR / task_id


def private_artifacts_dir(root: Path | str, task_id: str) -> Path:
    """Where GuardKit keeps a task's Coach verdicts and evidence, out of its Player's reach."""
    return Path(root) / PRIVATE_STATE_DIR / task_id


def worktrees_dir(root: Path | str) -> Path:
    """The folder of the loop worktrees (in the repository's main checkout)."""
    return Path(root) / WORKTREES_DIR


def worktree_path(root: Path | str, task_id: str) -> Path:
    """The conventional worktree of ``task_id``'s loop."""
    return worktrees_dir(root) / task_id


def features_dir(root: Path | str) -> Path:
    return Path(root) / FEATURES_DIR


def index_dir(root: Path | str) -> Path:
    return Path(root) / INDEX_DIR


def report_file(root: Path | str, task_id: str) -> Path:
    return Path(root) / REPORTS_DIR / f"{task_id}.html"


def status_cache_file(root: Path | str) -> Path:
    return Path(root) / STATUS_CACHE_FILE


def cache_file(root: Path | str, name: str) -> Path:
    """A reader's rebuildable cache, ``.guardkit/cache/NAME.json`` (beside ``status``'s)."""
    return Path(root) / STATUS_CACHE_FILE.parent / f"{name}.json"


def log_file(root: Path | str) -> Path:
    return Path(root) / LOG_FILE


def names_feature(ref: str) -> bool:
    """True when a command's argument names a feature (its id ``FEAT-...``, in any case, or its
    plan file ``....yaml``), not a task."""
    return ref[:len(FEATURE_PREFIX)].upper() == FEATURE_PREFIX or ref.endswith(".yaml")


def branch_for(task_id: str) -> str:
    """The branch a task's loop runs on: ``autobuild/TASK-ID``."""
    return f"{BRANCH_PREFIX}{task_id}"


def task_of_branch(branch: str | None) -> str | None:
    """``autobuild/TASK-ID`` -> ``TASK-ID``; None for any other branch."""
    if branch and branch.startswith(BRANCH_PREFIX):
        return branch[len(BRANCH_PREFIX):]
    return None


def worktree_root_of(relative: Path) -> Path | None:
    """The worktree part of a path relative to the main checkout, for a file inside a loop worktree.

    ``.guardkit/worktrees/TASK-X/tasks/a.md`` -> ``.guardkit/worktrees/TASK-X``; None otherwise.
    """
    parts = relative.parts
    depth = len(WORKTREES_DIR.parts)
    if len(parts) > depth + 2 and Path(*parts[:depth]) == WORKTREES_DIR:
        return Path(*parts[:depth + 1])
    return None


def is_local_scratch(relpath: str) -> bool:
    """True for a ``/``-separated path under ``.guardkit/`` that only this machine needs.

    The loop's scratch (``.work/``) and the search index are rebuilt at will: never committed,
    never a reason to keep a worktree.
    """
    parts = relpath.split("/")
    if parts[0] != GUARDKIT_DIR:
        return False
    return WORK_DIR in parts or parts[1:2] == [INDEX_DIR.name]


def task_lock_file(root: Path | str, task_id: str, common_git_dir: Path | None) -> Path:
    """The lock file serialising writers of ``task_id``.

    In git's common directory when there is one, so the main checkout and every worktree share
    it; without git, beside the task's turn files.
    """
    if common_git_dir is None:
        return artifacts_dir(root, task_id) / ".lock"
    return Path(common_git_dir) / LOCKS_IN_GIT_DIR / f"{task_id}.lock"


__all__ = [
    "BRANCH_PREFIX",
    "CONFIG_DIR",
    "FEATURES_DIR",
    "GUARDKIT_DIR",
    "INDEX_DIR",
    "LOCKS_IN_GIT_DIR",
    "LOG_FILE",
    "MERGE_QUEUE_IN_GIT_DIR",
    "OVERRIDES_FILE",
    "QUALITY_GATES_FILE",
    "REPORTS_DIR",
    "RUNTIME_DIRS",
    "RUNTIME_GLOBS",
    "STATE_DIR",
    "STATUS_CACHE_FILE",
    "TASKS_DIR",
    "TURN_COMMITS_IN_GIT_DIR",
    "WORKERS_IN_GIT_DIR",
    "WORKTREES_DIR",
    "WORK_DIR",
    "artifacts_dir",
    "branch_for",
    "features_dir",
    "index_dir",
    "is_local_scratch",
    "log_file",
    "report_file",
    "status_cache_file",
    "task_lock_file",
    "task_of_branch",
    "tasks_dir",
    "worktree_path",
    "worktree_root_of",
    "worktrees_dir",
]
