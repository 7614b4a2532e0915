"""``guardkit-state doctor``: is this machine and repository ready for a loop, and if not, what to do.

Every check gives one :class:`Check`: ``ok``, a ``note`` (worth knowing, nothing wrong), a
``warning`` (something will not work as it should, but a loop runs) or a ``problem`` (a loop would
stop: a turn commit or a merge refused, no repository, a named agent missing or signed out, claims
that cannot be pushed). Each warning and problem carries the one-line fix. Nothing here changes the
repository except what the rehearsal of a turn commit and a merge needs (a throwaway worktree,
removed again; :mod:`guardkit_state.inspect.doctor_git`) and, with a remote, a probe claim pushed
and deleted.

The checks: git; the repository (a commit to branch from); ``.guardkit/`` and the ignore rules of
the folders the tool keeps out of git (:data:`IGNORED_FOLDERS`, one row per folder) and of those it
needs in git (:data:`TRACKED_FOLDERS`); each agent preset (found, version, signed in, see
:mod:`guardkit_state.agents.sign_in`); the optional extras; then the git side.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from guardkit_state.agents.presets import is_preset_name, load_presets, preset_status
from guardkit_state.agents.sign_in import INSTALL_HINTS, SIGNED_IN, SIGNED_OUT, sign_in
from guardkit_state.errors import GuardkitStateError
from guardkit_state.extras import (
    EMBEDDED_FALKORDB,
    EMBEDDED_FALKORDB_PIP_OPTIONS,
    EXTRAS,
    extra_requirements,
    install_command,
    missing_requirements,
    requirement_name,
)
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.runner import execute
from guardkit_state.inspect.doctor_git import git_checks, remote_checks
from guardkit_state.inspect.doctor_records import NOTE, OK, PROBLEM, WARNING, Check, DoctorReport
from guardkit_state.store import layout
from guardkit_state.store.home import check_state_home


@dataclass(frozen=True)
class IgnoreRule:
    """A folder under the repository and whether git must ignore it (``ignored``) or must not."""

    folder: Path
    ignored: bool
    why: str


#: Folders guardkit-state keeps out of git (each holds a ``.gitignore`` of ``*`` it writes, or is covered by
#: a rule of ``.guardkit/``): a loop's worktrees, its log, its caches. One row per folder: a new private
#: folder is one more row.
IGNORED_FOLDERS: tuple[IgnoreRule, ...] = (
    IgnoreRule(layout.WORKTREES_DIR, True, "loop worktrees would show in 'git status' and be taken by 'git add -A'"),
    IgnoreRule(layout.LOG_FILE.parent, True, "the loop's log would show in 'git status'"),
    IgnoreRule(layout.STATUS_CACHE_FILE.parent, True, "caches would show in 'git status'"),
)
#: Folders a loop needs in git: a worktree is a checkout of what is committed.
TRACKED_FOLDERS: tuple[IgnoreRule, ...] = (
    IgnoreRule(Path(layout.TASKS_DIR), False, "a loop's worktree would have no task files"),
    IgnoreRule(layout.FEATURES_DIR, False, "a feature's worktrees would have no plan"),
)
_GIT_VERSION = re.compile(r"git version (\d+(?:\.\d+)+)")


def run_doctor(repo_dir: Path, *, agents: Sequence[str] = (), remote: str | None = None) -> DoctorReport:
    """Check this machine and the repository at ``repo_dir`` for a loop.

    ``agents`` are the ``--player`` / ``--coach`` values a loop will use: a preset among them that is
    missing or signed out is a problem (other presets are listed as notes and warnings). ``remote``:
    also check that claims can be pushed there (a probe claim pushed and deleted).
    """
    report = DoctorReport(Path(repo_dir))
    checks = report.checks
    git_found = _git(checks)
    repo = _repository(checks, Path(repo_dir)) if git_found else None
    if repo is not None:
        report.repo = repo.root
        _layout(checks, repo)
    _agents(checks, repo.root if repo is not None else Path(repo_dir), agents)
    _extras(checks)
    if repo is not None:
        checks.extend(git_checks(repo))
        if remote is not None:
            checks.extend(remote_checks(repo, remote))
    return report


def _git(checks: list[Check]) -> bool:
    found = shutil.which("git")
    if found is None:
        checks.append(Check("git", "git", PROBLEM, "git is not installed or not on PATH",
                            "install git (https://git-scm.com/downloads)"))
        return False
    status, out, _ = execute(Path.cwd(), ["git", "--version"])
    match = _GIT_VERSION.search(out.decode("utf-8", "replace"))
    checks.append(Check("git", "git", OK, f"git {match.group(1) if match else '(version unknown)'} ({found})"))
    return status == 0


def _repository(checks: list[Check], repo_dir: Path) -> GitRepo | None:
    repo = GitRepo.discover(repo_dir)
    if repo is None:
        if _is_bare(repo_dir):
            checks.append(Check("repository", "repository", PROBLEM,
                                f"{repo_dir} is a bare repository: a loop needs files to work on",
                                f"clone it and run in the clone (git clone {repo_dir} DIR); a bare repository "
                                "serves as the remote of feature-build --remote"))
        else:
            checks.append(Check("repository", "repository", PROBLEM, f"{repo_dir} is not in a git repository",
                                "run it in your project's checkout, or 'git init' there (or give --repo DIR)"))
        return None
    head = repo.head_sha()
    branch = repo.current_branch()
    if head is None:
        checks.append(Check("repository", "repository", PROBLEM,
                            f"{repo.root} has no commit yet: a loop branches its worktree from one",
                            "git commit --allow-empty -m 'first commit'"))
        return repo
    on = f"on branch {branch}" if branch else "with a detached HEAD"
    checks.append(Check("repository", "repository", OK, f"{repo.root}, {on} (HEAD {head[:10]})"))
    return repo


def _layout(checks: list[Check], repo: GitRepo) -> None:
    try:
        check_state_home(repo.root)
    except GuardkitStateError as exc:
        checks.append(Check("layout", f"{layout.GUARDKIT_DIR}/", PROBLEM, exc.message, exc.fix))
    else:
        there = (repo.root / layout.GUARDKIT_DIR).is_dir()
        checks.append(Check("layout", f"{layout.GUARDKIT_DIR}/", OK, "a directory" if there else
                            "not there yet (the first loop creates it)"))
    wrong = []
    for rule in (*IGNORED_FOLDERS, *TRACKED_FOLDERS):
        if not (repo.root / rule.folder).is_dir():
            continue
        sample = (rule.folder / "guardkit-doctor-sample.md").as_posix()
        source = repo.ignore_rules([sample]).get(sample)
        if (source is not None) == rule.ignored:
            continue
        folder = rule.folder.as_posix() + "/"
        wrong.append(folder)
        if rule.ignored:
            fix = f"printf '*\\n' > {folder}.gitignore"
            checks.append(Check("layout", folder, WARNING, f"{folder} is not ignored by git: {rule.why}", fix))
        else:
            checks.append(Check("layout", folder, WARNING, f"{folder} is ignored by git ({source}): {rule.why}",
                                "remove or narrow that rule, and commit the files"))
    if not wrong:
        checks.append(Check("layout", "ignore rules", OK, "loop worktrees, logs and caches ignored; tasks and "
                            "plans tracked (for the folders that exist)"))


def _agents(checks: list[Check], root: Path, wanted: Sequence[str]) -> None:
    try:
        presets = load_presets(root)
    except GuardkitStateError as exc:
        checks.append(Check("agents", "agents.yaml", PROBLEM, str(exc), "fix the file, or move it away"))
        return
    required = {name for name in wanted if is_preset_name(name, presets)}
    for name, preset in presets.items():
        needed = name in required
        status = preset_status(preset)
        if status.path is None:
            checks.append(Check("agents", f"agent {name}", PROBLEM if needed else NOTE,
                                f"{preset.program} is not found on PATH",
                                f"install it ({INSTALL_HINTS.get(preset.program, preset.program)}) and put it on "
                                "PATH" if needed else None))
            continue
        version = status.version or "version unknown"
        answer = sign_in(preset.program, status.path)
        if answer.state == SIGNED_OUT:
            checks.append(Check("agents", f"agent {name}", PROBLEM if needed else WARNING,
                                f"{status.path} ({version}): {answer.detail}", answer.fix))
        else:
            checks.append(Check("agents", f"agent {name}", OK if answer.state == SIGNED_IN else NOTE,
                                f"{status.path} ({version}): {answer.detail}"))
    for command in wanted:
        if not is_preset_name(command, presets):
            _agent_command(checks, command)


def _agent_command(checks: list[Check], command: str) -> None:
    """A ``--player`` / ``--coach`` that is a shell command: its program must be there."""
    program = command.split()[0] if command.split() else command
    found = shutil.which(program) if "/" not in program else (program if Path(program).exists() else None)
    if found is None:
        checks.append(Check("agents", f"agent {command!r}", PROBLEM, f"{program} is not found",
                            f"install {program}, or give its full path"))
    else:
        checks.append(Check("agents", f"agent {command!r}", OK, f"a shell command; {program} is {found}"))


def _extras(checks: list[Check]) -> None:
    for extra in EXTRAS:
        requirements = extra_requirements(extra)
        missing = missing_requirements(requirements)
        if missing:
            names = ", ".join(requirement_name(r) for r in missing)
            checks.append(Check("extras", f"extra {extra}", NOTE,
                                f"not installed ({names} missing): {_EXTRA_USE[extra]} cannot run",
                                f"install it with: {install_command(extra)}"))
            continue
        checks.append(Check("extras", f"extra {extra}", OK, "installed"))
        if extra == "graphiti" and missing_requirements(EMBEDDED_FALKORDB):
            command = install_command(requirements=EMBEDDED_FALKORDB, pip_options=EMBEDDED_FALKORDB_PIP_OPTIONS)
            checks.append(Check("extras", "extra graphiti", WARNING,
                                "the embedded FalkorDB is not installed: the index needs it, or --uri for a server",
                                f"install it with: {command}"))


_EXTRA_USE = {"graphiti": "the optional search index ('guardkit-state graphiti ...')",
              "mcp": "the MCP server ('guardkit-state mcp')"}


def _is_bare(path: Path) -> bool:
    """True inside a bare repository (git answers; a folder git does not know is not one)."""
    try:
        status, out, _ = execute(path, ["git", "rev-parse", "--is-bare-repository"], path=path, timeout=30)
    except GuardkitStateError:
        return False
    return status == 0 and out.strip() == b"true"


__all__ = ["IGNORED_FOLDERS", "TRACKED_FOLDERS", "IgnoreRule", "run_doctor"]

